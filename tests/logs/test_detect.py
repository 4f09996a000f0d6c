"""Engine detection: which engine(s) a log came from, and how sure we are.

Unit cases on the vote counts (wrappers, mixed input, a few quoted lines), then the whole pipeline on
one fixture of each engine: the detected engine, the confidence, and every engine seen.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from doctor.sources.logs.detect import detect
from doctor.sources.logs.entry import analyze_bytes

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def test_nothing_recognised() -> None:
    found = detect(Counter())
    assert (found.engine, found.confidence, found.seen, found.mixed) == (None, "low", [], False)


def test_wrapper_takes_the_lines_it_wraps() -> None:
    found = detect(Counter({"llama.cpp-library": 40, "llama.cpp": 10, "ollama": 6}))
    assert found.engine == "ollama"
    assert found.confidence == "high"
    assert found.seen == ["ollama", "llama.cpp"]
    assert not found.mixed


def test_llama_cpp_python_keeps_its_old_behaviour() -> None:
    found = detect(Counter({"llama.cpp-library": 30, "llama-cpp-python": 3}))
    assert (found.engine, found.confidence, found.mixed) == ("llama-cpp-python", "high", False)
    alone = detect(Counter({"llama.cpp-library": 12, "llama-server": 5, "llama.cpp": 5}))
    assert (alone.engine, alone.confidence) == ("llama.cpp", "high")


def test_two_engines_that_do_not_wrap_each_other_are_mixed() -> None:
    found = detect(Counter({"llama.cpp": 18, "vllm": 9}))
    assert found.engine == "llama.cpp"
    assert found.mixed and found.others == ["vllm"]
    assert found.confidence == "medium"
    assert found.seen == ["llama.cpp", "vllm"]


def test_a_stray_line_of_another_engine_keeps_high_confidence() -> None:
    found = detect(Counter({"vllm": 60, "llama.cpp": 1}))
    assert (found.engine, found.confidence, found.mixed) == ("vllm", "high", True)


def test_even_split_is_low_confidence() -> None:
    assert detect(Counter({"vllm": 4, "tgi": 4})).confidence == "low"


@pytest.mark.parametrize(("votes", "confidence"), [({"tgi": 1}, "low"), ({"tgi": 2}, "medium"), ({"tgi": 3}, "high")])
def test_few_lines_few_votes(votes: dict[str, int], confidence: str) -> None:
    assert detect(Counter(votes)).confidence == confidence


@pytest.mark.parametrize(("path", "engine"), [
    ("ollama/healthy-v0.5.7-journald.log", "ollama"),
    ("ollama/offload-to-gpu-v0.1.38.log", "ollama"),
    ("ollama/cli-verbose.log", "ollama"),
    ("vllm/healthy-v0.6.3.log", "vllm"),
    ("vllm/healthy-v0.8.5-v1-tp2.log", "vllm"),
    ("vllm/preemption-v0.34.log", "vllm"),
    ("tgi/healthy-v2.0.log", "tgi"),
    ("tgi/max-total-tokens-over-kv-v3.0.log", "tgi"),
])
def test_each_engine_and_era_is_recognised(analyze, path: str, engine: str) -> None:
    facts = analyze(LOGS / path).facts
    assert facts.value("engine.name") == engine
    assert facts.value("engine.detect_confidence") == "high"
    assert facts.value("engine.detected")[0] == engine


def test_ollama_log_shows_the_runner_it_wraps(analyze) -> None:
    facts = analyze(LOGS / "ollama" / "offload-to-gpu-v0.1.38.log").facts
    assert facts.value("engine.name") == "ollama"
    detected = facts.get("engine.detected")
    assert detected is not None and "signature lines" in (detected.source.text or "")


def test_a_log_of_no_known_engine_says_so() -> None:
    facts = analyze_bytes(b"Starting nginx 1.25.3\nworker process 12 started\n")
    assert not facts.has("engine.name")
    assert facts.get("engine.name").unknown
    assert facts.value("engine.detect_confidence") == "low"
