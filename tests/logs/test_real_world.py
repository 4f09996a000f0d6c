"""Logs as users paste them: the families of messages the real-log corpus showed llm-doctor misread.

Each kind is covered by at least two versions or phrasings, built from the engines' own strings
(fixtures/logs/<engine>/README.md cites the source of each line): OOM by phase in Ollama's runner,
vLLM's warm-up and KV blocks, TGI's warm-up and shard loading, GPU backends that fail for a driver
reason, Metal's working set, slow storage named by the model path, a CPU-only llama-cpp-python wheel
asked for GPU layers, and messages found without their prefixes (journald, docker, quoted in prose,
a reversed log viewer). Each case names the finding that must lead, its class, the lines it must
cite and a piece of the fix for the engine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.core.path_storage import path_storage
from doctor.judge.evaluate import diagnose
from doctor.sources.engines._ggml.gpu_failures import gpu_failure_cause
from doctor.sources.logs.entry import analyze_bytes

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"

CASES = [
    # file, leading rule, class, lines that must be cited, text the fix for the engine must contain
    # Ollama's runner OOM, placed by what its estimate covered
    ("ollama/runner-cublas-oom-v0.5.13.log", "LD356", "oom.compute", [28, 43], "num_gpu 36"),
    ("ollama/runner-cublas-not-initialized-v0.5.7-journald.log", "LD356", "oom.compute", [70], "num_gpu 29"),
    ("ollama/runner-oom-weights-only-estimate-v0.1.17.log", "LD355", "oom.kv_cache", [9], "num_ctx"),
    ("ollama/runner-oom-large-num-ctx-v0.5.7.log", "LD360", "oom.kv_cache", [70], "num_ctx 4096"),
    ("ollama/image-encode-oom-v0.5.7.log", "LD357", "oom.runtime", [76], "num_gpu"),
    ("ollama/compute-graph-over-gpu-v0.12.11.log", "LD358", "oom.compute", [17], "num_ctx"),
    # Ollama's load rate from its debug progress lines
    ("ollama/slow-load-progress-v0.5.7-debug.log", "LD101", "io.slow_load", [], "OLLAMA_MODELS"),
    # GPU backends that did not start, by cause
    ("ollama/gpu-unknown-999-v0.9.6.log", "LD521", "offload.none", [3], "modprobe nvidia_uvm"),
    ("llama.cpp/cuda-unknown-error-999.log", "LD521", "offload.none", [1], "modprobe nvidia_uvm"),
    ("ollama/gpu-driver-mismatch-v0.9.6.log", "LD522", "offload.none", [3], "update the NVIDIA driver"),
    ("llama.cpp/cuda-driver-too-old.log", "LD522", "offload.none", [1], "update the driver"),
    ("llama.cpp/cuda-forward-compat.log", "LD522", "offload.none", [1], "update the driver"),
    ("llama.cpp/cuda-ptx-toolchain.log", "LD522", "offload.none", [7], "update the driver"),
    # allocation failures that explain the abort after them
    ("llama.cpp/cublas-alloc-failed.log", "LD303", "oom.compute", [6], "-ub 256"),
    ("llama.cpp/metal-working-set-exceeded.log", "LD361", "oom.weights", [9], "fewer layers with -ngl"),
    ("llama.cpp/metal-working-set-numbers-only.log", "LD361", "oom.weights", [3], "iogpu.wired_limit_mb"),
    # storage the path gives away
    ("llama.cpp/wsl-windows-drive-model.log", "LD104", "io.slow_load", [2], "~/models"),
    # vLLM: KV blocks x block size against max_seq_len; warm-up for max_num_seqs
    ("vllm/kv-blocks-below-max-seq-len-v0.2.7.log", "LD350", "oom.kv_cache", [1, 2], "--max-model-len 16640"),
    ("vllm/kv-blocks-below-max-len-block-size-v0.4.2.log", "LD350", "oom.kv_cache", [4], "--max-model-len 11776"),
    ("vllm/cuda-graphs-oom-v0.3.3.log", "LD353", "oom.concurrency", [5], "--max-num-seqs"),
    ("vllm/sampler-warmup-oom-v0.8.5.log", "LD353", "oom.concurrency", [7], "--max-num-seqs"),
    # TGI: warm-up behind docker compose; a shard OOM while loading is not a corrupt model
    ("tgi/warmup-prefill-docker-v2.3.log", "LD352", "oom.compute", [4], "--max-batch-prefill-tokens 4096"),
    ("tgi/shard-oom-loading-v1.4.log", "LD301", "oom.weights", [11], "--num-shard with more GPUs than 2"),
]


@pytest.mark.parametrize(("name", "rule", "cls", "lines", "fix"), CASES, ids=[c[0] for c in CASES])
def test_root_cause(analyze, name: str, rule: str, cls: str, lines: list[int], fix: str) -> None:
    report = analyze(LOGS / name)
    assert report.assessment is not None, [f.id for f in report.findings]
    assert (report.assessment.id, report.assessment.cls) == (rule, cls), [(f.id, f.cls) for f in report.findings]
    finding = next(f for f in report.findings if f.id == rule)
    for line in lines:
        assert line in finding.lines, (line, finding.lines)
    assert finding.fix.command is not None and fix in finding.fix.command, finding.fix.command
    assert not any(f.cls in ("model.corrupt", "engine.crash") for f in report.findings), \
        "an allocation failure or a GPU that did not start explains the abort; it is not a corrupt model or a crash"


def _report(rulebase, text: str):
    facts = analyze_bytes(text.encode(), "paste")
    return diagnose(facts, rulebase, command="analyze", mode="analyze")


def test_ollama_oom_numbers(analyze) -> None:
    """The numbers behind the findings: the layers Ollama chose, the graph against the GPU, the load rate."""
    cublas = analyze(LOGS / "ollama/runner-cublas-oom-v0.5.13.log")
    oom = next(e for e in cublas.facts.events("oom") if e.source == "ollama")
    assert (oom.phase, oom.data["offloaded"], oom.data["suggest_num_gpu"]) == ("compute", 41, 36)
    graph = analyze(LOGS / "ollama/compute-graph-over-gpu-v0.12.11.log").facts
    assert graph.value("server.ollama.graph_gpu_max_bytes") == int(31.4 * (1 << 30))
    assert graph.value("server.ollama.gpu_vram_max") < graph.value("server.ollama.graph_gpu_max_bytes")
    slow = analyze(LOGS / "ollama/slow-load-progress-v0.5.7-debug.log")
    rate = slow.facts.value("run.load_mb_s")
    # 0.95 of the model (print_info file size) in 36 s between the first and the last progress line
    size = slow.facts.value("model.file_bytes")
    assert rate == pytest.approx(0.95 * size / 36.006 / 1e6, rel=0.01)
    assert f"({round(rate)} MB/s)" in next(f for f in slow.findings if f.id == "LD101").message


def test_healthy_ollama_is_not_an_oom(analyze) -> None:
    """The same head without the failure: no runner OOM, no finding at warning or above."""
    report = analyze(LOGS / "ollama/healthy-v0.5.7-journald.log")
    assert not report.facts.events("oom")
    assert not report.fails("warning"), [(f.id, f.message) for f in report.findings]


# -- messages recognised wherever they stand -----------------------------------------------------------
PREFILL = "Not enough memory to handle 4096 prefill tokens. You need to decrease `--max-batch-prefill-tokens`"


@pytest.mark.parametrize("text", [
    PREFILL,  # the message on its own line
    PREFILL[0].lower() + PREFILL[1:],  # quoted back lower-cased (as a maintainer did)
    f'Error: Warmup(Generation("{PREFILL}"))',  # the launcher's final error
    f"I start it with --max-input-length 4000 and get `{PREFILL}`, any idea?",  # quoted in prose
    f"> {PREFILL}",  # a markdown quote
    f"tgi-1  | 2024-09-18T07:41:33.507221Z ERROR text_generation_launcher: {PREFILL}",  # docker compose
])
def test_tgi_warmup_message_anywhere(rulebase, text: str) -> None:
    report = _report(rulebase, text + "\n")
    assert report.assessment is not None and report.assessment.id == "LD352", [f.id for f in report.findings]
    assert "--max-batch-prefill-tokens 2048" in (report.findings[0].fix.by_engine["tgi"])


def test_vllm_error_above_its_log_is_placed_by_the_steps_below(rulebase) -> None:
    """A log viewer that lists the newest line first: the OOM stands above the start-up it ended."""
    lines = (LOGS / "vllm/cuda-graphs-oom-v0.3.3.log").read_text().splitlines()
    report = _report(rulebase, "\n".join(reversed(lines)) + "\n")
    assert report.assessment is not None and report.assessment.cls == "oom.concurrency"
    # and the same OOM alone, with nothing to place it, stays unplaced (not guessed)
    alone = _report(rulebase, lines[-1] + "\n")
    assert alone.assessment is not None and alone.assessment.id == "LD359"


@pytest.mark.parametrize("prefix", ["", "Jan 16 04:28:14 gpu-box ollama[1532]: ", "ollama-1  | "])
def test_ollama_discovery_999_behind_any_prefix(rulebase, prefix: str) -> None:
    text = (f'{prefix}time=2024-09-05T09:20:35.622+08:00 level=DEBUG source=gpu.go:521 msg="discovered GPU libraries" '
            'paths="[/usr/lib/ollama/cuda_v12/libcudart.so.12.4.127]"\n'
            f"{prefix}cudaSetDevice err: 999\n"
            f'{prefix}time=2024-09-05T09:20:35.624+08:00 level=DEBUG source=gpu.go:533 msg="Unable to load cudart" '
            'library=/usr/lib/ollama/cuda_v12/libcudart.so.12.4.127 error="cudart init failure: 999"\n')
    report = _report(rulebase, text)
    assert report.assessment is not None and report.assessment.id == "LD521"
    assert report.engine == "ollama"


def test_discovery_failure_then_a_gpu_found_is_not_a_finding(rulebase) -> None:
    """One library failing while another finds the GPU (Ollama tries several) is not offload.none."""
    text = ('time=2024-09-05T09:20:35.624+08:00 level=DEBUG source=gpu.go:533 msg="Unable to load cudart" '
            'library=/tmp/ollama1/runners/cuda_v11/libcudart.so.11.0 error="cudart init failure: 35"\n'
            'time=2024-09-05T09:20:35.900+08:00 level=INFO source=types.go:105 msg="inference compute" '
            'id=GPU-1 library=cuda variant=v12 compute=8.6 driver=12.4 name="NVIDIA GeForce RTX 3060" '
            'total="11.8 GiB" available="11.0 GiB"\n')
    report = _report(rulebase, text)
    assert not report.facts.events("gpu_init_failed")
    assert not report.fails("warning")


# -- a CPU-only llama-cpp-python wheel asked for GPU layers --------------------------------------------------
@pytest.mark.parametrize("settings", [
    'llm = Llama(model_path="/models/llama-2-7b.Q4_K_M.gguf", n_gpu_layers=-1, n_ctx=4096)',
    "llm = LlamaCpp(model_path=MODEL, n_gpu_layers=40, n_batch=512, verbose=True)",
])
def test_cpu_only_wheel_with_gpu_layers(rulebase, settings: str) -> None:
    log = (LOGS / "llama-cpp-python" / "healthy.log").read_text()  # real output of a CPU build
    report = _report(rulebase, settings + "\n" + log)
    assert report.assessment is not None and report.assessment.id == "LD501", [f.id for f in report.findings]
    finding = report.findings[0]
    assert 1 in finding.lines  # the pasted setting is cited
    assert 'CMAKE_ARGS="-DGGML_CUDA=on"' in finding.fix.by_engine["llama-cpp-python"]


def test_cpu_only_wheel_without_gpu_layers_is_clean(rulebase) -> None:
    report = _report(rulebase, (LOGS / "llama-cpp-python" / "healthy.log").read_text())
    assert report.facts.value("engine.gpu_offload_supported") is False
    assert not report.fails("warning"), [(f.id, f.message) for f in report.findings]


# -- the pure helpers ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "cause", "code"), [
    ("cudart init failure: 999", "unknown", "999"),
    ("cudaSetDevice err: 999", "unknown", "999"),
    ("cuda driver library init failure: 35", "driver_old", "35"),
    ("ggml_cuda_init: failed to initialize CUDA: CUDA driver version is insufficient for CUDA runtime version",
     "driver_old", None),
    ("CUDA error: the provided PTX was compiled with an unsupported toolchain.", "driver_old", None),
    ("ggml_cuda_init: failed to initialize CUDA: forward compatibility was attempted on non supported HW",
     "forward_compat", None),
    ("ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected", "no_device", None),
    ("ggml_cuda_init: failed to initialize CUDA: unknown error", "unknown", None),
    ("cudart init failure: 46", "other", "46"),
])
def test_gpu_failure_causes(text: str, cause: str, code: str | None) -> None:
    assert gpu_failure_cause(text) == (cause, code)


@pytest.mark.parametrize(("path", "kind"), [
    ("/mnt/e/LLaMA/models/ggml-vic13b-q4_3.bin", "wsl-drvfs"),
    ("/mnt/c/Users/me/.ollama/models/blobs/sha256-6a0746a1ec1a", "wsl-drvfs"),
    (r"\\nas01\models\llama.gguf", "network"),
    ("//nas01/models/llama.gguf", "network"),
    ("/mnt/nfs/models/llama.gguf", "network"),
    ("/runpod-volume/models/Llama-3-8B", "network"),
    ("/content/drive/MyDrive/models/mistral.gguf", "fuse"),
    ("/run/user/1000/gvfs/smb-share:server=nas,share=models/x.gguf", "fuse"),
    ("/home/me/models/llama.gguf", None),
    ("/mnt/data/models/llama.gguf", None),
])
def test_path_storage(path: str, kind: str | None) -> None:
    found = path_storage(path)
    assert (found[0] if found else None) == kind


# -- output pasted with its settings ---------------------------------------------------------------------------
PARAGRAPH = "The keeper climbed the stairs every evening to light the lamp. The sea was calm and the gulls were quiet."


@pytest.mark.parametrize("settings", [
    'output = llm("Write a short story about a lighthouse keeper.", max_tokens=512, temperature=0)',
    'curl http://localhost:11434/api/generate -d \'{"model": "llama3", "prompt": "Write a story", '
    '"options": {"temperature": 0, "num_ctx": 4096}}\'',
    "outputs = model.generate(**inputs, max_new_tokens=512, do_sample=False)",
])
def test_repeated_paragraph_beside_greedy_settings(rulebase, settings: str) -> None:
    text = f"I run it like this:\n\n    {settings}\n\nand get:\n\n" + "\n".join([PARAGRAPH] * 5) + "\n"
    report = _report(rulebase, text)
    assert report.assessment is not None and report.assessment.cls == "sampling.repetition", \
        [(f.id, f.cls) for f in report.findings]
    assert report.assessment.confidence == "high"
    assert report.facts.value("sampling.temperature") == 0


def test_greedy_requests_in_a_server_log_are_not_output(rulebase) -> None:
    """A vLLM request log with temperature=0.0 and the same access line over and over is not a loop."""
    lines = []
    for i in range(6):
        lines.append(f"INFO 05-22 02:21:0{i} logger.py:39] Received request cmpl-{i}: prompt: 'Hi', params: "
                     "SamplingParams(n=1, temperature=0.0, top_p=1.0, top_k=-1, max_tokens=16), "
                     "prompt_token_ids: [1, 2], lora_request: None.")
        lines.append('INFO:     127.0.0.1:51234 - "POST /v1/completions HTTP/1.1" 200 OK')
    report = _report(rulebase, "\n".join(lines) + "\n")
    assert not report.facts.has("run.output_text") or report.facts.value("run.output_repetition") == 0
    assert not any(f.cls == "sampling.repetition" and f.severity != "info" for f in report.findings)


# -- messages wrapped by a terminal (mid-word, at 80 columns) or a web page (at a space) ------------------------
WRAPPED = [
    ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored "
     "in KV cache (16816). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
     "the engine.", "LD350"),
    ("Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: 3474 `inputs` tokens and "
     "60 `max_new_tokens`", "LD201"),
    ("srv    send_error: task id = 983, error: request (8283 tokens) exceeds the available context size (2048 tokens), "
     "try increasing it", "LD201"),
    ('time=2024-12-14T18:01:09.338Z level=WARN source=runner.go:129 msg="truncating input prompt" limit=2048 '
     "prompt=3858 keep=5 new=2048", "LD252"),
]


@pytest.mark.parametrize(("message", "rule"), WRAPPED, ids=["vllm", "tgi", "llama-server", "ollama"])
@pytest.mark.parametrize("how", ["terminal-80", "words-72"])
def test_wrapped_messages(rulebase, message: str, rule: str, how: str) -> None:
    import textwrap

    if how == "terminal-80":
        text = "\n".join(message[i:i + 80] for i in range(0, len(message), 80))
    else:
        text = "\n".join(textwrap.wrap(message, 72))
    for ending in ("", "\n"):  # pasted without the final newline, too
        report = _report(rulebase, text + ending)
        assert report.assessment is not None and report.assessment.id == rule, (how, [f.id for f in report.findings])


# -- a runner started with more threads than the container's CPU limit --------------------------------------------
def test_ollama_threads_above_docker_cpus(rulebase) -> None:
    log = (LOGS / "ollama/healthy-v0.5.7-journald.log").read_text().replace("--threads 8", "--threads 16")
    text = "docker run -d --gpus=all --cpus=4 -v ollama:/root/.ollama -p 11434:11434 ollama/ollama\n" + log
    report = _report(rulebase, text)
    assert report.assessment is not None and report.assessment.cls == "cpu.threads", [f.id for f in report.findings]
    finding = report.findings[0]
    assert {1, 14} <= set(finding.lines), finding.lines  # the --cpus line and the runner's --threads
    assert "num_thread 4" in finding.fix.by_engine["ollama"]


def test_llama_server_threads_above_compose_cpuset(rulebase) -> None:
    text = ("    command: llama-server -m /models/qwen2.5-7b-instruct-q4_k_m.gguf -t 16 --port 8080\n"
            "    cpuset: \"0-3\"\n"
            "    entrypoint: docker run --cpuset-cpus=0-3 ghcr.io/ggml-org/llama.cpp:server\n"
            "system_info: n_threads = 16 (n_threads_batch = 16) / 32 | CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | "
            "AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |\n"
            "main: server is listening on http://127.0.0.1:8080 - starting the main loop\n")
    report = _report(rulebase, text)
    assert report.facts.value("host.cpu.usable_cores") == 4
    assert report.assessment is not None and report.assessment.cls == "cpu.threads", [f.id for f in report.findings]
    assert "-t 4" in report.findings[0].fix.by_engine["llama.cpp"]


def test_ollama_system_info_names_its_gpu_backend(rulebase) -> None:
    """Ollama quotes the runner's system info (info="CUDA : ARCHS = ... | CPU : ..."): a CUDA build, not CPU-only."""
    head = "\n".join((LOGS / "ollama/healthy-v0.5.7-journald.log").read_text().splitlines()[:20]) + "\n"
    report = _report(rulebase, head)
    assert report.facts.value("engine.gpu_offload_supported") is True
    assert not any(f.cls == "offload.none" for f in report.findings)
