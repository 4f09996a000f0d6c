"""`watch --metrics URL`: vLLM and llama-server /metrics pages, parsed by prometheus_client."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.core.events import FactsEvent, IncidentEvent
from doctor.judge.live_judge import LiveJudge
from doctor.judge.rulebase import RuleBase
from doctor.sources.live.metrics.endpoint import (
    MetricsPoller,
    MetricsState,
    follow_metrics,
    parse_samples,
    to_facts,
    update,
)
from doctor.sources.live.session import TraceSession
from tests.watch.conftest import MetricsPages

PAGES = Path(__file__).resolve().parents[2] / "fixtures" / "traces" / "metrics"


def _facts(*names: str):
    state = MetricsState()
    for name in names:
        update(state, parse_samples((PAGES / name).read_text()))
    return to_facts(state, "http://x/metrics")


def test_vllm_page_maps_to_server_facts() -> None:
    facts = _facts("vllm-v1-full.prom")
    assert facts.value("server.kv_usage_max") == 99.5
    assert facts.value("server.preemptions_total") == 37  # one scrape: a counter's value, since the server started
    assert facts.value("server.preemptions") is None  # ... and no window to count an increase in
    assert facts.value("server.running_max") == 14
    assert facts.value("server.waiting_max") == 9
    ttfts = (0.08, 0.11, 0.09, 2.4, 3.1, 4.8, 6.2)
    assert facts.value("run.ttft_ms_mean") == pytest.approx(sum(ttfts) / len(ttfts) * 1000, abs=0.1)
    assert facts.value("engine.name") == "vllm"
    assert "vllm-v1" not in facts.get("server.preemptions_total").source.text  # the source names the URL and metric
    assert "http://x/metrics" in facts.get("server.preemptions_total").source.text


def test_maxima_are_kept_across_scrapes() -> None:
    facts = _facts("vllm-v1-full.prom", "vllm-v1-calm.prom")
    assert facts.value("server.kv_usage_max") == 99.5  # the calm page after it does not hide the peak
    assert facts.value("server.running_max") == 14


def test_llama_server_page() -> None:
    state = MetricsState()
    text = (PAGES / "llama-server.prom").read_text()
    update(state, parse_samples(text))
    slower = text.replace("llamacpp:predicted_tokens_seconds 36.85", "llamacpp:predicted_tokens_seconds 9.2")
    update(state, parse_samples(slower))
    facts = to_facts(state, "http://x/metrics")
    assert facts.value("server.waiting_max") == 2
    assert facts.value("server.running_max") == 1
    assert facts.value("run.tokens_used_max") == 4095
    assert (facts.value("run.decode_tps_min"), facts.value("run.decode_tps_max")) == (9.2, 36.85)
    assert facts.value("engine.name") == "llama.cpp"




def test_scrapes_over_http_and_reports_preemptions_as_they_rise(server: str, rulebase: RuleBase) -> None:
    MetricsPages.pages = [(PAGES / "vllm-v1-calm.prom").read_bytes(), (PAGES / "vllm-v1-full.prom").read_bytes()]
    events: list = []
    session = TraceSession("vllm", source="metrics", judge=LiveJudge(rulebase), on_event=events.append)
    poller = MetricsPoller(server, interval_s=0.01)
    end = follow_metrics(poller, session, stop=lambda: False, max_scrapes=2)
    facts_events = [e for e in events if isinstance(e, FactsEvent)]
    assert len(facts_events) == 2
    incidents = [e for e in events if isinstance(e, IncidentEvent)]
    assert [i.event for i in incidents] == ["preempted"]
    assert incidents[0].data["total"] == 37
    ids = {f["id"] for f in end.report["findings"]}
    assert "LD750" in ids  # the existing preemption rule fires from the metrics alone


def test_an_unreachable_endpoint_is_a_note_not_a_crash() -> None:
    poller = MetricsPoller("http://127.0.0.1:9/metrics", interval_s=0.01)  # port 9: discard, nothing listens
    events, note = poller.poll()
    assert events == []
    assert note is not None and "127.0.0.1:9" in note
    again_events, again_note = poller.poll()
    assert again_events == [] and again_note is None  # the same failure is said once


def test_only_http_urls_are_fetched() -> None:
    poller = MetricsPoller("file:///etc/passwd")
    events, note = poller.poll()
    assert events == [] and note is not None and "http" in note


def test_sglang_pages_map_to_the_same_facts() -> None:
    facts = _facts("sglang-0.4.3-busy.prom", "sglang-0.4.3-later.prom")
    assert facts.value("engine.name") == "sglang"
    assert facts.value("server.kv_usage_max") == 97.0  # sglang:token_usage, 0-1
    assert facts.value("server.running_max") == 200 and facts.value("server.waiting_max") == 73
    assert facts.value("server.max_num_seqs_suggested") == 100
    # 19 requests in the window
    assert facts.value("run.ttft_ms_mean") == pytest.approx((328.9 - 151.4) / 19 * 1000, abs=0.5)
    assert facts.value("server.gen_tps") is not None  # sglang:generation_tokens_total over the window
