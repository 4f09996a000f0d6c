"""The RAM probe: total and available memory, swap, and the container's memory limit.

psutil reads /proc/meminfo (MemAvailable already counts reclaimable page cache, so a model file
that is cached counts as available); a cgroup memory limit lowers both total and available, since
the engine is held to the limit whatever the host has free: available is then the limit less the
cgroup's working set (its usage without inactive page cache, which the kernel reclaims first).
"""

from __future__ import annotations

from typing import Any

from doctor.core.facts import Facts
from doctor.sources.probes.base import Probe, ProbeContext, Reporter, Roots
from doctor.sources.probes.cgroup import memory_limit


def _psutil(roots: Roots) -> Any:
    if roots.psutil is not None:
        return roots.psutil
    import psutil

    return psutil


def collect_memory(roots: Roots) -> Facts:
    rep = Reporter("memory")
    ps = rep.read(("host.ram.total", "host.ram.available"), lambda: _psutil(roots), "psutil")
    total = available = None
    if ps is not None:
        vm = rep.read(("host.ram.total", "host.ram.available"), ps.virtual_memory, "psutil.virtual_memory")
        if vm is not None:
            total, available = int(vm.total), int(vm.available)
        swap = rep.read(("host.ram.swap_total", "host.ram.swap_used"), ps.swap_memory, "psutil.swap_memory")
        if swap is not None:
            rep.set("host.ram.swap_total", int(swap.total), text="psutil.swap_memory")
            rep.set("host.ram.swap_used", int(swap.used), text="psutil.swap_memory")
    limits = rep.read("host.ram.cgroup_limit", lambda: memory_limit(roots), "cgroup memory limit")
    how_total, how_avail = "psutil.virtual_memory (MemTotal)", "psutil.virtual_memory (MemAvailable)"
    if limits is not None:
        limit, usage = limits
        if limit.value is not None:
            cap = int(limit.value)
            rep.set("host.ram.cgroup_limit", cap, text=limit.where)
            if total is None or cap < total:
                total, how_total = cap, f"cgroup limit ({limit.where})"
            room = cap - usage if usage is not None else cap
            if available is None or room < available:
                available, how_avail = max(0, room), f"cgroup limit - working set ({limit.where})"
    if total is not None:
        rep.set("host.ram.total", total, text=how_total)
    if available is not None:
        rep.set("host.ram.available", available, text=how_avail)
    return rep.facts


def _collect(ctx: ProbeContext) -> Facts:
    return collect_memory(ctx.roots)


PROBE = Probe("memory", "passive", "RAM total/available, swap, cgroup memory limit",
              ("host.ram.total", "host.ram.available", "host.ram.swap_used"), _collect)
