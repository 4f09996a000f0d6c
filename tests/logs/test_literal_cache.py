"""The literal cache (doctor/sources/logs/literal_cache.py): a kept answer is the answer the syntax
reader gives, a damaged, foreign or unwritable cache is only a miss, and the cache can be turned off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.sources.engines.llamacpp import patterns as llamacpp_patterns
from doctor.sources.logs import literal_cache, literals, matcher

PATTERNS = sorted({p.pattern for p in vars(llamacpp_patterns).values() if isinstance(p, matcher.GatedPattern)})


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder, and a process that has read no cache yet."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("LLM_DOCTOR_NO_CACHE", raising=False)
    monkeypatch.setitem(literal_cache._STATE, "memo", None)
    monkeypatch.setitem(literal_cache._STATE, "added", None)
    return tmp_path / "llm-doctor" / "literals"


def _forget(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a new process: nothing read, nothing added."""
    monkeypatch.setitem(literal_cache._STATE, "memo", None)
    monkeypatch.setitem(literal_cache._STATE, "added", None)


def _counting() -> tuple[list[str], object]:
    calls: list[str] = []

    def compute(pattern: str, flags: int) -> tuple[str, ...] | None:
        calls.append(pattern)
        return literals._read_literals(pattern, flags)

    return calls, compute


def test_a_kept_answer_is_the_answer_of_the_syntax_reader(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(PATTERNS) > 40
    calls, compute = _counting()
    first = [literal_cache.literals(p, 0, compute) for p in PATTERNS]  # type: ignore[arg-type]
    assert calls == PATTERNS
    literal_cache.save()
    assert len(list(fresh.glob("*.json"))) == 1

    _forget(monkeypatch)
    calls, compute = _counting()
    again = [literal_cache.literals(p, 0, compute) for p in PATTERNS]  # type: ignore[arg-type]
    assert calls == []  # every one from the file
    assert again == first == [literals._read_literals(p, 0) for p in PATTERNS]
    assert any(lits and len(lits) > 1 for lits in again) and None in [literals._read_literals("a*", 0)]
    # the flags are part of the key: the same text under other flags is asked again
    assert literal_cache.literals(PATTERNS[0], 8, compute) == literals._read_literals(PATTERNS[0], 8)  # type: ignore[arg-type]
    assert calls == [PATTERNS[0]]


def test_a_damaged_or_foreign_file_is_a_miss(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pattern = PATTERNS[0]
    literal_cache.literals(pattern, 0, literals._read_literals)
    literal_cache.save()
    (path,) = fresh.glob("*.json")
    for text in ("{not json", json.dumps({"key": "another reader", "literals": {f"0\0{pattern}": ["x"]}}),
                 json.dumps({"key": literal_cache._stamp(), "literals": {f"0\0{pattern}": [1]}})):
        path.write_text(text)
        _forget(monkeypatch)
        calls, compute = _counting()
        assert literal_cache.literals(pattern, 0, compute) == literals._read_literals(pattern, 0)  # type: ignore[arg-type]
        assert calls == [pattern]


def test_an_unwritable_folder_or_no_cache_leaves_the_answers_right(fresh: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fresh.parent.mkdir(parents=True)
    fresh.write_text("a file where the folder should be")
    pattern = PATTERNS[1]
    assert literal_cache.literals(pattern, 0, literals._read_literals) == literals._read_literals(pattern, 0)
    literal_cache.save()  # cannot write: says nothing
    assert fresh.is_file()

    fresh.unlink()
    _forget(monkeypatch)
    monkeypatch.setenv("LLM_DOCTOR_NO_CACHE", "1")
    assert literal_cache.literals(pattern, 0, literals._read_literals) == literals._read_literals(pattern, 0)
    literal_cache.save()
    assert not fresh.exists()


def test_required_literals_goes_through_the_cache(fresh: Path) -> None:
    pattern = r"offloaded (\d+)/(\d+) layers to GPU"
    expected = literals._read_literals(pattern, 0)
    assert expected is not None
    assert matcher.required_literals(pattern) == expected
    assert literal_cache._STATE["added"] == {f"0\0{pattern}": list(expected)}
