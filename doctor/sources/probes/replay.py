"""Recorded machines: stand-ins for NVML and psutil that answer from a recording, and the loader
that turns a folder under fixtures/machines/ into `Roots`.

A machine folder holds `sys/` and `proc/` (the files the probes read, symlinks kept relative) and
`machine.json` with the NVML answers (per device; a call the recording marks as failing raises the
real `pynvml.NVMLError` subclass for that code), the psutil answers, the engine's answers and, for
heavy probes, recorded measurements. doctor/sources/probes/record.py writes such folders from a live machine.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from doctor.sources.probes.base import Roots


def _nvml_error(name: str) -> Exception:
    import pynvml

    code = getattr(pynvml, f"NVML_ERROR_{name.upper()}", None)
    if not isinstance(code, int):
        code = pynvml.NVML_ERROR_UNKNOWN
    return pynvml.NVMLError(code)


class RecordedNvml:
    """Answers the NVML calls doctor/sources/probes/gpu.py makes, from a recording."""

    NVML_CLOCK_MEM = 2
    nvmlMemory_v2 = 0x02000028

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.devices: list[dict[str, Any]] = list(data.get("devices", []))
        self.started = False

    # -- library ------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        if self.data.get("init_error"):
            raise _nvml_error(self.data["init_error"])
        self.started = True

    def nvmlShutdown(self) -> None:
        self.started = False

    def _check(self, fn: str, dev: dict[str, Any] | None = None) -> None:
        if not self.started:
            raise _nvml_error("UNINITIALIZED")
        errors = {**self.data.get("errors", {}), **((dev or {}).get("errors", {}))}
        if fn in errors:
            raise _nvml_error(errors[fn])

    def nvmlSystemGetDriverVersion(self) -> str:
        self._check("nvmlSystemGetDriverVersion")
        return str(self.data.get("driver", ""))

    def nvmlDeviceGetCount(self) -> int:
        self._check("nvmlDeviceGetCount")
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> dict[str, Any]:
        self._check("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.devices):
            raise _nvml_error("INVALID_ARGUMENT")
        return self.devices[index]

    # -- device -------------------------------------------------------------------------------
    def _get(self, dev: dict[str, Any], fn: str, *path: str) -> Any:
        self._check(fn, dev)
        value: Any = dev
        for key in path:
            if not isinstance(value, dict) or key not in value:
                raise _nvml_error("NOT_SUPPORTED")
            value = value[key]
        return value

    def nvmlDeviceGetName(self, dev: dict[str, Any]) -> str:
        return str(self._get(dev, "nvmlDeviceGetName", "name"))

    def nvmlDeviceGetUUID(self, dev: dict[str, Any]) -> str:
        return str(self._get(dev, "nvmlDeviceGetUUID", "uuid"))

    def nvmlDeviceGetPciInfo(self, dev: dict[str, Any]) -> SimpleNamespace:
        return SimpleNamespace(busId=self._get(dev, "nvmlDeviceGetPciInfo", "pci_bus_id"))

    def nvmlDeviceGetMemoryInfo(self, dev: dict[str, Any], version: int | None = None) -> SimpleNamespace:
        if version is not None and not dev.get("memory_v2", True):
            raise _nvml_error("FUNCTION_NOT_FOUND")
        mem = self._get(dev, "nvmlDeviceGetMemoryInfo", "memory")
        return SimpleNamespace(total=mem["total"], free=mem["free"], used=mem["used"])

    def nvmlDeviceGetUtilizationRates(self, dev: dict[str, Any]) -> SimpleNamespace:
        util = self._get(dev, "nvmlDeviceGetUtilizationRates", "utilization")
        return SimpleNamespace(gpu=util["gpu"], memory=util["memory"])

    def nvmlDeviceGetPerformanceState(self, dev: dict[str, Any]) -> int:
        return int(self._get(dev, "nvmlDeviceGetPerformanceState", "pstate"))

    def _procs(self, dev: dict[str, Any], fn: str, key: str) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=p["pid"], usedGpuMemory=p.get("used")) for p in self._get(dev, fn, key)]

    def nvmlDeviceGetComputeRunningProcesses(self, dev: dict[str, Any]) -> list[SimpleNamespace]:
        return self._procs(dev, "nvmlDeviceGetComputeRunningProcesses", "processes")

    def nvmlDeviceGetGraphicsRunningProcesses(self, dev: dict[str, Any]) -> list[SimpleNamespace]:
        return self._procs(dev, "nvmlDeviceGetGraphicsRunningProcesses", "graphics_processes")

    def nvmlDeviceGetMemoryBusWidth(self, dev: dict[str, Any]) -> int:
        return int(self._get(dev, "nvmlDeviceGetMemoryBusWidth", "mem_bus_width"))

    def nvmlDeviceGetMaxClockInfo(self, dev: dict[str, Any], clock: int) -> int:
        if clock != self.NVML_CLOCK_MEM:
            raise _nvml_error("NOT_SUPPORTED")
        return int(self._get(dev, "nvmlDeviceGetMaxClockInfo", "max_mem_clock"))

    def _pcie(self, dev: dict[str, Any], fn: str, key: str) -> int:
        return int(self._get(dev, fn, "pcie", key))

    def nvmlDeviceGetCurrPcieLinkGeneration(self, dev: dict[str, Any]) -> int:
        return self._pcie(dev, "nvmlDeviceGetCurrPcieLinkGeneration", "curr_gen")

    def nvmlDeviceGetCurrPcieLinkWidth(self, dev: dict[str, Any]) -> int:
        return self._pcie(dev, "nvmlDeviceGetCurrPcieLinkWidth", "curr_width")

    def nvmlDeviceGetMaxPcieLinkGeneration(self, dev: dict[str, Any]) -> int:
        return self._pcie(dev, "nvmlDeviceGetMaxPcieLinkGeneration", "max_gen")

    def nvmlDeviceGetMaxPcieLinkWidth(self, dev: dict[str, Any]) -> int:
        return self._pcie(dev, "nvmlDeviceGetMaxPcieLinkWidth", "max_width")

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, dev: dict[str, Any]) -> int:
        return self._pcie(dev, "nvmlDeviceGetGpuMaxPcieLinkGeneration", "gpu_max_gen")

    def nvmlDeviceGetPcieReplayCounter(self, dev: dict[str, Any]) -> int:
        return self._pcie(dev, "nvmlDeviceGetPcieReplayCounter", "replay")


class RecordedPsutil:
    """Answers the psutil calls the CPU and memory probes make."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def cpu_count(self, logical: bool = True) -> int | None:
        counts = self.data.get("cpu_count", {})
        value = counts.get("logical" if logical else "physical")
        return int(value) if value is not None else None

    def virtual_memory(self) -> SimpleNamespace:
        vm = self.data["virtual_memory"]
        return SimpleNamespace(total=vm["total"], available=vm["available"])

    def swap_memory(self) -> SimpleNamespace:
        swap = self.data["swap_memory"]
        return SimpleNamespace(total=swap["total"], used=swap["used"])

    def getloadavg(self) -> tuple[float, float, float]:
        a, b, c = self.data.get("loadavg", (0.0, 0.0, 0.0))
        return float(a), float(b), float(c)


@dataclass(frozen=True, slots=True)
class RecordedMachine:
    name: str
    folder: Path
    roots: Roots
    model_path: str  # the model's path on the recorded machine (mapped through its mountinfo)
    meta: dict[str, Any]


def load_machine(folder: str | os.PathLike[str]) -> RecordedMachine:
    base = Path(folder)
    meta = json.loads((base / "machine.json").read_text(encoding="utf-8"))
    nvml = RecordedNvml(meta.get("nvml") or {"init_error": "LIBRARY_NOT_FOUND"})
    roots = Roots(
        sysfs=str(base / "sys"), proc=str(base / "proc"), nvml=nvml, psutil=RecordedPsutil(meta.get("psutil", {})),
        engine=meta.get("engine"), bench=meta.get("bench"),
        realpath=lambda p: os.path.normpath(p), recorded=base.name, live=False,
    )
    return RecordedMachine(base.name, base, roots, str(meta.get("model_path", "/models/model.gguf")), meta)
