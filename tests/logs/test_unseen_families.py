"""The families of messages behind the corpus cases llm-doctor once misread (issue 27), each built from
the engine's own format strings with other values than any corpus excerpt, in more than one era or
phrasing where the engine has several.

Sources of the strings: vLLM vllm/worker/worker.py (total_gpu_memory x gpu_memory_utilization),
vllm/worker/model_runner.py capture_model, vllm/v1/metrics/loggers.py (Running: %d reqs, Waiting:
%d reqs), vllm/v1/core/kv_cache_utils.py (GPU KV cache size: %s tokens), vllm/config (Using max model
len %s); Ollama llm/server.go / llm/memory.go (offload to cuda, starting llama server), discover
(inference compute), cmd/interactive.go (Set parameter '%s' to '%s') and the `ollama run --verbose`
block; TGI router/src/validation.rs (`max_new_tokens` must be <= {0}. Given: {1}) and the launcher's
env names, server/custom_kernels (CHECK_CUDA: #x " must be a CUDA tensor"); llama.cpp main of 2023
(main: build = N, ggml_init_cublas) and llama_model_default_params (n_gpu_layers 0 before b6325);
llama-cpp-python llama.py (Requested tokens exceed context window of %d, and with the count since
0.1.5x) and its completion dicts; text-generation-webui modules/text_generation.py (Output generated
in ...).
"""

from __future__ import annotations

import pytest

from doctor.core.report import Report
from doctor.judge.evaluate import diagnose
from doctor.judge.rulebase import load_rulebase
from doctor.sources.logs.entry import analyze_bytes


def judge(text: str) -> Report:
    facts = analyze_bytes(text.encode(), "pasted log")
    return diagnose(facts, load_rulebase(None), command="analyze", mode="analyze")


def leading(report: Report) -> str | None:
    return report.assessment.cls if report.assessment else None


def serious(report: Report) -> list[str]:
    return [f"{f.id} {f.cls}" for f in report.findings if f.severity in ("error", "warning")]


# -- vLLM: CUDA graphs with no room outside gpu_memory_utilization ----------------------------------------

V0_BUDGET = ("INFO 11-02 08:14:55 worker.py:267] the current vLLM instance can use "
             "total_gpu_memory (79.15GiB) x gpu_memory_utilization ({gmu}) = {budget}GiB\n")
V0_CAPTURE = ("INFO 11-02 08:15:20 model_runner.py:1442] Capturing cudagraphs for decoding. This may lead to "
              "unexpected consequences if the model is not static. To run the model in eager mode, set "
              "'enforce_eager=True' or use '--enforce-eager' in the CLI.\n")
TORCH_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity "
             "of 79.15 GiB of which 6.31 MiB is free.\n")


@pytest.mark.parametrize(("gmu", "budget"), [("0.97", "76.78"), ("0.99", "78.36")])
def test_graph_capture_oom_with_the_budget_at_the_top_is_compute(gmu: str, budget: str) -> None:
    report = judge(V0_BUDGET.format(gmu=gmu, budget=budget) + V0_CAPTURE + TORCH_OOM)
    assert leading(report) == "oom.compute"
    fix = report.findings[0].fix.by_engine.get("vllm", "")
    assert "--gpu-memory-utilization" in fix


def test_graph_capture_oom_at_the_default_budget_stays_concurrency() -> None:
    report = judge(V0_BUDGET.format(gmu="0.9", budget="71.24") + V0_CAPTURE + TORCH_OOM)
    assert leading(report) == "oom.concurrency"


# -- vLLM: a KV pool smaller than max_model_len, the long request waits for ever ---------------------------

def test_request_beyond_the_kv_pool_waits_for_ever() -> None:
    text = ("INFO 05-02 10:00:01 [model.py:1510] Using max model len 131072\n"
            "INFO 05-02 10:01:40 [kv_cache_utils.py:1087] GPU KV cache size: 52,384 tokens\n"
            "INFO 05-02 10:01:40 [kv_cache_utils.py:1091] Maximum concurrency for 131,072 tokens per request: 0.40x\n"
            "INFO 05-02 10:09:12 [loggers.py:127] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
            "throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 3 reqs, GPU KV cache usage: 0.0%, Prefix cache hit "
            "rate: 0.0%\n")
    report = judge(text)
    assert leading(report) == "context.overflow"
    assert "--max-model-len" in report.findings[0].fix.by_engine.get("vllm", "")


