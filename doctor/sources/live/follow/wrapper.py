"""`watch -- COMMAND ARGS...`: start an engine, pass its output through, read it live.

The command (llama-server, llama-cli, ollama serve, vllm serve, ...) runs in our process group, so
Ctrl-C reaches it as it would without llm-doctor and it can shut down its own way. Its stdout and
stderr are copied unchanged, byte for byte, to ours (or both to our stderr when stdout carries
JSON), split into lines and read by the same parsers `analyze` runs; its process tree is sampled
for CPU, resident memory and, where NVML answers, GPU memory. `--duration` ends it with SIGINT
(then SIGTERM, then SIGKILL if it will not stop). Its exit is reported: an exit status, or the
signal that killed it and its last lines.

Machine access: a process, pipes, psutil, NVML, optional HTTP scrapes.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from doctor.core.errors import EngineError
from doctor.core.events import EndEvent, SettingsEvent
from doctor.core.lines import LineSplitter, block_lines
from doctor.core.sanitize import strip_controls
from doctor.sources.live.embedded.runner import describe_status
from doctor.sources.live.embedded.sampler import ResourceSampler
from doctor.sources.live.session import TraceSession

SAMPLE_INTERVAL_S = 1.0
STOP_STEPS = ((signal.SIGINT, 10.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0))
TAIL_KEPT = 12


def wrap_command(argv: list[str], session: TraceSession, *, stop: Callable[[], bool], duration_s: float | None = None,
                 stdout_fd: int = 1, stderr_fd: int = 2, sample_interval_s: float = SAMPLE_INTERVAL_S,
                 metrics: Any = None, on_note: Callable[[str], None] | None = None) -> EndEvent:
    """Run `argv` under watch until it exits (or is stopped); returns the EndEvent."""
    if not argv:
        raise EngineError("give the command to run after --, e.g. llm-doctor watch -- llama-server -m model.gguf")
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise EngineError(f"{argv[0]}: command not found") from None
    except PermissionError:
        raise EngineError(f"{argv[0]}: permission denied") from None
    except OSError as exc:
        raise EngineError(f"{argv[0]}: cannot start ({exc.strerror or exc})") from None
    session.emit(SettingsEvent(settings={"command": list(argv), "pid": proc.pid}, stage="source"))
    return _Wrapped(proc, session, stop, duration_s, stdout_fd, stderr_fd, sample_interval_s, metrics, on_note).run()


class _Wrapped:
    def __init__(self, proc: subprocess.Popen[bytes], session: TraceSession, stop: Callable[[], bool],
                 duration_s: float | None, stdout_fd: int, stderr_fd: int, sample_interval_s: float, metrics: Any,
                 on_note: Callable[[str], None] | None) -> None:
        self.proc = proc
        self.session = session
        self.stop = stop
        self.duration_s = duration_s
        self.out_fds = {"stdout": stdout_fd, "stderr": stderr_fd}
        self.sample_interval_s = sample_interval_s
        self.metrics = metrics
        self.on_note = on_note
        self.splitters = {"stdout": LineSplitter(), "stderr": LineSplitter()}
        self.line = 0
        self.tail: deque[str] = deque(maxlen=TAIL_KEPT)
        self.stopping_since: float | None = None
        self.stop_step = 0
        self.reason: str | None = None

    def _copy(self, stream: str, data: bytes) -> None:
        fd = self.out_fds[stream]
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            pass  # our own output went away (a closed pipe); keep watching

    def _lines(self, stream: str, block: bytes) -> None:
        self.line += self.session.emit_log_block(block, self.line + 1, stream)
        # the last non-blank lines, for the report if the command dies
        recent = [raw for raw in block_lines(block, last=4 * TAIL_KEPT) if raw.strip()]
        self.tail.extend(strip_controls(raw.decode("utf-8", "replace")) for raw in recent[-TAIL_KEPT:])

    def _request_stop(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        if self.stopping_since is None:
            self.stopping_since = time.monotonic()
            self._signal(STOP_STEPS[0][0])
            self.stop_step = 1

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(OSError):
            self.proc.send_signal(sig)

    def run(self) -> EndEvent:
        sampler = ResourceSampler(self.proc.pid)
        sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        sel.register(self.proc.stdout.fileno(), selectors.EVENT_READ, "stdout")
        sel.register(self.proc.stderr.fileno(), selectors.EVENT_READ, "stderr")
        open_fds = 2
        start = time.monotonic()
        next_sample = start
        try:
            while open_fds or self.proc.poll() is None:
                try:
                    now = time.monotonic()
                    if now >= next_sample:
                        self.session.emit(sampler.sample(self.session.now_ms()))
                        next_sample = now + self.sample_interval_s
                    if self.metrics is not None and self.metrics.due(now):
                        scraped, note = self.metrics.poll()
                        for event in scraped:
                            self.session.emit(event)
                        if note and self.on_note is not None:
                            self.on_note(note)
                    if self.stopping_since is None:
                        if self.stop():
                            self._request_stop("interrupted")
                        elif self.duration_s is not None and now - start >= self.duration_s:
                            self._request_stop("finished")
                    elif (self.stop_step < len(STOP_STEPS)
                          and now - self.stopping_since > STOP_STEPS[self.stop_step - 1][1]):
                        sig = STOP_STEPS[self.stop_step][0]
                        if self.on_note is not None:
                            self.on_note(f"{_program(self.proc)} has not stopped; sending {signal.Signals(sig).name}")
                        self._signal(sig)
                        self.stopping_since = now
                        self.stop_step += 1
                    if not open_fds:
                        time.sleep(0.05)
                        continue
                    for key, _ in sel.select(min(0.25, max(0.0, next_sample - now))):
                        try:
                            data = os.read(key.fd, 1 << 16)
                        except OSError:
                            data = b""
                        stream = key.data
                        if not data:
                            sel.unregister(key.fd)
                            open_fds -= 1
                            self._lines(stream, self.splitters[stream].finish_block())
                            continue
                        self._copy(stream, data)
                        self._lines(stream, self.splitters[stream].feed_block(data))
                    self.session.flush()
                    self.session.evaluate()
                except KeyboardInterrupt:
                    # Ctrl-C reached the command too (same process group): let it shut down
                    self.reason = self.reason or "interrupted"
                    if self.stopping_since is None:
                        self.stopping_since = time.monotonic()
                        self.stop_step = 1
        finally:
            sel.close()
            sampler.close()
        status = self.proc.wait()
        return self._end(status)

    def _end(self, status: int) -> EndEvent:
        stopped = self.reason is not None
        errors: list[str] = []
        if stopped:
            reason = self.reason or "interrupted"
        elif status < 0:
            reason = "crashed"
        else:
            reason = "exited"
        name = os.path.basename(str(self.proc.args[0] if isinstance(self.proc.args, list) else self.proc.args))
        tail = list(self.tail)
        if reason == "crashed":
            errors.append(f"{name} died: {describe_status(status)}" + (f"; its last line: {tail[-1]}" if tail else ""))
        elif reason == "exited" and status != 0:
            errors.append(f"{name} exited with status {status}" + (f"; its last line: {tail[-1]}" if tail else ""))
        end = EndEvent(reason=reason, exit_status=status, error_lines=tail if reason in ("crashed", "exited") else [])
        return self.session.finish(end, errors)


def _program(proc: subprocess.Popen[bytes]) -> str:
    """The program a child runs (its argv[0]), for notes."""
    args = proc.args
    return str(args[0]) if isinstance(args, list | tuple) and args else str(args)
