"""vLLM logs, V0 and V1 (0.6.3, 0.8.5, 0.11, 0.34): the diagnosis, its evidence and the vLLM fix.

Each case runs the whole `analyze` pipeline on a fixture built from vLLM's own format strings and
names the finding that must lead, its class, the log lines it must cite and a piece of the fix a
user pastes. Healthy start-ups of each era must produce no warning or error, although they contain
lines that only sound alarming ("If you are running out of memory, consider ...").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.sources.engines._torch.pytorch import Frames, parse_size, torch_oom
from doctor.sources.logs.analyze import LogAnalyzer
from doctor.sources.logs.entry import analyze_bytes
from doctor.sources.logs.line import make_line

VLLM = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "vllm"

CASES = [
    # file, leading rule, class, evidence lines that must be cited, text the vLLM fix must contain
    ("preemption-v0.6.3.log", "LD750", "kv.preemption", [23, 28, 31], "--max-num-seqs 10"),
    ("preemption-v0.34.log", "LD750", "kv.preemption", [17, 19], "--max-num-seqs 6"),
    ("kv-below-max-len-v0.6.3.log", "LD350", "oom.kv_cache", [21], "--max-model-len 23520"),
    ("kv-below-max-len-v0.8.5.log", "LD350", "oom.kv_cache", [35], "--max-model-len 29440"),
    ("no-kv-memory-v0.11.log", "LD351", "oom.kv_cache", [28], "--gpu-memory-utilization 0.95"),
    ("prompt-over-max-len-v0.6.3.log", "LD201", "context.overflow", [12, 18], "--max-model-len 12544"),
    ("request-max-tokens-over-v0.8.5.log", "LD251", "context.overflow", [29, 35], '"max_tokens": 164'),
    ("batched-tokens-below-max-len-v0.6.3.log", "LD250", "context.overflow", [16], "--max-num-batched-tokens 8192"),
    ("oom-loading-weights-v0.6.3.log", "LD301", "oom.weights", [45], "--tensor-parallel-size 2"),
    ("oom-profile-run-v0.8.5.log", "LD354", "oom.compute", [29], "--max-num-batched-tokens 4096"),
    ("oom-cuda-graphs-v0.11.log", "LD353", "oom.concurrency", [27], "--max-num-seqs"),
    ("oom-serving-v0.6.3.log", "LD304", "oom.runtime", [37], "--gpu-memory-utilization 0.85"),
]


@pytest.mark.parametrize(("name", "rule", "cls", "lines", "fix"), CASES, ids=[c[0] for c in CASES])
def test_diagnosis(analyze, name: str, rule: str, cls: str, lines: list[int], fix: str) -> None:
    report = analyze(VLLM / name)
    assert report.engine == "vllm"
    assert report.assessment is not None, [f.id for f in report.findings]
    assert (report.assessment.id, report.assessment.cls) == (rule, cls)
    finding = next(f for f in report.findings if f.id == rule)
    for line in lines:
        assert line in finding.lines, (line, finding.lines)
    assert finding.fix.engine == "vllm"
    assert finding.fix.command is not None and fix in finding.fix.command, finding.fix.command


@pytest.mark.parametrize("name", ["healthy-v0.6.3.log", "healthy-v0.8.5-v1-tp2.log", "healthy-v0.34.log"])
def test_healthy_start_ups_have_no_warning_or_error(analyze, name: str) -> None:
    report = analyze(VLLM / name)
    assert report.engine == "vllm"
    assert not report.fails("warning"), [(f.id, f.message) for f in report.findings]
    outcomes = {c.id: c.outcome for c in report.checks}
    assert outcomes["LD350"] == "ok"  # the KV pool was compared with max_model_len, not skipped
    assert outcomes["LD750"] == "ok"
    assert not report.facts.events("oom"), "the 'If you are running out of memory' info line is not an OOM"


def test_v0_start_up_facts(analyze) -> None:
    facts = analyze(VLLM / "healthy-v0.6.3.log").facts
    assert facts.value("engine.version") == "0.6.3"
    assert facts.value("config.max_model_len") == 8192
    assert facts.value("config.gpu_memory_utilization") == 0.9
    assert facts.value("config.max_num_seqs") == 256
    assert facts.value("server.kv_blocks_gpu") == 27913
    assert facts.value("server.kv_tokens") == 27913 * 16
    assert facts.value("server.max_concurrency") == 54.52
    assert facts.value("server.weights_bytes") == int(14.9888 * (1 << 30))
    assert facts.value("server.chunked_prefill") is False
    assert facts.get("server.kv_tokens").source.line == 16


def test_v1_comma_grouped_numbers_and_worker_prefixes(analyze) -> None:
    facts = analyze(VLLM / "healthy-v0.8.5-v1-tp2.log").facts
    assert facts.value("server.kv_tokens") == 318256
    assert facts.value("config.max_model_len") == 32768
    assert facts.value("config.tensor_parallel_size") == 2
    assert facts.value("server.vllm.v1") is True
    assert facts.value("server.chunked_prefill") is True
    assert facts.value("run.load_ms") == pytest.approx(15121.1, abs=0.2)


def test_v034_one_line_capacity_and_preemption_sum(analyze) -> None:
    report = analyze(VLLM / "preemption-v0.34.log")
    facts = report.facts
    assert facts.value("server.kv_tokens") == 19808
    assert facts.value("server.max_concurrency") == 1.21
    assert facts.value("server.preemptions") == 11  # 4 + 7: the V1 stat counts per interval
    assert facts.value("server.kv_usage_max") == 99.7
    assert facts.value("server.running_max") == 12
    assert facts.value("server.waiting_max") == 55
    finding = next(f for f in report.findings if f.id == "LD750")
    assert "11 time(s)" in finding.message and "19808 tokens" in finding.message


def test_v0_preemption_total_is_the_running_count(analyze) -> None:
    facts = analyze(VLLM / "preemption-v0.6.3.log").facts
    assert facts.value("server.preemptions") == 101
    modes = {e.data.get("mode") for e in facts.events("preempted")}
    assert modes == {"recompute"}


def test_kv_estimate_when_vllm_does_not_print_one(analyze) -> None:
    """0.8.5 drops the estimated length from its message; the pool share of the request gives it."""
    facts = analyze(VLLM / "kv-below-max-len-v0.8.5.log").facts
    assert facts.value("server.kv_needed_bytes") == 16 * (1 << 30)
    assert facts.value("server.kv_available_bytes") == int(3.60 * (1 << 30))
    assert facts.value("server.max_len_fit") == 29440  # 131072 x 3.60 / 16.00, down to 256
    assert len(facts.events("kv_capacity")) == 1  # the re-printed exception is the same failure


def test_capacity_stated_only_in_numbers(analyze, tmp_path: Path) -> None:
    """Without the ValueError, blocks x 16 below max_model_len still says the pool is too small."""
    lines = (VLLM / "kv-below-max-len-v0.6.3.log").read_text().splitlines()[:10]
    assert "Maximum concurrency" in lines[-1] and not any("ValueError" in line for line in lines)
    path = tmp_path / "numbers-only.log"
    path.write_text("\n".join(lines) + "\n")
    report = analyze(path)
    assert report.assessment is not None and report.assessment.id == "LD350"
    assert "23520 tokens" in report.findings[0].message


def test_which_limit_a_rejected_prompt_hit(analyze) -> None:
    facts = analyze(VLLM / "prompt-over-max-len-v0.6.3.log").facts
    limits = {e.data.get("limit") for e in facts.events("prompt_too_long") if e.source == "vllm"}
    assert limits == {"max_model_len"}
    # multi-step scheduling keeps V0's min(max_model_len, max_num_batched_tokens) even with chunked prefill
    log = (b"INFO 10-21 12:40:03 llm_engine.py:237] Initializing an LLM engine (v0.6.3) with config: model='m', "
           b"max_seq_len=16384, tensor_parallel_size=1, num_scheduler_steps=8, chunked_prefill_enabled=True "
           b"multi_step_stream_outputs=True\n"
           b"INFO 10-21 12:40:03 arg_utils.py:954] args: Namespace(max_num_batched_tokens=4096, max_model_len=16384)\n"
           b"WARNING 10-21 12:44:10 scheduler.py:1107] Input prompt (6120 tokens) is too long and exceeds limit of "
           b"4096\n")
    data = analyze_bytes(log)
    event = next(e for e in data.events("prompt_too_long") if e.source == "vllm")
    assert event.data["limit"] == "max_num_batched_tokens"


def test_completion_cause_and_room(analyze) -> None:
    facts = analyze(VLLM / "request-max-tokens-over-v0.8.5.log").facts
    events = [e for e in facts.events("prompt_too_long") if e.source == "vllm"]
    seen = [(e.data["prompt"], e.data["completion"], e.data["room"]) for e in events]
    assert seen == [(3932, 1024, 164), (3777, 1024, 319)]
    assert all(e.data["cause"] == "completion" for e in events)
    assert facts.value("server.request_tokens_max") == 4956


def test_oom_steps_from_tracebacks(analyze) -> None:
    steps = {}
    for name in ("oom-loading-weights-v0.6.3.log", "oom-profile-run-v0.8.5.log", "oom-cuda-graphs-v0.11.log"):
        events = analyze(VLLM / name).facts.events("oom")
        assert len(events) == 1, (name, [e.to_json() for e in events])
        steps[name] = (events[0].phase, events[0].data.get("step"), events[0].data.get("phase_from"))
    assert steps == {"oom-loading-weights-v0.6.3.log": ("weights", "load_model", "message"),
                     "oom-profile-run-v0.8.5.log": ("compute", "profile_run", "message"),
                     "oom-cuda-graphs-v0.11.log": ("compute", "cuda_graphs", "message")}


def test_torch_oom_both_wordings() -> None:
    new = torch_oom("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                    "capacity of 23.65 GiB of which 1.07 GiB is free. Including non-PyTorch memory, this process has "
                    "22.56 GiB")
    assert new == {"bytes": 2 << 30, "device": 0, "total": int(23.65 * (1 << 30)), "free": int(1.07 * (1 << 30))}
    old = torch_oom("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 1; 15.78 GiB total capacity; "
                    "14.56 GiB already allocated; 3.12 MiB free; 14.68 GiB reserved in total by PyTorch)")
    assert old is not None and old["bytes"] == 20 << 20 and old["device"] == 1 and old["free"] == int(3.12 * (1 << 20))
    typo = torch_oom("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.53 GiB. GPU 0 has a total "
                     "capacty of 22.19 GiB of which 1.05 GiB is free.")
    assert typo is not None and typo["total"] == int(22.19 * (1 << 30))  # PyTorch 2.1's spelling
    warmup = torch_oom("RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests.")
    assert warmup == {"step": "sampler_warmup", "dummy_requests": 1024}
    assert torch_oom("CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out of memory") is None


def test_parse_size() -> None:
    assert parse_size("14.9888", "GiB") == int(14.9888 * (1 << 30))
    assert parse_size("-1.79", "GiB") == int(-1.79 * (1 << 30))
    assert parse_size("448.00", "MiB") == 448 << 20
    assert parse_size("7", "GB") == 7_000_000_000
    assert parse_size("x", "GiB") is None


def test_frames_pick_the_innermost_start_up_step() -> None:
    frames = Frames()
    text = ["Traceback (most recent call last):",
            '  File "/x/vllm/v1/worker/gpu_worker.py", line 345, in compile_or_warm_up_model',
            '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 3455, in capture_model',
            '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 1426, in _dummy_run',
            '  File "/x/torch/nn/modules/module.py", line 1751, in _wrapped_call_impl']
    for i, t in enumerate(text, 1):
        frames.feed(make_line(i, t.encode()))
    assert frames.current(6) == ("compute", "cuda_graphs")
    assert frames.current(6 + 500) is None  # too far away to belong to this traceback
    frames.feed(make_line(7, b"Traceback (most recent call last):"))
    assert frames.current(8) is None


def test_incremental_snapshots_do_not_repeat_ooms() -> None:
    """watch --log takes snapshots while the log grows: each OOM appears once in every snapshot."""
    data = (VLLM / "oom-cuda-graphs-v0.11.log").read_bytes()
    analyzer = LogAnalyzer("grow")
    for start in range(0, len(data), 700):
        analyzer.feed(data[start:start + 700])
        analyzer.snapshot()
    first = analyzer.finish()
    again = analyzer.snapshot()
    assert len(first.events("oom")) == 1 and len(again.events("oom")) == 1
    assert first.events("oom")[0].data.get("step") == "cuda_graphs"


def test_every_produced_fact_is_catalogued(analyze) -> None:
    from doctor.core import catalog

    for path in sorted(VLLM.glob("*.log")):
        for fact in analyze(path).facts:
            assert catalog.is_known(fact.name), (path.name, fact.name)
