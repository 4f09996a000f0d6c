"""doctor/sources/logs/shapes.py: a pattern said to match inside no line of a shape matches inside none of
the lines of that shape (sound), on llama-server's hot lines (doctor/sources/engines/llamacpp/fold.py HOT)
as the built logs of test_fold.py hold them; and the message catalogue needs no search of those runs."""

from __future__ import annotations

import random
import re

from doctor.sources.catalogue.matcher import block_pattern
from doctor.sources.catalogue.parser import _find_trigger, active_set
from doctor.sources.engines.llamacpp.fold import HOT
from doctor.sources.logs.shapes import can_occur
from tests.logs.test_fold import server_log, server_log_2025


def _hot_lines() -> list[str]:
    """The lines of every run of hot units in the built logs, and the spec's own samples and quiet lines."""
    runs = re.compile(rf"(?m)^(?:(?:{HOT.line})\r?\n)+")
    lines: list[str] = []
    for data in (server_log(requests=300, restart_at=None), server_log_2025(requests=100)):
        for run in runs.finditer(data.decode()):
            lines += run.group().splitlines()
    lines += [line.decode() for s in (*HOT.samples, *HOT.quiet) for line in s.split(b"\n")]
    assert any("graphs reused" in line for line in lines) and any(line.startswith("  ") for line in lines)
    return lines


def _patterns(lines: list[str], rng: random.Random) -> list[str]:
    """Patterns that match some of the lines (pieces of them, numbers made classes) and some that do not."""
    found = []
    for _ in range(400):
        line = rng.choice(lines)
        a = rng.randrange(len(line))
        b = min(len(line), a + rng.randrange(1, 40))
        piece = re.escape(line[a:b])
        found.append(piece)
        found.append(re.sub(r"[0-9]+", r"\\d+", piece))
        found.append(re.sub(r"(?:\\ )+", r"\\s+", piece) + rng.choice(("", "$", r"\b", ".*x", "(?:a|b)?")))
        found.append("^" + piece.upper())
    return [*found, "failed to", "CUDA error", r"[a-z]+\.c:\d+: ", "x?", "(?i)ZZZ", r"\|\s*$", "graphs reused"]


def test_said_not_to_occur_means_it_does_not() -> None:
    occurs = can_occur(HOT.line)
    lines = _hot_lines()
    assert len(lines) > 1000
    rng = random.Random(1)
    said_no = 0
    for pattern in _patterns(lines, rng):
        if occurs(pattern):
            continue
        said_no += 1
        regex = re.compile(pattern)
        hit = next((line for line in lines if regex.search(line) or regex.search(line.strip())), None)
        assert hit is None, (pattern, hit)
    assert said_no > 100  # it does prune (upper-cased pieces, other engines' words)
    assert occurs("stop processing: n_tokens = \\d+, truncated = 1") and occurs(r"tokens per second\)")
    assert not occurs("failed to") and not occurs(r"[a-z]+\.c:\d+: ")


def test_the_catalogue_searches_no_llama_server_run() -> None:
    """No active entry's trigger can match inside one of llama-server's hot lines: a folded run costs the
    catalogue nothing (bench/results/analyze_throughput.md); an entry that could would be searched for."""
    messages = active_set()
    assert _find_trigger(messages, HOT.line) is None
    occurs = can_occur(HOT.line)
    assert all(not occurs(block_pattern(p)) for p in messages.index.patterns)
    assert _find_trigger(messages, "") is not None  # a run of unknown shape is searched
