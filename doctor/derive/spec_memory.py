"""The published bandwidth made specific to the machine: the variant of an Apple chip its GPU core count
names, and a CPU platform's figure at the memory the user says is installed.

doctor/derive/spec_lookup.py sets `spec.mem_bw_gbs` from a row of the spec table; a row holds one
figure per chip (an Apple chip whose name hides its GPU core count gets its lowest variant) and, for a
CPU, the platform maximum at the rated memory speed. What a paste or `analyze --hardware` adds is read
here: `host.gpu[0].cores` (system_profiler's Total Number of Cores, "40-core GPU") picks the variant;
`host.ram.mts` / `host.ram.type` ("DDR5-6000", "DDR3") recompute channels x MT/s x 8 B (or the bus
width x MT/s for soldered memory). A generation named without a speed takes the row's own speed when
the row is of that generation, else the common speed of the generation (DEFAULT_MTS: the JEDEC bin
most modules of it ship at), so "i5-6500, DDR3" is held to dual-channel DDR3-1600, not the DDR4 figure.

Derive floor, pure. The strings are written here.
"""

from __future__ import annotations

import re

from doctor.core.facts import Facts, Source
from doctor.derive.source import step_src
from doctor.derive.specs import SpecRow, table

DEFAULT_MTS = {"DDR3": 1600, "DDR4": 2400, "DDR5": 4800, "LPDDR4": 3200, "LPDDR4X": 4267, "LPDDR5": 6400,
               "LPDDR5X": 7500}
GENERATION = re.compile(r"(LP)?DDR\d+X?", re.IGNORECASE)


def _src(text: str) -> Source:
    return step_src("spec", text[:300])


def _apple_variant(facts: Facts) -> None:
    cores = facts.value("host.gpu[0].cores")
    row = table().named(str(facts.value("spec.device", "")))
    if row is None or row.kind != "apple" or not isinstance(cores, int) or not row.gpu_core_variants:
        return
    fits = [bw for n, bw in row.gpu_core_variants if n == cores]
    if not fits:
        return
    facts.set("spec.mem_bw_gbs", fits[0], _src(f"{row.name} with a {cores}-core GPU: {fits[0]:g} GB/s; {row.source}"))


def platform_gbs(row: SpecRow, mts: float) -> float | None:
    """A CPU platform's peak at `mts`: channels x MT/s x 8 B, or the soldered bus width x MT/s."""
    if row.mem_channels:
        return round(row.mem_channels * mts * 8 / 1000, 1)
    if row.mem_bus_bits:
        return round(row.mem_bus_bits / 8 * mts / 1000, 1)
    return None


def _installed_mts(facts: Facts, row: SpecRow) -> tuple[float, str] | None:
    """The memory speed the user named, and how it was read."""
    mts, kind = facts.value("host.ram.mts"), facts.value("host.ram.type")
    if isinstance(mts, int) and mts > 0:
        return float(mts), f"{kind or 'memory'}-{mts}"
    if not isinstance(kind, str) or kind.upper() not in DEFAULT_MTS:
        return None
    rated = GENERATION.match(row.mem_type or "")
    if rated and rated.group(0).upper() == kind.upper():
        return None  # the row's own speed is of that generation
    return float(DEFAULT_MTS[kind.upper()]), f"{kind.upper()} (taken at {DEFAULT_MTS[kind.upper()]} MT/s)"


def _installed_memory(facts: Facts) -> None:
    kind = facts.value("spec.kind")
    name, fact = (facts.value("spec.device"), "spec.mem_bw_gbs") if kind == "cpu" else \
        (facts.value("spec.host_device"), "spec.host_mem_bw_gbs")
    row = table().named(str(name or ""))
    if row is None or row.kind != "cpu":
        return
    installed = _installed_mts(facts, row)
    if installed is None:
        return
    gbs = platform_gbs(row, installed[0])
    if gbs is None:
        return
    width = f"{row.mem_channels} channels" if row.mem_channels else f"{row.mem_bus_bits}-bit bus"
    facts.set(fact, gbs, _src(f"{row.name} with {installed[1]} as stated: {width} x {installed[0]:g} MT/s = "
                              f"{gbs:g} GB/s (the row's figure: {row.mem_bw_gbs} at its rated {row.mem_type})"))


def derive_spec_memory(facts: Facts) -> None:
    """Refine spec.mem_bw_gbs (and the host side's) with the GPU core count and the installed memory."""
    if not facts.has("spec.device"):
        return
    _apple_variant(facts)
    _installed_memory(facts)
