"""A followed log far behind its writer, read on with worker processes (the sources floor, live room).

`follow_log` (follower.py) reads a growing file a read at a time and feeds each read's complete lines to the
session's analyzer: the serial path. Where the bytes not yet read are many (BEHIND_MIN or more: a server that
logs faster than one core reads, or a big file followed from its start) and a worker is wanted
(doctor/sources/logs/parallel.py `workers_wanted`), `catch_up` reads them as `analyze` reads a big file: the
same regions machinery (doctor/sources/logs/regions.py, each region's candidate lines and folded runs read
ahead by worker processes that read the file themselves, the records replayed here in order through the same
analyzer, doctor/sources/logs/parallel.py `_Replay`), from the follower's line start on, region by region,
while the writer stays BEHIND_LOW or more ahead; the follower then reads on from the last region's end. After
each region the session re-judges the facts (at its own pace) and the descriptor's offset is moved to what
was read, so a reader of /proc sees the real position.

Taken only where nothing needs each line as an event (no recording, no kept events, no consumer of every line:
`line_events` "none", or "tail", which gets the last lines of each region), where the analyzer holds no part
of a line (LF line ends, no pasted input), and where this process runs no other thread (workers are forked).
The analyzer's facts are the serial follow's (tests/watch/test_follow_catchup.py).

Machine access: the file system and the worker processes.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Protocol

from doctor.core.lines import MAX_LINE, LineSplitter
from doctor.sources.logs.stream import CHUNK

if TYPE_CHECKING:
    from doctor.sources.live.session import TraceSession
    from doctor.sources.logs.regions import Read, Region

BEHIND_MIN = 16 << 20  # bytes not yet read that pay a worker's start (its patterns compiled: ~0.3 s of CPU)
BEHIND_LOW = 8 << 20  # read on with workers while the writer is at least this far ahead (two regions)
REGION = CHUNK  # the reads regions are cut in: analyze's


class Followed(Protocol):
    """What is read of the follower (follower.py LogFollower): its open file and where it reads next."""

    handle: IO[bytes] | None
    pos: int


def catch_up(follower: Followed, splitter: LineSplitter, session: TraceSession, stop: Callable[[], bool],
             first_line: int, chunk: int | None = None, workers: int | None = None,
             behind_min: int | None = None, behind_low: int | None = None) -> int:
    """Read the followed file on with workers from the splitter's line start, where it pays; the lines read
    (0: not taken). `first_line`: the number of the first of them."""
    from doctor.sources.logs import parallel

    behind_min = BEHIND_MIN if behind_min is None else behind_min
    behind_low = BEHIND_LOW if behind_low is None else behind_low
    handle = follower.handle
    analyzer = session.builder.analyzer
    scanner = analyzer.scanner
    if (handle is None or session.recorder is not None or session.keep_events
            or (session.on_event is not None and session.line_events == "all")
            or splitter.skipping or splitter.ends.ends != "lf" or analyzer.pasted is not None
            or threading.active_count() > 1):
        return 0
    session.builder.drain_log()
    if scanner._tail or scanner._skipping or scanner._ends.ends != "lf":
        return 0
    fd = handle.fileno()
    begin = follower.pos - len(splitter.partial)
    try:
        size = os.fstat(fd).st_size
    except OSError:
        return 0
    wanted = parallel.workers_wanted(size - begin, behind_min) if workers is None else workers
    if wanted <= 0 or size - begin < behind_min:
        return 0
    from doctor.sources.logs.regions import pread

    read = pread(fd)
    lines_before, bytes_before = scanner.lines, scanner.bytes
    shown = {"lines": lines_before}

    def replayed(region: Region) -> None:
        count = scanner.lines - shown["lines"]
        tail = b""
        if session.on_event is not None and session.line_events == "tail":
            low = max(region.start, region.end - (1 << 16))
            tail = read(low, region.end - low)
            tail = tail[tail.find(b"\n") + 1:] if low > region.start else tail  # whole lines
        session.log_read(count, first_line + shown["lines"] - lines_before, tail)
        shown["lines"] = scanner.lines
        with contextlib.suppress(OSError):
            os.lseek(fd, region.end, os.SEEK_SET)  # what /proc shows as read: what was read
        session.evaluate()

    pool = parallel.POOL(wanted, analyzer.name, analyzer.folders is not None, analyzer.escaped, fd)
    replay = parallel._Replay(analyzer, read, pool, replayed)
    try:
        last = replay.run(_regions(read, fd, begin, chunk or REGION, stop, behind_low))
    finally:
        pool.close()
    if last is None:
        handle.seek(follower.pos)
        return 0
    handle.seek(last.end)  # the follower reads on from the last region's end, a line start
    follower.pos = last.end
    splitter.partial = b""
    scanner.bytes = bytes_before + last.end - begin
    return scanner.lines - lines_before


def _regions(read: Read, fd: int, begin: int, chunk: int, stop: Callable[[], bool], behind_low: int
             ) -> Iterator[Region]:
    """The regions of the file from `begin` on (`analyze`'s cuts: regions.py), while the file's end is at least
    `behind_low` past the next one's start and nothing asked to stop."""
    from doctor.sources.logs.regions import Region, file_regions

    index = 0
    start = begin
    while not stop():
        try:
            size = os.fstat(fd).st_size
        except OSError:
            return
        if size - start < behind_low:
            return
        found = file_regions(read, size, chunk, MAX_LINE, start=start)
        if found is None:
            return
        moved = False
        for region in found:
            yield Region(index, region.start, region.end, region.buf_end)
            index += 1
            start, moved = region.end, True
            if stop():
                return
        if not moved:
            return
