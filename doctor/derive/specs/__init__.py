"""The published-spec table: memory bandwidth, FP16 and INT8 throughput and PCIe link of GPUs, Apple chips and
CPUs, each row with the document it cites (hardware.yaml beside this file, the one people edit;
README.md says where the figures come from).

The tool reads hardware.json, written from the YAML by scripts/specs_json.py (a test fails when the two
differ): json parses it in a millisecond where PyYAML takes 180 ms to import and parse, and it is read
when this module is imported, so deriving facts and judging them open no file. The rows are validated:
a row without a name, match strings or a source is dropped, a number that is not positive is read as
unknown. `SpecTable.find(name, kinds)` matches a device name from a log case-insensitively:
a row qualifies when one of its `match` substrings occurs in the name and none of its `not_match`
ones does; the longest matching substring wins, so a SKU row beats its family's fallback row.

Derive floor, pure: reads only its own data file, once, at import.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doctor.core.errors import InternalError

DATA = Path(__file__).with_name("hardware.json")
SECTIONS = {"gpus": "gpu", "apple": "apple", "cpus": "cpu"}  # file section -> spec.kind


@dataclass(frozen=True, slots=True)
class SpecRow:
    """One device's published figures. `mem_bw_low_gbs`: the lowest of the row's variants (an Apple
    chip whose GPU core count the name does not tell), else the row's own figure."""

    name: str
    kind: str  # gpu | apple | cpu
    match: tuple[str, ...]
    not_match: tuple[str, ...]
    source: str
    confidence: str
    vendor: str | None = None
    mem_bw_gbs: float | None = None
    mem_bw_low_gbs: float | None = None
    fp16_tflops: float | None = None
    int8_tops: float | None = None  # dense INT8 matrix throughput (what llama.cpp's MMQ runs a quantized prompt on)
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_gbs: float | None = None
    cores: int | None = None
    vram_gib: float | None = None
    notes: str | None = None
    # the memory behind a CPU row's figure (a user's "DDR5-6000" recomputes it: doctor/derive/spec_lookup.py)
    mem_channels: int | None = None
    mem_bus_bits: int | None = None
    mem_mts: float | None = None
    mem_type: str | None = None
    perf_cores: int | None = None  # P-cores / big cores of a hybrid or big.LITTLE CPU (threads past them wait)
    gpu_core_variants: tuple[tuple[int, float], ...] = ()  # (GPU cores, GB/s) of an Apple chip's variants

    def score(self, lowered: str) -> int:
        """The length of the longest match string found in `lowered` (0: the row does not match)."""
        if any(x in lowered for x in self.not_match):
            return 0
        return max((len(m) for m in self.match if m in lowered), default=0)


@dataclass(frozen=True, slots=True)
class SpecTable:
    rows: tuple[SpecRow, ...]
    dropped: tuple[str, ...] = ()  # rows left out at load, and why

    def find(self, device: str, kinds: tuple[str, ...] = ("gpu", "apple", "cpu")) -> SpecRow | None:
        """The most specific row for a device name from a log, among rows of `kinds`; ties keep file order."""
        lowered = " ".join(device.lower().split())
        best: SpecRow | None = None
        best_score = 0
        for row in self.rows:
            if row.kind not in kinds:
                continue
            score = row.score(lowered)
            if score > best_score:
                best, best_score = row, score
        return best

    def named(self, name: str) -> SpecRow | None:
        """The row called exactly `name` (a bench row's reference to the table)."""
        return next((row for row in self.rows if row.name == name), None)


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value > 0 else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(" ".join(x.lower().split()) for x in value if isinstance(x, str) and x.strip())


def _pcie(entry: dict[str, Any], lane_gbs: dict[int, float]) -> tuple[int | None, int | None, float | None]:
    link = entry.get("pcie")
    if not isinstance(link, dict):
        return None, None, None
    gen, width = link.get("gen"), link.get("width")
    if not isinstance(gen, int) or not isinstance(width, int) or gen not in lane_gbs or width <= 0:
        return None, None, None
    return gen, width, round(lane_gbs[gen] * width, 2)


