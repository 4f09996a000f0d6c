"""Real recordings (fixtures/traces/*.jsonl) replayed by `analyze`: the same findings as when recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.core.events import EndEvent, StepEvent
from doctor.sources.live.recording import read_recording

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
EXPECTED = {
    "healthy.jsonl": {"must": set(), "class_free": {"context.overflow", "sampling.repetition", "engine.crash"}},
    "greedy-loop.jsonl": {"must": {"LD401"}, "class_free": {"context.overflow", "engine.crash"}},
    "context-cut.jsonl": {"must": {"LD211"}, "class_free": {"engine.crash"}},
    # the recorded GGML_ASSERT has a known meaning: LD960 names it and explains the generic LD950
    "crash.jsonl": {"must": {"LD960"}, "class_free": {"context.overflow"}},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_replay_gives_the_findings_recorded_live(name: str, analyze) -> None:
    path = TRACES / name
    with path.open("rb") as handle:
        _, events, damaged = read_recording(handle)
    assert damaged == 0
    end = events[-1]
    assert isinstance(end, EndEvent)
    live_ids = {f["id"] for f in end.report["findings"]}
    report = analyze(path)
    replayed = {f.id for f in report.findings}
    explained = {rule for f in report.findings for rule in f.inhibits}
    # what fired live fires on replay, or is explained by a root cause added since the recording
    # (rules added since may add findings, never lose one)
    assert live_ids <= replayed | explained
    assert EXPECTED[name]["must"] <= replayed
    assert not {f.cls for f in report.findings} & EXPECTED[name]["class_free"]


def test_the_loop_recording_shows_the_span(analyze) -> None:
    report = analyze(TRACES / "greedy-loop.jsonl")
    loop = next(f for f in report.findings if f.id == "LD401")
    assert "fruits" in loop.message and loop.confidence == "high"


def test_the_crash_recording_keeps_the_steps_before_the_abort() -> None:
    with (TRACES / "crash.jsonl").open("rb") as handle:
        _, events, _ = read_recording(handle)
    steps = [e.step for e in events if isinstance(e, StepEvent)]
    assert steps == [1, 2, 3, 4, 5]
    end = events[-1]
    assert isinstance(end, EndEvent) and end.reason == "crashed" and end.exit_status == -6
    assert any("GGML_ASSERT" in line for line in end.error_lines)


def test_a_crash_cut_short_mid_write_still_replays(tmp_path: Path, analyze) -> None:
    lines = (TRACES / "crash.jsonl").read_bytes().splitlines(keepends=True)
    cut = b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2]  # llm-doctor itself died writing the end
    path = tmp_path / "cut.jsonl"
    path.write_bytes(cut)
    report = analyze(path)
    facts = report.facts
    assert facts.value("run.recording_complete") is False
    assert facts.value("run.recording_damaged_lines") == 1
    assert len(facts.value("run.decode_ms")) == 5
    assert facts.events("crash")  # the abort line came before the cut


def test_recordings_carry_no_paths_of_the_recording_machine() -> None:
    for path in TRACES.glob("*.jsonl"):
        text = path.read_text(encoding="utf-8")
        head = json.loads(text.split("\n", 1)[0])
        assert head["model_path"].startswith("/home/ana/"), path.name
        assert "/work/" not in text, path.name
