"""Hostile-suite helpers: a memory cap for inputs that lie about sizes, and the real logs."""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest

GIB = 1 << 30


def data_kib() -> int:
    """This process's data segment (heap and private anonymous maps) now, in KiB."""
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmData:"):
                return int(line.split()[1])
    return 0


@pytest.fixture
def memory_cap() -> Iterator[int]:
    """Cap the data segment at what the process uses now plus 1 GiB while the test runs.

    An input that makes the tool allocate what it claims (a 2**32-layer model, a 2**60-byte string)
    then fails the test with MemoryError instead of taking the machine down; mapped model files are
    not counted (RLIMIT_DATA leaves shared file mappings alone)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = data_kib() * 1024 + GIB
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    try:
        yield cap
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
