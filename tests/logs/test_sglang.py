"""SGLang as an engine of its own: its logs across three releases (fixtures/logs/sglang/README.md cites
each format string), its settings spelled as its flags, its findings and the facts they rest on."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.core import engines
from doctor.judge.evaluate import diagnose
from doctor.judge.rulebase import load_rulebase
from doctor.sources.inputs import read_input
from doctor.sources.logs.entry import analyze_bytes

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "sglang"


def _report(name: str):
    return diagnose(read_input(str(LOGS / name)), load_rulebase(None), command="analyze", mode="analyze")


@pytest.mark.parametrize(("name", "lead", "cls", "fix"), [
    ("v0.4.3-decode-retract-kv-full.log", "LD750", "kv.preemption", "--max-running-requests 100"),
    ("v0.4.3-not-enough-memory.log", "LD351", "oom.kv_cache", "--mem-fraction-static 0.85"),
    ("v0.4.3-cuda-graph-oom.log", "LD362", "oom.compute", "--mem-fraction-static 0.8"),
    ("v0.5.23-input-longer-than-context.log", "LD201", "context.overflow", "--context-length"),
])
def test_each_family_is_named_with_sglangs_flags(name: str, lead: str, cls: str, fix: str) -> None:
    report = _report(name)
    assert report.engine == "sglang"
    first = report.findings[0]
    assert (first.id, first.cls) == (lead, cls)
    assert fix in (first.fix.command or "")


def test_a_healthy_start_and_serving_is_clean() -> None:
    report = _report("v0.3.0-healthy-llama3-8b.log")
    assert report.engine == "sglang"
    assert [f.id for f in report.findings if f.severity in ("error", "warning")] == []
    facts = report.facts
    assert facts.value("server.kv_tokens") == 447537 and facts.value("config.n_ctx_seq") == 8192
    assert facts.value("server.sglang.mem_fraction_static") == 0.88


@pytest.mark.parametrize("header", ["[14:02:11 TP0] ", "[2025-02-20 14:02:11 TP0] ", "[2026-03-11 09:14:33.120 TP3] ",
                                    ""])
def test_the_pool_line_in_every_era(header: str) -> None:
    lines = [
        "max_total_num_tokens=61440, max_prefill_tokens=16384, max_running_requests=2049, context_len=131072",
        "max_total_num_tokens=61440, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=512, "
        "context_len=131072, available_gpu_mem=3.11 GB",
    ]
    for line in lines:
        facts = analyze_bytes((header + line + "\n").encode(), "pasted log")
        assert facts.value("engine.name") == "sglang"
        assert facts.value("server.kv_tokens") == 61440 and facts.value("config.n_ctx_seq") == 131072


@pytest.mark.parametrize("line", [
    "[2025-01-05 10:00:00 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_tokens_gained: 912, "
    "#new_token_ratio: 0.4100 -> 0.5200",
    "[10:00:00 TP0] Decode out of memory happened. #retracted_reqs: 3, #new_token_ratio: 0.4100 -> 0.5200",
])
def test_retraction_in_both_wordings_is_preemption(line: str) -> None:
    facts = analyze_bytes((line + "\n").encode(), "pasted log")
    assert facts.value("engine.name") == "sglang"
    assert facts.value("server.preemptions") == 3


def test_settings_are_spelled_as_sglang_flags() -> None:
    spelling = engines.get("sglang").spelling
    assert spelling is not None
    assert spelling.forms["n_ctx"].format(v=8192) == "--context-length 8192"
    assert spelling.forms["mem_fraction_static"].format(v=0.85) == "--mem-fraction-static 0.85"
    assert spelling.forms["tensor_parallel_size"].format(v=2) == "--tp 2"


def test_equal_decode_rates_give_their_median_without_comparing_their_sources() -> None:
    """Two decode batches at the same rate (a fuzzed log found it: the sort fell through to the Source)."""
    batch = ("[10:21:4{n} TP0] Decode batch. #running-req: 1, #token: 59, token usage: 0.00, "
             "gen throughput (token/s): 31.85, #queue-req: 0\n")
    facts = analyze_bytes((batch.format(n=1) + batch.format(n=2) + batch.format(n=3)).encode())
    assert facts.value("server.gen_tps") == pytest.approx(31.85)
