"""Live events → facts, and recordings read back: the pure half of watch (no engine here)."""

from __future__ import annotations

import io
import json

import pytest

from doctor.core.errors import InputError
from doctor.core.events import (
    EndEvent,
    FactsEvent,
    FindingEvent,
    IncidentEvent,
    LogEvent,
    PerfEvent,
    PhaseEvent,
    SampleEvent,
    SettingsEvent,
    StepEvent,
    event_from_json,
)
from doctor.core.facts import Facts, Source
from doctor.judge.evaluate import diagnose
from doctor.sources.live.recording import facts_from_recording, header, read_recording
from doctor.sources.live.trace import TraceBuilder


def _events(steps: list[float], tokens: list[str], n_ctx: int = 512, prompt: int = 10) -> list:
    out = [
        SettingsEvent(t_ms=1, stage="requested", settings={"model_path": "/m/x.gguf", "n_ctx": 300, "max_tokens": 64,
                                                            "temperature": 0.0, "repeat_penalty": 1.0}),
        PhaseEvent(t_ms=200, phase="load", ms=180.5),
        SettingsEvent(t_ms=201, stage="engine", settings={"n_ctx": n_ctx, "n_threads": 2, "prompt_tokens": prompt,
                                                           "engine_name": "llama-cpp-python"}),
        PhaseEvent(t_ms=230, phase="warmup", ms=20.0, tokens=2),
        PhaseEvent(t_ms=300, phase="prefill", ms=60.0, tokens=prompt, token=tokens[0], kv_used=prompt),
    ]
    t = 300.0
    for i, (ms, tok) in enumerate(zip(steps, tokens[1:], strict=True), start=1):
        t += ms
        out.append(StepEvent(t_ms=t, step=i, ms=ms, token=tok, kv_used=prompt + i, n_ctx=n_ctx, rss_bytes=200 << 20))
    out.append(SampleEvent(t_ms=t, rss_bytes=250 << 20, others_load=0.5, swap_in_bytes=0))
    out.append(EndEvent(t_ms=t + 5, reason="finished", exit_status=0, finish_reason="length"))
    return out


def test_builder_maps_every_kind_of_event_to_facts() -> None:
    builder = TraceBuilder("run")
    for event in _events([10.0, 11.0, 12.0], ["Hello", " there", " you", "!"]):
        builder.add(event)
    facts = builder.snapshot()
    assert facts.value("config.n_ctx_requested") == 300  # as asked
    assert facts.value("config.n_ctx") == 512  # as the engine padded it
    assert facts.value("config.max_new_tokens") == 64
    assert facts.value("config.prompt_tokens") == 10
    assert facts.value("sampling.temperature") == 0.0
    assert facts.value("run.load_ms") == 180.5
    assert facts.value("run.warmup_ms") == 20.0
    assert facts.value("run.prefill_ms") == 60.0
    assert facts.value("run.decode_ms") == [10.0, 11.0, 12.0]
    assert facts.value("run.kv_used") == 13
    assert facts.value("run.kv_fill") == round(13 / 512, 4)
    assert facts.value("run.output_text") == "Hello there you!"
    assert facts.value("run.generated_tokens") == 4
    assert facts.value("run.tokens_used_max") == 14
    assert facts.value("run.rss_max") == 250 << 20
    assert facts.value("run.cpu_load_max") == 0.5
    assert facts.value("run.swap_in_use") is False
    assert facts.value("run.finish_reason") == "length"
    assert facts.value("run.crashed") is False
    assert facts.value("engine.name") == "llama-cpp-python"


def test_snapshot_can_be_taken_again_and_again() -> None:
    builder = TraceBuilder("run")
    events = _events([10.0] * 20, ["x"] * 21)
    for event in events[:10]:
        builder.add(event)
    first = builder.snapshot()
    diagnose(first, _rulebase(), command="watch", mode="watch")  # derive() writes into the snapshot only
    for event in events[10:]:
        builder.add(event)
    second = builder.snapshot()
    assert len(first.value("run.decode_ms")) < len(second.value("run.decode_ms")) == 20
    assert not second.has("run.decode_ms_p50")  # the earlier derive did not leak into the builder


def _rulebase():
    from doctor.judge.rulebase import load_rulebase

    return load_rulebase([], env={})


def test_trace_facts_win_over_facts_parsed_from_the_log() -> None:
    builder = TraceBuilder("run")
    builder.add(LogEvent(line=1, text="llama_context: n_ctx                 = 256"))
    builder.add(SettingsEvent(stage="engine", settings={"n_ctx": 512}))
    facts = builder.snapshot()
    assert facts.value("config.n_ctx") == 512
    assert facts.get("config.n_ctx").source.kind == "trace"


