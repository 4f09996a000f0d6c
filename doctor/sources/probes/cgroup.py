"""Container limits: the CPU quota and memory limit of this process's cgroup (v1 or v2).

`/proc/self/cgroup` names the cgroup; the limits live under `<sysfs>/fs/cgroup`. Inside a
container with its own cgroup namespace the path is `/` and the container's limits sit at the
mount root, so the walk checks the named path and every parent up to the root and keeps the
tightest limit. No limit is a value (None with "no limit"), not an unknown.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from doctor.sources.probes.base import Roots, read_text, try_text

V1_UNLIMITED = 1 << 62  # v1 reports "no limit" as a huge page-rounded number (9223372036854771712)


@dataclass(frozen=True, slots=True)
class Limit:
    value: float | None  # cores or bytes; None = no limit
    where: str  # the file that set it, or why there is none


def cgroup_entries(roots: Roots) -> list[tuple[str, list[str], str]]:
    """(hierarchy id, controllers, path) for each line of /proc/self/cgroup."""
    out = []
    for line in read_text(roots.procfs("self", "cgroup")).splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            out.append((parts[0], [c for c in parts[1].split(",") if c], parts[2] or "/"))
    return out


def _walk(base: str, path: str) -> list[str]:
    """base/path, then each parent, down to base itself."""
    rel = path.strip("/")
    dirs = []
    while True:
        dirs.append(os.path.join(base, rel) if rel else base)
        if not rel:
            return dirs
        rel = os.path.dirname(rel)


def _v1_bases(roots: Roots, controller: str) -> list[str]:
    names = {"cpu": ("cpu,cpuacct", "cpu", "cpuacct,cpu"), "memory": ("memory",)}[controller]
    return [roots.sys("fs", "cgroup", n) for n in names]


def cpu_quota(roots: Roots) -> Limit:
    entries = cgroup_entries(roots)
    best: Limit = Limit(None, "no CPU quota set")
    for hid, controllers, path in entries:
        if hid == "0" and not controllers:  # cgroup v2
            for d in _walk(roots.sys("fs", "cgroup"), path):
                text = try_text(os.path.join(d, "cpu.max"))
                if not text:
                    continue
                quota, _, period = text.partition(" ")
                if quota != "max" and period.strip():
                    cores = int(quota) / int(period)
                    if best.value is None or cores < best.value:
                        best = Limit(cores, f"{os.path.join(d, 'cpu.max')}: {text}")
        elif "cpu" in controllers:
            for base in _v1_bases(roots, "cpu"):
                for d in [*_walk(base, path)]:
                    quota_us = try_text(os.path.join(d, "cpu.cfs_quota_us"))
                    period_us = try_text(os.path.join(d, "cpu.cfs_period_us"))
                    if quota_us is None or period_us is None:
                        continue
                    if int(quota_us) > 0 and int(period_us) > 0:
                        cores = int(quota_us) / int(period_us)
                        if best.value is None or cores < best.value:
                            best = Limit(cores, f"{d}/cpu.cfs_quota_us {quota_us} / cpu.cfs_period_us {period_us}")
    return best


def _working_set(d: str, usage_file: str, inactive_key: str) -> int | None:
    """Bytes in use in a cgroup that the kernel cannot simply drop: the usage less its inactive file
    pages (page cache nobody touched lately - reclaimed before anything is killed), as the kubelet
    and `docker stats` count it. Measured under a cgroup limit (bench/fit_vs_llamacpp.py): a process
    is killed only when what it cannot give back exceeds the limit."""
    current = try_text(os.path.join(d, usage_file))
    if not current or not current.isdigit():
        return None
    inactive = 0
    for line in (try_text(os.path.join(d, "memory.stat")) or "").splitlines():
        key, _, value = line.partition(" ")
        if key == inactive_key and value.strip().isdigit():
            inactive = int(value)
    return max(0, int(current) - inactive)


def memory_limit(roots: Roots) -> tuple[Limit, int | None]:
    """(the tightest memory limit, bytes in use in that cgroup that cannot be dropped)."""
    best: Limit = Limit(None, "no memory limit set")
    usage: int | None = None
    for hid, controllers, path in cgroup_entries(roots):
        if hid == "0" and not controllers:
            for d in _walk(roots.sys("fs", "cgroup"), path):
                text = try_text(os.path.join(d, "memory.max"))
                if text and text != "max":
                    limit = int(text)
                    if best.value is None or limit < best.value:
                        best = Limit(limit, f"{os.path.join(d, 'memory.max')}: {text}")
                        usage = _working_set(d, "memory.current", "inactive_file")
        elif "memory" in controllers:
            for base in _v1_bases(roots, "memory"):
                for d in _walk(base, path):
                    text = try_text(os.path.join(d, "memory.limit_in_bytes"))
                    if text and text.isdigit() and int(text) < V1_UNLIMITED:
                        limit = int(text)
                        if best.value is None or limit < best.value:
                            best = Limit(limit, f"{d}/memory.limit_in_bytes: {text}")
                            usage = _working_set(d, "memory.usage_in_bytes", "total_inactive_file")
    return best, usage


def parse_cpu_list(text: str) -> set[int]:
    """'0-3,8,10-11' -> {0, 1, 2, 3, 8, 10, 11} (Cpus_allowed_list, cpuset.cpus)."""
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus
