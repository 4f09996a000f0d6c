"""The GPU probe: NVIDIA GPUs through NVML (nvidia-ml-py), any vendor's through sysfs.

Per GPU: name, UUID, bus id, VRAM total/free/used (memory info v2, falling back to v1 on drivers
that lack it), utilisation and performance state, processes, memory bus width and maximum memory
clock -> spec bandwidth (clock x 2 x bus bits / 8: NVML's clock already follows the DDR
convention), and the PCIe link: current, maximum in this slot (`MaxPcieLink*`: card and system)
and what the card itself supports (`GpuMaxPcieLinkGeneration`; the width from sysfs). Every NVML
call is wrapped: NotSupported on one call makes that fact unknown, not the GPU.

When NVML cannot start (no driver, no library, not NVIDIA) the PCI bus in sysfs still says which
GPUs exist and how they are linked.
"""

from __future__ import annotations

import contextlib
from typing import Any

from doctor.core.facts import Facts
from doctor.sources.probes.base import Probe, ProbeContext, Reporter, Roots
from doctor.sources.probes.pcie import Link, PciGpu, link_gbs, list_gpus, nvml_bus_to_sysfs, read_link

GIB = 1 << 30


def _nvml(roots: Roots) -> Any:
    if roots.nvml is not None:
        return roots.nvml
    import pynvml

    return pynvml


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _error_text(exc: BaseException) -> str:
    return f"NVML: {exc}" if str(exc) else f"NVML: {type(exc).__name__}"


def collect_gpus(roots: Roots) -> Facts:
    rep = Reporter("gpu")
    pci = rep.read("host.gpu.count", lambda: list_gpus(roots), "PCI devices in sysfs") or []
    nv = rep.read("host.gpu.driver", lambda: _nvml(roots), "import pynvml")
    started = False
    reason = "nvidia-ml-py not importable"
    if nv is not None:
        try:
            nv.nvmlInit()
            started = True
        except Exception as exc:  # NVMLError subclasses: LibraryNotFound, DriverNotLoaded, NoPermission ...
            reason = _error_text(exc)
    if started and nv is not None:
        try:
            _from_nvml(rep, nv, roots)
        finally:
            with contextlib.suppress(Exception):  # shutting down a library we are done with
                nv.nvmlShutdown()
        return rep.facts
    _from_sysfs(rep, roots, pci, reason)
    return rep.facts


def _from_nvml(rep: Reporter, nv: Any, roots: Roots) -> None:
    driver = rep.read("host.gpu.driver", nv.nvmlSystemGetDriverVersion, "driver version")
    if driver is not None:
        rep.set("host.gpu.driver", _text(driver), text="nvmlSystemGetDriverVersion")
    count = rep.read("host.gpu.count", nv.nvmlDeviceGetCount, "device count")
    if count is None:
        return
    rep.set("host.gpu.count", int(count), text="nvmlDeviceGetCount")
    rep.set("host.gpu.vendor", "nvidia" if count else "none", text="NVML")
    for i in range(int(count)):
        _nvml_device(rep, nv, roots, i)


