"""Hugging Face TGI logs (v1.0, v2.0, v2.4, v3.0): the diagnosis, its evidence and the TGI fix.

Each case runs the whole `analyze` pipeline on a fixture built from TGI's own format strings. A
healthy start-up must produce no warning or error; an out-of-memory that TGI itself catches and
recovers from (a CUDA-graph size dropped at warm-up) must not become a finding.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.sources.logs.entry import analyze_bytes

TGI = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "tgi"

CASES = [
    # file, leading rule, class, evidence lines that must be cited, text the TGI fix must contain
    ("prefill-oom-v1.0.log", "LD352", "oom.compute", [33], "--max-batch-prefill-tokens 2048"),
    ("shard-oom-loading-v2.4.log", "LD301", "oom.weights", [60], "--num-shard with more GPUs"),
    ("validation-errors-v2.0.log", "LD251", "context.overflow", [25, 26], '"max_new_tokens": 146'),
    ("max-total-tokens-over-kv-v3.0.log", "LD350", "oom.kv_cache", [31, 33], "--max-total-tokens 24320"),
]


@pytest.mark.parametrize(("name", "rule", "cls", "lines", "fix"), CASES, ids=[c[0] for c in CASES])
def test_diagnosis(analyze, name: str, rule: str, cls: str, lines: list[int], fix: str) -> None:
    report = analyze(TGI / name)
    assert report.engine == "tgi"
    assert report.assessment is not None, [f.id for f in report.findings]
    assert (report.assessment.id, report.assessment.cls) == (rule, cls)
    finding = next(f for f in report.findings if f.id == rule)
    for line in lines:
        assert line in finding.lines, (line, finding.lines)
    assert finding.fix.engine == "tgi"
    assert finding.fix.command is not None and fix in finding.fix.command, finding.fix.command


def test_healthy_start_up(analyze) -> None:
    report = analyze(TGI / "healthy-v2.0.log")
    assert report.engine == "tgi"
    assert not report.fails("warning"), [(f.id, f.message) for f in report.findings]
    facts = report.facts
    assert facts.value("model.name") == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert facts.value("model.n_ctx_train") == 8192  # "Model supports up to 8192 but tgi will now set ..."
    assert facts.value("config.max_input_tokens") == 4095
    assert facts.value("config.max_total_tokens") == 4096
    assert facts.value("config.max_batch_prefill_tokens") == 4145
    assert facts.value("server.batch_total_tokens") == 141264
    assert facts.value("server.kv_tokens") == 141264  # what the KV blocks hold, as the router reports it
    assert facts.value("run.load_ms") == pytest.approx(13715.8, abs=0.1)
    assert {c.id: c.outcome for c in report.checks}["LD350"] == "ok"


def test_args_in_both_printings(analyze) -> None:
    one_line = analyze(TGI / "prefill-oom-v1.0.log").facts  # v1: Args { ... } on one line
    assert one_line.value("config.max_input_tokens") == 4000
    assert one_line.value("config.max_total_tokens") == 4096
    assert one_line.value("config.max_batch_prefill_tokens") == 4096
    pretty = analyze(TGI / "shard-oom-loading-v2.4.log").facts  # v2+: Some(\n    8191,\n)
    assert pretty.value("config.max_input_tokens") == 8191
    assert pretty.value("config.max_total_tokens") == 8192
    assert pretty.value("config.max_batch_prefill_tokens") == 8242
    assert pretty.value("model.name") == "mistralai/Mixtral-8x7B-Instruct-v0.1"


def test_prefill_oom_is_one_failure_with_a_suggestion(analyze) -> None:
    facts = analyze(TGI / "prefill-oom-v1.0.log").facts
    prefill = [e for e in facts.events("oom") if e.data.get("limit") == "max_batch_prefill_tokens"]
    assert len(prefill) == 1  # the RuntimeError, the router's "Server error" and "Error: Warmup(...)" are one
    assert prefill[0].data["n_tokens"] == 4096 and prefill[0].data["suggest"] == 2048
    torch = [e for e in facts.events("oom") if e.source == "tgi" and "limit" not in e.data]
    assert [(e.phase, e.data.get("step")) for e in torch] == [("compute", "warmup")]
    assert torch[0].data["bytes"] == int(1.53 * (1 << 30))  # the PyTorch 2.0 wording


def test_shard_failure_is_a_load_failure_explained_by_the_oom(analyze) -> None:
    report = analyze(TGI / "shard-oom-loading-v2.4.log")
    assert [e.data.get("reason") for e in report.facts.events("load_failed")] == ["shard"]
    checks = {c.id: c for c in report.checks}
    assert checks["LD903"].inhibited_by == "LD301"


def test_v3_not_enough_memory_in_debug_form(analyze) -> None:
    facts = analyze(TGI / "max-total-tokens-over-kv-v3.0.log").facts
    assert [e.data.get("max_total_tokens") for e in facts.events("kv_capacity")] == [32768]
    assert facts.value("server.kv_tokens") == 24320
    assert facts.value("config.n_ctx_seq") == 32768


def test_validation_causes() -> None:
    log = (b"2024-05-02T08:07:12.881400Z ERROR text_generation_router::infer: router/src/infer/mod.rs:118: "
           b"Input validation error: `inputs` must have less than 4095 tokens. Given: 5210\n"
           b"2024-05-02T08:07:13.001200Z ERROR text_generation_router::infer: router/src/infer/mod.rs:118: "
           b"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens "
           b"and 200 `max_new_tokens`\n")
    facts = analyze_bytes(log)
    events = [e for e in facts.events("prompt_too_long") if e.source == "tgi"]
    assert [(e.data["limit"], e.data["cause"]) for e in events] == [("max_input_tokens", "prompt"),
                                                                     ("max_total_tokens", "completion")]
    assert events[1].data["room"] == 96
    assert facts.value("engine.name") == "tgi"


def test_a_handled_cuda_graph_oom_is_not_a_finding(analyze, tmp_path: Path) -> None:
    """flash_causal_lm.warmup catches the OOM of one CUDA-graph size, logs it and goes on."""
    healthy = (TGI / "healthy-v2.0.log").read_text().splitlines()
    at = next(i for i, line in enumerate(healthy) if "Cuda Graphs are enabled" in line) + 1
    handled = ["2024-06-12T09:14:22.101312Z ERROR text_generation_launcher: Decode cuda graph warmup failed",
               "Traceback (most recent call last):",
               '  File "/opt/conda/lib/python3.11/site-packages/text_generation_server/models/flash_causal_lm.py", '
               "line 1662, in warmup",
               "    self.cuda_graph_warmup(bs, max_total_tokens, max_total_tokens)",
               "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total capacity of "
               "22.05 GiB of which 21.12 MiB is free. Process 51 has 22.02 GiB memory in use."]
    path = tmp_path / "handled.log"
    path.write_text("\n".join(healthy[:at] + handled + healthy[at:]) + "\n")
    report = analyze(path)
    assert not report.facts.events("oom")
    assert not report.fails("warning"), [(f.id, f.message) for f in report.findings]


def test_json_output_mode() -> None:
    """--json-output: one JSON object per line, the message and the tracing target as fields."""
    log = (b'{"timestamp":"2024-07-01T10:00:01.000001Z","level":"INFO","message":"Starting shard",'
           b'"target":"text_generation_launcher","span":{"rank":0,"name":"shard-manager"}}\n'
           b'{"timestamp":"2024-07-01T10:00:31.000001Z","level":"ERROR","message":"Shard 0 failed to start",'
           b'"target":"text_generation_launcher","filename":"launcher/src/main.rs","line_number":1143}\n')
    facts = analyze_bytes(log)
    assert facts.value("engine.name") == "tgi"
    assert [(e.line, e.data.get("reason")) for e in facts.events("load_failed")] == [(2, "shard")]


def test_every_produced_fact_is_catalogued(analyze) -> None:
    from doctor.core import catalog

    for path in sorted(TGI.glob("*.log")):
        for fact in analyze(path).facts:
            assert catalog.is_known(fact.name), (path.name, fact.name)
