"""The run's timeline (doctor/sources/logs/timeline.py): a failure placed by the last step the log shows
before it, with the line that placed it as evidence, for every engine that marks it.

The lines are real: llama.cpp's from fixtures/logs/llama.cpp/cuda-oom-runtime.log (its README cites
the issue and the format strings), SGLang's from fixtures/logs/sglang/v0.4.3-decode-retract-kv-full.log
(model_runner.py's start-up lines), KoboldCpp's progress line as gpttype_adapter.cpp prints it
(`"\\rProcessing Prompt%s (%d / %zu tokens)"`, LostRuins/koboldcpp) followed by ggml-cuda.cu's
`CUDA error: %s` abort, and PyTorch's out-of-memory message (c10/cuda/CUDACachingAllocator.cpp).
"""

from __future__ import annotations

from pathlib import Path

from doctor.judge.evaluate import diagnose
from doctor.judge.rulebase import load_rulebase
from doctor.sources.logs.entry import analyze_bytes
from doctor.sources.logs.timeline import Timeline

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
RUNTIME = (ROOT / "llama.cpp" / "cuda-oom-runtime.log").read_text().splitlines()
SGLANG = (ROOT / "sglang" / "v0.4.3-decode-retract-kv-full.log").read_text().splitlines()
CUDA_OOM = ["CUDA error: out of memory",
            "  current device: 0, in function ggml_cuda_pool_malloc_vmm at ggml/src/ggml-cuda/ggml-cuda.cu:377",
            "ggml/src/ggml-cuda/ggml-cuda.cu:96: CUDA error"]
TORCH_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
             "of 79.10 GiB of which 1.02 GiB is free.")


