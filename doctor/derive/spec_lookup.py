"""The published spec of the hardware a log names: `spec.*` from the spec table (doctor/derive/specs).

Which device ran the model is read from the facts the log gave: layers on the GPU
(`run.offloaded_layers`, `config.n_gpu_layers`), the backend (`bench.backend`, `engine.backends`)
and the device names (`host.gpu[].name` from CUDA / ROCm / Vulkan / Metal / SYCL device lines or a
pasted nvidia-smi table; `host.cpu.model` from a pasted lscpu or a llama-bench CSV/JSON
`cpu_info`). A GPU run is held to its GPU's row (and the CPU's row goes to `spec.host_*`, the host side
of a partial offload); a CPU run to the CPU's row; an Apple chip to its unified-memory row.

When the log does not say enough, `spec.device` is unknown and its reason is the one fact that would
settle it ("which GPU ran this? ..."); doctor/derive/speed.py passes it on as `speed.<phase>.settle`.
Runs only when the input measured a speed (`run.prefill_tps` / `run.decode_tps`) and no spec was
set already (a bench row, a test).

Derive floor, pure. The strings are written here.
"""

from __future__ import annotations

from doctor.core.facts import Facts, Source
from doctor.derive.specs import SpecRow, table

MAX_GPUS = 16
GPU_BACKENDS = ("cuda", "rocm", "hip", "musa", "metal", "mtl", "vulkan", "sycl", "cann", "opencl", "kompute")
APPLE_BACKENDS = ("metal", "mtl")


def _src(text: str) -> Source:
    return Source("estimate", "spec", text=text[:300])


def _backends(facts: Facts) -> list[str]:
    found: list[str] = []
    bench = facts.value("bench.backend")
    if isinstance(bench, str):
        found += [b.strip().lower() for b in bench.split(",") if b.strip()]
    listed = facts.value("engine.backends")
    if isinstance(listed, list):
        found += [str(b).lower() for b in listed]
    return found


def gpu_used(facts: Facts) -> bool | None:
    """Whether a GPU (or an Apple chip's GPU) ran the model: True, False, or None when the log does not say."""
    placed = facts.value("run.offloaded_layers")
    if isinstance(placed, int):
        return placed > 0
    asked = facts.value("config.n_gpu_layers")
    backends = _backends(facts)
    gpu_backend = any(b.startswith(GPU_BACKENDS) for b in backends)
    if isinstance(asked, int) and asked == 0:
        return False
    if backends and not gpu_backend:
        return False  # CPU / BLAS only
    if gpu_backend:
        return True if not isinstance(asked, int) else asked != 0
    if facts.value("host.gpu.count") == 0 or facts.value("engine.gpu_offload_supported") is False:
        return False
    if facts.has("engine.cpu_features") and not _gpu_names(facts) and not facts.has("host.gpu.count"):
        return False  # llama.cpp's system_info line, and no GPU initialised before it: a CPU run
    return None


def _gpu_names(facts: Facts) -> list[str]:
    names = []
    for i in range(MAX_GPUS):
        name = facts.value(f"host.gpu[{i}].name")
        if isinstance(name, str) and name.strip():
            names.append(name.strip())
    return names


def _set_row(facts: Facts, row: SpecRow, log_name: str, apple_low: bool) -> None:
    cite = f"{row.name} (as the log names it: {log_name}): {row.source}"
    src = _src(cite)
    bw = row.mem_bw_low_gbs if apple_low and row.mem_bw_low_gbs else row.mem_bw_gbs
    facts.set("spec.device", row.name, src)
    facts.set("spec.kind", row.kind, src)
    facts.set("spec.log_name", log_name, src)
    facts.set("spec.source", row.source, src)
    facts.set("spec.confidence", row.confidence, src)
    if bw is not None:
        variant = " (the lowest variant: the name does not tell the core count)" if bw != row.mem_bw_gbs else ""
        facts.set("spec.mem_bw_gbs", bw, _src(f"{row.name}: {bw:g} GB/s{variant}; {row.source}"))
    if row.fp16_tflops is not None:
        facts.set("spec.fp16_tflops", row.fp16_tflops, _src(f"{row.name}: {row.fp16_tflops:g} TFLOPS; {row.source}"))
    if row.int8_tops is not None:
        facts.set("spec.int8_tops", row.int8_tops, _src(f"{row.name}: {row.int8_tops:g} INT8 TOPS dense; {row.source}"))
    if row.kind == "cpu" and row.cores:
        facts.set("spec.cores", row.cores, _src(f"{row.name}: {row.cores} physical cores; {row.source}"))
    if row.kind == "cpu" and row.perf_cores and row.cores and row.perf_cores < row.cores:
        facts.set("spec.perf_cores", row.perf_cores,
                  _src(f"{row.name}: {row.perf_cores} performance cores of {row.cores}; {row.source}"))
    if row.pcie_gbs is not None:
        facts.set("spec.pcie_gbs", row.pcie_gbs,
                  _src(f"{row.name}: PCIe {row.pcie_gen}.0 x{row.pcie_width}, {row.pcie_gbs:g} GB/s one way (PCI-SIG)"))


