"""Record this machine as a replayable folder (what fixtures/machines/ holds).

Copies exactly the sysfs and procfs files the probes read - keeping sysfs's relative symlinks, so
`/sys/dev/block/259:2` still resolves to its device inside the copy - and writes `machine.json`
with NVML's and psutil's answers and the engine's. doctor/sources/probes/replay.py reads it back. Nothing else
of the machine is copied (no other processes' data, no file contents but the model's path).

    python -m doctor.sources.probes.record DEST --model /path/to/model.gguf [--bench]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from doctor.sources.probes.base import Roots, try_text
from doctor.sources.probes.mountinfo import find_mount, parse_mountinfo
from doctor.sources.probes.pcie import list_gpus

PROC_FILES = ("self/mountinfo", "self/cgroup", "cpuinfo", "sys/kernel/ostype", "sys/kernel/osrelease", "1/cgroup")
SYS_FILES = ("class/dmi/id/sys_vendor", "class/dmi/id/product_name",
             "devices/system/cpu/cpu0/cpufreq/scaling_governor")
BLOCK_ATTRS = ("partition", "dev", "dm/name", "dm/uuid", "md/level", "loop/backing_file", "queue/rotational",
               "device/model", "device/vendor", "device/transport", "device/device/transport", "size", "removable")
PCI_ATTRS = ("class", "vendor", "device", "current_link_speed", "current_link_width", "max_link_speed",
             "max_link_width")
CGROUP_FILES = ("cpu.max", "memory.max", "memory.current", "cpu.cfs_quota_us", "cpu.cfs_period_us",
                "memory.limit_in_bytes", "memory.usage_in_bytes")


class Copier:
    def __init__(self, src_root: str, dest_root: Path) -> None:
        self.src_root = src_root.rstrip("/")
        self.dest_root = dest_root

    def copy(self, path: str) -> None:
        """Copy one file under the root, recreating every symlink met on the way."""
        rel = os.path.relpath(path, self.src_root)
        if rel.startswith(".."):
            return
        cur_src, cur_dest = self.src_root, self.dest_root
        parts = Path(rel).parts
        for i, part in enumerate(parts):
            cur_src = os.path.join(cur_src, part)
            cur_dest = cur_dest / part
            if os.path.islink(cur_src):
                target = os.readlink(cur_src)
                if not cur_dest.is_symlink() and not cur_dest.exists():
                    cur_dest.parent.mkdir(parents=True, exist_ok=True)
                    os.symlink(target, cur_dest)
                resolved = os.path.normpath(os.path.join(os.path.dirname(cur_src), target))
                rest = os.path.join(resolved, *parts[i + 1:])
                self.copy(rest)
                return
        if os.path.isfile(cur_src):
            text = try_text(cur_src)
            if text is not None:
                cur_dest.parent.mkdir(parents=True, exist_ok=True)
                cur_dest.write_text(text + "\n", encoding="utf-8")
        elif os.path.isdir(cur_src):
            cur_dest.mkdir(parents=True, exist_ok=True)

    def link(self, path: str) -> None:
        """Recreate a symlink (and the tree it points into)."""
        self.copy(path)


def _status_line() -> str:
    for line in (try_text("/proc/self/status") or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line
    return ""


def _block_chain(copier: Copier, roots: Roots, dev: str, depth: int = 0) -> None:
    if depth > 8:
        return
    link = roots.sys("dev", "block", dev)
    copier.copy(link)
    real = os.path.realpath(link)
    for attr in BLOCK_ATTRS:
        copier.copy(os.path.join(real, attr))
    if os.path.exists(os.path.join(real, "partition")):
        parent = os.path.dirname(real)
        for attr in BLOCK_ATTRS:
            copier.copy(os.path.join(parent, attr))
        real = parent
    name = os.path.basename(real)
    copier.copy(roots.sys("class", "block", name))
    device = os.path.join(real, "device")
    if os.path.islink(device):
        copier.copy(device)
        hctl = os.path.basename(os.path.realpath(device))
        host = hctl.split(":")[0]
        for cls in ("scsi_host", "iscsi_host", "fc_host", "sas_host"):
            copier.copy(roots.sys("class", cls, f"host{host}", "proc_name"))
            copier.copy(roots.sys("class", cls, f"host{host}"))
    slaves = os.path.join(real, "slaves")
    if os.path.isdir(slaves):
        for member in os.listdir(slaves):
            copier.copy(os.path.join(slaves, member))
            member_dev = try_text(os.path.join(os.path.realpath(os.path.join(slaves, member)), "dev"))
            if member_dev:
                _block_chain(copier, roots, member_dev, depth + 1)


def _psutil_answers() -> dict[str, Any]:
    import psutil

    vm, swap = psutil.virtual_memory(), psutil.swap_memory()
    return {"cpu_count": {"logical": psutil.cpu_count(logical=True), "physical": psutil.cpu_count(logical=False)},
            "virtual_memory": {"total": vm.total, "available": vm.available},
            "swap_memory": {"total": swap.total, "used": swap.used}, "loadavg": list(psutil.getloadavg())}


def nvml_answers(nv: Any) -> dict[str, Any]:
    """NVML's answers to every call doctor/sources/probes/gpu.py makes, errors included."""
    try:
        nv.nvmlInit()
    except Exception as exc:
        return {"init_error": _error_name(nv, exc)}
    out: dict[str, Any] = {"devices": [], "driver": None}
    try:
        out["driver"] = _text(nv.nvmlSystemGetDriverVersion())
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            dev: dict[str, Any] = {"errors": {}}

            def ask(fn: str, *args: Any, h: Any = h, dev: dict[str, Any] = dev) -> Any:
                try:
                    return getattr(nv, fn)(h, *args)
                except Exception as exc:
                    dev["errors"][fn] = _error_name(nv, exc)
                    return None

            dev["name"] = _text(ask("nvmlDeviceGetName"))
            dev["uuid"] = _text(ask("nvmlDeviceGetUUID"))
            pci = ask("nvmlDeviceGetPciInfo")
            dev["pci_bus_id"] = _text(pci.busId) if pci is not None else None
            mem = ask("nvmlDeviceGetMemoryInfo")
            if mem is not None:
                dev["memory"] = {"total": int(mem.total), "free": int(mem.free), "used": int(mem.used)}
            util = ask("nvmlDeviceGetUtilizationRates")
            if util is not None:
                dev["utilization"] = {"gpu": int(util.gpu), "memory": int(util.memory)}
            dev["pstate"] = ask("nvmlDeviceGetPerformanceState")
            procs = ask("nvmlDeviceGetComputeRunningProcesses")
            dev["processes"] = [{"pid": int(p.pid), "used": p.usedGpuMemory} for p in procs or []]
            gprocs = ask("nvmlDeviceGetGraphicsRunningProcesses")
            dev["graphics_processes"] = [{"pid": int(p.pid), "used": p.usedGpuMemory} for p in gprocs or []]
            dev["mem_bus_width"] = ask("nvmlDeviceGetMemoryBusWidth")
            dev["max_mem_clock"] = ask("nvmlDeviceGetMaxClockInfo", getattr(nv, "NVML_CLOCK_MEM", 2))
            dev["pcie"] = {key: ask(fn) for key, fn in (
                ("curr_gen", "nvmlDeviceGetCurrPcieLinkGeneration"), ("curr_width", "nvmlDeviceGetCurrPcieLinkWidth"),
                ("max_gen", "nvmlDeviceGetMaxPcieLinkGeneration"), ("max_width", "nvmlDeviceGetMaxPcieLinkWidth"),
                ("gpu_max_gen", "nvmlDeviceGetGpuMaxPcieLinkGeneration"), ("replay", "nvmlDeviceGetPcieReplayCounter"))}
            dev["pcie"] = {k: v for k, v in dev["pcie"].items() if v is not None}
            out["devices"].append({k: v for k, v in dev.items() if v is not None})
    finally:
        with contextlib.suppress(Exception):  # shutting down a library we are done with
            nv.nvmlShutdown()
    return out


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _error_name(nv: Any, exc: BaseException) -> str:
    value = getattr(exc, "value", None)
    for name in dir(nv):
        if name.startswith("NVML_ERROR_") and getattr(nv, name) == value:
            return name.removeprefix("NVML_ERROR_")
    return "UNKNOWN"


