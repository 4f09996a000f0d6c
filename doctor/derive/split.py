"""The split explained: when the plan does not fit, the sum that fails, term by term.

Called from doctor/derive/plan.py's budget step (marked [split hook]) with the figures it already
computed. It writes `derived.split_sum` - "weights 36.0 GiB (output layer 0.8 GiB of it) + KV
2.5 GiB + compute 0.6 GiB = 39.1 GiB on the GPU vs 22.5 GiB free after the margin" - for the
device that does not fit (or, when both fit, for the GPU if one is used), plus
`derived.output_gpu_bytes`, `derived.split_constraint` (the first term that no longer fits:
weights, kv_cache, compute, projector) and `derived.split_short_bytes`. The plan rules (rules/plan.yaml)
quote the sum beside the largest n_gpu_layers and n_ctx that do fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.core.facts import Facts, Source

GIB = 1 << 30


@dataclass(frozen=True, slots=True)
class DeviceSum:
    device: str  # "GPU" or "host"
    weights: int
    output: int  # the output layer's share of `weights`
    kv: int
    compute: int
    room: int  # the budget: free memory minus the margin
    projector: int = 0  # an mmproj's weights + compute buffer on this device (doctor/derive/mmproj.py)

    @property
    def total(self) -> int:
        return self.weights + self.kv + self.compute + self.projector

    @property
    def constraint(self) -> str:
        if self.weights > self.room:
            return "weights"
        if self.weights + self.kv > self.room:
            return "kv_cache"
        if self.weights + self.kv + self.compute > self.room:
            return "compute"
        return "projector" if self.total > self.room else "none"

    def text(self) -> str:
        out = f" (output layer {_g(self.output)} of it)" if self.output else ""
        verdict = "does not fit" if self.total > self.room else "fits"
        where = "free after the margin" if self.device == "GPU" else "available after the margin"
        proj = f" + vision projector {_g(self.projector)}" if self.projector else ""
        return (f"weights {_g(self.weights)}{out} + KV {_g(self.kv)} + compute {_g(self.compute)}{proj} = "
                f"{_g(self.total)} on the {self.device} vs {_g(self.room)} {where}: {verdict}")


def _g(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def explain(facts: Facts, gpu: DeviceSum | None, host: DeviceSum | None) -> None:
    """Write the split facts for the device that fails first (GPU before host)."""
    src = Source("estimate", "estimate.split", text="weights + KV + compute per device vs its budget")
    if gpu is not None:
        facts.set("derived.output_gpu_bytes", gpu.output, src)
    chosen = next((d for d in (gpu, host) if d is not None and d.constraint != "none"), None)
    if chosen is None:
        chosen = gpu or host
    if chosen is None:
        return
    facts.set("derived.split_sum", chosen.text(), src)
    facts.set("derived.split_device", chosen.device.lower(), src)
    facts.set("derived.split_constraint", chosen.constraint, src)
    facts.set("derived.split_short_bytes", max(0, chosen.total - chosen.room), src)
