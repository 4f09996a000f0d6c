"""The bounds a speed verdict is held to: measured on this machine, or another machine's published peaks.

Floor: derive (pure: facts in, a Ceilings value out). Strings: the `how` texts below (the facts'
Sources), docs/speed.md.

A ceiling is a bound, so each figure is a physical limit or the engine's own best on this machine,
never a fitted model of one CPU (issue 36):

- this machine: the memory read bandwidth at the engine's thread count and on all cores
  (host.ram.read_bw_gbs / _all_gbs: doctor/sources/probes/ceilings.py), the engine's kernel rates for
  the model's weight types at the planned threads (host.cpu.kernel_*: the kernel probe,
  doctor/sources/live/embedded/kernels.py), the GPU's measured copy bandwidth and PCIe (scan --bench);
- another machine (a pasted log: spec.*, doctor/derive/spec_lookup.py): its published bandwidth
  and the peak of the unit the engine's matrix products run on - `UNITS`: int8 for a quantized
  model's prompt on a GPU (llama.cpp's MMQ kernels: int8 tensor cores where there are some), the
  FP16 / BF16 tensor figure for F16 / BF16 weights, FP32 for F32, and for a CPU its vector peak
  (spec.cpu_gflops: cores x clock x the vector width's FLOPs a cycle, where the table has it). A
  unit the table has no figure for is left out of the ceiling (which stays a bound) and said so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.core.facts import Facts
from doctor.derive.speed_cost import FLOAT_TYPES, Kernels, kernel_gaps

# GPUs (no GPU here): launch costs per layer per decode token, least squares over the full-offload rows
# the sources call normal in bench/data/public_runs.yaml (docs/speed.md), by backend where it had rows
GPU_LAYER_MS = 0.08
GPU_LAYER_MS_BY_BACKEND = {"cuda": 0.065, "vulkan": 0.11, "rocm": 0.12, "hip": 0.12, "metal": 0.26}
# one core's sustained read bandwidth, for a published CPU figure at fewer threads than cores: 16.3 GB/s
# measured on one core of the AMX Xeon here; desktop cores draw more (docs/speed.md)
PER_CORE_READ_GBS = 20.0
# the published peak each unit's figure comes from (spec.* fact), by the unit a prompt's products run on
UNITS = {"int8": "spec.int8_tops", "fp16": "spec.fp16_tflops", "bf16": "spec.bf16_tflops",
         "fp32": "spec.fp32_tflops"}


@dataclass(frozen=True, slots=True)
class Ceilings:
    cpu_bw_gbs: float | None  # read bandwidth at the engine's thread count
    cpu_bw_all_gbs: float | None
    kernels: Kernels | None  # the engine's own kernel rates on this machine (the kernel probe)
    gpu_bw_gbs: float | None
    gpu_peaks: dict[str, float]  # unit -> published dense peak, TFLOPS / TOPS (int8, fp16, bf16, fp32)
    pcie_gbs: float | None
    source: str  # measured | spec | unknown
    how: str
    gpu_layer_ms: float = GPU_LAYER_MS  # kernel launches per layer per token, by the engine's GPU backend
    cpu_peak_gflops: float | None = None  # a published CPU's vector peak (FLOP/s): a compute bound
    gpu_kind: str = "gpu"  # gpu | apple
    notes: list[str] = field(default_factory=list)
    kernel_missing: tuple[str, ...] = ()  # the kernel probe's figures not measured (host.cpu.kernel_missing)


def _num(facts: Facts, name: str) -> float | None:
    value = facts.value(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def kernels_of(facts: Facts) -> Kernels | None:
    return Kernels.from_rows(facts.value("host.cpu.kernel_decode"), facts.value("host.cpu.kernel_prefill"),
                             facts.value("host.cpu.kernel_attention"))


def ceilings(facts: Facts) -> Ceilings:
    # the engine's thread count's figure; all cores' where only that was kept (a bound at any count)
    bw_all = _num(facts, "host.ram.read_bw_all_gbs")
    bw = _num(facts, "host.ram.read_bw_gbs") or bw_all
    kernels = kernels_of(facts)
    gpu_bw, pcie = _num(facts, "host.gpu[0].bandwidth_measured_gbs"), _num(facts, "host.gpu[0].pcie.h2d_measured_gbs")
    peaks: dict[str, float] = {}
    cpu_peak = None
    how = []
    source = "measured" if bw or gpu_bw else "unknown"
    if bw:
        how.append(f"RAM read {bw:g} GB/s")
    if kernels is not None:
        how.append("the engine's kernels timed on this machine")
    if gpu_bw:
        how.append(f"GPU copy {gpu_bw:g} GB/s")
    kind = str(facts.value("spec.kind", "")).lower()
    spec_bw, spec_pcie = _num(facts, "spec.mem_bw_gbs"), _num(facts, "spec.pcie_gbs")
    if kind in ("gpu", "apple"):
        if gpu_bw is None and spec_bw:
            gpu_bw, source = spec_bw, "spec" if source == "unknown" else source
        peaks = {unit: v for unit, name in UNITS.items() if (v := _num(facts, name)) is not None}
        pcie = pcie or spec_pcie
        if kind == "apple" and bw is None and spec_bw:  # unified memory: the CPU reads the same RAM
            bw = bw_all = spec_bw
        host_bw = _num(facts, "spec.host_mem_bw_gbs")  # the CPU side of a partial offload, when named
        if bw is None and host_bw:
            bw = bw_all = host_bw
    elif kind == "cpu" and bw is None and spec_bw:
        bw_all, source = spec_bw, "spec"
        cpu_peak = _num(facts, "spec.cpu_gflops")
        bw, cpu_peak = _at_threads(facts, spec_bw, cpu_peak, how)
    if source == "spec":
        device, cite = facts.value("spec.device", "the device"), facts.value("spec.source", "spec")
        how.append(f"{device}: {spec_bw:g} GB/s ({cite})")
    missing = facts.value("host.cpu.kernel_missing")
    return Ceilings(bw, bw_all or bw, kernels, gpu_bw, peaks, pcie, source, "; ".join(how), gpu_layer_ms(facts),
                    cpu_peak, "apple" if kind == "apple" else "gpu",
                    kernel_missing=tuple(str(k) for k in missing) if isinstance(missing, list) else ())


def _at_threads(facts: Facts, spec_bw: float, peak: float | None, how: list[str]) -> tuple[float, float | None]:
    """A published CPU's figures at the engine's thread count: one core draws only its own share of the
    memory bus (PER_CORE_READ_GBS each, up to the whole spec) and of the chip's FLOPs."""
    threads = facts.value("config.n_threads")
    cores = _num(facts, "host.cpu.usable_cores") or _num(facts, "host.cpu.physical_cores") \
        or _num(facts, "spec.cores")
    if not isinstance(threads, int) or threads <= 0 or cores is None or threads >= cores:
        return spec_bw, peak
    bw = min(spec_bw, threads * PER_CORE_READ_GBS)
    if bw < spec_bw:
        how.append(f"{threads} thread(s) draw ~{bw:g} GB/s ({PER_CORE_READ_GBS:g} GB/s a core)")
    return bw, peak * threads / cores if peak else None