def record_machine(dest: str, model_path: str, bench: bool = False) -> Path:
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    roots = Roots()
    proc_copier, sys_copier = Copier("/proc", out / "proc"), Copier("/sys", out / "sys")
    for rel in PROC_FILES:
        proc_copier.copy(os.path.join("/proc", rel))
    status = _status_line()
    if status:
        (out / "proc" / "self").mkdir(parents=True, exist_ok=True)
        (out / "proc" / "self" / "status").write_text(status + "\n", encoding="utf-8")
    for rel in SYS_FILES:
        sys_copier.copy(os.path.join("/sys", rel))
    mounts = parse_mountinfo(try_text("/proc/self/mountinfo") or "")
    mount = find_mount(mounts, os.path.realpath(model_path))
    devs = {mount.dev} if mount is not None and mount.major else set()
    devs |= {m.dev for m in mounts if m.mountpoint in ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf") and m.major}
    for dev in devs:
        _block_chain(sys_copier, roots, dev)
    for gpu in list_gpus(roots):
        path = roots.sys("bus", "pci", "devices", gpu.bdf)
        sys_copier.copy(path)
        real = os.path.realpath(path)
        for attr in PCI_ATTRS:
            sys_copier.copy(os.path.join(real, attr))
            sys_copier.copy(os.path.join(os.path.dirname(real), attr))
    for line in (try_text("/proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        rel = parts[2].strip("/")
        bases = ["fs/cgroup"] if parts[0] == "0" else [f"fs/cgroup/{c}" for c in ("cpu,cpuacct", "cpu", "memory")]
        for base in bases:
            cur = rel
            while True:
                for name in CGROUP_FILES:
                    sys_copier.copy(os.path.join("/sys", base, cur, name))
                if not cur:
                    break
                cur = os.path.dirname(cur)
    import pynvml

    from doctor.sources.probes.engine import ask_engine

    meta: dict[str, Any] = {"description": f"recorded with doctor/sources/probes/record.py on {os.uname().nodename}",
                            "model_path": os.path.realpath(model_path), "psutil": _psutil_answers(),
                            "nvml": nvml_answers(pynvml)}
    try:
        meta["engine"] = ask_engine()
    except Exception as exc:  # recorded as missing, not fatal
        meta["engine_error"] = str(exc)
    if bench:
        from doctor.sources.probes.gpubench import run_bench
        from doctor.sources.probes.readbench import measure_read

        meta["bench"] = run_bench()
        read = measure_read(model_path, roots)
        meta["bench"]["read_mb_s"] = read.value("model.storage.read_mb_s")
        meta["bench"]["read_upper_bound"] = read.value("model.storage.read_upper_bound")
    (out / "machine.json").write_text(json.dumps(meta, indent=1, default=str) + "\n", encoding="utf-8")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description="record this machine for replay (fixtures/machines/ format)")
    parser.add_argument("dest")
    parser.add_argument("--model", required=True, help="the model file whose storage to record")
    parser.add_argument("--bench", action="store_true", help="also record the benchmarks")
    parser.add_argument("--force", action="store_true", help="replace DEST")
    args = parser.parse_args()
    if os.path.exists(args.dest) and args.force:
        shutil.rmtree(args.dest)
    path = record_machine(args.dest, args.model, args.bench)
    print(f"recorded {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
