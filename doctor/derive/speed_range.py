"""Is a pasted decode speed normal? Within the range its device class reaches in public results.

A ceiling says what the hardware allows; what llama.cpp-family engines usually reach on it is a
share of that, and the share differs by device class (CUDA GPUs, Metal, Vulkan on small hosts,
CPUs) and by model size (a small model on a big GPU is held by kernel launches, not bytes). Here a
decode verdict against a published spec (`speed.decode.ceiling_source` = spec) is placed in that
range:

- efficiency = measured tok/s x bytes read per token / the device's published bandwidth (the
  bandwidth bound; the bytes are the model's weights on that device, speed_log.py's cost);
- the class: the device kind and backend (gpu:cuda, gpu:rocm, gpu:vulkan, gpu:sycl, apple:metal,
  cpu:x86, cpu:arm) and the model band (small: under SMALL_BYTES of weights; tiny, under TINY_BYTES,
  has no public runs and so no range);
- the range: the lowest and highest efficiency of the runs the sources call normal in
  bench/data/public_runs.yaml (speed_ranges.json beside the spec table, written by
  `python -m bench.speed_ranges`, which prints the table with its sources); a class with fewer than
  MIN_ROWS rows falls back to its device kind in the same band (kind:band), never across bands.

`speed.decode.placement` is below (under the class's lowest by more than MARGIN) | within | above, or
`partial` when the model is split between GPU and host (the ranges are for one device; the offload
rules name that cause). Runs on this machine's
measured ceilings keep the fraction rule of docs/speed.md (their ceilings are measured, not
published), and so are not placed here.

Derive floor, pure: reads its own data file once. The strings are written here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from doctor.core.facts import Facts, Source
from doctor.derive.source import step_src

DATA = Path(__file__).with_name("specs") / "speed_ranges.json"
SMALL_BYTES = 2.5e9  # weights read per token; below it launches and sampling hold a GPU's decode
TINY_BYTES = 0.5e9  # below it the fixed cost of a step is most of it: no public runs, no range (the fraction rule)
MIN_ROWS = 4
# below means under the class's lowest public run by more than this share: one run's own noise and the
# spread a class's few public runs under-sample (chosen after seeing post 008, a 2024 RTX 3090 Ti run at
# 0.99 of CUDA's lowest; docs/speed.md section 7)
MARGIN = 0.10
GB = 1e9
ARM = re.compile(r"\b(?:arm\b|aarch64|cortex|neoverse|ampere|graviton|snapdragon|qualcomm|raspberry|bcm27\d\d|"
                 r"rockchip|rk35\d\d|apple|cix\b|mediatek|dimensity|kryo|qcs\d+|orin|jetson|tegra)", re.IGNORECASE)
GPU_BACKENDS = (("cuda", "cuda"), ("rocm", "rocm"), ("hip", "rocm"), ("vulkan", "vulkan"), ("sycl", "sycl"),
                ("metal", "metal"), ("mtl", "metal"), ("opencl", "opencl"), ("musa", "cuda"), ("cann", "cann"))


@dataclass(frozen=True, slots=True)
class Range:
    key: str
    low: float
    high: float
    rows: int
    median: float


def _src(text: str) -> Source:
    return step_src("speed", text[:300])


def backend_of(names: list[str], kind: str, vendor: str | None = None) -> str:
    """The GPU backend family among the engine's backends (`CUDA`, `ROCm`, `Vulkan,BLAS`, ...)."""
    if kind == "apple":
        return "metal"
    for name in names:
        low = name.lower()
        for key, family in GPU_BACKENDS:
            if key in low:
                return family
    return {"nvidia": "cuda", "amd": "rocm", "intel": "sycl"}.get(str(vendor), "other")


def class_key(kind: str, backend: str, device: str, weights: float) -> str:
    """The class of a run: kind:backend:band (a CPU's backend is its architecture)."""
    if kind == "cpu":
        backend = "arm" if ARM.search(device) else "x86"
    band = "tiny" if weights < TINY_BYTES else "small" if weights < SMALL_BYTES else "large"
    return f"{kind}:{backend}:{band}"


def efficiency(tok_s: float, bytes_per_token: float, bw_gbs: float) -> float:
    """Measured decode against the bandwidth bound: the share of the device's bandwidth it streamed."""
    return tok_s * bytes_per_token / (bw_gbs * GB)


def fallbacks(key: str) -> list[str]:
    """The class, then its device kind in the same model band: a band is never left (a small model's share of
    the bandwidth is not a large one's)."""
    kind, _, band = key.split(":")
    return [key, f"{kind}:{band}"]


_RANGES: list[dict[str, Range]] = []


