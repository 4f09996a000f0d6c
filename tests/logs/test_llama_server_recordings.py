"""Real llama-server runs (fixtures/record_llama_server.py: the llama.cpp vendored by llama-cpp-python
0.3.36, SmolLM2-135M, default log verbosity) through `analyze`, and its real /metrics pages through the
metrics mapping."""

from __future__ import annotations

from pathlib import Path

from doctor.judge.evaluate import diagnose
from doctor.sources.live.metrics.endpoint import MetricsState, parse_samples, to_facts, update

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "fixtures" / "logs" / "llama-server"
PAGES = ROOT / "fixtures" / "traces" / "metrics"


def _ids(report) -> list[str]:
    return [f.id for f in report.findings]


def _line(name: str, number: int) -> str:
    return (LOGS / name).read_text().splitlines()[number - 1]


def test_healthy_session_has_no_findings(analyze) -> None:
    report = analyze(LOGS / "real-healthy.log")
    assert _ids(report) == []
    assert report.engine == "llama.cpp"
    assert report.facts.value("derived.n_ctx_seq") == 2048
    assert report.facts.value("config.n_parallel") == 1
    assert 0 < report.facts.value("run.tokens_used_max") < 100


def test_four_slots_share_the_context(analyze) -> None:
    report = analyze(LOGS / "real-parallel-4.log")
    assert report.facts.value("config.n_parallel") == 4
    assert report.facts.value("derived.n_ctx_seq") == 512  # 2048 / 4, as the server printed it
    assert _ids(report) == []  # short requests fit their 512-token slots


def test_a_prompt_longer_than_its_slot_is_refused(analyze) -> None:
    report = analyze(LOGS / "real-prompt-too-long.log")
    events = report.facts.events("prompt_too_long")
    assert len(events) == 1 and events[0].data == {"n_tokens": 582, "n_ctx": 256}
    assert "exceeds the available context size" in _line("real-prompt-too-long.log", events[0].line)
    root = report.findings[0]
    assert root.id == "LD203"  # 512 split over 2 slots: the request needed 582 of a 256-token slot
    assert events[0].line in root.lines


def test_generation_runs_into_the_end_without_context_shift(analyze) -> None:
    report = analyze(LOGS / "real-context-end-no-shift.log")
    assert _ids(report) == ["LD202"]  # not "the prompt does not fit": the prompt was 45 tokens
    finding = report.findings[0]
    assert finding.confidence == "high"
    stop = report.facts.events("ctx_full")[0]
    assert "stop processing: n_tokens = 255, truncated = 1" in _line("real-context-end-no-shift.log", stop.line)
    assert stop.line in finding.lines
    assert report.facts.events("truncation") == []


def test_context_shift_discards_old_tokens(analyze) -> None:
    report = analyze(LOGS / "real-context-shift.log")
    assert _ids(report) == ["LD202"]
    shifts = report.facts.events("context_shift")
    assert len(shifts) >= 2
    assert all("slot context shift" in _line("real-context-shift.log", e.line) for e in shifts)
    assert report.facts.events("ctx_full") == [] and report.facts.events("truncation") == []


def test_queueing_shows_in_the_metrics_not_in_the_log(analyze, rulebase) -> None:
    assert _ids(analyze(LOGS / "real-queueing.log")) == []  # deferral is logged only at debug level
    state = MetricsState()
    update(state, parse_samples((PAGES / "llama-server-queueing.prom").read_text()))
    facts = to_facts(state, "http://127.0.0.1:8080/metrics")
    assert facts.value("server.waiting_max") >= 2 and facts.value("server.running_max") == 1
    facts.set("config.n_parallel", 1, facts.get("server.running_max").source)  # what /props says
    report = diagnose(facts, rulebase, command="watch", mode="watch")
    assert "LD752" in _ids(report)
    assert report.findings[0].confidence == "high"


def test_slots_sharing_one_kv_buffer_fill_it_together(analyze) -> None:
    report = analyze(LOGS / "real-kv-unified-full.log")
    facts = report.facts
    assert facts.value("config.kv_unified") is True and facts.value("config.n_parallel") == 4
    full = facts.events("ctx_full")
    assert full and all("failed to find" in _line("real-kv-unified-full.log", e.line)
                        or "Context size has been exceeded" in _line("real-kv-unified-full.log", e.line) for e in full)
    assert report.assessment is not None and report.assessment.id == "LD202"
    # no sequence reached 256 on its own (65 at most): the four filled the shared buffer together,
    # so the fix is not "what one sequence used + 10%" (256 again) but a bigger buffer
    assert facts.value("run.tokens_used_max") < 100
    assert facts.value("derived.ctx_recommended") == 512
