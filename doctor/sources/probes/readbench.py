"""Heavy probe (scan --bench): an honest sequential read speed of the model file.

A read of a file that sits in the page cache measures RAM, so the probe first asks how much of the
file is cached (cachestat(2), Linux >= 6.5, else mmap + mincore(2) as util-linux fincore does).
Then it reads with O_DIRECT into an aligned buffer, bypassing the cache. Where O_DIRECT is refused
(some FUSE and older overlay/tmpfs) it drops *this file's* cached pages with
posix_fadvise(DONTNEED) - never system-wide, and never when another process has the file mapped
(a running engine would have to re-read it) - and reads buffered. The read is bounded in bytes and
time. Inside a VM the host may cache the virtual disk, so the figure is labelled an upper bound.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
import time

from doctor.core.facts import Facts
from doctor.sources.probes.base import Probe, ProbeContext, Reporter, Roots
from doctor.sources.probes.cpu import cpuinfo, virtualization

BLOCK = 8 << 20
MAX_BYTES = 2 << 30
SYS_CACHESTAT = 451  # same number on x86-64 and arm64
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Cachestat(ctypes.Structure):
    _fields_ = [("nr_cache", ctypes.c_uint64), ("nr_dirty", ctypes.c_uint64), ("nr_writeback", ctypes.c_uint64),
                ("nr_evicted", ctypes.c_uint64), ("nr_recently_evicted", ctypes.c_uint64)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def cached_fraction(path: str) -> tuple[float, str]:
    """Share of the file in the page cache, and how it was measured."""
    size = os.path.getsize(path)
    if size == 0:
        return 0.0, "empty file"
    pages = (size + PAGE - 1) // PAGE
    libc = _libc()
    fd = os.open(path, os.O_RDONLY)
    try:
        rng, cs = _Range(0, 0), _Cachestat()
        rc = libc.syscall(SYS_CACHESTAT, fd, ctypes.byref(rng), ctypes.byref(cs), 0)
        if rc == 0:
            return min(1.0, cs.nr_cache / pages), "cachestat"
        return _mincore(libc, fd, size) / pages, "mincore"
    finally:
        os.close(fd)


def _mincore(libc: ctypes.CDLL, fd: int, size: int) -> int:
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    window = 128 << 20
    resident = 0
    for off in range(0, size, window):
        length = min(window, size - off)
        addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, off)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed")
        try:
            vec = (ctypes.c_ubyte * ((length + PAGE - 1) // PAGE))()
            if libc.mincore(addr, length, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
            resident += sum(b & 1 for b in vec)
        finally:
            libc.munmap(addr, length)
    return resident


def mapped_by(roots: Roots, path: str) -> list[int]:
    """PIDs (other than ours) that have the file mapped."""
    pids: list[int] = []
    me = os.getpid()
    try:
        entries = os.listdir(roots.proc)
    except OSError:
        return pids
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(os.path.join(roots.proc, entry, "maps"), encoding="utf-8", errors="replace") as handle:
                if any(line.rstrip().endswith(path) for line in handle):
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def read_direct(path: str, seconds: float, max_bytes: int = MAX_BYTES) -> tuple[int, float]:
    """Bytes read and seconds taken with O_DIRECT; raises OSError(EINVAL) where unsupported."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    buf = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT needs
    total, start = 0, time.perf_counter()
    try:
        while total < max_bytes and time.perf_counter() - start < seconds:
            n = os.preadv(fd, [buf], total)
            if n <= 0:
                break
            total += n
            if n < BLOCK:
                break
    finally:
        os.close(fd)
        buf.close()
    return total, time.perf_counter() - start


def read_buffered(path: str, seconds: float, max_bytes: int = MAX_BYTES) -> tuple[int, float]:
    total, start = 0, time.perf_counter()
    with open(path, "rb", buffering=0) as handle:
        buf = bytearray(BLOCK)
        while total < max_bytes and time.perf_counter() - start < seconds:
            n = handle.readinto(buf)
            if not n:
                break
            total += n
    return total, time.perf_counter() - start


def measure_read(path: str, roots: Roots, seconds: float = 8.0) -> Facts:
    rep = Reporter("readbench")
    real = os.path.realpath(path)
    cached = rep.read("model.storage.cached_fraction", lambda: cached_fraction(real), "page cache residency")
    if cached is not None:
        rep.set("model.storage.cached_fraction", round(cached[0], 3), text=f"{cached[1]} before the read")
    method = "O_DIRECT"
    try:
        n, took = read_direct(real, seconds)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
            rep.unknown("model.storage.read_mb_s", f"read failed: {exc.strerror or exc}")
            return rep.facts
        others = mapped_by(roots, real)
        if others and cached is not None and cached[0] > 0.05:
            rep.unknown("model.storage.read_mb_s", f"O_DIRECT unsupported here and PIDs {others[:5]} map the file;"
                        " not dropping its cache under a running engine")
            return rep.facts
        if not others:
            fd = os.open(real, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
            method = "buffered after dropping this file's cached pages"
        else:
            method = "buffered (file mapped elsewhere but not cached)"
        n, took = read_buffered(real, seconds)
    if n <= 0 or took <= 0:
        rep.unknown("model.storage.read_mb_s", "nothing could be read")
        return rep.facts
    mb_s = round(n / 1e6 / took, 1)
    rep.set("model.storage.read_mb_s", mb_s, text=f"{method}: {n / 2**20:.0f} MiB in {took:.2f} s")
    _model, flags = cpuinfo(roots)
    vm, _container = virtualization(roots, flags)
    upper = vm != "none"
    rep.set("model.storage.read_upper_bound", upper,
            text=f"inside a VM ({vm}): the host may cache the virtual disk" if upper else "bare metal")
    return rep.facts


def _collect(ctx: ProbeContext) -> Facts:
    rep = Reporter("readbench")
    if not ctx.model_path:
        rep.unknown("model.storage.read_mb_s", "no model path")
        return rep.facts
    if not ctx.roots.live:
        recorded = ctx.roots.bench if isinstance(ctx.roots.bench, dict) else {}
        if "read_mb_s" in recorded:
            rep.set("model.storage.read_mb_s", float(recorded["read_mb_s"]),
                    text=f"recorded on {ctx.roots.recorded}")
            rep.set("model.storage.read_upper_bound", bool(recorded.get("read_upper_bound", False)))
        else:
            rep.unknown("model.storage.read_mb_s", f"not recorded for {ctx.roots.recorded}")
        return rep.facts
    return measure_read(ctx.model_path, ctx.roots, ctx.bench_seconds)


PROBE = Probe("readbench", "heavy", "cold sequential read speed of the model file (page cache checked first)",
              ("model.storage.read_mb_s",), _collect)
