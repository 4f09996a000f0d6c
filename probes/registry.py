"""Every probe, and running a chosen set of them into one Facts snapshot.

Passive and light probes run by default; heavy ones (benchmarks) only with `bench=True`. Probes run
in a small thread pool: most of their time is spent waiting on a child process or the disk, so the
engine check, the GGUF read and the machine reads overlap.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from doctor.facts import Facts
from probes import cpu, engine, gguf_model, gpu, gpubench, memory, readbench, storage
from probes.base import Probe, ProbeContext, run_probe

PROBES: tuple[Probe, ...] = (gguf_model.PROBE, storage.PROBE, cpu.PROBE, memory.PROBE, gpu.PROBE, engine.PROBE,
                             readbench.PROBE, gpubench.PROBE)
NAMES = tuple(p.name for p in PROBES)


def by_name(name: str) -> Probe | None:
    return next((p for p in PROBES if p.name == name), None)


def select(bench: bool, only: set[str] | None = None, skip: set[str] | None = None) -> list[Probe]:
    chosen = []
    for probe in PROBES:
        if only and probe.name not in only:
            continue
        if skip and probe.name in skip:
            continue
        if probe.cost == "heavy" and not bench:
            continue
        chosen.append(probe)
    return chosen


def unreadable_roots(ctx: ProbeContext) -> list[str]:
    """The probe roots (/sys, /proc) this process cannot list, each with why. The probes read a
    missing file as "not there" (no cgroup quota, no such disk), so a root that exists but cannot be
    read must be said once, loudly, or its absence would read as facts."""
    out = []
    for label, path in (("/sys", ctx.roots.sysfs), ("/proc", ctx.roots.proc)):
        try:
            os.listdir(path)
        except FileNotFoundError:
            continue  # not there at all (another OS, a recording without it): the probes say so
        except OSError as exc:
            out.append(f"cannot read {label} ({path}): {exc.strerror or exc}; machine facts read from it are "
                       "unknown, and limits kept there (a cgroup CPU quota, a disk, a PCIe link) may be missed")
    return out


def collect(ctx: ProbeContext, probes: list[Probe], parallel: bool = True) -> Facts:
    """Run the probes and merge their facts in a fixed order. Heavy probes should run alone."""
    facts = Facts()
    if not probes:
        return facts
    if parallel and len(probes) > 1:
        with ThreadPoolExecutor(max_workers=min(4, len(probes)), thread_name_prefix="probe") as pool:
            results = list(pool.map(lambda p: run_probe(p, ctx), probes))
    else:
        results = [run_probe(p, ctx) for p in probes]
    for result in results:
        facts.merge(result)
    return facts
