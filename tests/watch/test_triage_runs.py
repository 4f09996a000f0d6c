"""Crash triage on real runs: the engine child crashes under one setting only, and `run_embedded`
finds that setting, makes the run again with it and reports why; on an AMX Xeon, the real crash.

The stand-in crash (tests/watch/crashing_child.py) is the real engine child that segfaults in its
warm-up while weight repacking is on, as llama.cpp's AMX kernel does
(../shared/reference/engine-crash-amx/). Runs are kept to a few tokens.
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import pytest

from doctor.core.events import EndEvent, IncidentEvent, SettingsEvent
from doctor.judge.evaluate import diagnose
from doctor.judge.live_judge import LiveJudge
from doctor.judge.rulebase import RuleBase, load_rulebase
from doctor.sources.live.embedded.runner import RunSettings, run_embedded
from doctor.sources.live.recording import facts_from_recording
from doctor.sources.models.default import default_model_path
from tests.conftest import crash_reported

pytestmark = pytest.mark.engine

CRASHING_CHILD = [sys.executable, "-m", "tests.watch.crashing_child"]


@pytest.fixture(scope="module")
def rules() -> RuleBase:
    return load_rulebase([], env={})


def _triage_events(events: list[object]) -> list[IncidentEvent]:
    return [e for e in events if isinstance(e, IncidentEvent) and e.event == "triage"]


def test_triage_finds_repacking_and_the_run_is_made_again_with_it_off(rules: RuleBase, tmp_path: Path) -> None:
    record = tmp_path / "run.jsonl"
    progress: list[str] = []
    settings = RunSettings(model_path=str(default_model_path()), max_tokens=6, seed=4, prompt="Tell me about paint")
    run = run_embedded(settings, record=str(record), judge=LiveJudge(rules), timeout_s=120, command=CRASHING_CHILD,
                       on_progress=progress.append)
    # the run reported is complete, made with repacking off
    assert run.reason == "finished" and not run.crashed and run.exit_status == 0
    assert run.settings is not None and run.settings.use_extra_bufts is False
    assert run.facts.value("config.use_extra_bufts") is False  # as the engine reports it
    assert len(run.steps) == 5 and run.facts.value("run.prefill_ms") > 0
    assert run.facts.value("run.crashed") is False and run.errors == []
    # the triage: confirmed 2/2, then the first change completed
    assert run.triage is not None and run.triage.status == "fixed"
    assert [(a.change, a.outcome) for a in run.triage.attempts] == [
        (None, "crashed"), (None, "crashed"), ("repack_off", "completed")]
    assert run.triage.attempts[0].phase == "warm-up" and "SIGSEGV" in run.triage.attempts[0].detail
    assert run.facts.value("run.triage_change") == "repack_off"
    summary = run.facts.value("run.triage_summary")
    assert summary.startswith("crashed 2/2 with the original settings (SIGSEGV in the warm-up); completed with "
                              "weight repacking off") and "decode" in summary and "ms/token" in summary
    # progress: on the callback and in the event stream (the TUI's feed, the ticker, the recording)
    assert progress[0].startswith("triage: the engine crashed (SIGSEGV in the warm-up)")
    assert any("run 2: weight repacking off" in p and "completed" in p for p in progress)
    assert [e.text for e in _triage_events(run.events)][:-1] == progress
    # the finding names the cause and each engine's switch
    assert run.report is not None
    finding = next(f for f in run.report.findings if f.id == "LD951")
    assert finding.cls == "engine.crash" and summary in finding.message
    fixes = finding.fix.by_engine
    assert "-nr" in fixes["llama.cpp"] and "use_extra_bufts" in fixes["llama-cpp-python"] and "ollama" in fixes
    assert "LD950" not in {f.id for f in run.report.findings}
    # the recording holds the crashed start, the triage and the run made again; it replays the same
    text = record.read_text()
    assert text.count('"stage":"requested"') == 2 and '"restart":true' in text
    replayed = diagnose(facts_from_recording(io.BytesIO(record.read_bytes()), "run.jsonl"), rules,
                        command="analyze", mode="analyze")
    assert [(f.id, f.message) for f in replayed.findings] == [(f.id, f.message) for f in run.report.findings]
    assert replayed.facts.value("run.triage_status") == "fixed" and len(replayed.facts.value("run.decode_ms")) == 5


def test_without_triage_the_crash_is_reported_as_it_came(rules: RuleBase) -> None:
    settings = RunSettings(model_path=str(default_model_path()), max_tokens=4, seed=4)
    started = time.monotonic()
    run = run_embedded(settings, judge=LiveJudge(rules), timeout_s=120, command=CRASHING_CHILD, triage=False)
    assert run.crashed and run.exit_status == -11 and run.triage is None
    assert not _triage_events(run.events)
    assert crash_reported({f.id for f in run.report.findings})
    assert time.monotonic() - started < 60


def test_a_crash_no_setting_avoids_is_reported_with_what_was_tried(rules: RuleBase) -> None:
    settings = RunSettings(model_path=str(default_model_path()), max_tokens=4, seed=4, n_threads=1,
                           n_threads_batch=1, n_batch=32, n_ubatch=32)  # fewer changes to try: a shorter test
    run = run_embedded(settings, judge=LiveJudge(rules), timeout_s=120, host=False,
                       command=[*CRASHING_CHILD, "--crash-when", "always"])
    assert run.crashed and run.exit_status == -11
    assert run.triage is not None and run.triage.status == "no_fix"
    assert [a.change for a in run.triage.attempts] == [None, None, "repack_off", "mmap_off", "all_together"]
    ids = {f.id for f in run.report.findings}
    assert "LD959" in ids and crash_reported(ids)  # the crash, and the honest word that nothing avoided it
    ld959 = next(f for f in run.report.findings if f.id == "LD959")
    assert "still crashed with weight repacking off" in ld959.message and "no single change" in ld959.message


def test_a_run_that_does_not_crash_costs_no_triage(rules: RuleBase) -> None:
    settings = RunSettings(model_path=str(default_model_path()), max_tokens=4, seed=4)
    run = run_embedded(settings, judge=LiveJudge(rules), timeout_s=120, host=False)
    if run.triage is not None:  # this machine's engine crashes with the defaults (an AMX Xeon): triage's job
        assert run.triage.status == "fixed" and run.reason == "finished"
        pytest.skip(f"the engine crashes here with the defaults; triage: {run.triage.summary()}")
    assert run.reason == "finished"
    assert not _triage_events(run.events)
    assert [e.stage for e in run.events if isinstance(e, SettingsEvent)] == ["requested", "engine"]  # one child
    assert sum(isinstance(e, EndEvent) for e in run.events) == 1


def _has_amx(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    try:
        return "amx_tile" in cpuinfo.read_text()
    except OSError:
        return False


@pytest.mark.skipif(not _has_amx(), reason="needs an x86-64 CPU with AMX (amx_tile in /proc/cpuinfo): the real "
                    "crash of llama.cpp's AMX kernel does not happen elsewhere")
def test_the_real_amx_crash_is_found_and_avoided(rules: RuleBase) -> None:
    settings = RunSettings(model_path=str(default_model_path()), max_tokens=4, seed=4,
                           prompt="The capital of France is")
    run = run_embedded(settings, judge=LiveJudge(rules), timeout_s=120, host=False)
    if run.triage is None:
        pytest.skip("this AMX CPU's engine build did not crash (built without the AMX kernel, or a fixed llama.cpp)")
    assert run.triage.status == "fixed" and run.triage.change is not None
    assert run.triage.change.key == "repack_off"
    assert run.reason == "finished" and len(run.steps) == 3
    assert "LD951" in {f.id for f in run.report.findings}
