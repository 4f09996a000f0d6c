"""Follow a growing log file the way `tail -F` does: appends, truncation, rotation, a file that
is not there yet.

`LogFollower.poll()` returns what is new since the last call: data chunks and notes ("truncated",
"rotated", "appeared"). Rotation is a new inode at the path (logrotate's create mode, or a
rename-and-recreate): the rest of the old file is read to its end first, then the new file from its
start. Truncation (copytruncate, `> file`) is a size below the read position: reading restarts at
0. Memory is bounded: at most `chunk` bytes are read per poll, and a line is only ever held until
its newline arrives (`LineSplitter`: the line policy of doctor/core/lines.py, which cuts lines
longer than `max_line` and numbers them as `analyze` and the TUI's log pane do).

`follow_log()` drives a watch session from it: complete lines go to the same parsers `analyze`
runs, in one piece per read (`TraceSession.emit_log_block`), so findings fire as the lines arrive
and a log growing at tens of MB/s is read as fast as it grows; far behind its writer, it is read on with
worker processes as `analyze` reads a big file (catchup.py). A truncation or rotation is a
NoticeEvent (in the ndjson stream and the recording) that begins a new session: the new file's
lines are numbered from 1, and its facts are not mixed with the old file's.

Machine access: the file system.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from doctor.core.events import EndEvent, NoticeEvent, SettingsEvent
from doctor.core.lines import LineSplitter
from doctor.sources.live.follow.catchup import catch_up
from doctor.sources.live.session import TraceSession

CHUNK = 1 << 20
POLL_S = 0.25


@dataclass(slots=True)
class Change:
    kind: str  # data | note
    data: bytes = b""
    text: str = ""
    session: str | None = None  # a note that begins a new session: "truncated" | "rotated"


class LogFollower:
    def __init__(self, path: str, *, from_start: bool = True, chunk: int = CHUNK) -> None:
        self.path = path
        self.from_start = from_start
        self.chunk = chunk
        self.handle: IO[bytes] | None = None
        self.ident: tuple[int, int] | None = None
        self.pos = 0
        self.waiting_noted = False
        self.opened_once = False

    def _open(self) -> Change | None:
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - kept open across polls, closed in close()
            st = os.fstat(handle.fileno())
        except FileNotFoundError:
            if not self.waiting_noted:
                self.waiting_noted = True
                return Change("note", text=f"waiting for {self.path} to appear")
            return None
        except OSError as exc:
            if not self.waiting_noted:
                self.waiting_noted = True
                return Change("note", text=f"cannot open {self.path}: {exc.strerror or exc}; retrying")
            return None
        self.handle = handle
        self.ident = (st.st_dev, st.st_ino)
        first = not self.opened_once
        self.opened_once = True
        self.waiting_noted = False
        if first and not self.from_start:
            self.pos = st.st_size
            handle.seek(self.pos)
            return Change("note", text=f"following {self.path} from its end ({st.st_size} bytes skipped)")
        self.pos = 0
        if first:
            return Change("note", text=f"following {self.path}")
        return Change("note", text=f"{self.path} appeared again; reading it from the start")

    def poll(self) -> list[Change]:
        changes: list[Change] = []
        if self.handle is None:
            note = self._open()
            if note is not None:
                changes.append(note)
            if self.handle is None:
                return changes
        assert self.handle is not None
        try:
            st_path = os.stat(self.path)
        except OSError:
            st_path = None
        try:
            st_open = os.fstat(self.handle.fileno())
        except OSError:
            st_open = None
        if st_open is not None and st_open.st_size < self.pos:
            changes.append(Change("note", text=f"{self.path} was truncated; reading from its start",
                                  session="truncated"))
            self.pos = 0
            self.handle.seek(0)
        budget = self.chunk
        data = self._read(budget)
        if data:
            changes.append(Change("data", data))
            budget -= len(data)
        rotated = st_path is not None and (st_path.st_dev, st_path.st_ino) != self.ident
        if (rotated or st_path is None) and budget > 0 and len(data) < self.chunk:
            # the old file is fully read; switch to the new one (or wait for it)
            self.close()
            if rotated:
                self._open()
                changes.append(Change("note", text=f"{self.path} was rotated; following the new file",
                                      session="rotated"))
                more = self._read(budget)
                if more:
                    changes.append(Change("data", more))
        return changes

    def _read(self, budget: int) -> bytes:
        if self.handle is None or budget <= 0:
            return b""
        try:
            data = self.handle.read(budget)
        except OSError:
            return b""
        self.pos += len(data)
        return data

    def close(self) -> None:
        if self.handle is not None:
            with contextlib.suppress(OSError):
                self.handle.close()
            self.handle = None


def follow_log(path: str, session: TraceSession, *, stop: Callable[[], bool], duration_s: float | None = None,
               from_start: bool = True, poll_s: float = POLL_S, until_idle_s: float | None = None,
               on_note: Callable[[str], None] | None = None, metrics: Any = None) -> EndEvent:
    """Follow `path` into the session until stopped, `duration_s` passes, or (for tests and
    replays) nothing new arrived for `until_idle_s`. Returns the EndEvent it finished with."""
    follower = LogFollower(path, from_start=from_start)
    splitter = LineSplitter(sniff_cr=True)
    session.emit(SettingsEvent(settings={"log": path, "from_start": from_start}, stage="source"))
    start = time.monotonic()
    last_data = start
    line_no = 0
    reason = "finished"
    caught_up = live = False  # a line written while we followed: the run happened now, on this machine
    try:
        while True:
            got = False
            if follower.handle is not None:  # far behind the writer: read on with workers (catchup.py)
                read = catch_up(follower, splitter, session, stop, line_no + 1)
                line_no += read
                got = read > 0
            for change in follower.poll():
                if change.kind == "note":
                    if on_note is not None:
                        on_note(change.text)
                    if change.session is not None:
                        # the old file's last partial line ends its session; the new file counts from line 1
                        line_no += session.emit_log_block(splitter.finish_block(), line_no + 1, "file")
                        session.emit(NoticeEvent(text=f"{change.text} (after line {line_no})", session=change.session))
                        line_no = 0
                        splitter = LineSplitter(sniff_cr=True)  # a new file: its own head tells its line ends
                    continue
                got = True
                line_no += session.emit_log_block(splitter.feed_block(change.data), line_no + 1, "file")
            if metrics is not None and metrics.due():
                scraped, note = metrics.poll()
                for scraped_event in scraped:
                    session.emit(scraped_event)
                if note and on_note is not None:
                    on_note(note)
            session.flush()
            session.evaluate()
            now = time.monotonic()
            live = live or (got and caught_up)
            caught_up = caught_up or not got
            if got:
                last_data = now
            if stop():
                reason = "interrupted"
                break
            if duration_s is not None and now - start >= duration_s:
                reason = "finished"
                break
            if got:
                continue  # more may be waiting: read on before sleeping
            if until_idle_s is not None and now - last_data >= until_idle_s:
                break
            time.sleep(poll_s)
    except KeyboardInterrupt:
        reason = "interrupted"
    finally:
        follower.close()
    session.emit_log_block(splitter.finish_block(), line_no + 1, "file")
    if not live:
        session.cores = None  # a finished log read back: this machine's cores now say nothing of its run
    return session.finish(EndEvent(reason=reason))
