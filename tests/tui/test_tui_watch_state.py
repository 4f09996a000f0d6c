"""The watch screen's model fed a real recording, the replay reader, and the text charts."""

from __future__ import annotations

import copy
import itertools
import json
import threading
from pathlib import Path

import pytest

from doctor.core.errors import InputError
from doctor.core.events import EndEvent, FindingEvent, IncidentEvent, LiveEvent, PhaseEvent, StepEvent
from doctor.derive import derive
from doctor.sources.live.recording import read_recording
from doctor.sources.live.trace import TraceBuilder
from doctor.views.tui.charts import bar, sparkline
from doctor.views.tui.replay import Replay, iter_recording, read_header
from doctor.views.tui.watch_state import WatchState, loop_ranges

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"


def _state(recording: Path) -> tuple[WatchState, list]:
    events = list(iter_recording(recording))
    state = WatchState()
    for event in events:
        state.apply(event)
    return state, events


def test_recording_folds_into_figures(recording: Path) -> None:
    state, events = _state(recording)
    steps = [e for e in events if isinstance(e, StepEvent)]
    prefill = next(e for e in events if isinstance(e, PhaseEvent) and e.phase == "prefill")
    assert state.step_count == len(steps) and state.steps == [float(e.ms) for e in steps]
    assert state.phases["prefill"] == prefill.ms and state.prefill_tokens == prefill.tokens
    assert "load" in state.phases
    assert state.text == prefill.token + "".join(e.token for e in steps)
    last_kv = [e.kv_used for e in steps if e.kv_used is not None][-1]
    assert state.kv_used == last_kv and state.n_ctx == 256
    assert state.kv_fill() == pytest.approx(last_kv / 256)
    assert state.rss_peak == max(e.rss_bytes for e in events if getattr(e, "rss_bytes", None))
    assert state.end is not None and state.end.reason == "finished"
    assert state.final_report() is not None
    assert any(kind == "ctx_full" for _, kind, _ in state.incidents) == any(
        isinstance(e, IncidentEvent) and e.event == "ctx_full" for e in events)


def _through_the_builder(events: list[LiveEvent]) -> tuple[WatchState, TraceBuilder]:
    """The live path: each event marked by the trace builder, then folded in by the screen's state."""
    builder, state = TraceBuilder("run"), WatchState()
    for event in events:
        builder.add(event)
        state.apply(event)
    return state, builder


def _unmarked(events: list[LiveEvent]) -> list[LiveEvent]:
    out = copy.deepcopy(events)
    for event in out:
        if isinstance(event, StepEvent):
            event.p50_ms = event.spike_ms = None
            event.spikes_added, event.spikes_removed = [], []
    return out


def test_spikes_are_the_ones_the_rule_counts(recording: Path) -> None:
    """The recording carries the builder's marks; the screen shows exactly the rule's spikes."""
    state, events = _state(recording)
    again = _unmarked(events)
    live, builder = _through_the_builder(again)
    assert state.spikes == live.spikes == builder.decode.spikes
    assert [e.to_json() for e in again] == [e.to_json() for e in events]  # the marks are the builder's
    assert len(state.spikes) == 13, "the recording was made with CPU contention; it has spikes"
    report = state.final_report()
    assert report is not None and "13 steps took more than 3x the median" in next(
        f.message for f in report.findings if f.id == "LD801")
    assert state.median_ms == derive(builder.snapshot()).value("run.decode_ms_p50")


@pytest.mark.parametrize("name", ["healthy.jsonl", "greedy-loop.jsonl", "context-cut.jsonl", "crash.jsonl"])
def test_the_screen_shows_the_spikes_of_the_rule_on_recorded_traces(name: str) -> None:
    with (TRACES / name).open("rb") as handle:
        _, events, _ = read_recording(handle)
    state, builder = _through_the_builder(events)
    facts = derive(builder.snapshot())
    steady = facts.value("run.decode_ms")[1:]
    bar_ms = 3 * facts.value("run.decode_ms_p50")
    assert state.spikes == builder.decode.spikes == {i + 1 for i, ms in enumerate(steady) if ms > bar_ms}
    assert len(state.spikes) == facts.value("run.decode_spikes")
    assert state.median_ms == facts.value("run.decode_ms_p50")


