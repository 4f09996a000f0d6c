"""The throughput benchmark's reference is fair: grep -E, given the trigger fragments translated by
bench/analyze_throughput.py, selects exactly the lines the analyzer's scanner hands to the parsers."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bench.analyze_throughput import ere, grep_cmd, trigger_file
from bench.gen_log import generate
from doctor.sources.logs.analyze import LogAnalyzer


def test_ere_translation() -> None:
    assert ere(r"(?:print_info|llm_load_print_meta): +(?:arch|n_\w+)") == \
        "(print_info|llm_load_print_meta): +(arch|n_[A-Za-z0-9_]+)"
    assert ere(r"offloaded \d+/") == "offloaded [0-9]+/"


@pytest.mark.skipif(shutil.which("grep") is None, reason="needs grep")
def test_grep_counts_the_lines_the_scanner_selects(tmp_path: Path) -> None:
    log = tmp_path / "gen.log"
    generate(log, 2)
    patterns = trigger_file(tmp_path)
    env = dict(os.environ, LC_ALL="C")
    grep = subprocess.run(grep_cmd(patterns, log), capture_output=True, env=env, check=True)
    analyzer = LogAnalyzer("x", fold=False)  # every candidate line handed on (a folded run is no line each)
    data = log.read_bytes()
    candidates = [r for r in analyzer.scanner.feed(data) if r.text is not None]
    candidates += [r for r in analyzer.scanner.finish() if r.text is not None]
    assert int(grep.stdout) == len(candidates) > 1000
    assert analyzer.scanner.lines == data.count(b"\n")