def _row(entry: Any, kind: str, lane_gbs: dict[int, float]) -> SpecRow | str:
    """A validated row, or why the entry is dropped."""
    if not isinstance(entry, dict):
        return "not a mapping"
    name, source = entry.get("name"), entry.get("source")
    if not isinstance(name, str) or not name.strip():
        return "no name"
    match = _strings(entry.get("match"))
    if not match:
        return f"{name}: no match strings"
    if not isinstance(source, str) or not source.strip() or source.strip().lower().startswith("n/a"):
        # a row that cites nothing gives no figures; it still names a device (generic VM CPUs)
        if any(_positive(entry.get(k)) for k in ("mem_bw_gbs", "fp16_tflops", "int8_tops")):
            return f"{name}: figures without a source"
        source = ""
    bw = _positive(entry.get("mem_bw_gbs"))
    variants = [_positive(v.get("mem_bw_gbs")) for v in entry.get("mem_bw_variants") or [] if isinstance(v, dict)]
    low = min([v for v in variants if v is not None] + ([bw] if bw is not None else []), default=None)
    gen, width, pcie_gbs = _pcie(entry, lane_gbs)
    cores = entry.get("cores")
    notes = entry.get("notes")
    by_cores = tuple(sorted((v["gpu_cores"], float(v["mem_bw_gbs"])) for v in entry.get("mem_bw_variants") or []
                            if isinstance(v, dict) and _count(v.get("gpu_cores")) and _positive(v.get("mem_bw_gbs"))))
    confidence = entry.get("confidence")
    vendor = entry.get("vendor")
    return SpecRow(
        name=name.strip(), kind=kind, match=match, not_match=_strings(entry.get("not_match")),
        source=source.strip(), confidence=confidence if confidence in ("high", "medium") else "medium",
        vendor=vendor if isinstance(vendor, str) else None, mem_bw_gbs=bw, mem_bw_low_gbs=low,
        fp16_tflops=_positive(entry.get("fp16_tflops")), int8_tops=_positive(entry.get("int8_tops")),
        pcie_gen=gen, pcie_width=width, pcie_gbs=pcie_gbs, cores=_count(cores),
        vram_gib=_positive(entry.get("vram_gib")),
        notes=notes if isinstance(notes, str) else None,
        mem_channels=_count(entry.get("mem_channels")), mem_bus_bits=_count(entry.get("mem_bus_bits")),
        mem_mts=_positive(entry.get("mem_mts")),
        mem_type=mem_type if isinstance((mem_type := entry.get("mem_type")), str) else None,
        perf_cores=_count(entry.get("perf_cores")), gpu_core_variants=by_cores)


def parse(data: Any) -> SpecTable:
    """Validate a loaded spec document into a table (rows that fail are listed in `dropped`)."""
    if not isinstance(data, dict):
        raise InternalError("spec table: the document is not a mapping")
    gens = (data.get("pcie") or {}).get("gens") if isinstance(data.get("pcie"), dict) else None
    lane_gbs = {int(g): float(v["gbs_per_lane_per_dir"]) for g, v in (gens or {}).items()
                if str(g).isdigit() and isinstance(v, dict) and _positive(v.get("gbs_per_lane_per_dir"))}
    rows: list[SpecRow] = []
    dropped: list[str] = []
    for section, kind in SECTIONS.items():
        entries = data.get(section)
        for entry in entries if isinstance(entries, list) else ():
            row = _row(entry, kind, lane_gbs)
            if isinstance(row, SpecRow):
                rows.append(row)
            else:
                dropped.append(f"{section}: {row}")
    return SpecTable(tuple(rows), tuple(dropped))


def load(path: Path) -> SpecTable:
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InternalError(f"spec table {path}: {exc}") from exc
    return parse(data)


_TABLE: list[SpecTable] = []


def table() -> SpecTable:
    """The shipped table (read on first use: an input that names no device never needs it)."""
    if not _TABLE:
        _TABLE.append(load(DATA))
    return _TABLE[0]