def test_log_lines_go_through_the_llama_cpp_parser() -> None:
    builder = TraceBuilder("run")
    lines = ["llama_context: n_ctx                 = 4096",
             "llama_kv_cache: size =   45.00 MiB (  2048 cells,  30 layers,  1/1 seqs), "
             "K (f16):   22.50 MiB, V (f16):   22.50 MiB",
             "decode: failed to find a memory slot for batch of size 1"]
    for i, line in enumerate(lines, start=1):
        builder.add(LogEvent(line=i, text=line, stream="log", level="warn"))
    facts = builder.snapshot()
    assert facts.value("config.type_k") == "f16"
    assert [e.line for e in facts.events("ctx_full")] == [3]


def test_incidents_become_events_and_findings_use_them() -> None:
    builder = TraceBuilder("run")
    for event in _events([10.0], ["a", "b"], n_ctx=256, prompt=53):
        builder.add(event)
    builder.add(IncidentEvent(event="ctx_full", text="context full: prompt 53 + max_tokens 600 exceed n_ctx 256",
                               data={"n_ctx": 256, "n_tokens": 653}))
    facts = builder.snapshot()
    assert facts.events("ctx_full")[0].data == {"n_ctx": 256, "n_tokens": 653}
    report = diagnose(facts, _rulebase(), command="watch", mode="watch")
    ids = {f.id for f in report.findings}
    assert "LD202" in ids  # the event alone says the context filled


def test_perf_and_facts_events() -> None:
    builder = TraceBuilder("run")
    builder.add(PerfEvent(prefill_ms=59.2, prompt_tokens=10, decode_ms=30.1, decode_tokens=3))
    builder.add(FactsEvent(facts={"host.cpu.usable_cores": {"value": 2, "unit": "cores",
                                                             "source": {"kind": "probe", "name": "probe.cpu"}}}))
    facts = builder.snapshot()
    assert facts.value("run.engine_prefill_ms") == 59.2
    assert facts.value("run.engine_decode_tokens") == 3
    assert facts.value("host.cpu.usable_cores") == 2
    assert facts.get("host.cpu.usable_cores").source.name == "probe.cpu"


def test_output_text_keeps_the_last_8_kib() -> None:
    builder = TraceBuilder("run")
    builder.add(SettingsEvent(stage="engine", settings={"prompt_tokens": 1}))
    for i in range(3000):
        builder.add(StepEvent(step=i + 1, ms=1.0, token=f" w{i:04d}"))
    text = builder.snapshot().value("run.output_text")
    assert len(text) <= 8192
    assert text.endswith(" w2999")


def test_events_round_trip_through_json() -> None:
    for event in [*_events([10.0], ["a", "b"]), FindingEvent(state="resolved", finding={"id": "LD401"}),
                  IncidentEvent(event="crash", text="x", data={"signal": 6})]:
        back = event_from_json(json.loads(json.dumps(event.to_json())))
        assert back == event


def test_event_from_json_refuses_unknown_kinds_and_wrong_types() -> None:
    assert event_from_json({"kind": "no-such-kind"}) is None
    step = event_from_json({"kind": "step", "step": "7", "ms": [1], "token": 5, "kv_used": 3})
    assert isinstance(step, StepEvent)
    assert (step.step, step.ms, step.token, step.kv_used) == (0, 0.0, "", 3)


def _recording(events: list, head: dict | None = None) -> bytes:
    lines = [json.dumps(head or header("embedded", {"n_ctx": 512}))]
    lines += [json.dumps(e.to_json()) for e in events]
    return ("\n".join(lines) + "\n").encode()


def test_recording_replays_to_the_same_facts_as_live() -> None:
    events = _events([10.0, 11.0, 12.0], ["Hello", " there", " you", "!"])
    live = TraceBuilder("run.jsonl")
    for event in events:
        live.add(event)
    replayed = facts_from_recording(io.BytesIO(_recording(events)), "run.jsonl")
    live_facts = live.snapshot()
    for name in live_facts.names():
        assert replayed.value(name) == live_facts.value(name), name
    assert replayed.value("run.recording_complete") is True


def test_a_recording_cut_mid_line_keeps_everything_before_the_cut() -> None:
    events = _events([10.0, 11.0, 12.0], ["Hello", " there", " you", "!"])[:-1]  # no end: the run died
    data = _recording(events) + b'{"kind":"step","t_ms":999,"step":4,"ms":1'  # half-written line
    facts = facts_from_recording(io.BytesIO(data), "cut.jsonl")
    assert facts.value("run.decode_ms") == [10.0, 11.0, 12.0]
    assert facts.value("run.recording_damaged_lines") == 1
    assert facts.value("run.recording_complete") is False


def test_garbage_in_the_middle_is_skipped_and_counted() -> None:
    events = _events([10.0, 11.0], ["a", "b", "c"])
    lines = _recording(events).split(b"\n")
    lines.insert(3, b"\x00\xff not json")
    lines.insert(5, b"[1, 2, 3]")
    facts = facts_from_recording(io.BytesIO(b"\n".join(lines)), "x")
    assert facts.value("run.recording_damaged_lines") == 2
    assert facts.value("run.decode_ms") == [10.0, 11.0]


@pytest.mark.parametrize("first", [b"not json\n", b'{"llm_doctor": "facts"}\n',
                                   b'{"llm_doctor": "trace", "version": 99}\n'])
def test_not_a_recording_is_one_clear_error(first: bytes) -> None:
    with pytest.raises(InputError) as info:
        read_recording(io.BytesIO(first), "x.jsonl")
    assert "x.jsonl" in str(info.value)


def test_analyze_reads_a_recording_through_inputs(tmp_path) -> None:
    from doctor.sources.inputs import read_input

    path = tmp_path / "run.jsonl"
    path.write_bytes(_recording(_events([10.0, 11.0], ["a", "b", "c"])))
    facts = read_input(str(path))
    assert isinstance(facts, Facts)
    assert facts.value("run.decode_ms") == [10.0, 11.0]


def test_child_messages_become_events_with_text_made_safe() -> None:
    from doctor.sources.live.embedded.messages import step_event, to_event

    step = step_event([4, 12.5, "line\n\x1b]0;title\x07next\tcol", 22, 301.5], n_ctx=512)
    assert step is not None
    assert (step.step, step.ms, step.kv_used, step.n_ctx, step.t_ms) == (4, 12.5, 22, 512, 301.5)
    assert step.token == "line\nnext\tcol"  # line breaks kept, the escape sequence gone
    assert step_event(["x"], 512) is None
    log = to_event({"m": "log", "lvl": "error", "text": "a\x1b[2Jb\rc", "t": 5}, None, 7)
    assert isinstance(log, LogEvent) and log.text == "abc" and log.line == 7 and log.level == "error"
    assert to_event({"m": "hello"}, None, 1) is None


def _rule_spikes(times: list[float], first: int) -> set[int]:
    """run.decode_spikes' rule over a window of step times whose first is step `first`, judged as
    doctor/derive/run.py judges a snapshot: steady steps above 3 x their nearest-rank median."""
    facts = Facts()
    facts.set("run.decode_ms", list(times), Source("trace", "test"))
    from doctor.derive.run import derive_run_summaries, steady_start

    derive_run_summaries(facts)
    p50 = facts.value("run.decode_ms_p50")
    start = steady_start(len(times))
    spikes = {first + i for i, ms in enumerate(times) if i >= start and p50 and ms > 3 * p50}
    assert len(spikes) == (facts.value("run.decode_spikes") or 0)
    return spikes


@pytest.mark.parametrize("keep", [1, 2, 3, 5, 8, 100_000])
def test_decode_spikes_step_by_step_are_the_rules_on_the_window(keep: int) -> None:
    """After every step the spikes kept up to date equal the rule applied to the whole window again,
    and the marks (added, removed) rebuild them: a view that only applies the marks cannot drift."""
    import random

    from doctor.sources.live.trace import DecodeSteps

    rng = random.Random(keep)
    for run in range(30):
        steps = DecodeSteps(keep)
        shown: set[int] = set()
        shape = run % 3
        for _ in range(rng.randint(1, 120)):
            if shape == 0:  # steady with outliers
                ms = round(rng.uniform(8, 9), 3) if rng.random() > 0.1 else round(rng.uniform(20, 200), 3)
            elif shape == 1:  # two clusters around the bar, zeros and ties: the bar moves across steps
                ms = rng.choice([0, 0.0, 1.0, 2.9, 3.0, 3.1, 9.0, 9.3, 10.0])
            else:
                ms = float(rng.randint(0, 5))
            added, removed = steps.add(ms)
            assert not set(added) & shown and set(removed) <= shown
            shown = (shown | set(added)) - set(removed)
            assert shown == steps.spikes == _rule_spikes(list(steps.times), steps.seen - len(steps.times))


def test_the_builder_marks_each_step_with_the_spikes_as_they_stand() -> None:
    times = [30.0, 10.0, 10.0, 10.0, 10.0, 45.0, 10.0, 9.0]
    builder = TraceBuilder("run")
    events = _events(times, ["a"] * (len(times) + 1))
    for event in events:
        builder.add(event)
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [e.p50_ms for e in steps] == [30.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0]
    assert steps[4].spike_ms == 30.0 and steps[0].spike_ms == 90.0
    # with 5 steps the first (30 ms) is warm-up, no longer a steady step; 45 ms is above 3 x 10 ms
    assert [(e.spikes_added, e.spikes_removed) for e in steps] == [
        ([], []), ([], []), ([], []), ([], []), ([], []), ([5], []), ([], []), ([], [])]
    assert builder.decode.spikes == {5}
    facts = builder.snapshot()
    assert facts.value("run.decode_ms") == times
    from doctor.derive import derive

    assert derive(facts).value("run.decode_spikes") == 1
    marked = steps[5].to_json()
    assert marked["spikes_added"] == [5] and "spikes_removed" not in marked  # empty marks are left out
    assert event_from_json(json.loads(json.dumps(marked))) == steps[5]
