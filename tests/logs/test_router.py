"""The router's one RE2 set match per line (doctor/sources/logs/router.py): it tells start lines exactly as
the start-line pattern does, its cached routes answer as a fresh match would, and analyzing with it
gives the same sessions as without it; the catalogue's trigger for an anchored entry selects exactly
the lines its pattern matches."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.sources.logs.analyze import LogAnalyzer
from doctor.sources.logs.router import ROUTES_MAX, Router
from doctor.sources.logs.sessions import start_lines

ROOT = Path(__file__).resolve().parents[2]
LOGS = sorted((ROOT / "fixtures" / "logs").rglob("*.log"))
# logs of every engine one after the other: many engine starts, so many sessions
CONCATENATED = {engine: b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in LOGS if p.parent.name == engine)
                for engine in ("llama-server", "vllm", "ollama", "tgi", "llama-cpp-python")}


def _router() -> Router:
    router = LogAnalyzer("x").router
    assert router is not None  # RE2 is a dependency
    return router


def test_start_fragments_are_told_as_the_start_pattern_tells_them() -> None:
    router, starts = _router(), start_lines()
    assert starts.pattern is not None and starts.prefilter is not None
    seen = 0
    for path in LOGS:
        for raw in path.read_bytes().splitlines():
            if not raw.isascii():
                continue
            expected = starts.pattern.search(raw) is not None
            assert router.route(raw).start is expected, (path.name, raw[:120])
            seen += expected
    assert seen > 10  # the fixtures hold engine starts


def test_the_prefilter_changes_no_marker() -> None:
    starts = start_lines()
    assert starts.pattern is not None
    for path in LOGS[:40]:
        for raw in path.read_bytes().splitlines():
            m = starts.pattern.search(raw)
            expected = None if m is None or m.lastindex is None else starts.markers[m.lastindex - 1][:2]
            got = starts.marker(raw)
            assert (None if got is None else (got.family, got.order)) == expected


def test_a_cached_route_is_the_route_of_a_fresh_match() -> None:
    router = _router()
    lines = [raw for p in LOGS[:30] for raw in p.read_bytes().splitlines() if raw.isascii()]
    first = [router.route(raw) for raw in lines]
    router._routes.clear()
    assert [router.route(raw) for raw in lines] == first
    assert len(router._routes) <= ROUTES_MAX


def _analyze(data: bytes) -> dict[str, object]:
    analyzer = LogAnalyzer("x")
    analyzer.scanner.hold_last = True
    analyzer.feed(data)
    facts = analyzer.finish()
    assert len(facts.sessions) > 1
    return facts.to_json()


@pytest.mark.parametrize("engine", sorted(CONCATENATED))
def test_sessions_and_facts_are_the_same_without_the_router(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = CONCATENATED[engine]
    routed = _analyze(data)
    monkeypatch.setattr(Router, "build", classmethod(lambda cls, parsers, starts=(): None))
    assert LogAnalyzer("x").router is None
    assert _analyze(data) == routed


def test_an_anchored_catalogue_entry_selects_only_its_own_lines() -> None:
    catalogue = pytest.importorskip("doctor.sources.catalogue.parser")
    fragments = catalogue.catalogue_set().fragments
    assert "\\x3a\\x20" not in fragments  # ": " alone would make every line of a log a candidate
    trigger = LogAnalyzer("x").scanner.trigger
    abort = b"ggml.c:1234: GGML_ASSERT(x) failed"
    assert trigger.search(b"first line\n" + abort + b"\nlast line\n") is not None  # mid-block, line-anchored
    assert trigger.search(b"a note: nothing an engine said\nkey: value\n") is None
