"""The speed verdict for a pasted log: the model's cost per token from what the log says, when there is
no GGUF tensor table to build it from.

doctor/derive/speed.py holds measured tok/s against the ceilings with a cost built from the GGUF's
tensor table (scan, watch, a saved scan). A pasted log (a llama-bench table, an Ollama `--verbose`
block, llama-server or llama-cli timings, vLLM's stats) has none; it says the model's size
(llama-bench's size column, `model size` / `file size` in print_info), its parameters, sometimes its
layer count and how many layers went to the GPU. From those, a coarse cost for a dense model: every
weight byte is read once per decode token (the token embedding's share is not known, so the bytes
are an upper bound and the ceiling a lower one: the verdict errs towards "normal"), split between
GPU and host by the layers on the GPU; 2 FLOPs per parameter per token. speed.py's own ceilings and
verdict then judge it. A mixture of experts (n_expert in the log, "MoE" or "A3B" in its name) is not
judged: the log does not give its routed share, and the settle fact says so. When the device is
unknown, the settle fact is spec_lookup's question ("which GPU ran this?").

Sets only speed.<phase>.* (through speed.py's set_verdict), never the derived cost facts (speed.py's).
Derive floor, pure. The strings are written here.
"""

from __future__ import annotations

import re
from dataclasses import replace

from doctor.core.facts import Facts
from doctor.derive.speed import Cost, Verdict, core_share, judge, set_verdict, weight_type
from doctor.derive.speed_ceilings import Ceilings, ceilings

MOE_NAME = re.compile(r"\bMoE\b|\bA\d+(?:\.\d+)?B\b", re.IGNORECASE)  # "gpt-oss 20B MXFP4 MoE", "Qwen3-30B-A3B"
TYPICAL_LAYERS = 16.0  # n_layer of a 1B model; ~ x (params / 1B) ** 0.3 for larger (Llama 3B 28, 7B 32, 70B 80)
ALL_LAYERS = 99  # llama-bench's default -ngl and what people pass for "all"


def _int(facts: Facts, name: str) -> int | None:
    value = facts.value(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _moe(facts: Facts) -> bool:
    experts = facts.value("model.n_expert")
    name = str(facts.value("model.name", "")) + " " + str(facts.value("model.file_type", ""))
    return (isinstance(experts, int) and experts > 1) or MOE_NAME.search(name) is not None


def gpu_share(facts: Facts, n_layer: int) -> float:
    """The share of the repeating layers on the GPU (Apple: the whole model sits in unified memory)."""
    if facts.value("spec.kind") == "apple":
        return 1.0
    if facts.value("spec.kind") == "cpu":
        return 0.0
    placed, total = _int(facts, "run.offloaded_layers"), _int(facts, "run.total_layers")
    shown = facts.value("run.gpu_share")  # `ollama ps`: the share of the loaded model in VRAM
    if placed is None and isinstance(shown, int | float) and 0.0 <= shown <= 1.0:
        return float(shown)
    if placed is not None:
        return min(1.0, placed / (total or n_layer + 1))
    asked = facts.value("config.n_gpu_layers")
    if isinstance(asked, int) and not isinstance(asked, bool):
        return 1.0 if asked < 0 or asked >= min(n_layer + 1, ALL_LAYERS) else max(0.0, asked / (n_layer + 1))
    return 1.0 if facts.value("spec.kind") == "gpu" else 0.0


def log_cost(facts: Facts) -> tuple[Cost | None, str | None]:
    """(speed.py's Cost for this log, None) or (None, the fact that would settle it)."""
    weights = _int(facts, "model.weights_bytes") or _int(facts, "model.file_bytes")
    params = _int(facts, "model.n_params")
    if weights is None or params is None:
        return None, "the model's size and parameter count (the log's model lines, or the GGUF file)"
    if _moe(facts):
        return None, "the model's routed share (a mixture of experts reads only its active experts: the GGUF file)"
    n_layer = _int(facts, "model.n_layer") or max(1, round(TYPICAL_LAYERS * (params / 1e9) ** 0.3))
    share = gpu_share(facts, n_layer)
    gpu_layers = round(share * n_layer)
    gpu_bytes = int(weights * share)
    cpu_bytes = weights - gpu_bytes
    pcie = cpu_bytes if 0 < gpu_layers < n_layer else 0
    return Cost(decode_gpu_bytes=gpu_bytes, decode_cpu_bytes=cpu_bytes, prefill_flops=2.0 * params,
                pcie_bytes_per_batch=pcie, n_layer=n_layer, gpu_layers=gpu_layers,
                depth=0, weight_type=weight_type(facts)), None


def with_host(facts: Facts, ceil: Ceilings) -> Ceilings:
    """The CPU platform's published bandwidth for the host side of a GPU run (a partial offload reads the
    CPU layers from RAM), when nothing measured it."""
    host = facts.value("spec.host_mem_bw_gbs")
    if ceil.cpu_bw_gbs is not None or not isinstance(host, int | float) or host <= 0:
        return ceil
    how = f"{ceil.how}; host {facts.value('spec.host_device')}: {host:g} GB/s ({facts.value('spec.host_source')})"
    return replace(ceil, cpu_bw_gbs=float(host), cpu_bw_all_gbs=float(host), how=how.lstrip("; "))


def derive_speed_log(facts: Facts) -> None:
    """speed.<phase>.* for a pasted log's measured speeds, when speed.py had no tensor table to work from."""
    phases = [p for p in ("prefill", "decode") if facts.has(f"run.{p}_tps") and not facts.has(f"speed.{p}.tok_s")]
    if not phases or facts.has("model.layer_bytes"):
        return  # judged already, or speed.py's own cost applies
    spec = facts.get("spec.device")
    device_question = spec.unknown if spec is not None and not spec.known else None
    cost, missing = log_cost(facts)
    ceil = with_host(facts, ceilings(facts))
    if device_question and cost is not None and not cost.decode_gpu_bytes and ceil.source == "measured":
        device_question = None  # a CPU run on this machine: its measured bandwidth holds it, not a spec row
    if cost is None or device_question:
        for phase in phases:
            unknown = Verdict(phase, float(facts.value(f"run.{phase}_tps")),
                              settle=device_question or missing or "the machine's ceilings")
            set_verdict(facts, unknown, ceil, core_share(facts, phase))
        return
    for verdict, share in judge(facts, cost, ceil):
        if verdict.phase in phases and verdict.tok_s is not None:
            set_verdict(facts, verdict, ceil, share)
