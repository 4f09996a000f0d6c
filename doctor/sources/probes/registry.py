"""Every probe, and running a chosen set of them into one Facts snapshot.

Passive and light probes run by default; heavy ones (benchmarks) only with `bench=True`. Probes run
in a small thread pool: most of their time is spent waiting on a child process or the disk, so the
engine check, the GGUF read and the machine reads overlap. A probe's module is imported only when
the probe is chosen (`scan --only gguf,memory` does not pay for the others); the table below names
each probe's module and cost, and tests check it against the probe itself.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from doctor.core.facts import Facts
from doctor.sources.probes.base import Probe, ProbeContext, run_probe

# (name, module under doctor/sources/probes/, cost), in the order facts are merged
TABLE: tuple[tuple[str, str, str], ...] = (
    ("gguf", "gguf_model", "passive"), ("storage", "storage", "passive"), ("cpu", "cpu", "passive"),
    ("memory", "memory", "passive"), ("gpu", "gpu", "passive"), ("engine", "engine", "light"),
    ("ceilings", "ceilings", "light"),
    ("readbench", "readbench", "heavy"), ("gpubench", "gpubench", "heavy"),
)
NAMES = tuple(name for name, _, _ in TABLE)


def _load(module: str) -> Probe:
    probe: Probe = importlib.import_module(f"doctor.sources.probes.{module}").PROBE
    return probe


def __getattr__(name: str) -> Any:  # PROBES: every probe, imported on first use
    if name == "PROBES":
        return tuple(_load(module) for _, module, _ in TABLE)
    raise AttributeError(name)


def by_name(name: str) -> Probe | None:
    return next((_load(module) for n, module, _ in TABLE if n == name), None)


def select(bench: bool, only: set[str] | None = None, skip: set[str] | None = None) -> list[Probe]:
    chosen = []
    for name, module, cost in TABLE:
        if only and name not in only:
            continue
        if skip and name in skip:
            continue
        if cost == "heavy" and not bench:
            continue
        chosen.append(_load(module))
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
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(4, len(probes)), thread_name_prefix="probe") as pool:
            results = list(pool.map(lambda p: run_probe(p, ctx), probes))
    else:
        results = [run_probe(p, ctx) for p in probes]
    for result in results:
        facts.merge(result)
    return facts
