"""A derived min/max fact cites the line that holds its value (issue 13 item 6): not the last line of
the series. Checked over every engine's fixture logs, for every extreme that is read off one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.sources.logs.entry import analyze_stream

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
EXTREMES = ("run.decode_tps_min", "run.decode_tps_max", "server.kv_usage_max", "server.running_max",
            "server.waiting_max", "server.swapped_max", "run.prompt_tokens_max")


def _spellings(value: float) -> set[str]:
    out = {str(value)}
    if isinstance(value, float):
        out |= {f"{value:.1f}", f"{value:.2f}", f"{value:g}"}
        if value == int(value):
            out.add(str(int(value)))
    return out


def _cases() -> list[Path]:
    return sorted(p for p in LOGS.rglob("*.log"))


@pytest.mark.parametrize("path", _cases(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_extreme_cites_the_line_with_its_value(path: Path) -> None:
    with path.open("rb") as handle:
        facts = analyze_stream(handle, path.name)
    lines = path.read_text(errors="replace").splitlines()
    for name in EXTREMES:
        fact = facts.get(name)
        if fact is None or not fact.known or fact.source.kind != "log" or fact.source.line is None:
            continue
        cited = lines[fact.source.line - 1]
        assert any(s in cited for s in _spellings(fact.value)), (name, fact.value, fact.source.line, cited)


def test_the_fastest_rate_of_the_slowdown_log_is_on_line_50() -> None:
    path = LOGS / "llama-server" / "session-slowdown-then-full.log"
    with path.open("rb") as handle:
        facts = analyze_stream(handle, path.name)
    fast, slow = facts.get("run.decode_tps_max"), facts.get("run.decode_tps_min")
    assert (fast.value, fast.source.line) == (58.45, 50)
    assert (slow.value, slow.source.line) == (10.21, 58)