def gpu_layer_ms(facts: Facts) -> float:
    """The launch cost per GPU layer for the engine's GPU backend (engine.backends), else all rows' fit."""
    backends = facts.value("engine.backends")
    for name in backends if isinstance(backends, list) else []:
        for key, ms in GPU_LAYER_MS_BY_BACKEND.items():
            if key in str(name).lower():
                return ms
    return GPU_LAYER_MS


def gpu_unit(types: set[str], gpu_kind: str) -> str:
    """The unit a prompt's matrix products run on: int8 for quantized weights on a discrete GPU
    (llama.cpp's MMQ), FP16 on Apple GPUs (no int8 matrix units) and for F16, BF16 for BF16, FP32 for F32."""
    quantized = {t for t in types if t not in FLOAT_TYPES}
    if quantized:
        return "fp16" if gpu_kind == "apple" else "int8"
    if "F32" in types and not types - {"F32"}:
        return "fp32"
    return "bf16" if "BF16" in types and "F16" not in types else "fp16"


def gpu_peak(ceil: Ceilings, unit: str) -> tuple[float | None, str]:
    """The published peak for the unit (TFLOPS / TOPS), falling back only where the fallback is a bound:
    BF16 runs at the FP16 tensor rate on the GPUs that have both."""
    if unit in ceil.gpu_peaks:
        return ceil.gpu_peaks[unit], unit
    if unit == "bf16" and "fp16" in ceil.gpu_peaks:
        return ceil.gpu_peaks["fp16"], "fp16"
    return None, unit


MISSING_KERNELS = "the engine's kernel rates for this model's weight types on this machine (a traced llm-doctor " \
                  "scan times them)"


def missing_kernels(ceil: Ceilings, phase: str, threads: int, head: tuple[str, ...] = ()) -> str:
    """Which kernel figures the phase lacks at the engine's threads (a kernel probe stopped before them: named,
    never guessed), else the general sentence."""
    keys = list(ceil.kernel_missing)
    if phase == "prefill":  # a prompt runs the output head (of types `head`) once, at its decode rate
        keys = [k for k in keys if k.split("/")[-2] == "prefill" or k.split("/")[:2] in (["dense", t] for t in head)]
    gaps = kernel_gaps(keys, None if phase == "prefill" else phase, threads)
    return f"the kernel probe's {gaps} on this machine (not measured yet: the next traced llm-doctor scan " \
           "measures them)" if gaps else MISSING_KERNELS
