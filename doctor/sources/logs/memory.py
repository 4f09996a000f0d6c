"""The memory of an analysis (the sources floor): how the C heap holds its big reads, and the budget its worker
processes keep to.

A log is read in reads of 1 MiB (doctor/sources/logs/stream.py CHUNK), each joined once with the partial line
before it. glibc's malloc serves a block this big with its own mapping and gives it back when freed, but it
raises that threshold to the size of the largest such block freed (its dynamic threshold): from then on each
read's buffers come from the heap, whose freed top is not always given back, and the process keeps several reads'
worth of memory it no longer uses (about 10 MB of the peak on the mixed log of bench/analyze_real.py with reads of
4 MiB). Setting the threshold (mallopt M_MMAP_THRESHOLD) keeps it where it is: blocks of 512 KiB and more are
mapped and unmapped each time (a few hundred page faults per read: nothing next to scanning it).

The budget (`memory_budget`, LLM_DOCTOR_MEMORY_MB, 100 MB): the memory of the analysis and its workers, summed
as the machine pays it (`memory_used`: proportional sets, a page the forked workers share counted once). Where it
nears the budget the workers stop and the analysis reads on alone (doctor/sources/logs/parallel.py): on a log
of many engines' sessions each worker's whole analyses grow as the analysis's own does.

Machine access: glibc's mallopt through ctypes (where the C library is glibc; elsewhere nothing is done), and
/proc/PID/smaps_rollup or statm.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

MEMORY_ENV = "LLM_DOCTOR_MEMORY_MB"
MEMORY_MB = 100  # the memory of the analysis and its workers, summed (PSS): the workers stop short of it
MEMORY_SHARE = 0.8  # ... once the sum reaches this share of it (it grows between two looks)
M_MMAP_THRESHOLD = -3  # glibc's malloc.h
THRESHOLD = 512 << 10


@functools.cache
def map_big_buffers() -> bool:
    """Have blocks of THRESHOLD bytes or more mapped and given back when freed (once per process); False where
    the C library is not glibc or refuses."""
    name = ctypes.util.find_library("c")
    if not name or "libc.so" not in name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD))


def memory_budget() -> int:
    """The bytes of memory the analysis and its workers may use together, summed as `memory_used` sums them
    (LLM_DOCTOR_MEMORY_MB, else MEMORY_MB; 0: no bound): where the sum reaches MEMORY_SHARE of it, the workers
    stop and the analysis reads on alone (a log of many engines' sessions: each worker's whole analyses grow as the
    analysis's own does)."""
    given = os.environ.get(MEMORY_ENV, "").strip()
    try:
        mb = float(given) if given else MEMORY_MB
    except ValueError:
        mb = MEMORY_MB
    return max(0, int(mb * (1 << 20)))


def memory_used(pids: list[int]) -> int:
    """The memory these processes use, summed: their proportional sets (PSS, /proc/PID/smaps_rollup: a page
    shared by the workers forked from this process counted once, split between them), else their resident sets
    (/proc/PID/statm); a process gone counts nothing."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
                rollup = f.read()
            at = rollup.index(b"\nPss:") + 5
            total += int(rollup[at:rollup.index(b"kB", at)]) << 10
            continue
        except (OSError, ValueError):
            pass
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
    return total
