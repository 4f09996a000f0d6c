"""The machine and model-file facts a watch needs next to the trace: cores, RAM, swap, GPUs, file size.

Decode jitter is judged against the cores the engine may use and the swap around it; slow load
against the file size and the storage under it. When the scan probes (doctor/sources/probes/) are installed their
passive probes are used, so watch and scan say the same thing; otherwise psutil and os are read
directly. Nothing here raises: a value that cannot be read is unknown with the reason.

Machine access.
"""

from __future__ import annotations

import os
from typing import Any

from doctor.core.facts import Facts, Source
from doctor.sources.live.embedded.sampler import cgroup_quota

# scan's passive probes that watch reuses when they are installed (gguf: the model's tensor table, which
# the speed verdict costs the run from, as scan does)
PROBE_NAMES = ("cpu", "memory", "storage", "gpu", "gguf")


def _src(text: str) -> Source:
    return Source("probe", "watch.host", text=text)


def host_facts(model_path: str | None = None, use_probes: bool = True, threads: int | None = None,
               settings: Any = None) -> Facts:
    """`settings`: the embedded engine's RunSettings, for the kernel figures an earlier scan kept for
    this model's weight types at its threads."""
    facts = Facts()
    if use_probes:
        facts.merge(_probe_facts(model_path))
        facts.merge(_kept_ceilings(threads))
    _psutil_facts(facts)
    if model_path:
        _model_file(facts, model_path)
    if use_probes and settings is not None and model_path:
        facts.merge(_kept_kernels(model_path, settings, facts))
    return facts


def _kept_kernels(model_path: str, settings: Any, host: Facts) -> Facts:
    """The kernel probe's figures an earlier scan kept for this model's weight types, at the run's threads
    (llama-cpp-python's defaults where unset) - never measured while the engine runs. The figures with
    weight repacking off serve a run that asked for it on: crash triage turns it off where it crashes."""
    try:
        from doctor.sources.live.embedded.kernels import kernel_facts, request_from
        from doctor.sources.probes.gguf_model import collect_model

        view = collect_model(model_path)
        logical = os.cpu_count() or 1
        for name, value in (("config.n_threads", settings.n_threads or max(1, logical // 2)),
                            ("config.n_threads_batch", settings.n_threads_batch or logical),
                            ("config.n_gpu_layers", settings.n_gpu_layers),
                            ("config.flash_attn", "enabled" if settings.flash_attn else "disabled"),
                            ("config.type_k", settings.type_k), ("config.type_v", settings.type_v)):
            view.set(name, value, _src("the run's settings"))
        usable = host.value("host.cpu.usable_cores")
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            cpuinfo = handle.read()
        for repack in dict.fromkeys((settings.use_extra_bufts is not False, False)):
            view.set("config.use_extra_bufts", repack, _src("the run's settings"))
            request = request_from(view, int(usable) if isinstance(usable, int | float) and usable >= 1 else logical)
            if request is None:
                return Facts()
            kept = kernel_facts(request, cpuinfo, measure_missing=False)
            if kept.has("host.cpu.kernel_decode"):
                return kept
        return Facts()
    except Exception:  # a cache or file that cannot be read is no figure, never a failed watch
        return Facts()


def _kept_ceilings(threads: int | None) -> Facts:
    """This machine's ceilings as an earlier scan kept them (doctor/sources/probes/ceilings.py), for
    the speed verdict; nothing is measured while the engine runs."""
    try:
        from doctor.sources.probes.ceilings import kept_facts

        return kept_facts(threads)
    except Exception:  # a cache that cannot be read is no ceiling, never a failed watch
        return Facts()


def _probe_facts(model_path: str | None) -> Facts:
    """scan's passive machine probes (cpu, memory, storage under the model, gpu), when installed."""
    try:
        from doctor.sources.probes.base import ProbeContext
        from doctor.sources.probes.registry import by_name, collect
    except ImportError:
        return Facts()
    chosen = [p for p in (by_name(name) for name in PROBE_NAMES) if p is not None and p.cost == "passive"]
    try:
        return collect(ProbeContext(model_path=model_path), chosen)
    except Exception:  # probes never raise, but watch must not depend on it
        return Facts()


def _psutil_facts(facts: Facts) -> None:
    try:
        import psutil
    except ImportError:
        for name in ("host.cpu.logical_cores", "host.ram.total"):
            facts.unknown(name, "psutil is not installed", _src("psutil missing"))
        return
    logical = psutil.cpu_count() or None
    physical = _safe(lambda: psutil.cpu_count(logical=False))
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    quota = cgroup_quota()
    if logical:
        facts.set_default("host.cpu.logical_cores", logical, _src("psutil.cpu_count()"))
    if physical:
        facts.set_default("host.cpu.physical_cores", physical, _src("psutil.cpu_count(logical=False)"))
    else:
        facts.unknown("host.cpu.physical_cores", "psutil could not count physical cores", _src("psutil"))
    if affinity:
        facts.set_default("host.cpu.affinity_cores", affinity, _src("os.sched_getaffinity(0)"))
    if quota:
        facts.set_default("host.cpu.quota_cores", round(quota, 2), _src("cgroup cpu.max / cfs_quota_us"))
    candidates = [float(v) for v in (physical, affinity, quota) if v]
    if candidates:
        usable = min(candidates)
        facts.set_default("host.cpu.usable_cores", int(usable) if usable == int(usable) else round(usable, 2),
                          _src(f"min(physical {physical}, affinity {affinity}, quota {quota})"))
    load = _safe(lambda: os.getloadavg()[0])
    if load is not None:
        facts.set("host.cpu.load_1m", round(load, 2), _src("os.getloadavg()"))
        usable_v = facts.value("host.cpu.usable_cores")
        if isinstance(usable_v, int | float) and usable_v > 0:
            facts.set("host.cpu.load_per_core", round(load / usable_v, 3), _src(f"load {load:.2f} / {usable_v} cores"))
    mem = _safe(psutil.virtual_memory)
    if mem is not None:
        facts.set_default("host.ram.total", int(mem.total), _src("psutil.virtual_memory()"))
        facts.set("host.ram.available", int(mem.available), _src("psutil.virtual_memory()"))
    swap = _safe(psutil.swap_memory)
    if swap is not None:
        facts.set_default("host.ram.swap_total", int(swap.total), _src("psutil.swap_memory()"))
        facts.set("host.ram.swap_used", int(swap.used), _src("psutil.swap_memory()"))


def _model_file(facts: Facts, model_path: str) -> None:
    try:
        size = os.stat(model_path).st_size
    except OSError as exc:
        facts.unknown("model.file_bytes", f"cannot stat {model_path}: {exc.strerror or exc}", _src("os.stat"))
        return
    facts.set("model.file_bytes", size, _src(f"os.stat({os.path.basename(model_path)})"))
    facts.set_default("model.path", model_path, _src("the model watch runs"))


def _safe(fn: Any) -> Any:
    try:
        return fn()
    except Exception:  # any failure here is reported as unknown, never raised
        return None


def facts_payload(facts: Facts) -> dict[str, Any]:
    """Facts in the form a FactsEvent carries (Fact JSON by name)."""
    return facts.to_json()["facts"]
