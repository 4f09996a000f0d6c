"""The CPU probe: cores (physical, logical, allowed, within the container quota), ISA flags, load,
the frequency governor, and what kind of machine this is (VM, container).

Core counts and load come from psutil; the affinity from /proc/self/status (what
sched_getaffinity returns), the quota from the cgroup (doctor/sources/probes/cgroup.py), ISA flags and the
hypervisor flag from /proc/cpuinfo, the hypervisor vendor from DMI in sysfs. llama-cpp-python
starts cpu_count()//2 threads of the *host*, ignoring affinity and quota; `host.cpu.usable_cores`
is what generation threads can actually use.
"""

from __future__ import annotations

import os
from typing import Any

from doctor.core.facts import Facts
from doctor.sources.probes.base import Probe, ProbeContext, Reporter, Roots, read_text, try_text
from doctor.sources.probes.cgroup import cpu_quota, parse_cpu_list

INFERENCE_FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                   "avx_vnni", "amx_tile", "amx_int8", "amx_bf16", "asimd", "asimddp", "i8mm", "sve", "bf16")
DMI_HYPERVISORS = {"qemu": "kvm", "kvm": "kvm", "vmware": "vmware", "microsoft corporation": "hyperv",
                   "xen": "xen", "amazon ec2": "kvm", "google": "kvm", "innotek gmbh": "virtualbox",
                   "parallels": "parallels", "openstack": "kvm", "digitalocean": "kvm", "hetzner": "kvm"}


def _psutil(roots: Roots) -> Any:
    if roots.psutil is not None:
        return roots.psutil
    import psutil

    return psutil


def cpuinfo(roots: Roots) -> tuple[str | None, set[str]]:
    """(model name, flags) from /proc/cpuinfo (x86 `flags`, arm64 `Features`)."""
    model: str | None = None
    flags: set[str] = set()
    for line in read_text(roots.procfs("cpuinfo"), 4 << 20).splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "hardware", "cpu model") and model is None:
            model = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    return model, flags


def affinity(roots: Roots) -> int:
    if roots.affinity is not None:
        return len(roots.affinity())
    for line in read_text(roots.procfs("self", "status")).splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return len(parse_cpu_list(line.split(":", 1)[1]))
    return len(os.sched_getaffinity(0))


def virtualization(roots: Roots, flags: set[str]) -> tuple[str, bool]:
    """(hypervisor or 'none', inside a container)."""
    dmi = (try_text(roots.sys("class", "dmi", "id", n)) for n in ("sys_vendor", "product_name"))
    vendor = " ".join(filter(None, dmi))
    vm = "none"
    low = vendor.lower()
    for needle, name in DMI_HYPERVISORS.items():
        if needle in low:
            vm = name
            break
    else:
        if "hypervisor" in flags:
            vm = "vm"
    container = False
    mountinfo = try_text(roots.procfs("self", "mountinfo")) or ""
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] == "/":
            tail = line.split(" - ", 1)[1].split() if " - " in line else []
            container = bool(tail) and tail[0] in ("overlay", "fuse-overlayfs", "aufs")
    if not container:
        cg = try_text(roots.procfs("1", "cgroup")) or ""
        container = any(k in cg for k in ("/docker/", "/kubepods", "/containerd/", "/lxc/", "libpod"))
    return vm, container


