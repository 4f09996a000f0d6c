"""Thin pastes read for what they say: a launch command alone (doctor/sources/logs/launch.py), the system-info
line alone, and the confidence a finding from so little carries (doctor/derive/thin.py, the judge's cap).

Commands use the engines' own flags (llama.cpp common/arg.cpp: `-c`, `-t`, `-ngl`, `-fa [on|off|auto]` and the
bare `-fa` of 2024, `-cram`, `-ctk`, `--no-mmap`; vLLM's EngineArgs: `--max-model-len`, `-tp`,
`--gpu-memory-utilization`; SGLang's ServerArgs: `--context-length`, `--tp`; TGI's launcher: `--max-total-tokens`,
`--num-shard`; Ollama's envconfig: OLLAMA_CONTEXT_LENGTH), docker run's options (`--gpus`, `--runtime`,
`--device`, `-e`, `--cpus`) and the published images (ghcr.io/ggml-org/llama.cpp:server-cuda, vllm/vllm-openai,
ollama/ollama, lmsysorg/sglang); the system-info line is llama.cpp's common/common.cpp format
(`system_info: n_threads = %d / %d | %s`).
"""

from __future__ import annotations

import pytest

from doctor.core.report import Report
from doctor.judge.evaluate import diagnose
from doctor.judge.rulebase import load_rulebase
from doctor.sources.logs.entry import analyze_bytes

CUDA_IMAGE = ("$ docker run -p 8080:8080 -v /models:/models ghcr.io/ggml-org/llama.cpp:server-cuda-b4100 \\\n"
              "    -m /models/Qwen2.5-14B-Instruct-Q4_K_M.gguf -c 16384 --host 0.0.0.0 -t 16\n")


def judge(text: str) -> Report:
    return diagnose(analyze_bytes(text.encode(), "pasted"), load_rulebase(None), command="analyze", mode="analyze")


def values(text: str, *names: str) -> dict[str, object]:
    facts = analyze_bytes(text.encode())
    return {name: facts.value(name) for name in names}


def test_a_cuda_image_started_without_gpus_is_named_with_low_confidence() -> None:
    report = judge(CUDA_IMAGE)
    assert report.assessment is not None and report.assessment.id == "LD509"
    assert report.assessment.cls == "offload.none" and report.assessment.confidence == "low"
    lead = next(f for f in report.findings if f.id == "LD509")
    assert "Only a launch command was pasted" in lead.message and "start-up lines" in lead.message
    assert "--gpus all" in lead.fix.text
    assert not [f for f in report.findings if f.id == "LD508"]  # no GPU at all explains no GPU layers


def test_the_continued_command_is_read_whole() -> None:
    got = values(CUDA_IMAGE, "config.n_ctx", "config.n_threads", "engine.build", "config.n_gpu_layers",
                 "engine.launch_family", "config.container_gpus")
    assert got == {"config.n_ctx": 16384, "config.n_threads": 16, "engine.build": 4100,
                   "config.n_gpu_layers": 0,  # no -ngl before b6325: no GPU layers
                   "engine.launch_family": "llama.cpp", "config.container_gpus": "none"}


def test_the_same_image_with_gpus_is_no_finding() -> None:
    text = CUDA_IMAGE.replace("docker run ", "docker run --gpus all ").replace("-t 16", "-t 16 -ngl 99")
    report = judge(text)
    assert "LD509" not in {f.id for f in report.findings}
    assert report.verdict() == "no_problems"
    assert "only a launch command" in report.verdict_text()


@pytest.mark.parametrize(("flags", "fact", "value"), [
    ("-fa", "config.flash_attn", "enabled"),  # the bare switch of 2024 builds
    ("-fa on", "config.flash_attn", "enabled"),
    ("--flash-attn off", "config.flash_attn", "disabled"),
    ("-cram 2048", "config.cache_ram", 2048 << 20),
    ("--no-mmap", "config.use_mmap", False),
    ("-ctk q8_0 -ctv q8_0", "config.type_v", "q8_0"),
    ("--n-gpu-layers=35", "config.n_gpu_layers", 35),
    ("-np 4", "config.n_parallel", 4),
])
def test_llama_cpp_flags_across_versions(flags: str, fact: str, value: object) -> None:
    assert values(f"./build/bin/llama-server -m model.gguf {flags} --port 8080\n", fact)[fact] == value


def test_the_old_program_names_need_a_model_flag() -> None:
    assert values("main: server is listening on http://127.0.0.1:8080\n", "engine.launch_family") == {
        "engine.launch_family": None}
    old = values("./main -m models/7B/ggml-model-q4_0.gguf -p 'Hello' -n 128\n", "engine.launch_family",
                 "config.n_gpu_layers")
    assert old == {"engine.launch_family": "llama.cpp", "config.n_gpu_layers": 0}