def test_findings_fire_and_resolve_as_recorded(recording: Path) -> None:
    state, events = _state(recording)
    last: dict[str, str] = {}
    for event in events:
        if isinstance(event, FindingEvent):
            last[event.finding["id"]] = event.state
    assert {fid: st.state for fid, st in state.findings.items()} == last
    assert "resolved" in last.values() and "fired" in last.values()
    worst = state.worst_active()
    assert worst is not None and worst.finding.severity == "error"
    order = [s.state for s in state.active_findings()]
    assert order == sorted(order, key=lambda s: s != "fired")


def test_the_loop_in_the_output_is_found(recording: Path) -> None:
    state, _ = _state(recording)
    loop = state.loop()
    assert loop is not None
    span, ranges = loop
    text = state.text
    squeeze = span.replace(" ", "")
    covered = sum(end - start for start, end in ranges)
    assert covered >= 3 * len(squeeze)
    for start, end in ranges:
        assert text[start:end].replace(" ", "").replace("\n", "").count(squeeze) >= 1
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))  # merged, in order


def test_loop_ranges_on_plain_text() -> None:
    text = "Intro. " + "I am a helpful assistant. " * 6
    span, ranges = loop_ranges(text)
    assert "helpful" in span
    assert len(ranges) == 1  # overlapping copies merge into one stretch
    start, end = ranges[0]
    assert text[start:end].count("helpful") >= 5 and start >= len("Intro")
    assert loop_ranges("a short answer with no loop in it at all, just words") is None


def test_finding_event_for_unknown_id_resolved_first() -> None:
    state = WatchState()
    state.apply(FindingEvent(t_ms=5, state="resolved", finding={"id": "LD1", "severity": "warning"}))
    assert state.findings["LD1"].state == "resolved"
    state.apply(FindingEvent(t_ms=9, state="fired", finding={"id": "LD1", "severity": "warning"}))
    assert state.findings["LD1"].state == "fired" and state.findings["LD1"].fired_ms == 9


def test_rates() -> None:
    state = WatchState()
    for i, ms in enumerate([10.0] * 40):
        state.apply(StepEvent(t_ms=i * 10, step=i + 1, ms=ms, token="x"))
    assert state.tokens_per_s() == pytest.approx(100.0)
    assert state.overall_tokens_per_s() == pytest.approx(100.0)
    assert state.spikes == set()
    state.apply(StepEvent(t_ms=500, step=41, ms=200.0, token="y", p50_ms=10.0, spike_ms=30.0, spikes_added=[40]))
    assert state.spikes == {40} and state.median_ms == 10.0
    state.apply(StepEvent(t_ms=510, step=42, ms=10.0, token="z", spikes_removed=[40], spikes_added=["x", True, 7]))
    assert state.spikes == {7}  # taken from the event as it says, outside input that is not a step left out


def test_header_and_damaged_lines(tmp_path: Path, recording: Path) -> None:
    assert read_header(recording)["llm_doctor"] == "trace"
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"not": "a trace"}\n')
    with pytest.raises(InputError, match="not an llm-doctor watch recording"):
        read_header(bad)
    damaged = tmp_path / "crashed.ndjson"
    lines = recording.read_text().splitlines()[:10]
    damaged.write_text("\n".join([*lines, '{"kind": "step", "t_ms": 1, "st'])+ "\n")
    seen: list[int] = []
    events = list(iter_recording(damaged, seen))
    assert len(events) == 9 and seen == [11]


def test_replay_pauses_and_stops(recording: Path) -> None:
    clock = [0.0]
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        clock[0] += s

    replay = Replay(recording, speed=1.0, clock=lambda: clock[0], sleep=sleep)
    it = iter(replay)
    first = next(it)
    second = next(it)
    assert clock[0] == pytest.approx(second.t_ms / 1000.0, abs=0.06)
    assert first.kind == "settings"
    replay.pause(True)
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(next(it)))
    t.start()
    t.join(0.2)
    assert t.is_alive() and not got  # paused: nothing comes
    replay.pause(False)
    t.join(5)
    assert got
    replay.stop()
    rest = list(it)  # stopping skips the pacing but still delivers the end
    assert isinstance(rest[-1], EndEvent)