def collect_cpu(roots: Roots) -> Facts:
    rep = Reporter("cpu")
    ps = rep.read(("host.cpu.logical_cores", "host.cpu.physical_cores"), lambda: _psutil(roots), "psutil")
    if ps is not None:
        logical = rep.read("host.cpu.logical_cores", lambda: ps.cpu_count(logical=True), "psutil")
        if logical is not None:
            rep.set("host.cpu.logical_cores", logical, text="psutil.cpu_count()")
        phys = rep.read("host.cpu.physical_cores", lambda: ps.cpu_count(logical=False), "psutil")
        if phys is not None:
            rep.set("host.cpu.physical_cores", phys, text="psutil.cpu_count(logical=False)")
        elif not rep.facts.get("host.cpu.physical_cores"):
            rep.unknown("host.cpu.physical_cores", "psutil could not count physical cores")
        load = rep.read("host.cpu.load_1m", lambda: ps.getloadavg()[0], "load average")
        if load is not None:
            rep.set("host.cpu.load_1m", round(float(load), 2), text="1-minute load average")
    info = rep.read(("host.cpu.model", "host.cpu.flags"), lambda: cpuinfo(roots), "/proc/cpuinfo")
    flags: set[str] = set()
    if info is not None:
        model, flags = info
        rep.set("host.cpu.model", model, text="/proc/cpuinfo")
        rep.set("host.cpu.flags", sorted(f for f in flags if f in INFERENCE_FLAGS), text="/proc/cpuinfo flags")
        if "sse2" in flags:  # x86; AVX does not exist elsewhere
            rep.set("host.cpu.avx2", "avx2" in flags, text="/proc/cpuinfo flags")
            rep.set("host.cpu.avx512", "avx512f" in flags, text="/proc/cpuinfo flags")
    aff = rep.read("host.cpu.affinity_cores", lambda: affinity(roots), "/proc/self/status")
    if aff:
        rep.set("host.cpu.affinity_cores", aff, text="Cpus_allowed_list")
    quota = rep.read("host.cpu.quota_cores", lambda: cpu_quota(roots), "cgroup cpu quota")
    if quota is not None and quota.value is not None:
        rep.set("host.cpu.quota_cores", round(quota.value, 2), text=quota.where)
    governor = try_text(roots.sys("devices", "system", "cpu", "cpu0", "cpufreq", "scaling_governor"))
    if governor:
        rep.set("host.cpu.governor", governor, text="cpu0 scaling_governor")
    limits = [v for v in (rep.facts.value("host.cpu.physical_cores"), rep.facts.value("host.cpu.affinity_cores"),
                          rep.facts.value("host.cpu.quota_cores")) if isinstance(v, int | float) and v > 0]
    if limits:
        usable = min(limits)
        why = ", ".join(f"{n} {rep.facts.value('host.cpu.' + k)}" for n, k in
                        (("physical", "physical_cores"), ("affinity", "affinity_cores"), ("quota", "quota_cores"))
                        if rep.facts.has("host.cpu." + k))
        rep.set("host.cpu.usable_cores", round(usable, 2) if not float(usable).is_integer() else int(usable),
                text=f"min({why})")
        load = rep.facts.value("host.cpu.load_1m")
        if isinstance(load, float):
            rep.set("host.cpu.load_per_core", round(load / max(usable, 1), 2), text=f"load {load} / {usable} cores")
    ostype = try_text(roots.procfs("sys", "kernel", "ostype"))
    release = try_text(roots.procfs("sys", "kernel", "osrelease"))
    if ostype:
        rep.set("host.os", f"{ostype} {release or ''}".strip(), text="/proc/sys/kernel")
    virt = rep.read("host.virtualized", lambda: virtualization(roots, flags), "DMI / cpuinfo / mountinfo")
    if virt is not None:
        vm, container = virt
        rep.set("host.vm", vm, text="DMI sys_vendor / cpuinfo hypervisor flag")
        rep.set("host.container", container, text="root filesystem / cgroup of PID 1")
        summary = "container" if container and vm == "none" else (f"container in {vm}" if container else vm)
        rep.set("host.virtualized", summary)
    return rep.facts


def _collect(ctx: ProbeContext) -> Facts:
    return collect_cpu(ctx.roots)


PROBE = Probe("cpu", "passive", "CPU cores, quota, affinity, ISA flags, load, VM/container",
              ("host.cpu.physical_cores", "host.cpu.logical_cores", "host.cpu.usable_cores"), _collect)
