"""What-if budgets: plan for a machine you are not on (`scan --ram SIZE --vram SIZE[,SIZE...]`).

The memory the scan found on this machine (host.ram.*, host.gpu*) is replaced by the stated
budgets, each fact's source saying it was stated rather than measured; doctor/derive/ then
gives the verdict, the shortfall and the largest context / most GPU layers under those budgets
exactly as it would for a machine it had probed. A GPU budget also states that the engine there can
offload (this machine's build does not decide it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.core.errors import UsageError
from doctor.core.facts import Facts, Source

MAX_WHATIF_GPUS = 64
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)(b?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


def parse_size(text: str, what: str = "size") -> int:
    """Bytes from '24G', '24GiB', '1.5g', '512M', '24GB' (decimal: 24e9) or a plain byte count.

    K/M/G/T alone and KiB/MiB/GiB/TiB are powers of 1024, as free and nvidia-smi print memory;
    KB/MB/GB/TB are powers of 1000, as disk and cloud vendors label it."""
    m = _SIZE.match(text)
    if not m:
        raise UsageError(f"{what} {text!r} is not a size (examples: 24G, 24GiB, 512M, 16GB)")
    number, unit, binary, byte = m.groups()
    base = 1000 if unit and byte and not binary else 1024
    value = int(float(number) * base ** _POWERS[unit.lower()])
    if value <= 0 or value > 1 << 50:
        raise UsageError(f"{what} {text!r} is out of range (1 byte to 1 PiB)")
    return value


def parse_sizes(text: str, what: str) -> list[int]:
    parts = [p for p in text.split(",") if p.strip()]
    if not parts or len(parts) > MAX_WHATIF_GPUS:
        raise UsageError(f"{what} {text!r}: give 1 to {MAX_WHATIF_GPUS} sizes separated by commas")
    return [parse_size(p, what) for p in parts]


@dataclass(frozen=True, slots=True)
class Budgets:
    ram: int | None = None
    vram: tuple[int, ...] | None = None

    @property
    def any(self) -> bool:
        return self.ram is not None or self.vram is not None

    def describe(self) -> str:
        parts = []
        if self.ram is not None:
            parts.append(f"RAM {self.ram / (1 << 30):.2f} GiB")
        if self.vram is not None:
            parts.append("VRAM " + " + ".join(f"{v / (1 << 30):.2f} GiB" for v in self.vram))
        return ", ".join(parts)


def apply_budgets(facts: Facts, budgets: Budgets) -> Facts:
    """A copy of `facts` with the stated budgets in place of this machine's memory."""
    if not budgets.any:
        return facts
    replaced = []
    if budgets.ram is not None:
        replaced.append("host.ram.")
    if budgets.vram is not None:
        replaced += ["host.gpu.", "host.gpu[", "engine.gpu_offload_supported"]
    out = Facts()
    for fact in facts:
        if not fact.name.startswith(tuple(replaced)):
            out.add(fact)
    for event in facts.events():
        out.add_event(event)
    out.events_observed = facts.events_observed
    out.inputs = [*facts.inputs, f"what-if budget ({budgets.describe()})"]
    if budgets.ram is not None:
        src = Source("config", "--ram", text="stated budget (what-if), not measured")
        out.set("host.ram.total", budgets.ram, src)
        out.set("host.ram.available", budgets.ram, src)
    if budgets.vram is not None:
        src = Source("config", "--vram", text="stated budget (what-if), not measured")
        out.set("host.gpu.count", len(budgets.vram), src)
        out.set("engine.gpu_offload_supported", True, Source("config", "--vram", text="planning for a GPU machine"))
        for i, size in enumerate(budgets.vram):
            out.set(f"host.gpu[{i}].name", f"GPU {i} (--vram)", src)
            out.set(f"host.gpu[{i}].vram_total", size, src)
            out.set(f"host.gpu[{i}].vram_free", size, src)
    return out
