"""Resource sampling of a running engine process (tree) and of the machine around it.

Every `sample()` reads, for the engine's process and its children: CPU % (psutil), resident memory
(psutil), GPU memory (NVML, per process, when an NVIDIA driver is there); and for the machine: the
1-minute load, the CPU demand of *other* processes (runnable threads from /proc/loadavg minus the
engine's own running threads, per usable core), swap in use and bytes swapped in since the start.
A reading that fails is None, never an exception: a process that exits between two samples, a
machine without /proc or NVML.

Machine access only; the roots (/proc, the NVML and psutil modules) are parameters for tests.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

from doctor.core.events import SampleEvent


def usable_cores(proc_root: str = "/proc", cgroup_root: str = "/sys/fs/cgroup") -> float | None:
    """min(affinity, cgroup quota) — the CPUs this process can actually use."""
    try:
        affinity: float | None = float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        affinity = float(os.cpu_count() or 0) or None
    quota = cgroup_quota(cgroup_root)
    values = [v for v in (affinity, quota) if v]
    return min(values) if values else None


def cgroup_quota(cgroup_root: str = "/sys/fs/cgroup") -> float | None:
    """CPU quota in cores from cgroup v2 cpu.max or v1 cfs files; None when unlimited or unknown."""
    try:
        with open(os.path.join(cgroup_root, "cpu.max"), encoding="ascii") as handle:
            quota, period = handle.read().split()[:2]
        if quota != "max" and int(period) > 0:
            return int(quota) / int(period)
        return None
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(cgroup_root, "cpu", "cpu.cfs_quota_us"), encoding="ascii") as handle:
            quota_us = int(handle.read().strip())
        with open(os.path.join(cgroup_root, "cpu", "cpu.cfs_period_us"), encoding="ascii") as handle:
            period_us = int(handle.read().strip())
        if quota_us > 0 and period_us > 0:
            return quota_us / period_us
    except (OSError, ValueError):
        pass
    return None


@dataclass(slots=True)
class NvmlHandle:
    """NVML, initialised once; `why` says why it is not available."""

    module: Any = None
    handles: tuple[Any, ...] = ()
    why: str | None = None

    @classmethod
    def open(cls, module: Any = None) -> NvmlHandle:
        try:
            if module is None:
                import pynvml as module  # type: ignore[no-redef]
            module.nvmlInit()
            count = module.nvmlDeviceGetCount()
            handles = tuple(module.nvmlDeviceGetHandleByIndex(i) for i in range(count))
        except ImportError:
            return cls(why="nvidia-ml-py is not installed")
        except Exception as exc:  # any failure here is reported as unknown, never raised
            return cls(why=f"NVML not available ({type(exc).__name__}: {exc})")
        if not handles:
            return cls(module, (), "NVML found no NVIDIA GPU")
        return cls(module, handles, None)

    def process_memory(self, pids: set[int]) -> int | None:
        """GPU memory used by these processes, summed over devices; None without NVML."""
        if self.module is None or not self.handles:
            return None
        total = 0
        seen = False
        for handle in self.handles:
            for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                fn = getattr(self.module, getter, None)
                if fn is None:
                    continue
                try:
                    procs = fn(handle)
                except Exception:  # any failure here is reported as unknown, never raised
                    continue
                seen = True
                for p in procs:
                    used = getattr(p, "usedGpuMemory", None)
                    if getattr(p, "pid", None) in pids and isinstance(used, int):
                        total += used
        return total if seen else None

    def close(self) -> None:
        if self.module is not None and self.why is None:
            with contextlib.suppress(Exception):
                self.module.nvmlShutdown()


class ResourceSampler:
    """Samples one process tree; call `sample()` every fraction of a second."""

    def __init__(self, pid: int | None, *, proc_root: str = "/proc", psutil_module: Any = None,
                 nvml: NvmlHandle | None = None, cores: float | None = None, own_pid: int | None = None,
                 tree: bool = True) -> None:
        if psutil_module is None:
            import psutil as psutil_module
        self.psutil = psutil_module
        self.proc_root = proc_root
        self.nvml = nvml if nvml is not None else NvmlHandle.open()
        self.cores = cores if cores is not None else usable_cores(proc_root)
        self.own_pid = own_pid if own_pid is not None else os.getpid()
        self.tree = tree  # follow the process's children too (a wrapped server); listing them scans /proc
        self.procs: dict[int, Any] = {}
        self.root: Any = None
        self.swap_in_start: int | None = None
        self._swap_start()
        if pid is not None:
            self.attach(pid)

    def attach(self, pid: int) -> None:
        try:
            self.root = self.psutil.Process(pid)
            self.root.cpu_percent(None)
            self.procs = {pid: self.root}
        except Exception:  # any failure here is reported as unknown, never raised
            self.root = None

    def _swap_start(self) -> None:
        try:
            self.swap_in_start = int(self.psutil.swap_memory().sin)
        except Exception:  # any failure here is reported as unknown, never raised
            self.swap_in_start = None

    def _tree(self) -> list[Any]:
        if self.root is None:
            return []
        if not self.tree:
            return [self.root]
        try:
            children = self.root.children(recursive=True)
        except Exception:  # any failure here is reported as unknown, never raised
            return list(self.procs.values())
        alive = {self.root.pid: self.root}
        for child in children:
            known = self.procs.get(child.pid)
            if known is None:
                try:
                    child.cpu_percent(None)
                except Exception:  # any failure here is reported as unknown, never raised
                    continue
                known = child
            alive[child.pid] = known
        self.procs = alive
        return list(alive.values())

    def sample(self, t_ms: float = 0.0) -> SampleEvent:
        event = SampleEvent(t_ms=t_ms)
        tree = self._tree()
        if tree:
            cpu = 0.0
            rss = 0
            ok = False
            for proc in tree:
                try:
                    with proc.oneshot():
                        cpu += proc.cpu_percent(None)
                        rss += proc.memory_info().rss
                    ok = True
                except Exception:  # any failure here is reported as unknown, never raised
                    continue
            if ok:
                event.cpu_percent = round(cpu, 1)
                event.rss_bytes = rss
            event.vram_bytes = self.nvml.process_memory({p.pid for p in tree})
        with contextlib.suppress(AttributeError, OSError):
            event.load_1m = round(os.getloadavg()[0], 2)
        event.others_load = self._others_load({p.pid for p in tree})
        try:
            swap = self.psutil.swap_memory()
            event.swap_used_bytes = int(swap.used)
            if self.swap_in_start is not None:
                event.swap_in_bytes = max(0, int(swap.sin) - self.swap_in_start)
        except Exception:  # any failure here is reported as unknown, never raised
            pass
        return event

    def _others_load(self, pids: set[int]) -> float | None:
        """Runnable threads that are neither the engine's nor ours, per usable core (Linux)."""
        if not self.cores:
            return None
        try:
            with open(os.path.join(self.proc_root, "loadavg"), encoding="ascii") as handle:
                running = int(handle.read().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return None
        mine = self._running_threads(pids) + max(1, self._running_threads({self.own_pid}))
        return round(max(0, running - mine) / self.cores, 3)

    def _running_threads(self, pids: set[int]) -> int:
        count = 0
        for pid in pids:
            task_dir = os.path.join(self.proc_root, str(pid), "task")
            try:
                tids = os.listdir(task_dir)
            except OSError:
                continue
            for tid in tids:
                try:
                    with open(os.path.join(task_dir, tid, "stat"), "rb") as handle:
                        stat = handle.read()
                except OSError:
                    continue
                end = stat.rfind(b")")
                if end > 0 and stat[end + 2:end + 3] == b"R":
                    count += 1
        return count

    def close(self) -> None:
        self.nvml.close()
