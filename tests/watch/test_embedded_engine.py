"""The embedded runner on the real engine: llama-cpp-python on SmolLM2-135M, in a child process.

Each scenario is one real run (module-scoped fixtures share them between the tests that read it).
"""

from __future__ import annotations

import io
import itertools
import sys
import threading
from pathlib import Path

import pytest

from doctor.core.errors import EngineError, UsageError
from doctor.core.events import (
    EndEvent,
    FactsEvent,
    FindingEvent,
    IncidentEvent,
    LogEvent,
    PerfEvent,
    PhaseEvent,
    SettingsEvent,
    StepEvent,
)
from doctor.judge.evaluate import diagnose
from doctor.judge.live_judge import LiveJudge
from doctor.judge.rulebase import RuleBase, load_rulebase
from doctor.sources.live.embedded.runner import EmbeddedRun, RunSettings, run_embedded
from doctor.sources.live.recording import facts_from_recording
from doctor.sources.models.default import default_model_path
from tests.conftest import worked_around

pytestmark = pytest.mark.engine

LOOP_PROMPT = "Write a list of fruits. Write a list of fruits. Write a list of fruits."
# warnings that depend on what else this machine is doing, not on the run's settings (other processes on
# the cores: watch names them as scan does, issue 36, and the test machine is often shared)
MACHINE_DEPENDENT = {"decode.jitter", "io.slow_load", "speed.contention"}


@pytest.fixture(scope="module")
def rules() -> RuleBase:
    return load_rulebase([], env={})


def _run(rules: RuleBase, tmp: Path, name: str, **kw: object) -> tuple[EmbeddedRun, Path]:
    record = tmp / f"{name}.jsonl"
    settings = RunSettings(model_path=str(default_model_path()), seed=7, **kw)
    run = run_embedded(settings, record=str(record), judge=LiveJudge(rules), timeout_s=300)
    return run, record


@pytest.fixture(scope="module")
def healthy(rules: RuleBase, tmp_path_factory: pytest.TempPathFactory) -> tuple[EmbeddedRun, Path]:
    return _run(rules, tmp_path_factory.mktemp("healthy"), "healthy", max_tokens=48, n_ctx=2048)


@pytest.fixture(scope="module")
def looping(rules: RuleBase, tmp_path_factory: pytest.TempPathFactory) -> tuple[EmbeddedRun, Path]:
    return _run(rules, tmp_path_factory.mktemp("loop"), "loop", prompt=LOOP_PROMPT, temperature=0.0,
                repeat_penalty=1.0, max_tokens=200)


@pytest.fixture(scope="module")
def overflow(rules: RuleBase, tmp_path_factory: pytest.TempPathFactory) -> tuple[EmbeddedRun, Path]:
    return _run(rules, tmp_path_factory.mktemp("overflow"), "overflow", prompt=LOOP_PROMPT, temperature=0.0,
                n_ctx=200, max_tokens=400)


def _ids(run: EmbeddedRun) -> set[str]:
    assert run.report is not None
    return {f.id for f in run.report.findings}


# -- a healthy run -------------------------------------------------------------------------------

def test_healthy_run_has_no_warning(healthy: tuple[EmbeddedRun, Path]) -> None:
    run, _ = healthy
    assert run.reason == "finished" and run.exit_status == 0 and not run.crashed
    assert run.report is not None
    # where this machine's engine crashes with the defaults (an AMX Xeon), triage made the run with a
    # working setting and says so (LD951): that is the machine's, not the run's
    serious = [(f.id, f.title) for f in run.report.findings
               if f.severity in ("error", "warning") and f.cls not in MACHINE_DEPENDENT
               and f.id not in worked_around(run.report)]
    assert serious == []
    assert run.report.errors == []


def test_events_come_in_the_order_of_the_run(healthy: tuple[EmbeddedRun, Path]) -> None:
    run, _ = healthy
    # after a crash triage (an AMX Xeon) the run reported starts again at its restart; the host facts
    # came before the first attempt
    events = run.events if run.triage is None else run.events[:2] + run.final_events
    kinds = [(type(e).__name__, getattr(e, "phase", None) or getattr(e, "stage", None)) for e in events
             if not isinstance(e, LogEvent | FindingEvent) and type(e).__name__ != "SampleEvent"]
    expected_start = [("SettingsEvent", "requested"), ("FactsEvent", None)]
    if run.triage is not None:
        expected_start.append(("SettingsEvent", "requested"))
    assert kinds[:len(expected_start) + 4] == [*expected_start, ("PhaseEvent", "load"), ("SettingsEvent", "engine"),
                                               ("PhaseEvent", "warmup"), ("PhaseEvent", "prefill")]
    # the other processes' share of the cores over the run (/proc/stat, as scan has it) comes last
    assert kinds[-3:] == [("PerfEvent", None), ("FactsEvent", None), ("EndEvent", None)]
    shared = [e for e in events if type(e).__name__ == "FactsEvent"][-1]
    assert set(shared.facts) == {"host.cpu.other_busy", "host.cpu.steal_pct"}  # type: ignore[attr-defined]
    assert run.report is not None and 0.0 <= run.report.facts.value("host.cpu.other_busy") <= 1.0
    # decode steps reach the parent in batches (at most 200 ms old), so samples taken meanwhile may
    # come before steps that ended earlier; nothing else is out of order
    # (the run reported: a crashed first attempt's last lines are drained after it died)
    times = [e.t_ms for e in events]
    assert max(a - b for a, b in itertools.pairwise(times)) < 500


def test_every_decode_step_is_timed_with_the_engines_kv_fill(healthy: tuple[EmbeddedRun, Path]) -> None:
    run, _ = healthy
    prefill = next(e for e in run.final_events if isinstance(e, PhaseEvent) and e.phase == "prefill")
    steps = run.steps
    assert [s.step for s in steps] == list(range(1, len(steps) + 1))
    assert len(steps) + 1 == run.facts.value("run.generated_tokens")
    assert all(s.ms > 0 for s in steps)
    assert prefill.kv_used == prefill.tokens  # the prompt is in the cache after prefill
    assert [s.kv_used for s in steps] == [prefill.tokens + s.step for s in steps]
    assert {s.n_ctx for s in steps} == {2048}
    assert run.facts.value("run.kv_used") == steps[-1].kv_used
    assert steps[-1].rss_bytes and steps[-1].rss_bytes > 50 << 20  # the sampler's RSS rides on the steps


def test_prefill_and_decode_agree_with_llama_cpps_own_counters(healthy: tuple[EmbeddedRun, Path]) -> None:
    run, _ = healthy
    facts = run.facts
    perf = next(e for e in run.final_events if isinstance(e, PerfEvent))
    ours_decode = sum(s.ms for s in run.steps)
    assert perf.decode_tokens == len(run.steps)
    assert perf.prompt_tokens == facts.value("run.prompt_tokens")
    # ours include sampling and the Python generator around each eval, so they are a little larger
    assert perf.decode_ms <= ours_decode <= perf.decode_ms * 1.15 + 10
    assert perf.prefill_ms <= facts.value("run.prefill_ms") <= perf.prefill_ms * 1.15 + 10
    assert perf.tracer_ms is not None and perf.tracer_ms < ours_decode * 0.05  # the tracer's own share


def test_the_engine_log_is_captured_although_verbose_is_off(healthy: tuple[EmbeddedRun, Path]) -> None:
    run, _ = healthy
    text = "\n".join(run.log_lines)
    assert "llama_context: n_ctx" in text and "print_info: n_layer" in text
    facts = run.facts
    assert facts.get("config.kv_unified").source.kind == "log"  # only the log says this
    assert facts.value("run.kv_cells") == 2048
    assert facts.value("model.n_head_kv") == 3
    assert facts.value("engine.name") == "llama-cpp-python"
    assert facts.value("config.n_threads") >= 1


def test_warmup_is_timed_apart_from_prefill(healthy: tuple[EmbeddedRun, Path]) -> None:
    run, _ = healthy
    phases = {e.phase: e for e in run.final_events if isinstance(e, PhaseEvent)}
    assert phases["warmup"].tokens == 2 and phases["warmup"].ms > 0
    assert run.facts.value("run.warmup_ms") == round(phases["warmup"].ms, 3)
    assert run.facts.value("run.prefill_ms") == round(phases["prefill"].ms, 3)


def test_host_and_model_file_facts_come_with_the_run(healthy: tuple[EmbeddedRun, Path]) -> None:
    run, _ = healthy
    facts = run.facts
    assert facts.value("model.file_bytes") == default_model_path().stat().st_size
    assert facts.value("host.cpu.usable_cores") >= 1
    assert isinstance(facts.value("run.cpu_load_max"), float)


def test_recording_replays_to_the_same_findings(healthy: tuple[EmbeddedRun, Path], rules: RuleBase, analyze) -> None:
    run, record = healthy
    replayed = analyze(record)
    assert [(f.id, f.message) for f in replayed.findings] == [(f.id, f.message) for f in run.report.findings]


# -- greedy decoding loops -----------------------------------------------------------------------

def test_a_greedy_loop_is_found_with_its_span(looping: tuple[EmbeddedRun, Path]) -> None:
    run, _ = looping
    assert run.report is not None
    loop = next(f for f in run.report.findings if f.id == "LD401")
    assert loop.confidence == "high"  # temperature 0 and no penalty allow it
    assert "fruits" in loop.message and "temperature 0" in loop.message
    assert any("fruits" in e.text and e.fact == "run.output_repetition" for e in loop.evidence)
    assert run.report.facts.value("run.repeat_count") >= 5  # derived from the output by the rules pass


def test_the_loop_is_announced_while_the_run_goes_on(looping: tuple[EmbeddedRun, Path]) -> None:
    run, _ = looping
    fired = next(e for e in run.events if isinstance(e, FindingEvent) and e.finding["id"] == "LD401")
    end = next(e for e in run.events if isinstance(e, EndEvent))
    later_steps = [s for s in run.steps if s.t_ms > fired.t_ms]
    assert fired.state == "fired" and fired.t_ms < end.t_ms
    assert later_steps  # decoding went on after the finding was announced


def test_loop_recording_replays_to_the_same_findings(looping: tuple[EmbeddedRun, Path], analyze) -> None:
    run, record = looping
    assert [f.id for f in analyze(record).findings] == [f.id for f in run.report.findings]


# -- the context runs out ------------------------------------------------------------------------

def test_overflow_is_predicted_before_the_first_token(overflow: tuple[EmbeddedRun, Path]) -> None:
    run, _ = overflow
    fired = [e for e in run.events if isinstance(e, FindingEvent) and e.finding["id"] == "LD211"][-1]
    prefill = next(e for e in run.final_events if isinstance(e, PhaseEvent) and e.phase == "prefill")
    assert fired.t_ms < prefill.t_ms
    assert fired.finding["class"] == "context.overflow"


def test_overflow_is_detected_when_it_happens(overflow: tuple[EmbeddedRun, Path]) -> None:
    run, _ = overflow
    facts = run.facts
    assert facts.value("config.n_ctx_requested") == 200
    assert facts.value("config.n_ctx") == 256  # llama.cpp pads the context to 256
    prompt = facts.value("run.prompt_tokens")
    assert run.finish_reason == "length"
    assert facts.value("run.generated_tokens") == 256 - prompt  # cut to the room left, as create_completion does
    assert facts.value("run.tokens_used_max") == 256
    assert [e.data["n_ctx"] for e in facts.events("ctx_full")] == [256]
    report = run.report
    assert report is not None and report.assessment is not None
    assert report.assessment.id == "LD211" or report.assessment.id in worked_around(report)
    assert "LD211" in {f.id for f in report.findings}
    ld202 = next(c for c in report.checks if c.id == "LD202")
    assert ld202.outcome == "fired" and ld202.inhibited_by == "LD211"
    ld211 = next(f for f in report.findings if f.id == "LD211")
    assert any("context full" in e.text for e in ld211.evidence)


def test_running_past_the_context_fails_in_the_engine(rules: RuleBase, tmp_path: Path) -> None:
    run, _ = _run(rules, tmp_path, "fail", prompt=LOOP_PROMPT, temperature=0.0, n_ctx=256, max_tokens=400,
                  context_full="fail")
    facts = run.facts
    assert run.reason == "error" and run.finish_reason == "error" and not run.crashed
    failed = facts.events("decode_failed")
    assert any(e.data.get("ret") == 1 for e in failed)
    assert any("failed to find a memory slot" in e.text for e in facts.events("ctx_full"))  # the engine's own line
    assert any("llama_decode returned 1" in err for err in run.errors)
    assert "LD211" in _ids(run)


def test_a_prompt_longer_than_the_context_is_refused(rules: RuleBase, tmp_path: Path) -> None:
    run, _ = _run(rules, tmp_path, "too-long", prompt="The meeting covered budgets and hiring plans. " * 40,
                  n_ctx=256, max_tokens=32)
    assert run.steps == []
    events = run.facts.events("prompt_too_long")
    assert events and "exceed context window of 256" in events[0].text
    assert "LD201" in _ids(run)


# -- crashes, stops and bad input ----------------------------------------------------------------

def test_an_engine_abort_is_reported_not_fatal(rules: RuleBase, tmp_path: Path) -> None:
    record = tmp_path / "crash.jsonl"
    # repacking off: on an AMX Xeon the engine would die of the AMX kernel before the abort under test
    settings = RunSettings(model_path=str(default_model_path()), max_tokens=64, seed=7, use_extra_bufts=False)
    # this child aborts whatever the settings; triage's "nothing avoided it" is tested in test_triage_runs.py
    run = run_embedded(settings, record=str(record), judge=LiveJudge(rules), timeout_s=300,
                       command=[sys.executable, "-m", "tests.watch.aborting_child"], triage=False)
    assert run.crashed and run.reason == "crashed" and run.exit_status == -6
    assert any("GGML_ASSERT(n_tokens_all <= cparams.n_batch) failed" in line for line in run.error_lines)
    assert "SIGABRT" in run.errors[0] and "GGML_ASSERT" in run.errors[0]
    assert run.facts.value("run.crashed") is True
    assert [s.step for s in run.steps] == [1, 2, 3, 4, 5]  # everything up to the abort reached the parent
    assert run.facts.events("crash")
    # the recording holds the whole run, crash included, and replays to the same findings
    from doctor.sources.live.recording import read_recording

    with record.open("rb") as handle:
        _, events, damaged = read_recording(handle)
    assert damaged == 0 and isinstance(events[-1], EndEvent) and events[-1].reason == "crashed"
    replayed = diagnose(facts_from_recording(io.BytesIO(record.read_bytes()), "crash.jsonl"), rules,
                        command="analyze", mode="analyze")
    assert [f.id for f in replayed.findings] == [f.id for f in run.report.findings]


def test_stop_ends_the_run_cleanly_with_a_report(rules: RuleBase) -> None:
    stop = threading.Event()

    def on_event(event: object) -> None:
        if isinstance(event, StepEvent) and event.step >= 3:
            stop.set()

    settings = RunSettings(model_path=str(default_model_path()), prompt=LOOP_PROMPT, temperature=0.0, max_tokens=500)
    run = run_embedded(settings, on_event=on_event, judge=LiveJudge(rules), stop=stop, timeout_s=300)
    assert run.reason == "interrupted" and run.finish_reason == "interrupted" and not run.crashed
    assert 3 <= len(run.steps) < 100
    assert run.report is not None


def test_settings_and_model_are_checked_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="no such model file"):
        run_embedded(RunSettings(model_path=str(tmp_path / "missing.gguf")))
    with pytest.raises(UsageError, match="--type-k"):
        run_embedded(RunSettings(model_path=str(default_model_path()), type_k="q9_9"))
    with pytest.raises(UsageError, match="--top-p"):
        run_embedded(RunSettings(model_path=str(default_model_path()), top_p=1.5))


def test_a_file_that_is_not_a_model_is_diagnosed(rules: RuleBase, tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 64)  # a header, then nothing
    run = run_embedded(RunSettings(model_path=str(bad)), judge=LiveJudge(rules), timeout_s=120)
    assert run.reason == "error" and not run.crashed
    assert any("Failed to load model" in err for err in run.errors)
    assert run.facts.events("load_failed")
    assert _ids(run) & {"LD901", "LD903"}


def test_facts_events_carry_no_machine_paths_beyond_the_model(healthy: tuple[EmbeddedRun, Path]) -> None:
    run, _ = healthy
    first = next(e for e in run.events if isinstance(e, SettingsEvent))
    host = next(e for e in run.events if isinstance(e, FactsEvent))
    assert first.settings["model_path"] == str(default_model_path())
    assert all(not name.startswith(("run.", "config.")) for name in host.facts)  # host facts only


def test_incidents_are_in_the_stream(overflow: tuple[EmbeddedRun, Path]) -> None:
    run, _ = overflow
    incidents = [e for e in run.final_events if isinstance(e, IncidentEvent)]
    assert [i.event for i in incidents] == ["ctx_full"]
    assert "n_ctx 256" in incidents[0].text


def test_pause_holds_between_steps_without_counting_the_wait(rules: RuleBase) -> None:
    import time

    pause = threading.Event()
    state = {"paused_at": 0.0}

    def on_event(event: object) -> None:
        if isinstance(event, StepEvent) and event.step == 3 and not state["paused_at"]:
            state["paused_at"] = time.monotonic()
            pause.set()
        elif state["paused_at"] and pause.is_set() and time.monotonic() - state["paused_at"] > 1.5:
            pause.clear()

    # repacking off: on an AMX Xeon the repacked kernel can crash the warm-up (LD951), which is not under test
    settings = RunSettings(model_path=str(default_model_path()), prompt=LOOP_PROMPT, temperature=0.0, max_tokens=40,
                           use_extra_bufts=False)
    run = run_embedded(settings, on_event=on_event, judge=LiveJudge(rules), pause=pause, timeout_s=300,
                       sample_interval_s=0.1)
    assert run.reason == "finished" and len(run.steps) == 39
    assert any("generation paused" in line for line in run.log_lines)
    assert any("generation resumed" in line for line in run.log_lines)
    gaps = [b.t_ms - a.t_ms for a, b in itertools.pairwise(run.steps)]
    assert max(gaps) > 1000  # the run did hold
    assert max(s.ms for s in run.steps) < 1000  # and no step's time includes the hold


def test_chat_wraps_the_prompt_in_the_models_template(rules: RuleBase) -> None:
    plain = run_embedded(RunSettings(model_path=str(default_model_path()), prompt="Name three colors.", max_tokens=1,
                                     seed=2), host=False)
    chat = run_embedded(RunSettings(model_path=str(default_model_path()), prompt="Name three colors.", chat=True,
                                    max_tokens=96, seed=2), host=False)
    # the template adds the role markers (and SmolLM2's default system prompt) around the question
    assert chat.facts.value("config.prompt_tokens") > plain.facts.value("config.prompt_tokens") + 10
    assert chat.finish_reason == "stop"  # the template's end token is an end-of-generation token
    assert "<|im_end|>" not in chat.facts.value("run.output_text")