def test_a_start_up_refusal_stays_a_kv_pool_problem() -> None:
    text = ("ValueError: The model's max seq len (65536) is larger than the maximum number of tokens that can be "
            "stored in KV cache (20992). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
            "initializing the engine.\n")
    assert leading(judge(text)) == "oom.kv_cache"


# -- Ollama ------------------------------------------------------------------------------------------------

def test_ollama_kv_estimate_beyond_memory_and_context_creation_failed() -> None:
    text = ('Error: llama runner process has terminated: error:failed to create context with model '
            "'/usr/share/ollama/.ollama/models/blobs/sha256-0a1b2c'\n"
            'time=2024-09-01T10:00:00.000Z level=INFO source=memory.go:309 msg="offload to cuda" layers.requested=-1 '
            'layers.model=41 layers.offload=0 layers.split="" memory.available="[7.2 GiB]" '
            'memory.required.full="52.1 GiB" memory.required.partial="0 B" memory.required.kv="40.0 GiB" '
            'memory.required.allocations="[0 B]" memory.weights.total="48.3 GiB"\n')
    report = judge(text)
    assert leading(report) == "oom.kv_cache"
    fix = report.findings[0].fix.by_engine.get("ollama", "")
    assert "num_ctx" in fix and "OLLAMA_NUM_PARALLEL" in fix


VERBOSE = ("total duration:       {total}\nload duration:        12.1ms\nprompt eval count:    21 token(s)\n"
           "prompt eval duration: {pdur}\nprompt eval rate:     {prate} tokens/s\neval count:           {n} token(s)\n"
           "eval duration:        {edur}\neval rate:            {rate} tokens/s\n")


def test_ollama_decode_collapses_after_num_thread_is_set() -> None:
    text = (VERBOSE.format(total="3.1s", pdur="40ms", prate="525.00", n=180, edur="2.9s", rate="62.07")
            + "\n>>> /set parameter num_thread 72\nSet parameter 'num_thread' to '72'\n"
            + VERBOSE.format(total="9m12s", pdur="31.2s", prate="0.67", n=150, edur="8m40s", rate="0.29"))
    report = judge(text)
    assert leading(report) == "cpu.threads"
    assert "num_thread" in report.findings[0].fix.by_engine.get("ollama", "")


def test_ollama_steady_verbose_runs_stay_clean() -> None:
    text = (VERBOSE.format(total="3.1s", pdur="40ms", prate="525.00", n=180, edur="2.9s", rate="62.07")
            + VERBOSE.format(total="3.3s", pdur="44ms", prate="477.27", n=190, edur="3.1s", rate="61.29"))
    assert serious(judge(text)) == []


def test_ollama_fits_fewer_layers_when_other_programs_hold_vram() -> None:
    text = ('time=2025-08-02T09:00:00.000Z level=INFO source=types.go:130 msg="inference compute" '
            'id=GPU-11111111-2222-3333-4444-555555555555 library=cuda variant=v12 compute=8.6 driver=12.8 '
            'name="NVIDIA RTX A6000" total="47.5 GiB" available="21.3 GiB"\n'
            'time=2025-08-02T09:00:05.000Z level=INFO source=server.go:438 msg="starting llama server" '
            'cmd="/usr/local/bin/ollama runner --model /root/.ollama/models/blobs/sha256-abcdef --ctx-size 4096 '
            '--batch-size 512 --n-gpu-layers 31 --threads 12 --parallel 1 --port 41234"\n')
    report = judge(text)
    assert leading(report) == "offload.partial"
    assert "nvidia-smi" in report.findings[0].fix.by_engine.get("ollama", "")


# -- TGI ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("settings", ["MAX_INPUT_LENGTH: 8190\nMAX_TOTAL_TOKENS: 8192\n",
                                      "MAX_INPUT_TOKENS=8190\nMAX_TOTAL_TOKENS=8192\n"])
@pytest.mark.parametrize("reply", ["`max_new_tokens` must be <= 2", "`max_new_tokens` must be <= 2. Given: 512"])
def test_tgi_input_limit_leaves_no_room_to_generate(settings: str, reply: str) -> None:
    report = judge(settings + "\n" + reply + "\n")
    assert leading(report) == "context.overflow"