def _nvml_device(rep: Reporter, nv: Any, roots: Roots, i: int) -> None:
    p = f"host.gpu[{i}]"
    handle = rep.read(f"{p}.name", lambda: nv.nvmlDeviceGetHandleByIndex(i), f"GPU {i}")
    if handle is None:
        return

    def ask(names: str | tuple[str, ...], fn: str, *args: Any) -> Any:
        return rep.read(names, lambda: getattr(nv, fn)(handle, *args), fn)

    name = ask(f"{p}.name", "nvmlDeviceGetName")
    if name is not None:
        rep.set(f"{p}.name", _text(name), text="nvmlDeviceGetName")
    uuid = ask(f"{p}.uuid", "nvmlDeviceGetUUID")
    if uuid is not None:
        rep.set(f"{p}.uuid", _text(uuid), text="nvmlDeviceGetUUID")
    pci = ask(f"{p}.pci_bus_id", "nvmlDeviceGetPciInfo")
    bdf = nvml_bus_to_sysfs(_text(pci.busId)) if pci is not None else None
    if bdf:
        rep.set(f"{p}.pci_bus_id", bdf, text="nvmlDeviceGetPciInfo")
    mem = _memory_info(rep, nv, handle, p)
    if mem is not None:
        total, free, used, how = mem
        rep.set(f"{p}.vram_total", total, text=how)
        rep.set(f"{p}.vram_free", free, text=how)
        rep.set(f"{p}.vram_used", used, text=how)
    util = ask((f"{p}.util_gpu", f"{p}.util_mem"), "nvmlDeviceGetUtilizationRates")
    if util is not None:
        rep.set(f"{p}.util_gpu", float(util.gpu), text="nvmlDeviceGetUtilizationRates")
        rep.set(f"{p}.util_mem", float(util.memory), text="nvmlDeviceGetUtilizationRates")
    pstate = ask(f"{p}.pstate", "nvmlDeviceGetPerformanceState")
    if pstate is not None:
        rep.set(f"{p}.pstate", int(pstate), text=f"P{int(pstate)}")
    if util is not None or pstate is not None:
        busy = (util is not None and util.gpu >= 10) or (pstate is not None and int(pstate) <= 2 and util is None)
        rep.set(f"{p}.busy", bool(busy), text=f"utilisation {getattr(util, 'gpu', '?')}%, P{pstate}")
    procs = _processes(rep, nv, handle, p)
    if procs is not None:
        rep.set(f"{p}.processes", procs, text="compute and graphics processes (host PIDs)")
    bits = ask(f"{p}.mem_bus_bits", "nvmlDeviceGetMemoryBusWidth")
    clock = ask(f"{p}.mem_clock_mhz", "nvmlDeviceGetMaxClockInfo", getattr(nv, "NVML_CLOCK_MEM", 2))
    if bits is not None:
        rep.set(f"{p}.mem_bus_bits", int(bits), text="nvmlDeviceGetMemoryBusWidth")
    if clock is not None:
        rep.set(f"{p}.mem_clock_mhz", int(clock), text="nvmlDeviceGetMaxClockInfo(NVML_CLOCK_MEM)")
    if bits and clock:
        spec = round(int(clock) * 2 * int(bits) / 8 / 1000, 1)
        rep.set(f"{p}.bandwidth_spec_gbs", spec, text=f"{int(clock)} MHz x 2 x {int(bits)} bits / 8")
    else:
        rep.unknown(f"{p}.bandwidth_spec_gbs", "memory bus width or max memory clock not reported")
    link = read_link(roots, bdf) if bdf else None
    _nvml_pcie(rep, ask, p, link)


def _memory_info(rep: Reporter, nv: Any, handle: Any, p: str) -> tuple[int, int, int, str] | None:
    names = (f"{p}.vram_total", f"{p}.vram_free", f"{p}.vram_used")
    version = getattr(nv, "nvmlMemory_v2", None)
    if version is not None:
        try:
            info = nv.nvmlDeviceGetMemoryInfo(handle, version=version)
            return int(info.total), int(info.free), int(info.used), "nvmlDeviceGetMemoryInfo v2"
        except Exception:
            pass
    info = rep.read(names, lambda: nv.nvmlDeviceGetMemoryInfo(handle), "nvmlDeviceGetMemoryInfo")
    if info is None:
        return None
    return int(info.total), int(info.free), int(info.used), "nvmlDeviceGetMemoryInfo"


def _processes(rep: Reporter, nv: Any, handle: Any, p: str) -> list[dict[str, int | None]] | None:
    seen: dict[int, int | None] = {}
    ok = False
    for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        try:
            for proc in getattr(nv, fn)(handle):
                used = getattr(proc, "usedGpuMemory", None)
                seen.setdefault(int(proc.pid), int(used) if isinstance(used, int) else None)
            ok = True
        except Exception as exc:
            if not ok and fn.endswith("GraphicsRunningProcesses"):
                rep.unknown(f"{p}.processes", _error_text(exc))
    if not ok:
        return None
    return [{"pid": pid, "bytes": used} for pid, used in sorted(seen.items())]


