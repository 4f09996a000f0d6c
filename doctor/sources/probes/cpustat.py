"""How busy the cores were with other work while something of ours ran: /proc/stat deltas.

Floor: sources (machine access; the proc root is a parameter so recorded machines replay). No
strings for users. `CpuWindow.start()` reads the machine's CPU time counters and this process's own
(and its reaped children's) CPU time; `stop()` reads them again and returns the share of the cores
other processes used in between (0..1) and the steal time the hypervisor took (% of the window).
Our own time — this process, its threads and the engine child once reaped — is not "other". An
engine that is not our child (watch --log follows another process's log) is told apart as the
busiest process of the window (`engine_not_ours`: /proc/<pid>/stat before and after): a followed log
does not name its writer's pid, and while a run is being traced its engine is the one at work.
`cores_facts` turns a share into the host.cpu.other_busy / steal_pct facts scan and watch judge with.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass

from doctor.core.facts import Facts, Source

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True, slots=True)
class CpuTimes:
    busy: float  # seconds all CPUs spent on anything but idle / iowait / steal
    steal: float
    total: float  # every column, seconds
    cpus: int


@dataclass(frozen=True, slots=True)
class CpuShare:
    other_busy: float  # share of the cores other processes used (0..1)
    steal_pct: float  # % of the CPU time the hypervisor took
    seconds: float  # the window
    cpus: int
    own_cores: float  # cores our process tree used on average

    def describe(self) -> str:
        return (f"/proc/stat over {self.seconds:.1f} s on {self.cpus} CPUs: others used "
                f"{self.other_busy * 100:.0f}% of the cores, steal {self.steal_pct:.1f}%, this run "
                f"{self.own_cores:.2f} cores")


def read_times(proc_root: str = "/proc") -> CpuTimes | None:
    """The aggregate `cpu` line of /proc/stat, in seconds; None when it cannot be read."""
    try:
        with open(os.path.join(proc_root, "stat"), encoding="ascii") as handle:
            lines = handle.read(1 << 16).splitlines()
    except OSError:
        return None
    cpus = sum(1 for ln in lines if ln.startswith("cpu") and ln[3:4].isdigit())
    head = next((ln for ln in lines if ln.startswith("cpu ")), None)
    if head is None:
        return None
    try:
        values = [int(v) for v in head.split()[1:]]
    except ValueError:
        return None
    values += [0] * (8 - len(values))
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    busy = user + nice + system + irq + softirq  # guest time is already inside user
    total = sum(values[:8])
    return CpuTimes(busy / CLK_TCK, steal / CLK_TCK, total / CLK_TCK, max(1, cpus))


def own_seconds() -> float:
    """CPU seconds of this process (all threads) and its reaped children."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def share(before: CpuTimes, after: CpuTimes, own_s: float, wall_s: float) -> CpuShare | None:
    """The other processes' share of the cores between two readings; `own_s` is our CPU time."""
    total = after.total - before.total
    if total <= 0 or wall_s <= 0:
        return None
    busy = after.busy - before.busy
    others = max(0.0, busy - own_s)
    cpu_s = total  # all CPUs' seconds in the window (the counters' own clock)
    return CpuShare(other_busy=round(min(1.0, others / cpu_s), 3),
                    steal_pct=round(100.0 * max(0.0, after.steal - before.steal) / cpu_s, 2),
                    seconds=wall_s, cpus=after.cpus, own_cores=round(own_s / wall_s, 2))


def process_seconds(proc_root: str = "/proc") -> dict[int, float]:
    """CPU seconds (user + system) of every process /proc shows, by pid; unreadable ones left out."""
    out: dict[int, float] = {}
    try:
        names = [n for n in os.listdir(proc_root) if n.isdigit()]
    except OSError:
        return out
    for name in names:
        try:
            with open(os.path.join(proc_root, name, "stat"), encoding="ascii", errors="replace") as handle:
                fields = handle.read(4096).rpartition(")")[2].split()
            out[int(name)] = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)
        except (OSError, ValueError, IndexError):
            continue
    return out


def busiest_other(before: dict[int, float], after: dict[int, float], exclude: int) -> float:
    """CPU seconds the busiest process other than `exclude` used between two readings."""
    return max((t - before.get(pid, 0.0) for pid, t in after.items() if pid != exclude), default=0.0)


class CpuWindow:
    """Start before the run, stop after it (the engine child reaped): `stop()` gives the share.
    `engine_not_ours`: the engine is another process's (a followed log): the busiest one is ours."""

    def __init__(self, proc_root: str = "/proc", engine_not_ours: bool = False) -> None:
        self.proc_root = proc_root
        self.engine_not_ours = engine_not_ours
        self._before: CpuTimes | None = None
        self._procs: dict[int, float] = {}
        self._own = 0.0
        self._t0 = 0.0

    def start(self) -> CpuWindow:
        self._before = read_times(self.proc_root)
        self._procs = process_seconds(self.proc_root) if self.engine_not_ours else {}
        self._own = own_seconds()
        self._t0 = time.monotonic()
        return self

    def stop(self) -> CpuShare | None:
        after = read_times(self.proc_root)
        if self._before is None or after is None:
            return None
        own = own_seconds() - self._own
        if self.engine_not_ours:
            own += busiest_other(self._procs, process_seconds(self.proc_root), os.getpid())
        return share(self._before, after, own, time.monotonic() - self._t0)


def cores_facts(share: CpuShare | None) -> Facts:
    """How the cores were shared while the run was traced: host.cpu.other_busy and steal_pct."""
    facts = Facts()
    if share is None:
        return facts
    src = Source("probe", "probe.cpustat", text=share.describe())
    facts.set("host.cpu.other_busy", share.other_busy, src)
    facts.set("host.cpu.steal_pct", share.steal_pct, src)
    return facts
