"""Load helpers shared by tests/hostile/test_load.py (bounded, CI) and bench/load.py (the full sizes):
build large real-shaped logs, run llm-doctor in a child and read its peak memory, write a log at a
set rate, and a reader that drains a pipe slower than the writer fills it (a slow terminal).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "logs"
BLOCK_SOURCES = ("llama-cpp-python/healthy.log", "llama-server/session-slowdown-then-full.log",
                 "llama.cpp/server-context-exceeded.log", "ollama/healthy-v0.5.7-journald.log",
                 "vllm/preemption-v0.6.3.log", "tgi/healthy-v2.0.log")


def log_block() -> bytes:
    """About 300 KB of real engine output of every kind (trigger lines and filler), one block."""
    parts = []
    for name in BLOCK_SOURCES:
        data = (FIXTURES / name).read_bytes()
        parts.append(data if data.endswith(b"\n") else data + b"\n")
    return b"".join(parts)


def write_log(path: Path, size_bytes: int) -> int:
    """A log of about `size_bytes` made of real blocks; returns its line count."""
    block = log_block()
    lines_per_block = block.count(b"\n")
    n = max(1, size_bytes // len(block))
    with path.open("wb") as handle:
        chunk = block * 32
        full, rest = divmod(n, 32)
        for _ in range(full):
            handle.write(chunk)
        handle.write(block * rest)
    return n * lines_per_block


@dataclass
class Measured:
    returncode: int
    maxrss_kib: int
    seconds: float
    stdout: bytes = b""
    stderr: bytes = b""
    extra: dict[str, float] = field(default_factory=dict)


def run_measured(args: list[str], *, readers: dict[str, object] | None = None, timeout: float = 600.0,
                 env: dict[str, str] | None = None) -> Measured:
    """Run `python -m doctor ARGS`; return its exit code, its peak RSS (from wait4) and its output.
    `readers` may replace the reader of "stdout" or "stderr" (a slow terminal: see slow_reader)."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "doctor", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1", **(env or {})})
    out: dict[str, bytes] = {}
    readers = readers or {}

    def drain(name: str, handle: Any) -> None:
        reader = readers.get(name)
        out[name] = reader(handle) if reader is not None else handle.read()

    threads = [threading.Thread(target=drain, args=("stdout", proc.stdout)),
               threading.Thread(target=drain, args=("stderr", proc.stderr))]
    for t in threads:
        t.start()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in threads:
        t.join()
    return Measured(proc.returncode, usage.ru_maxrss, time.monotonic() - start, out.get("stdout", b""),
                    out.get("stderr", b""))


def slow_reader(bytes_per_s: float, chunk: int = 1 << 16) -> Any:
    """A reader that drains a pipe at `bytes_per_s` (a terminal slower than the command). What it
    returns as the captured output is the number of bytes it read (as ASCII digits)."""
    def read(handle: Any) -> bytes:
        total = 0
        start = time.monotonic()
        while True:
            data = handle.read1(chunk) if hasattr(handle, "read1") else handle.read(chunk)
            if not data:
                break
            total += len(data)
            due = start + total / bytes_per_s
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        return str(total).encode()

    return read


class RateWriter(threading.Thread):
    """Appends real log lines to a file at `bytes_per_s` for `seconds`, in 64 KiB writes: `head` once, then
    `block` (by default log_block()) over and over."""

    def __init__(self, path: Path, bytes_per_s: float, seconds: float, block: bytes | None = None,
                 head: bytes = b"") -> None:
        super().__init__(daemon=True)
        self.path = path
        self.rate = bytes_per_s
        self.seconds = seconds
        self.block = block
        self.head = head
        self.written = 0
        self.lines = 0

    def run(self) -> None:
        chunks = line_chunks(self.block if self.block is not None else log_block(), 1 << 16)
        start = time.monotonic()
        i = 0
        with self.path.open("ab", buffering=0) as handle:
            if self.head:
                handle.write(self.head)
                self.written += len(self.head)
                self.lines += self.head.count(b"\n")
            while time.monotonic() - start < self.seconds:
                data = chunks[i % len(chunks)]
                i += 1
                handle.write(data)
                self.written += len(data)
                self.lines += data.count(b"\n")
                delay = start + self.written / self.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)


def line_chunks(data: bytes, size: int) -> list[bytes]:
    """`data` cut into pieces of about `size` bytes, each ending at a line end."""
    out: list[bytes] = []
    pos = 0
    while pos < len(data):
        cut = data.rfind(b"\n", pos, pos + size)
        end = cut + 1 if cut >= pos else (data.find(b"\n", pos + size) + 1 or len(data))
        out.append(data[pos:end])
        pos = end
    return out