def test_vllm_sglang_tgi_and_ollama_commands() -> None:
    vllm = values("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768 -tp 2 "
                  "--gpu-memory-utilization 0.9\n", "config.max_model_len", "config.tensor_parallel_size",
                  "config.gpu_memory_utilization", "engine.name")
    assert vllm == {"config.max_model_len": 32768, "config.tensor_parallel_size": 2,
                    "config.gpu_memory_utilization": 0.9, "engine.name": "vllm"}
    sglang = values("python3 -m sglang.launch_server --model-path Qwen/Qwen2.5-7B-Instruct --context-length 8192 "
                    "--tp 2\n", "config.max_model_len", "config.tensor_parallel_size")
    assert sglang == {"config.max_model_len": 8192, "config.tensor_parallel_size": 2}
    tgi = values("text-generation-launcher --model-id bigscience/bloom-560m --max-total-tokens 4096 --num-shard 2\n",
                 "config.max_total_tokens", "config.num_shard")
    assert tgi == {"config.max_total_tokens": 4096, "config.num_shard": 2}
    ollama = values("docker run -d -v ollama:/root/.ollama -e OLLAMA_CONTEXT_LENGTH=8192 -p 11434:11434 "
                    "--name ollama ollama/ollama\n", "config.num_ctx", "config.container_gpus", "engine.backends")
    assert ollama == {"config.num_ctx": 8192, "config.container_gpus": "none", "engine.backends": ["CUDA"]}


def test_a_rocm_image_counts_its_devices_as_gpus() -> None:
    got = values("docker run -d --device /dev/kfd --device /dev/dri -v ollama:/root/.ollama -p 11434:11434 "
                 "ollama/ollama:rocm\n", "config.container_gpus", "engine.backends")
    assert got == {"config.container_gpus": "--device /dev/kfd; --device /dev/dri", "engine.backends": ["ROCm"]}


def test_threads_above_a_container_quota_from_the_command_alone() -> None:
    report = judge("docker run --gpus all --cpus 4 ghcr.io/ggml-org/llama.cpp:server-cuda -m /m/x.gguf -t 16 "
                   "-ngl 99\n")
    lead = next(f for f in report.findings if f.id == "LD511")
    assert lead.cls == "cpu.threads" and lead.confidence == "low"


def test_the_system_info_line_alone_caps_at_medium() -> None:
    report = judge("system_info: n_threads = 32 / 16 | AVX = 1 | AVX2 = 1 | AVX512 = 0 | FMA = 1 | NEON = 0 | "
                   "F16C = 1 | SSE3 = 1 | SSSE3 = 1 |\n")
    assert report.assessment is not None and report.assessment.id == "LD512"
    assert report.assessment.confidence == "medium"
    assert "Only llama.cpp's system-info line was pasted" in report.assessment.message


def test_a_command_beside_the_engines_own_lines_is_not_thin() -> None:
    text = ("./llama-server -m models/m.gguf -c 8192 -t 32\n"
            "system_info: n_threads = 32 / 16 | AVX = 1 | AVX2 = 1 | FMA = 1 | F16C = 1 | SSE3 = 1 |\n"
            "llama_model_loader: loaded meta data with 33 key-value pairs and 272 tensors from models/m.gguf "
            "(version GGUF V3 (latest))\n")
    report = judge(text)
    assert not report.facts.has("derived.input_thin")
    assert report.assessment is not None and report.assessment.confidence == "high"


# -- placement and limits from numbers: a Slurm job's CPUs, two sockets, `ollama ps` ---------------------------
# Slurm's sbatch(1) (#SBATCH --cpus-per-task=N, -c N; SLURM_CPUS_PER_TASK in the job's environment), util-linux
# lscpu (Socket(s):, Core(s) per socket:, NUMA node(s):, read by doctor/sources/logs/hostinfo.py), Ollama
# cmd/cmd.go ListRunningHandler (PROCESSOR "100% GPU" | "100% CPU" | "%d%%/%d%% CPU/GPU").

@pytest.mark.parametrize("job", ["#SBATCH --cpus-per-task=8", "#SBATCH -c 8", "SLURM_CPUS_PER_TASK=8",
                                 "srun --cpus-per-task=8 ./llama-cli -m m.gguf -t 32"])
def test_threads_above_a_slurm_jobs_cpus(job: str) -> None:
    report = judge(job + "\nsystem_info: n_threads = 32 / 128 | AVX = 1 | AVX2 = 1 | AVX512 = 1 | FMA = 1 | "
                   "F16C = 1 | SSE3 = 1 |\n")
    assert report.facts.value("host.cpu.usable_cores") == 8
    assert report.assessment is not None and report.assessment.id == "LD511"


LSCPU = ("Architecture:                         x86_64\nCPU(s):                               192\n"
         "Model name:                           AMD EPYC 9454 48-Core Processor\n"
         "Thread(s) per core:                   2\nCore(s) per socket:                   48\n"
         "Socket(s):                            2\nNUMA node(s):                         2\n")


