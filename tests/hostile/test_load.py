"""Load, bounded for CI (the full sizes and the rates are bench/load.py): analyze on a large log
keeps flat memory; watch follows a log that keeps growing and reads every line with flat memory;
watch -- CMD with a command that writes faster than the terminal drains loses nothing and grows
nothing. Memory is each child's peak RSS (wait4); no test here asserts a speed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .load_tools import RateWriter, log_block, run_measured, slow_reader, write_log

MIB = 1 << 20
FLAT_KIB = 40 * 1024  # how much more a 10x larger input may cost at peak


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> int:
    """Peak RSS of analyze on one block of log: the tool, its rules, its parsers."""
    path = tmp_path_factory.mktemp("base") / "small.log"
    write_log(path, 1)
    m = run_measured(["analyze", str(path), "--format", "json"])
    assert m.returncode in (0, 1), m.stderr
    return m.maxrss_kib


def test_analyze_memory_stays_flat_from_15_to_150_mb(tmp_path: Path) -> None:
    small, big = tmp_path / "small.log", tmp_path / "big.log"
    write_log(small, 15 * MIB)
    lines = write_log(big, 150 * MIB)
    a = run_measured(["analyze", str(small), "--format", "json"])
    b = run_measured(["analyze", str(big), "--format", "json"])
    assert a.returncode in (0, 1) and b.returncode in (0, 1), b.stderr
    report = json.loads(b.stdout)
    assert report["facts"]["facts"]["run.log_lines"]["value"] == lines  # every line was read
    assert b.maxrss_kib - a.maxrss_kib < FLAT_KIB, (a.maxrss_kib, b.maxrss_kib)


def test_analyze_from_a_pipe(tmp_path: Path) -> None:
    """`analyze -` reads stdin in chunks too (a log pasted or piped from journalctl)."""
    import subprocess

    path = tmp_path / "piped.log"
    lines = write_log(path, 40 * MIB)
    with path.open("rb") as handle:
        proc = subprocess.run([sys.executable, "-m", "doctor", "analyze", "-", "--format", "json"], stdin=handle,
                              capture_output=True, check=False, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode in (0, 1), proc.stderr
    assert json.loads(proc.stdout)["facts"]["facts"]["run.log_lines"]["value"] == lines


def test_watch_follows_a_growing_log_to_the_last_line_with_flat_memory(tmp_path: Path, baseline: int) -> None:
    log = tmp_path / "growing.log"
    log.write_bytes(b"")
    writer = RateWriter(log, 3 * MIB, 3.0)  # 9 MiB over 3 s; bench/load.py pushes 50 MB/s
    writer.start()
    m = run_measured(["watch", "--log", str(log), "--duration", "10", "--format", "json"])
    writer.join()
    assert m.returncode in (0, 1), m.stderr
    report = json.loads(m.stdout)
    assert report["facts"]["facts"]["run.log_lines"]["value"] == writer.lines  # nothing skipped, nothing twice
    assert m.maxrss_kib - baseline < 2 * FLAT_KIB, (baseline, m.maxrss_kib)


def test_watch_a_command_that_floods_a_slow_terminal(tmp_path: Path, baseline: int) -> None:
    """The command writes 24 MiB as fast as it can; the terminal (our stderr here, as --format json
    sends the pass-through there) drains 8 MiB/s. Back-pressure holds the command: nothing is lost
    and nothing piles up in memory."""
    block = log_block()
    copies = (24 * MIB) // len(block)
    src = tmp_path / "block.log"
    src.write_bytes(block)
    code = (f"import sys; b = open({str(src)!r}, 'rb').read(); w = sys.stdout.buffer.write\n"
            f"for _ in range({copies}): w(b)\n")
    m = run_measured(["watch", "--format", "json", "--", sys.executable, "-c", code],
                     readers={"stderr": slow_reader(8 * MIB)})
    assert m.returncode in (0, 1), m.stdout[-2000:]
    assert int(m.stderr) == copies * len(block)  # every byte reached the terminal
    report = json.loads(m.stdout)
    assert report["facts"]["facts"]["run.log_lines"]["value"] == copies * block.count(b"\n")
    assert m.maxrss_kib - baseline < 2 * FLAT_KIB, (baseline, m.maxrss_kib)