def _log(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def _line(lines: list[str], needle: str) -> int:
    return next(n for n, text in enumerate(lines, 1) if needle in text)


def test_steps_only_move_forward_and_a_new_load_begins_again() -> None:
    t = Timeline()
    assert t.place(10) is None  # nothing marked: no placement (the engine's own fallback decides)
    assert t.reach("load", 1, "llama_model_loader: loaded meta data", "llama.cpp")
    assert t.reach("weights", 5, "CUDA0 model buffer size", "llama.cpp")
    assert not t.reach("load", 6, "print_info: arch = llama", "llama.cpp")  # still the same load
    assert t.reach("decode", 9, "eval time", "llama.cpp")
    assert not t.reach("prefill", 12, "new prompt", "llama.cpp")  # a later request moves nothing
    placed = t.place(20)
    assert placed is not None and (placed.phase, placed.step, placed.after.line) == ("runtime", "decode", 9)
    assert t.reach("load", 30, "llama_model_loader: loaded meta data", "llama.cpp")  # a new model load
    placed = t.place(31)
    assert placed is not None and placed.phase == "weights"
    placed = t.place(7)  # a failure held back until later is placed where it was
    assert placed is not None and (placed.phase, placed.after.line) == ("kv_cache", 5)


def test_each_engine_orders_its_start_up_steps() -> None:
    """Each engine's parser carries its own start-up order (LogParser.startup_next, in the engine's folder)."""
    from doctor.sources.engines.llamacpp.parser import LlamaCppParser
    from doctor.sources.engines.sglang.parser import SglangParser
    from doctor.sources.engines.tgi.parser import TgiParser
    from doctor.sources.engines.vllm.parser import VllmParser

    for parser, reached, phase, step in ((LlamaCppParser, "weights", "kv_cache", "kv_cache_alloc"),
                                         (VllmParser, "weights", "compute", "profile_run"),
                                         (TgiParser, "weights", "compute", "warmup"),
                                         (SglangParser, "weights", "kv_cache", "kv_cache_alloc"),
                                         (VllmParser, "kv", "compute", "cuda_graphs"),
                                         (LlamaCppParser, "kv", "compute", "compute_reserve")):
        t = Timeline()
        t.reach(reached, 3, "weights placed", parser.name, follows=parser.startup_next)
        placed = t.place(4)
        assert placed is not None and (placed.phase, placed.step) == (phase, step), parser.name


def test_an_oom_after_the_kv_cache_is_the_compute_reserve_and_cites_the_kv_line() -> None:
    # the run's lines up to the KV cache, then the backend's out-of-memory abort
    head = RUNTIME[:_line(RUNTIME, "KV self size")]
    facts = analyze_bytes(_log(*head, *CUDA_OOM))
    [oom] = facts.events("oom")
    kv_line = _line(RUNTIME, "KV buffer size")  # the first line that shows the KV cache allocated
    assert (oom.phase, oom.data["step"], oom.data["placed_after"]) == ("compute", "compute_reserve", "kv")
    assert [n for n, _ in oom.placed_by] == [kv_line]
    report = diagnose(facts, load_rulebase(None), command="analyze", mode="analyze")
    first = report.findings[0]
    assert (first.id, first.cls) == ("LD303", "oom.compute")
    assert kv_line in [e.line for e in first.evidence]  # the line that placed it is evidence
    assert "the KV cache had been allocated" in first.message


def test_an_oom_in_a_request_is_the_runtime_one_whatever_came_first() -> None:
    facts = analyze_bytes(_log(*RUNTIME))
    [oom] = facts.events("oom")
    assert (oom.phase, oom.data["step"]) == ("runtime", "prefill")
    assert [n for n, _ in oom.placed_by] == [_line(RUNTIME, "new prompt")]


def test_a_koboldcpp_prompt_batch_that_runs_out_is_no_weights_oom() -> None:
    # the console's progress line and the abort on the same line, as KoboldCpp's \r progress leaves them
    facts = analyze_bytes(_log("Processing Prompt [BLAS] (512 / 12710 tokens)" + CUDA_OOM[0], *CUDA_OOM[1:]))
    [oom] = facts.events("oom")
    assert (oom.phase, oom.data["step"]) == ("runtime", "prefill")
    report = diagnose(facts, load_rulebase(None), command="analyze", mode="analyze")
    assert report.engine == "koboldcpp" and report.findings[0].cls == "oom.runtime"


def test_a_pytorch_oom_in_sglangs_graph_capture_is_placed_by_its_start_up_lines() -> None:
    head = SGLANG[:_line(SGLANG, "Capture cuda graph begin")]
    facts = analyze_bytes(_log(*head, TORCH_OOM))
    [oom] = facts.events("oom")
    assert (oom.phase, oom.data["step"]) == ("compute", "cuda_graphs")
    assert [n for n, _ in oom.placed_by] == [len(head)]
    report = diagnose(facts, load_rulebase(None), command="analyze", mode="analyze")
    assert (report.findings[0].id, report.findings[0].cls) == ("LD353", "oom.concurrency")


def test_a_pytorch_oom_after_sglangs_weights_is_the_kv_pools() -> None:
    head = SGLANG[:_line(SGLANG, "Load weight end")]
    facts = analyze_bytes(_log(*head, TORCH_OOM))
    [oom] = facts.events("oom")
    assert (oom.phase, oom.data["placed_after"]) == ("kv_cache", "weights")


def test_a_crash_says_what_the_run_had_done() -> None:
    head = RUNTIME[:_line(RUNTIME, "compute buffer size")]
    facts = analyze_bytes(_log(*head, "/src/llama.cpp/src/llama-context.cpp:1785: GGML_ASSERT(n_tokens_all <= "
                                     "cparams.n_batch) failed"))
    [crash] = facts.events("crash")
    assert crash.phase is None and crash.data["placed_after"] == "compute"
    report = diagnose(facts, load_rulebase(None), command="analyze", mode="analyze")
    finding = next(f for f in report.findings if f.cls == "engine.crash")
    assert "the compute buffers had been reserved" in finding.message


def test_a_saved_report_keeps_the_lines_that_placed_an_event() -> None:
    from doctor.core.facts import Facts

    facts = analyze_bytes(_log(*RUNTIME[:_line(RUNTIME, "KV self size")], *CUDA_OOM))
    [oom] = Facts.from_json(facts.to_json()).events("oom")
    assert oom.placed_by == facts.events("oom")[0].placed_by and oom.placed_by


def test_an_oom_right_after_a_launch_is_the_loads() -> None:
    # the launch and the error as a user pasted them (vllm-project/vllm#188): nothing was placed in between
    launch = ("python -u -m vllm.entrypoints.openai.api_server --host 0.0.0.0 --model mistralai/Mistral-7B-v0.1 "
              "--dtype half --gpu-memory-utilization 0.8  --max-model-len 4096")
    oom = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB (GPU 0; 10.73 GiB total "
           "capacity; 9.85 GiB already allocated; 46.44 MiB free; 9.86 GiB reserved in total by PyTorch)")
    facts = analyze_bytes(_log(launch, "", oom))
    [event] = facts.events("oom")
    assert (event.phase, event.data["placed_after"]) == ("weights", "load")
    assert [n for n, _ in event.placed_by] == [1]
    report = diagnose(facts, load_rulebase(None), command="analyze", mode="analyze")
    assert report.findings[0].cls == "oom.weights"  # no longer "a step the log does not show" (runtime)


def test_a_cuda_oom_in_a_graph_time_function_is_compute_time() -> None:
    # ggml-cuda.cu's error block, as a terminal or a journal joins it onto one line: the pool's alloc runs only
    # when a graph is computed, so the OOM is no weights' even with no start-up line before it
    block = ("CUDA error: out of memory current device: 0, in function alloc at ggml/src/ggml-cuda/ggml-cuda.cu:445 "
             "cudaMalloc((void **) &ptr, look_ahead_size)")
    [event] = analyze_bytes(_log(block)).events("oom")
    assert (event.phase, event.data["step"]) == ("compute", "compute_graph")
    # in a request (the fixture's lines up to its prompt), the timeline's serving step is what it names
    facts = analyze_bytes(_log(*RUNTIME[:_line(RUNTIME, "prompt processing progress")], *CUDA_OOM))
    [event] = facts.events("oom")
    assert event.phase == "runtime"