def _unknown(facts: Facts, reason: str) -> None:
    facts.unknown("spec.device", reason, _src(reason))


def _host_side(facts: Facts) -> None:
    cpu = facts.value("host.cpu.model")
    if not isinstance(cpu, str) or not cpu.strip():
        return
    row = table().find(cpu, ("cpu",))
    if row is None or row.mem_bw_gbs is None:
        return
    src = _src(f"{row.name} (as the log names it: {cpu.strip()}): {row.source}")
    facts.set("spec.host_device", row.name, src)
    facts.set("spec.host_mem_bw_gbs", row.mem_bw_gbs, src)
    facts.set("spec.host_source", row.source, src)


def _gpu(facts: Facts) -> None:
    names = _gpu_names(facts)
    if not names:
        backend = next((b for b in _backends(facts) if b.startswith(GPU_BACKENDS)), None)
        if backend in APPLE_BACKENDS:
            _unknown(facts, "which Apple chip ran this? the log names the Metal backend but not the chip "
                            "(the `GPU name:` line of the Metal start-up, or the Mac's chip, would settle it)")
        else:
            on = f"a {backend.upper()} backend" if backend else "layers on a GPU"
            _unknown(facts, f"which GPU ran this? the log shows {on} but does not name the GPU (the "
                            "`Device 0:` line or nvidia-smi's table would settle it)")
        return
    name = names[0]
    if "..." in name:
        _unknown(facts, f"nvidia-smi cut the GPU's name ({name}): the full name (nvidia-smi -L) would settle it")
        return
    row = table().find(name, ("gpu", "apple"))
    if row is None:
        _unknown(facts, f"the spec table has no row for {name}: its memory bandwidth (GB/s) would settle it")
        return
    _set_row(facts, row, name, apple_low=row.kind == "apple")
    if row.kind == "gpu":
        _host_side(facts)


def _cpu(facts: Facts) -> None:
    cpu = facts.value("host.cpu.model")
    if not isinstance(cpu, str) or not cpu.strip():
        _unknown(facts, "which CPU ran this? the log does not name it (lscpu's `Model name:` line would settle it)")
        return
    cpu = cpu.strip()
    row = table().find(cpu, ("apple", "cpu"))
    if row is None:
        _unknown(facts, f"the spec table has no row for the CPU {cpu}: its memory channels and speed "
                        "(or a measured bandwidth) would settle it")
        return
    if row.mem_bw_gbs is None:
        _unknown(facts, f"{cpu} does not name the exact CPU model (a VM or cloud brand string): the host's "
                        "memory bandwidth, measured or from the instance type, would settle it")
        return
    _set_row(facts, row, cpu, apple_low=row.kind == "apple")


def derive_spec(facts: Facts) -> None:
    """Set `spec.*` for the device that ran the model, or say which fact would settle it."""
    if facts.has("spec.device") or not (facts.has("run.decode_tps") or facts.has("run.prefill_tps")):
        return
    used = gpu_used(facts)
    if used is None:
        names = _gpu_names(facts)
        if names:
            used = True  # a GPU named, nothing saying it was left idle
        elif facts.has("host.cpu.model"):
            used = False
        else:
            _unknown(facts, "which device ran this? the log names no GPU or CPU (the engine's device lines, "
                            "or the GPU / CPU model, would settle it)")
            return
    if used:
        _gpu(facts)
    else:
        _cpu(facts)
