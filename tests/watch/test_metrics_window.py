"""/metrics read as what each metric is: counters as increases over the window (baseline: the first
scrape), gauges as gauges, histograms as rates over the window (mean, p50, p95 from bucket increases);
queueing and slow first tokens become findings. Pages are written by prometheus_client with vLLM's
names, types and buckets (fixtures/traces/metrics/make_vllm_metrics.py) or are llama-server's page;
the HTTP tests serve them from 127.0.0.1."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from doctor.core.events import IncidentEvent
from doctor.judge.evaluate import diagnose
from doctor.judge.live_judge import LiveJudge
from doctor.judge.rulebase import RuleBase
from doctor.sources.live.metrics.endpoint import (
    MetricsPoller,
    MetricsState,
    follow_metrics,
    parse_scrape,
    quantile,
    to_facts,
    update,
)
from doctor.sources.live.session import TraceSession
from tests.watch.conftest import MetricsPages

PAGES = Path(__file__).resolve().parents[2] / "fixtures" / "traces" / "metrics"
_spec = importlib.util.spec_from_file_location("make_vllm_metrics", PAGES / "make_vllm_metrics.py")
assert _spec is not None and _spec.loader is not None
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)


def vllm_page(preemptions: int = 0, running: int = 4, waiting: int = 0, kv: float = 0.5,
              ttfts: list[float] | None = None, **kw: Any) -> str:
    return make.page(running, waiting, kv, preemptions, ttfts or [], **kw).decode()


def _state(*pages: str, step_s: float = 30.0) -> MetricsState:
    state = MetricsState()
    for i, text in enumerate(pages):
        update(state, parse_scrape(text, t=i * step_s))
    return state




def _watch(server: str, rulebase: RuleBase, pages: list[str]) -> tuple[list[Any], dict[str, Any]]:
    MetricsPages.pages = [p.encode() for p in pages]
    events: list[Any] = []
    session = TraceSession("vllm", source="metrics", judge=LiveJudge(rulebase), on_event=events.append)
    end = follow_metrics(MetricsPoller(server, interval_s=0.01), session, stop=lambda: False, max_scrapes=len(pages))
    return events, end.report


def test_a_counter_already_at_120_that_never_moves_is_no_preemption(server: str, rulebase: RuleBase) -> None:
    page = vllm_page(preemptions=120)
    events, report = _watch(server, rulebase, [page, page, page])
    assert not [e for e in events if isinstance(e, IncidentEvent)]  # not "rose from 0 to 120"
    assert "LD750" not in {f["id"] for f in report["findings"]}
    facts = report["facts"]["facts"]
    assert facts["server.preemptions"]["value"] == 0
    assert facts["server.preemptions_total"]["value"] == 120


def test_100_to_120_is_20_preemptions_in_the_window(server: str, rulebase: RuleBase) -> None:
    events, report = _watch(server, rulebase, [vllm_page(preemptions=100, running=12),
                                               vllm_page(preemptions=120, running=12, kv=0.99)])
    incidents = [e for e in events if isinstance(e, IncidentEvent)]
    assert [(i.event, i.data["new"]) for i in incidents] == [("preempted", 20)]
    assert "100 -> 120" in incidents[0].text and "rose from 0" not in incidents[0].text
    finding = next(f for f in report["findings"] if f["id"] == "LD750")
    assert "preempted 20 time(s)" in finding["message"] and "120 time" not in finding["message"]
    fix = finding["fix"]["command"]
    assert "--max-num-seqs 6" in fix and "<" not in fix  # half the running peak, no raw placeholder


def test_a_counter_reset_counts_on_from_its_new_value() -> None:
    state = _state(vllm_page(preemptions=50), vllm_page(preemptions=60), vllm_page(preemptions=4))
    facts = to_facts(state, "http://x/metrics")
    assert facts.value("server.preemptions") == 14  # 10, then a restart and 4 more
    assert "reset" in facts.get("server.preemptions").source.text


def test_waiting_requests_are_a_finding_with_evidence(rulebase: RuleBase) -> None:
    state = _state(vllm_page(running=256, waiting=40, kv=0.71))
    report = diagnose(to_facts(state, "http://vllm:8000/metrics"), rulebase, command="watch", mode="watch")
    finding = next(f for f in report.findings if f.id == "LD760")
    assert "40 requests waited" in finding.message
    assert any("server.waiting_max = 40" in e.text and "vllm:num_requests_waiting" in e.text
               for e in finding.evidence)


def test_histograms_are_read_over_the_window() -> None:
    before = [0.05] * 20  # fast requests before the window
    during = [0.09, 0.4, 1.2, 2.2, 2.3, 2.4, 3.0, 4.0, 6.0, 7.0]
    state = _state(vllm_page(ttfts=before, itls=[0.02] * 20, generated=1000),
                   vllm_page(ttfts=before + during, itls=[0.02] * 20 + [0.03] * 30, generated=4000))
    facts = to_facts(state, "http://x/metrics")
    assert facts.value("run.ttft_ms_mean") == pytest.approx(sum(during) / len(during) * 1000, abs=0.1)
    assert facts.value("run.ttft_requests") == 10
    # p50: rank 5 of 10 falls in the (1.0, 2.5] bucket, which holds 4 (1.2 to 2.4) above 2 below
    assert facts.value("run.ttft_ms_p50") == pytest.approx((1.0 + 1.5 * (5 - 2) / 4) * 1000, abs=0.1)
    assert facts.value("run.ttft_ms_p95") == pytest.approx((5.0 + 2.5 * (9.5 - 8) / 2) * 1000, abs=0.1)
    assert facts.value("run.itl_ms_mean") == pytest.approx(30.0, abs=0.01)  # the window's tokens only
    assert facts.value("server.gen_tps") == pytest.approx(3000 / 30.0)
    assert "in the window" in facts.get("run.ttft_ms_mean").source.text


def test_quantile_matches_histogram_quantile() -> None:
    assert quantile({0.1: 0.0, 1.0: 10.0, float("inf"): 10.0}, 0.5) == pytest.approx(0.55)
    assert quantile({1.0: 0.0, float("inf"): 0.0}, 0.5) is None


def test_slow_first_token_from_queueing_names_the_queue(rulebase: RuleBase) -> None:
    ttfts = [2.0, 2.2, 2.5, 3.0, 4.1, 2.6]
    state = _state(vllm_page(waiting=3, ttfts=[], queue=[], prefill=[]),
                   vllm_page(waiting=5, ttfts=ttfts, queue=[t - 0.2 for t in ttfts], prefill=[0.2] * 6))
    report = diagnose(to_facts(state, "http://x/metrics"), rulebase, command="watch", mode="watch")
    ids = [f.id for f in report.findings]
    assert "LD760" in ids and "LD761" not in ids  # the queue is the cause; the slow first token its symptom
    finding = next(f for f in report.findings if f.id == "LD760")
    assert finding.confidence == "high"
    assert "in the queue on average" in finding.message and "most was waiting" in finding.message


def test_slow_first_token_without_a_queue(rulebase: RuleBase) -> None:
    ttfts = [2.0, 2.2, 2.5, 3.0, 4.1, 2.6]
    state = _state(vllm_page(), vllm_page(ttfts=ttfts, queue=[0.01] * 6, prefill=[t - 0.01 for t in ttfts]))
    report = diagnose(to_facts(state, "http://x/metrics"), rulebase, command="watch", mode="watch")
    finding = next(f for f in report.findings if f.id == "LD761")
    assert "LD760" not in [f.id for f in report.findings]
    assert "over 6 requests" in finding.message and "the prefill itself took" in finding.message


def test_llama_server_per_token_latency_from_counters() -> None:
    text = (PAGES / "llama-server.prom").read_text()
    later = (text.replace("llamacpp:tokens_predicted_total 5210", "llamacpp:tokens_predicted_total 6210")
                 .replace("llamacpp:tokens_predicted_seconds_total 141.36",
                          "llamacpp:tokens_predicted_seconds_total 191.36"))
    facts = to_facts(_state(text, later), "http://x/metrics")
    assert facts.value("run.itl_ms_mean") == pytest.approx(50.0)  # 50 s for 1000 tokens in the window
    one = to_facts(_state(text), "http://x/metrics")
    assert one.value("run.itl_ms_mean") == pytest.approx(141.36 / 5210 * 1000, abs=0.01)
    assert "since the server started" in one.get("run.itl_ms_mean").source.text


def test_stalling_output_tokens_from_the_itl_histogram(rulebase: RuleBase) -> None:
    steady, stalls = [0.02] * 90, [0.6] * 10  # one token in ten waits 600 ms
    state = _state(vllm_page(itls=[0.02] * 10), vllm_page(itls=[0.02] * 10 + steady + stalls))
    facts = to_facts(state, "http://x/metrics")
    # rank 50 of 100: 50 of the 90 in the (0.01, 0.025] bucket
    assert facts.value("run.itl_ms_p50") == pytest.approx((0.01 + 0.015 * 50 / 90) * 1000, abs=0.1)
    assert facts.value("run.itl_ms_p95") >= 500
    report = diagnose(facts, rulebase, command="watch", mode="watch")
    finding = next(f for f in report.findings if f.id == "LD762")
    assert "at the 95th percentile" in finding.message