def test_tgi_custom_cuda_kernels_without_a_gpu() -> None:
    text = ('{"error":"Request failed during generation: Server error: query_states must be a CUDA tensor",'
            '"error_type":"generation"}\n'
            "2023-08-14T09:12:44.100000Z ERROR text_generation_launcher: Method Prefill encountered an error.\n")
    report = judge(text)
    assert report.findings and report.findings[0].severity in ("error", "warning")
    assert "--disable-custom-kernels" in " ".join(f.fix.by_engine.get("tgi", "") + f.fix.text
                                                   for f in report.findings)


# -- llama.cpp: a GPU build run without -ngl, when the default was 0 layers ---------------------------------

OLD_MAIN = ("$ ./main -m models/13B/ggml-model-q5_0.bin -p \"Hello\" -n 64 -t 8\n"
            "main: build = {build} (abc1234)\nmain: seed  = 1690000000\n"
            "ggml_init_cublas: found 2 CUDA devices:\n  Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6\n"
            "  Device 1: NVIDIA GeForce RTX 3090, compute capability 8.6\n"
            "llama.cpp: loading model from models/13B/ggml-model-q5_0.bin\n")


def test_cuda_build_without_ngl_runs_on_the_cpu() -> None:
    report = judge(OLD_MAIN.format(build=1120))
    assert leading(report) == "offload.none"
    assert "-ngl" in report.findings[0].fix.by_engine.get("llama.cpp", "")


def test_ngl_on_the_command_line_is_not_flagged() -> None:
    text = OLD_MAIN.format(build=1120).replace("-t 8", "-t 8 -ngl 43")
    assert "offload.none" not in " ".join(serious(judge(text)))


def test_builds_that_offload_by_default_are_not_flagged() -> None:
    text = ("$ ./build/bin/llama-cli -m models/qwen3-8b-q4_k_m.gguf -p hi\nbuild: 6512 (1a2b3c4d) with cc for x86_64\n"
            "ggml_cuda_init: found 1 CUDA devices:\n  Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9, "
            "VMM: yes\n")
    assert "offload.none" not in " ".join(serious(judge(text)))


# -- client-side limits ------------------------------------------------------------------------------------

def test_every_reply_cut_at_the_same_budget_is_a_client_limit() -> None:
    text = "\n".join(
        f'{{"id": "cmpl-{i}", "object": "text_completion", "choices": [{{"text": "...", "index": 0, '
        f'"logprobs": null, "finish_reason": "length"}}], "usage": {{"prompt_tokens": {p}, "completion_tokens": 32, '
        f'"total_tokens": {p + 32}}}}}' for i, p in enumerate((410, 1733, 96)))
    report = judge(text)
    assert leading(report) == "context.overflow"
    assert "max_tokens" in report.findings[0].message


def test_pretty_printed_replies_are_paired_with_their_usage() -> None:
    block = ('  "choices": [\n    {{\n      "index": 0,\n      "finish_reason": "length"\n    }}\n  ],\n'
             '  "usage": {{\n    "prompt_tokens": {p},\n    "completion_tokens": 16,\n    "total_tokens": {t}\n  }}\n')
    report = judge("{\n" + block.format(p=812, t=828) + "}\n{\n" + block.format(p=57, t=73) + "}\n")
    assert leading(report) == "context.overflow"


def test_replies_that_stop_on_their_own_are_clean() -> None:
    text = "\n".join(f"{{'finish_reason': 'stop'}}], 'usage': {{'prompt_tokens': {p}, 'completion_tokens': {c}, "
                     f"'total_tokens': {p + c}}}}}" for p, c in ((300, 41), (1200, 230)))
    assert serious(judge(text)) == []


@pytest.mark.parametrize("error", ["ValueError: Requested tokens exceed context window of 4096",
                                   "ValueError: Requested tokens (4196) exceed context window of 4096"])
def test_front_end_reply_budget_over_the_context(error: str) -> None:
    text = ('  File "/srv/text-generation-webui/modules/llamacpp_model.py", line 102, in generate\n'
            f"{error}\nOutput generated in 0.02 seconds (0.00 tokens/s, 0 tokens, context 196, seed 1234)\n")
    report = judge(text)
    assert leading(report) == "context.overflow"
    words = report.findings[0].message + report.findings[0].fix.text
    assert "max_new_tokens" in words
