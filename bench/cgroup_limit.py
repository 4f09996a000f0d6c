"""A real memory limit for one child process: a cgroup of its own (v2 `memory.max`, or v1
`memory.limit_in_bytes`), as a container runtime sets one, so a fit verdict can be checked against
what the kernel really does - kill the process, or evict page cache and let it re-read.

Making a cgroup needs write access to the cgroup file system (root, or a delegated subtree);
`available()` says whether this machine allows it and why not. The bench falls back to reading
peak resident memory where it does not.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT_V1 = Path("/sys/fs/cgroup/memory")
ROOT_V2 = Path("/sys/fs/cgroup")


@dataclass(slots=True)
class Limited:
    """How one limited run ended."""

    returncode: int
    stderr: str
    oom_kills: int  # the kernel's OOM kills inside the cgroup
    peak: int  # the most memory charged to the cgroup (bytes), or -1 where the kernel does not say

    @property
    def killed(self) -> bool:
        return self.oom_kills > 0 or self.returncode in (-9, 137)


def _layout() -> tuple[Path, str, str, str] | None:
    """(parent, limit file, peak file, events file) of the hierarchy that can hold a new cgroup."""
    if (ROOT_V1 / "memory.limit_in_bytes").exists():
        return ROOT_V1, "memory.limit_in_bytes", "memory.max_usage_in_bytes", "memory.oom_control"
    if (ROOT_V2 / "cgroup.controllers").exists() and "memory" in (ROOT_V2 / "cgroup.controllers").read_text():
        return ROOT_V2, "memory.max", "memory.peak", "memory.events"
    return None


def available() -> tuple[bool, str]:
    """Whether a memory cgroup can be made here, and why not."""
    layout = _layout()
    if layout is None:
        return False, "no memory cgroup controller mounted under /sys/fs/cgroup"
    probe = layout[0] / f"llm-doctor-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError as exc:
        return False, f"cannot make a cgroup under {layout[0]}: {exc.strerror}"
    has_limit = (probe / layout[1]).exists()
    probe.rmdir()
    if not has_limit:
        return False, f"a cgroup under {layout[0]} has no {layout[1]} (memory controller not delegated)"
    return True, f"cgroup {'v1' if layout[0] == ROOT_V1 else 'v2'} memory limit under {layout[0]}"


def drop_file_cache(path: Path, tries: int = 20) -> None:
    """Evict a file's pages from the page cache (as after a reboot or in a fresh container), so the
    limited run reads and is charged for them itself. Pages another process maps stay: after a few
    tries (a child just ended may still be unmapping) that is an error, not a silent measurement."""
    left = 0
    for _ in range(tries):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        left = resident_bytes(path)
        if left <= 1 << 20:
            return
        time.sleep(0.25)
    raise OSError(f"{left >> 20} MiB of {path} stay in the page cache: another process maps it "
                  "(run the bench alone)")


def resident_bytes(path: Path) -> int:
    """How much of a file is in the page cache: mincore(2) over a read-only mapping of it (mapping it
    touches no page)."""
    import ctypes
    import mmap

    size = path.stat().st_size
    if size == 0:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
    vec = (ctypes.c_ubyte * ((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE))()
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"cannot map {path}")
        try:
            if libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore failed on {path}")
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return min(size, sum(v & 1 for v in vec) * mmap.PAGESIZE)


def _oom_kills(text: str) -> int:
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return int(value)
    return 0


def run_limited(cmd: Sequence[str], limit: int, timeout: float = 600) -> Limited:
    """Run `cmd` in a new cgroup whose memory (and, on v1, memory + swap) is limited to `limit` bytes."""
    layout = _layout()
    if layout is None:
        raise OSError("no memory cgroup controller")
    parent, limit_file, peak_file, events_file = layout
    group = parent / f"llm-doctor-bench-{os.getpid()}-{time.monotonic_ns()}"
    group.mkdir()
    try:
        (group / limit_file).write_text(str(limit))
        swap = group / "memory.memsw.limit_in_bytes" if parent == ROOT_V1 else group / "memory.swap.max"
        if swap.exists():
            with contextlib.suppress(OSError):  # no swap accounting: the machine's swap is the limit's business
                swap.write_text(str(limit) if parent == ROOT_V1 else "0")
        procs = str(group / "cgroup.procs")

        def enter() -> None:
            with open(procs, "w", encoding="ascii") as f:
                f.write(str(os.getpid()))

        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False,
                              preexec_fn=enter)
        events = (group / events_file).read_text()
        try:
            peak = int((group / peak_file).read_text())
        except (OSError, ValueError):
            peak = -1
        return Limited(proc.returncode, proc.stderr, _oom_kills(events), peak)
    finally:
        for _ in range(100):  # the cgroup empties a moment after its last process is reaped
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.05)
