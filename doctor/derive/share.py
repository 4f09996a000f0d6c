"""An out-of-memory beyond the share a PyTorch server took: vLLM sizes weights + KV cache to gpu_memory_utilization x
the device's memory, SGLang to --mem-fraction-static x it; what runs outside that share (activations, CUDA graphs,
sampler and kernel workspaces, a communication pool) lives in the rest. A PyTorch OOM whose own numbers say the device
was in use beyond that share (total capacity minus free, as the message gives them) failed outside it: the share left
too little, whatever the timeline can say. Only for an OOM that neither a traceback frame nor the engine's own message
placed, and that a launch command at most placed (a command says the load began, not where the run failed).

`derived.oom_outside_share` (the share), `derived.oom_in_use_bytes` (what was in use when it failed),
`derived.oom_share_recommended` (a share lowered by what the allocation lacked, at least 0.05).
Derive floor, pure. The strings are written here.
"""

from __future__ import annotations

import math
import re

from doctor.core.facts import Facts, Source

# the shares the PyTorch servers take, by the fact that holds each
SHARES = ("config.gpu_memory_utilization", "server.sglang.mem_fraction_static")
STEP = 0.05  # the least a share is lowered by
# a parameter count in a model's name (`7B`, `0.5B`, `8x22B`) and the quantisations a name says, in bytes per weight
PARAMS = re.compile(r"(?<![\w.])(?:(\d+)x)?(\d+(?:\.\d+)?)[Bb](?![a-zA-Z])")
QUANT_BYTES = ((re.compile(r"awq|gptq|int4|4bit|nf4|bnb|w4a16|exl2", re.IGNORECASE), 0.55),
               (re.compile(r"fp8|int8|8bit|w8a8", re.IGNORECASE), 1.05))
OVER = 0.98  # in use at least this much of the share: the share was taken (the rest of it rounding and fragments)


def _launch_lines(facts: Facts) -> set[int]:
    lines: set[int] = set()
    span = facts.value("engine.launch_lines")
    for fact in facts:
        src = fact.source
        if src.kind == "log" and src.name == "launch" and src.line is not None:
            lines.update(range(src.line, src.line + (span if isinstance(span, int) and 0 < span < 64 else 1)))
    return lines


def weights_per_device(facts: Facts) -> float | None:
    """Bytes of weights each device holds, from the parameters a Hugging Face name carries (`Mistral-7B`, `8x22B`;
    the larger count where it names an active one too) at 2 bytes each (fp16 / bf16, the servers' default), less
    where the name says a quantisation (AWQ / GPTQ / 4-bit, FP8 / 8-bit), split over the tensor-parallel GPUs."""
    name = facts.value("model.name")
    if not isinstance(name, str):
        return None
    tail = name.rstrip("/").rsplit("/", 1)[-1]
    counts = [int(m.group(1) or 1) * float(m.group(2)) for m in PARAMS.finditer(tail)]
    if not counts:
        return None
    width = next((b for pattern, b in QUANT_BYTES if pattern.search(tail)), 2.0)
    tp = facts.value("config.tensor_parallel_size")
    return max(counts) * 1e9 * width / (tp if isinstance(tp, int) and tp > 0 else 1)


def derive_oom_share(facts: Facts) -> None:
    share, name = next(((v, n) for n in SHARES if isinstance(v := facts.value(n), float) and 0.5 <= v <= 1.0),
                       (None, None))
    if share is None or name is None:
        return
    launch: set[int] | None = None
    for event in facts.events("oom"):
        data = event.data
        total, free = data.get("total"), data.get("free")
        if not isinstance(total, int) or not isinstance(free, int) or total <= 0 or not 0 <= free < total:
            continue
        if data.get("phase_from") == "message" or event.phase not in ("weights", "runtime", "compute", "unknown"):
            continue
        if event.placed_by:
            launch = _launch_lines(facts) if launch is None else launch
            if any(n not in launch for n, _ in event.placed_by):
                continue  # an engine's own line placed it: the timeline knows better than the numbers
        in_use = total - free
        if in_use < OVER * share * total:
            continue
        weights = weights_per_device(facts)
        if weights is not None and weights >= share * total:
            continue  # the weights alone are over the share: loading them is what failed (the weights rule's)
        src = Source("estimate", "estimate.share", event.line,
                     f"{in_use} of {total} bytes in use when it failed; {name} {share}")
        facts.set("derived.oom_outside_share", share, src)
        facts.set("derived.oom_in_use_bytes", in_use, src)
        # a lower share by what the failed allocation lacked (two points more for the next one), at least 0.05
        asked = data.get("bytes")
        short = (asked - free) / total if isinstance(asked, int) and asked > free else 0.0
        lower = share - max(STEP, math.ceil((short + 0.02) * 100) / 100)
        facts.set("derived.oom_share_recommended", round(max(0.5, lower), 2), src)
        return
