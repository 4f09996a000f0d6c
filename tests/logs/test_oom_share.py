"""An out-of-memory beyond the share of the device a PyTorch server took (doctor/derive/share.py, LD367).

Lines from the corpus cases as their threads posted them: vLLM-Ascend's NPU OOM at --gpu-memory-utilization 0.85
(corpus/1240, vllm-project/vllm-ascend: the maintainer's answer, 0.8); SGLang's OOM at mem-fraction-static 0.95 in a
recipe's decode block (shared corpus 541); and two weights OOMs that must stay the weights rule's: Mistral-7B fp16 on
an 11 GB card at 0.8 (corpus/1250) and WizardLM-2-8x22B on one A100 at 0.5 (corpus/1297, the maintainer: the model
cannot fit). The PyTorch texts are c10's CUDACachingAllocator wordings (both), torch_npu's with "current active".
"""

from __future__ import annotations

from doctor.judge.evaluate import diagnose
from doctor.sources.logs.entry import analyze_bytes

NPU = ("vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct \\\n--tensor-parallel-size 4 --max-model-len 4096 \\\n"
       "--gpu-memory-utilization 0.85 --compilation-config '{\"cudagraph_mode\":\"FULL_DECODE_ONLY\"}'\n\n"
       "Error:RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity; "
       "55.91 GiB already allocated; 55.91 GiB current active; 1.80 GiB free; 58.73 GiB reserved in total by "
       "PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.\n")
SGLANG = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 3 has a total capacity of "
          "184.00 GiB of which 2.21 GiB is free. Including non-PyTorch memory, this process has 181.77 GiB memory in "
          "use.\ndecode:\n  mem-fraction-static: 0.95\n  moe-runner-backend: \"flashinfer_trtllm\"\n"
          "  tensor-parallel-size: 4\n")
MISTRAL = ("python -u -m vllm.entrypoints.openai.api_server --host 0.0.0.0 --model mistralai/Mistral-7B-v0.1 "
           "--dtype half --gpu-memory-utilization 0.8  --max-model-len 4096\n\n> torch.cuda.OutOfMemoryError: CUDA "
           "out of memory. Tried to allocate 224.00 MiB (GPU 0; 10.73 GiB total capacity; 9.85 GiB already "
           "allocated; 46.44 MiB free; 9.86 GiB reserved in total by PyTorch) If reserved memory is >> allocated "
           "memory try setting max_split_size_mb to avoid fragmentation.\n")
WIZARD = ("python3 -m vllm.entrypoints.openai.api_server --model alpindale/WizardLM-2-8x22B --dtype auto "
          "--max-model-len 8192 --gpu-memory-utilization 0.50 --enforce-eager\n\ntorch.cuda.OutOfMemoryError: CUDA "
          "out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 79.15 GiB of which 147.75 MiB "
          "is free. Process 483452 has 78.98 GiB memory in use.\n")


def _report(text: str, rulebase):
    return diagnose(analyze_bytes(text.encode()), rulebase, command="analyze", mode="analyze")


def test_torch_npu_oom_is_read_with_its_numbers() -> None:
    ooms = analyze_bytes(NPU.encode()).events("oom")
    assert [(e.line, e.data["bytes"], e.data["device"]) for e in ooms] == [(5, 2 << 30, 0)]
    assert ooms[0].data["free"] == int(1.80 * (1 << 30)) and ooms[0].data["total"] == int(60.96 * (1 << 30))


def test_vllm_oom_beyond_gpu_memory_utilization_is_outside_the_share(rulebase) -> None:
    report = _report(NPU, rulebase)
    assert report.assessment is not None
    assert (report.assessment.id, report.assessment.cls) == ("LD367", "oom.compute")
    assert report.facts.value("derived.oom_outside_share") == 0.85
    finding = next(f for f in report.findings if f.id == "LD367")
    assert 5 in finding.lines
    assert "--gpu-memory-utilization 0.8 (from 0.85)" in finding.fix.by_engine["vllm"]
    assert "LD301" not in {f.id for f in report.findings}  # a launch command placed it at the load: not the weights


def test_sglang_share_from_a_recipe_key(rulebase) -> None:
    report = _report(SGLANG, rulebase)
    assert report.facts.value("server.sglang.mem_fraction_static") == 0.95  # the YAML key of --config / a recipe
    assert report.engine == "sglang"
    assert report.assessment is not None
    assert (report.assessment.id, report.assessment.cls) == ("LD367", "oom.compute")
    finding = next(f for f in report.findings if f.id == "LD367")
    assert "--mem-fraction-static 0.9 (from 0.95)" in finding.fix.by_engine["sglang"]


def test_weights_over_the_share_stay_a_weights_oom(rulebase) -> None:
    for text in (MISTRAL, WIZARD):
        report = _report(text, rulebase)
        assert not report.facts.has("derived.oom_outside_share"), report.facts.value("model.name")
        assert report.assessment is not None and report.assessment.cls == "oom.weights"


def test_the_share_and_the_model_from_launch_commands() -> None:
    """SGLang's --mem-fraction-static and --model-path (srt/server_args.py flags), vLLM's --model (EngineArgs)."""
    facts = analyze_bytes(b"python -m sglang.launch_server --model-path Qwen/Qwen2.5-72B-Instruct --tp 4 "
                          b"--mem-fraction-static 0.93\n")
    assert facts.value("server.sglang.mem_fraction_static") == 0.93
    assert facts.value("model.name") == "Qwen/Qwen2.5-72B-Instruct"
    assert analyze_bytes(MISTRAL.encode()).value("model.name") == "mistralai/Mistral-7B-v0.1"
