"""doctor/sources/logs/shapes.py: a pattern said to match inside no line of a shape matches inside none of
the lines of that shape (sound), on llama-server's hot lines (doctor/sources/engines/llamacpp/fold.py HOT)
as the built logs of test_fold.py hold them; and the message catalogue needs no search of those runs."""

from __future__ import annotations

import random
import re

from doctor.sources.catalogue.parser import active_set
from doctor.sources.engines.llamacpp.fold import HOT
from doctor.sources.logs.shapes import block_pattern, can_occur, shape_finder
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
    patterns = tuple(messages.index.patterns)
    assert shape_finder(patterns, HOT.line) is None
    occurs = can_occur(HOT.line)
    assert all(not occurs(block_pattern(p)) for p in messages.index.patterns)
    assert shape_finder(patterns, "") is not None  # a run of unknown shape is searched


def test_block_pattern_drops_anchors_only() -> None:
    """A pattern matched against a stripped line's text is searched for in the raw lines without its anchors
    (a class's ^ or $ and escaped ones stay), a `$` that ends it standing for the raw line's end after its
    trailing blanks (every line of a block ends in a line end); one whose anchors cannot be told apart matches
    anything."""
    end = r"[ \t\r\f\v]*\n"
    assert block_pattern(r"task \d+ \|\s*$") == r"task \d+ \|\s*" + end
    assert block_pattern(r"^\s*eval time") == r"\s*eval time"
    assert block_pattern(r"[^x]+y") == r"[^x]+y" and block_pattern(r"x\$") == r"x\$"
    assert block_pattern(r"[]^$]x$") == r"[]^$]x" + end and block_pattern(r"\Aab\Z") == "ab"
    assert block_pattern(r"(?:a|(?m:^b))") == r"(?:a|(?m:b))"
    assert block_pattern(r"a$|b") == r"a|b"  # a `$` the pattern goes on after is dropped
    raw = "      total time =  5223.91 ms /  1128 tokens   \r\n"
    for pattern in (r"^total time = +[0-9.]+ ms", r"tokens$", r"\Atotal.*tokens\Z"):
        assert re.search(pattern, raw.strip()) and re.search(block_pattern(pattern), raw)
    # a line that ends in a backslash (a shell command's continuation), not one that holds one
    ends = block_pattern(r"(?m:\\[ \t]*\r?$)")
    assert re.search(ends, "python -m vllm.entrypoints.openai.api_server \\\n")
    assert not re.search(ends, "prompt: 'a\\nb', params: x.\n")
