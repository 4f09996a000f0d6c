"""The engine behind a wrapper, by evidence, and fixes in the words of what the user runs (issue 27 §3).

Logs under fixtures/logs/wrappers (README.md cites the format strings): Ollama in its llama-server era
with and without its own lines, an AMX crash inside Ollama in both eras, text-generation-webui running
llama-cpp-python or llama-server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.judge.evaluate import diagnose
from doctor.judge.rulebase import load_rulebase
from doctor.sources.inputs import read_input
from doctor.sources.logs.entry import analyze_bytes

WRAPPERS = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "wrappers"


def _report(path: Path):
    return diagnose(read_input(str(path)), load_rulebase(None), command="analyze", mode="analyze")


@pytest.mark.parametrize("name", ["ollama-llama-server-era-v0.33.log", "ollama-llama-server-era-bare-v0.33.log"])
def test_ollama_running_llama_server_is_ollama(name: str) -> None:
    report = _report(WRAPPERS / name)
    assert report.engine == "ollama"
    lead = report.findings[0]
    assert lead.cls == "offload.partial"
    assert lead.fix.engine == "ollama" and "num_gpu" in (lead.fix.command or "")
    assert "-ngl" not in (lead.fix.command or "")


@pytest.mark.parametrize("name", ["ollama-amx-crash-llama-server-era-v0.32.1.log",
                                  "ollama-amx-crash-runner-v0.5.11.log"])
def test_amx_crash_inside_ollama_is_named_with_ollamas_fix(name: str) -> None:
    report = _report(WRAPPERS / name)
    assert report.engine == "ollama"
    lead = report.findings[0]
    assert lead.cls == "engine.crash" and "AMX" in lead.message
    assert "Ollama" in (lead.fix.command or "") and "0.32.2" in (lead.fix.command or "")


def test_a_plain_llama_server_log_stays_llama_cpp() -> None:
    text = (WRAPPERS / "ollama-llama-server-era-bare-v0.33.log").read_text()
    text = text.replace("/usr/local/lib/ollama/cuda_v13/", "/opt/llama.cpp/build/bin/").replace(
        "/usr/local/lib/ollama/", "/opt/llama.cpp/build/bin/")
    facts = analyze_bytes(text.encode(), "pasted log")
    assert facts.value("engine.name") == "llama.cpp"


@pytest.mark.parametrize(("frame", "engine"), [
    ('  File "/home/u/text-generation-webui/modules/llamacpp_model.py", line 77, in generate\n', "llama-cpp-python"),
    ("23:10:01-123456 INFO     Using gpu_layers=auto | ctx_size=16384 | cache_type=fp16\n", "llama.cpp"),
])
def test_text_generation_webui_and_the_engine_inside(frame: str, engine: str) -> None:
    text = frame + "Output generated in 3.10 seconds (24.19 tokens/s, 75 tokens, context 812, seed 42)\n"
    facts = analyze_bytes(text.encode(), "pasted log")
    assert facts.value("client.frontend") == "text-generation-webui"
    assert facts.value("client.frontend_engine") == engine
    assert facts.value("client.prompt_tokens_max") == 812


def test_lm_studio_running_llama_cpp_is_lm_studio_with_lms_words() -> None:
    report = _report(WRAPPERS / "lmstudio-llama-cpp-context-v0.3.log")
    assert report.engine == "lmstudio"
    lead = report.findings[0]
    assert lead.cls == "context.overflow"
    assert (lead.fix.command or "").startswith("lms load --context-length ")


def test_an_lm_studio_model_path_alone_is_evidence() -> None:
    text = ("llama_model_loader: loaded meta data with 30 key-value pairs and 291 tensors from "
            "C:\\Users\\u\\.lmstudio\\models\\bartowski\\Llama-3.2-3B-Instruct-GGUF\\Llama-3.2-3B-Instruct-Q4_K_M.gguf "
            "(version GGUF V3 (latest))\nload_tensors: offloaded 0/29 layers to GPU\n")
    facts = analyze_bytes(text.encode(), "pasted log")
    assert facts.value("engine.name") == "lmstudio"


# llama-swap's health-check error as mostlygeek/llama-swap#92 quoted it (v88-v95 "failed after %vs", corpus case
# 1073), and the later forms (v96 "timed out after %vs"; v218 internal/process/process_command.go "%v" of a Go
# duration)
@pytest.mark.parametrize("line", [b"unable to start process: health check failed after 15s",
                                  b"health check timed out after 120s",
                                  b"health check timed out after 5m0s"])
def test_llama_swap_giving_up_on_a_loading_server_is_a_slow_load(line: bytes, tmp_path: Path) -> None:
    path = tmp_path / "llama-swap.log"
    path.write_bytes(line + b"\n\nProcess can not ProxyRequest, state is failed\n")
    report = _report(path)
    assert report.assessment is not None and report.assessment.cls == "io.slow_load"
    finding = next(f for f in report.findings if f.cls == "io.slow_load")
    assert finding.lines == [1] and "healthCheckTimeout" in finding.message + (finding.fix.text or "")


def test_llama_swap_refusing_requests_alone_names_no_cause(tmp_path: Path) -> None:
    path = tmp_path / "llama-swap.log"
    path.write_bytes(b"Process can not ProxyRequest, state is failed\n")
    assert not any(f.cls == "io.slow_load" for f in _report(path).findings)


# Unsloth Studio's placement line as unslothai/unsloth#5323 quotes the reporter's log (corpus case 557), wrapped
# as posted; its format: studio/backend/core/inference/llama_cpp.py "GGUF size: ..., GPUs free: {gpus}, selected:
# {gpu_indices}, fit: {use_fit}"
STUDIO_NO_GPU = (b"    GGUF size: 20.8 GB, est. KV cache: 0.1 GB, context: 4096,\n"
                 b"    GPUs free: [(0, 22805)], selected: None, fit: True\n")


def test_unsloth_studio_pinning_no_gpu_leaves_layers_to_fit(tmp_path: Path) -> None:
    path = tmp_path / "studio.log"
    path.write_bytes(STUDIO_NO_GPU)
    report = _report(path)
    assert report.assessment is not None and report.assessment.cls == "offload.partial"
    lead = next(f for f in report.findings if f.cls == "offload.partial")
    assert lead.lines == [2] and "--fit on" in lead.message + (lead.fix.text or "")
    # a GPU chosen (-ngl -1, all layers), or no GPU at all: nothing to say
    chosen = b"GPUs free: [(0, 22805)], selected: [0], fit: False\n"
    for line in (chosen, b"GPUs free: [], selected: None, fit: True\n"):
        path.write_bytes(line)
        assert not any(f.cls == "offload.partial" for f in _report(path).findings)