def test_threads_over_two_sockets_without_numa() -> None:
    report = judge("$ ./llama-cli -m /models/m.gguf -t 96 -p hi\n\n$ lscpu\n" + LSCPU)
    assert report.facts.value("host.cpu.sockets") == 2 and report.facts.value("host.cpu.numa_nodes") == 2
    assert report.assessment is not None and report.assessment.id == "LD514"
    assert "-t 48" in next(f for f in report.findings if f.id == "LD514").fix.by_engine["llama.cpp"]
    report = judge("$ ./llama-cli -m /models/m.gguf -t 96 --numa distribute -p hi\n\n$ lscpu\n" + LSCPU)
    assert "LD514" not in {f.id for f in report.findings}


@pytest.mark.parametrize(("rows", "rule", "share"), [
    ("gpt-oss:120b    d98fe6ba01e6    99 GB    10%/90% CPU/GPU    8192       Forever", "LD556", 0.9),
    ("llama3:8b    365c0bd3c000    6.7 GB    100% CPU     4 minutes from now", "LD557", 0.0),
    ("qwen2.5:7b    845dbda0ea48    5.5 GB    100% GPU     4096    4 minutes from now", None, 1.0),
    ("     PROCESSOR              \n     33%/67%   CPU/GPU", "LD556", 0.67),  # the column alone
    # two models: the one least on the GPU is what matters
    ("qwen2.5:7b    845dbda0ea48    5.5 GB    100% GPU     4 minutes from now\n"
     "llama3:70b      be39eb53a197    41 GB   42%/58% CPU/GPU 4 minutes from now", "LD556", 0.58),
])
def test_ollama_ps_rows_say_where_the_model_sits(rows: str, rule: str | None, share: float) -> None:
    report = judge("NAME    ID    SIZE    PROCESSOR    CONTEXT    UNTIL\n" + rows + "\n")
    assert report.facts.value("run.gpu_share") == share
    leading = report.assessment.id if report.assessment else None
    assert leading == rule


def test_fit_moving_layers_to_the_cpu_is_partial_offload() -> None:
    """llama.cpp's --fit placement lines (src/llama.cpp llama_params_fit_impl, common/fit.cpp: "%s: projected to
    use %ld MiB of device memory vs. %ld MiB of free device memory", "%s:   - %s: %2u layers, %6ld MiB used, %6ld
    MiB free", with " (%2u overflowing)"): the last pass's layers per device."""
    text = ("llama_params_fit_impl: projected to use 31012 MiB of device memory vs. 23542 MiB of free device memory\n"
            "llama_params_fit_impl: cannot meet free memory target of 1024 MiB, need to reduce device memory by "
            "8494 MiB\n"
            "llama_params_fit_impl: filling dense layers back-to-front:\n"
            "llama_params_fit_impl:   - CUDA0: 52 layers,  22871 MiB used,    671 MiB free\n"
            "llama_params_fit_impl: converting dense-only layers to full layers and filling them front-to-back with "
            "overflow to next device/system memory:\n"
            "llama_params_fit_impl:   - CUDA0: 30 layers (12 overflowing),  22400 MiB used,   1142 MiB free\n"
            "llama_params_fit: successfully fit params to free device memory\n")
    report = judge(text)
    assert report.facts.value("run.fit_gpu_layers") == 30 and report.facts.value("run.fit_overflow_layers") == 12
    assert report.assessment is not None and report.assessment.id == "LD515"
    assert report.assessment.cls == "offload.partial" and report.assessment.confidence == "high"
    assert "--fit-target" in next(f for f in report.findings if f.id == "LD515").fix.by_engine["llama.cpp"]


@pytest.mark.parametrize(("line", "confidence"), [
    # Ollama v0.1.32 gpu/amd_linux.go: slog.Warn(fmt.Sprintf("amdgpu [%d] %s is not supported by %s %v", ...))
    ('time=2024-05-02T12:17:03.657Z level=WARN source=amd_linux.go:116 msg="amdgpu [0] gfx1036 is not supported by '
     '/tmp/ollama1234/rocm [gfx1030 gfx1100 gfx1101 gfx1102 gfx900 gfx906 gfx908 gfx90a gfx940 gfx941 gfx942]"',
     "high"),
    # discover/amd_linux.go since v0.1.35: slog.Warn("amdgpu is not supported", "gpu", ..., "gpu_type", gfx, ...)
    ('time=2024-11-02T08:00:01.000Z level=WARN source=amd_linux.go:389 msg="amdgpu is not supported" gpu=0 '
     'gpu_type=gfx1031 library=/usr/lib/ollama supported_types="[gfx1030 gfx1100 gfx1101 gfx1102]"', "high"),
    # scripts/install.sh: warning "No NVIDIA/AMD GPU detected. Ollama will run in CPU-only mode."
    (">>> The Ollama API is now available at 127.0.0.1:11434.\nWARNING: No NVIDIA/AMD GPU detected. Ollama will "
     "run in CPU-only mode.", "medium"),
])
def test_ollama_passing_over_the_gpu_is_named(line: str, confidence: str) -> None:
    report = judge(line + "\n")
    assert report.assessment is not None and report.assessment.id == "LD558"
    assert report.assessment.cls == "offload.none" and report.assessment.confidence == confidence
    assert "HSA_OVERRIDE_GFX_VERSION" in next(f for f in report.findings if f.id == "LD558").fix.by_engine["ollama"]
