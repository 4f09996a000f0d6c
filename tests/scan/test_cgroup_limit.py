"""The fit bench's truth: a real memory limit (bench/cgroup_limit.py). Where this machine lets a
cgroup be made (root or a delegated subtree) the kernel really kills a process that needs more
private memory than the limit, lets one that needs less run, and evicts file pages instead of
killing; elsewhere the tests say why they skip."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.cgroup_limit import _oom_kills, available, drop_file_cache, resident_bytes, run_limited  # noqa: E402

MIB = 1 << 20
CAN, WHY = available()
needs_cgroup = pytest.mark.skipif(not CAN, reason=f"no memory cgroup can be made here: {WHY}")


def test_oom_kills_are_read_from_v1_and_v2_event_files() -> None:
    assert _oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n") == 2  # v1 memory.oom_control
    assert _oom_kills("low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\noom_group_kill 0\n") == 1  # v2 memory.events
    assert _oom_kills("oom_kill_disable 0\nunder_oom 0\n") == 0  # an old kernel without the counter


def test_a_file_leaves_the_page_cache_and_a_mapped_one_is_reported(tmp_path: Path) -> None:
    import mmap

    path = tmp_path / "weights.bin"
    path.write_bytes(b"\1" * (8 * MIB))
    path.read_bytes()
    drop_file_cache(path)
    assert resident_bytes(path) <= MIB
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mapped:
        assert sum(mapped[i] for i in range(0, len(mapped), 4096)) == 2048  # every page touched, mapped
        assert resident_bytes(path) == 8 * MIB
        with pytest.raises(OSError, match="another process maps it"):
            drop_file_cache(path, tries=2)


@needs_cgroup
def test_private_memory_over_the_limit_is_killed_and_under_it_runs() -> None:
    grab = "b = bytearray({n} * 1024 * 1024); b[::4096] = b'\\1' * len(b[::4096]); print('ran')"
    over = run_limited([sys.executable, "-c", grab.format(n=96)], 64 * MIB)
    assert over.killed and over.oom_kills >= 1 and over.returncode != 0
    under = run_limited([sys.executable, "-c", grab.format(n=16)], 64 * MIB)
    assert not under.killed and under.returncode == 0
    assert 16 * MIB < under.peak <= 64 * MIB


@needs_cgroup
def test_mapped_file_pages_are_evicted_not_killed(tmp_path: Path) -> None:
    """96 MiB of mapped file read twice in a 64 MiB limit: the process runs, re-reading from disk."""
    path = tmp_path / "weights.bin"
    path.write_bytes(b"\1" * (96 * MIB))
    drop_file_cache(path)
    read = ("import mmap, sys\nf = open(sys.argv[1], 'rb'); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n"
            "print(sum(sum(m[i] for i in range(0, len(m), 4096)) for _ in range(2)))")
    run = run_limited([sys.executable, "-c", read, str(path)], 64 * MIB)
    assert not run.killed and run.returncode == 0
    assert run.peak <= 64 * MIB