def test_bar_and_sparkline() -> None:
    assert bar(0.5, 10) == "█████     "
    assert bar(1.2, 4) == "████" and bar(-1, 3) == "   "
    assert bar(0.5, 1) == "▌" and bar(1 / 8, 1) == "▏"
    cols = sparkline([1.0, 1.0, 8.0, 1.0], 4, {2})
    assert [c.char for c in cols] == ["▁", "▁", "█", "▁"] and [c.spike for c in cols] == [False, False, True, False]
    many = sparkline([1.0] * 100 + [50.0] + [1.0] * 99, 20, {100})
    assert len(many) == 20 and sum(c.spike for c in many) == 1 and max(c.value for c in many) == 50.0


def test_recording_is_the_shape_the_trace_reader_accepts(recording: Path) -> None:
    from doctor.sources.live.recording import facts_from_recording

    with recording.open("rb") as handle:
        facts = facts_from_recording(handle, recording.name)
    assert facts.value("run.recording_complete") is True
    head = json.loads(recording.read_text().splitlines()[0])
    assert head["n_ctx"] == 256


def test_a_triage_restart_starts_the_figures_afresh() -> None:
    """The run crashed mid-decode, triage found a working setting and the run starts again: the
    screen shows the new run's figures, and the triage's steps stay in the feed."""
    state = WatchState()
    first = [PhaseEvent(t_ms=10, phase="load", ms=300.0), PhaseEvent(t_ms=20, phase="prefill", ms=40.0, tokens=6,
                                                                      token=" Once"),
             StepEvent(t_ms=30, step=1, ms=15.0, token=" upon", kv_used=7, n_ctx=2048)]
    triage = [IncidentEvent(t_ms=40, event="triage", text="triage: run 1: the original settings: crashed (SIGSEGV)"),
              IncidentEvent(t_ms=50, event="triage", text="triage: carrying on with weight repacking off",
                            data={"restart": True})]
    second = [PhaseEvent(t_ms=60, phase="load", ms=280.0), PhaseEvent(t_ms=70, phase="prefill", ms=35.0, tokens=6,
                                                                      token=" A"),
              StepEvent(t_ms=80, step=1, ms=14.0, token=" robot", kv_used=7, n_ctx=2048),
              StepEvent(t_ms=90, step=2, ms=13.0, token=" paints", kv_used=8, n_ctx=2048)]
    for event in first + triage + second:
        state.apply(event)
    assert state.step_count == 2 and state.steps == [14.0, 13.0]
    assert state.text == " A robot paints" and state.phases == {"load": 280.0, "prefill": 35.0}
    assert [kind for _, kind, _ in state.incidents] == ["triage", "triage"]


def test_the_same_rule_in_two_sessions_is_two_findings_and_a_notice_is_shown() -> None:
    from doctor.core.events import NoticeEvent

    state = WatchState()
    base = {"slug": "generation-hits-context-end", "severity": "error", "confidence": "high", "title": "t",
            "message": "m", "area": "Context", "class": "context.overflow"}
    state.apply(FindingEvent(t_ms=1.0, state="fired", finding={**base, "id": "LD202"}))
    state.apply(NoticeEvent(t_ms=2.0, text="server.log was truncated; reading from its start", session="truncated"))
    state.apply(FindingEvent(t_ms=3.0, state="fired", finding={**base, "id": "LD202", "session": 2}))
    assert sorted(state.findings) == ["2:LD202", "LD202"]
    assert all(s.state == "fired" for s in state.findings.values())
    assert any(kind == "notice" and "truncated" in text for _, kind, text in state.incidents)


def test_no_view_carries_the_spike_rule() -> None:
    """The spike factor lives where the rule's fact is computed (doctor/derive/run.py) and the trace
    builder applies it; a view that had its own copy could drift from what LD801 judges."""
    views = Path(__file__).resolve().parents[2] / "doctor" / "views"
    holders = [p.name for p in views.rglob("*.py") if "SPIKE_FACTOR" in p.read_text(encoding="utf-8")]
    assert not holders
    from doctor.derive.run import SPIKE_FACTOR

    assert SPIKE_FACTOR == 3.0  # what rules/decode.yaml's LD801 message says ("more than 3x the median")