def _nvml_pcie(rep: Reporter, ask: Any, p: str, link: Link | None) -> None:
    q = f"{p}.pcie"
    values = {
        "gen_current": ask(f"{q}.gen_current", "nvmlDeviceGetCurrPcieLinkGeneration"),
        "width_current": ask(f"{q}.width_current", "nvmlDeviceGetCurrPcieLinkWidth"),
        "gen_max": ask(f"{q}.gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
        "width_max": ask(f"{q}.width_max", "nvmlDeviceGetMaxPcieLinkWidth"),
        "gen_gpu_max": ask(f"{q}.gen_gpu_max", "nvmlDeviceGetGpuMaxPcieLinkGeneration"),
    }
    for key, value in values.items():
        if value is not None:
            rep.set(f"{q}.{key}", int(value), text=f"NVML {key}")
    width_gpu = link.width_device_max if link is not None else None
    if width_gpu is not None:
        rep.set(f"{q}.width_gpu_max", width_gpu, text=f"sysfs {link.bdf} max_link_width" if link else None)
    elif values["width_max"] is not None:
        rep.unknown(f"{q}.width_gpu_max", "sysfs link attributes not readable")
    gen_max, gen_gpu, width_max = values["gen_max"], values["gen_gpu_max"], values["width_max"]
    if gen_max is not None and gen_gpu is not None:
        limited = int(gen_max) < int(gen_gpu) or (width_gpu is not None and width_max is not None
                                                  and int(width_max) < width_gpu)
        rep.set(f"{q}.slot_limited", limited,
                text=f"max in this slot Gen{gen_max} x{width_max} vs card Gen{gen_gpu}"
                     + (f" x{width_gpu}" if width_gpu else ""))
    spec = link_gbs(int(gen_max) if gen_max is not None else None, int(width_max) if width_max is not None else None)
    if spec is not None:
        rep.set(f"{q}.spec_gbs", spec, text=f"Gen{gen_max} x{width_max}, one direction")
    replay = ask(f"{q}.replay_errors", "nvmlDeviceGetPcieReplayCounter")
    if replay is not None:
        rep.set(f"{q}.replay_errors", int(replay), text="nvmlDeviceGetPcieReplayCounter")


COMPUTE_VENDORS = ("nvidia", "amd", "intel", "moore threads")  # not a server BMC's VGA (ASPEED, Matrox)


def _from_sysfs(rep: Reporter, roots: Roots, pci: list[PciGpu], reason: str) -> None:
    discrete = [g for g in pci if not g.integrated and g.vendor in COMPUTE_VENDORS]
    rep.set("host.gpu.count", len(discrete),
            text=f"PCI display controllers in sysfs ({', '.join(g.bdf + ' ' + g.vendor for g in pci) or 'none'})")
    rep.set("host.gpu.vendor", discrete[0].vendor if discrete else "none", text="PCI vendor id")
    rep.unknown("host.gpu.driver", reason)
    for i, gpu in enumerate(discrete):
        p = f"host.gpu[{i}]"
        rep.set(f"{p}.pci_bus_id", gpu.bdf, text="sysfs")
        rep.set(f"{p}.name", f"{gpu.vendor} GPU {gpu.device_id or ''}".strip(), text=f"PCI ids ({reason})")
        for name in ("vram_total", "vram_free", "bandwidth_spec_gbs"):
            rep.unknown(f"{p}.{name}", reason)
        link = read_link(roots, gpu.bdf)
        if link is None:
            continue
        q = f"{p}.pcie"
        for key, value in (("gen_current", link.gen_current), ("width_current", link.width_current),
                           ("gen_max", link.gen_max), ("width_max", link.width_max),
                           ("gen_gpu_max", link.gen_device_max), ("width_gpu_max", link.width_device_max)):
            if value is not None:
                rep.set(f"{q}.{key}", value, text=f"sysfs {gpu.bdf}")
        if link.slot_limited is not None:
            rep.set(f"{q}.slot_limited", link.slot_limited,
                    text=f"bridge Gen{link.gen_slot_max} x{link.width_slot_max} vs card Gen{link.gen_device_max}"
                         f" x{link.width_device_max}")
        spec = link_gbs(link.gen_max, link.width_max)
        if spec is not None:
            rep.set(f"{q}.spec_gbs", spec, text=f"Gen{link.gen_max} x{link.width_max}, one direction")


def _collect(ctx: ProbeContext) -> Facts:
    return collect_gpus(ctx.roots)


PROBE = Probe("gpu", "passive", "GPUs: NVML (name, VRAM, bandwidth spec, PCIe link) or sysfs for any vendor",
              ("host.gpu.count",), _collect)