def ranges() -> dict[str, Range]:
    if not _RANGES:
        try:
            data = json.loads(DATA.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        _RANGES.append({k: Range(k, float(v["low"]), float(v["high"]), int(v["rows"]), float(v["median"]))
                        for k, v in (data.get("classes") or {}).items()
                        if isinstance(v, dict) and int(v.get("rows", 0)) >= MIN_ROWS})
    return _RANGES[0]


def usual_range(key: str) -> Range | None:
    table = ranges()
    return next((table[k] for k in fallbacks(key) if k in table), None)


def _split(facts: Facts) -> tuple[float, float] | None:
    """Bytes per token read from GPU memory and from host RAM: the tensor table's, else the log's cost."""
    from doctor.derive.speed_log import log_cost

    gpu, cpu = facts.value("derived.decode_bytes_per_token_gpu"), facts.value("derived.decode_bytes_per_token_cpu")
    if isinstance(gpu, int) and isinstance(cpu, int):
        return float(gpu), float(cpu)
    cost, _ = log_cost(facts)
    return (float(cost.decode_gpu_bytes), float(cost.decode_cpu_bytes)) if cost is not None else None


def derive_speed_range(facts: Facts) -> None:
    """speed.decode.{efficiency, usual_*, placement} for a decode verdict against a published spec."""
    p = "speed.decode"
    tok_s, bw = facts.value(f"{p}.tok_s"), facts.value("spec.mem_bw_gbs")
    if facts.value(f"{p}.ceiling_source") != "spec" or not isinstance(tok_s, int | float) or tok_s <= 0 \
            or not isinstance(bw, int | float) or bw <= 0:
        return
    split = _split(facts)
    if split is None:
        return
    gpu, cpu = split
    kind = str(facts.value("spec.kind"))
    if kind != "apple" and gpu > 0 and cpu > 0:
        facts.set(f"{p}.placement", "partial", _src(f"{gpu / GB:.2f} GB a token on the GPU, {cpu / GB:.2f} GB from "
                                                     "host RAM: the usual ranges are for one device"))
        return
    per_token = gpu + cpu
    if per_token <= 0 or (kind == "gpu" and not gpu) or (kind == "cpu" and not cpu):
        return
    where = {"apple": "unified memory", "gpu": "GPU memory", "cpu": "host RAM"}.get(kind, kind)
    names = facts.value("engine.backends")
    bench = facts.value("bench.backend")
    backend = backend_of([*(names if isinstance(names, list) else []), *([bench] if isinstance(bench, str) else [])],
                         kind, _vendor(facts))
    device = str(facts.value("spec.device", ""))
    key = class_key(kind, backend, device, per_token)
    eff = efficiency(float(tok_s), per_token, float(bw))
    facts.set(f"{p}.efficiency", round(eff, 3), _src(
        f"{tok_s:g} tok/s x {per_token / GB:.2f} GB a token / {bw:g} GB/s ({device}, {where})"))
    r = usual_range(key)
    if r is None:
        return
    facts.set(f"{p}.usual_class", _describe(r.key), _src(f"class {r.key} (this run: {key})"))
    cite = f"{r.rows} runs the sources call normal (bench/data/public_runs.yaml), median {r.median:.0%}"
    facts.set(f"{p}.usual_low", round(r.low, 3), _src(f"the lowest of {cite}"))
    facts.set(f"{p}.usual_high", round(r.high, 3), _src(f"the highest of {cite}"))
    facts.set(f"{p}.usual_tok_s", round(r.low * bw * GB / per_token, 2), _src(
        f"the low end of the usual range for this model here: {r.low:.0%} x {bw:g} GB/s / {per_token / GB:.2f} GB"))
    place = "below" if eff < r.low * (1 - MARGIN) else "above" if eff > r.high else "within"
    facts.set(f"{p}.placement", place, _src(f"{eff:.0%} of the bandwidth bound against {r.low:.0%}-{r.high:.0%} "
                                            f"({_describe(r.key)}, {r.rows} public runs)"))


def _vendor(facts: Facts) -> str | None:
    from doctor.derive.specs import table

    row = table().named(str(facts.value("spec.device", "")))
    return row.vendor if row is not None else None


KIND_WORDS = {"gpu": "GPUs", "apple": "Apple chips", "cpu": "CPUs"}
BACKEND_WORDS = {"cuda": "CUDA", "rocm": "ROCm", "vulkan": "Vulkan", "sycl": "SYCL", "metal": "Metal",
                 "x86": "x86", "arm": "ARM", "other": "other backends", "opencl": "OpenCL", "cann": "CANN"}


def _describe(key: str) -> str:
    """`gpu:cuda:large` -> 'CUDA GPUs with models of 2.5 GB or more'."""
    parts = key.split(":")
    kind = KIND_WORDS.get(parts[0], parts[0])
    words = [f"{BACKEND_WORDS.get(parts[1], parts[1])} {kind}" if len(parts) > 1 and parts[1] not in ("tiny", "small",
                                                                                                    "large")
             else kind]
    band = parts[-1] if parts[-1] in ("tiny", "small", "large") else None
    if band:
        words.append({"tiny": f"models under {TINY_BYTES / GB:g} GB",
                      "small": f"models of {TINY_BYTES / GB:g}-{SMALL_BYTES / GB:g} GB",
                      "large": f"models of {SMALL_BYTES / GB:g} GB or more"}[band])
    return " with ".join(words)
