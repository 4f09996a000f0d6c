"""The resource sampler on recorded /proc and NVML answers, and the live judge's fired/updated/resolved."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from doctor.core.facts import Facts, Source
from doctor.judge.live_judge import UPDATE_EVERY_MS, LiveJudge
from doctor.judge.rulebase import RuleBase
from doctor.sources.live.embedded.sampler import NvmlHandle, ResourceSampler, cgroup_quota


class RecordedNvml:
    """NVML answers as a driver gives them (pynvml's shapes): one GPU, two processes on it."""

    class NVMLError(Exception):
        pass

    def __init__(self, procs: list[tuple[int, int]], fail_init: bool = False) -> None:
        self.procs = procs
        self.fail_init = fail_init
        self.shutdown = False

    def nvmlInit(self) -> None:  # pynvml's names
        if self.fail_init:
            raise self.NVMLError("Driver Not Loaded")

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"gpu{i}"

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in self.procs]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: str) -> list[SimpleNamespace]:
        raise self.NVMLError("Not Supported")

    def nvmlShutdown(self) -> None:
        self.shutdown = True


def _proc_tree(root: Path, running: int, tasks: dict[int, list[str]]) -> None:
    (root / "loadavg").write_text(f"1.20 0.80 0.50 {running}/412 99999\n")
    for pid, states in tasks.items():
        for i, state in enumerate(states):
            task = root / str(pid) / "task" / str(pid + i)
            task.mkdir(parents=True)
            task.joinpath("stat").write_text(f"{pid + i} (python3 (x) y) {state} 1 2 3 4 5\n")


@pytest.fixture
def child() -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; x = bytearray(30 << 20); time.sleep(30)"])
    yield proc
    proc.kill()
    proc.wait()


def test_sample_reads_the_process_and_the_machine(tmp_path: Path, child: subprocess.Popen[bytes]) -> None:
    import time

    time.sleep(0.3)
    # 6 runnable threads on the machine: 2 are the engine's, 1 is ours, so 3 belong to others
    _proc_tree(tmp_path, running=6, tasks={child.pid: ["R", "R", "S"], 4242: ["R"]})
    nvml = RecordedNvml([(child.pid, 900 << 20), (1, 5 << 30)])
    sampler = ResourceSampler(child.pid, proc_root=str(tmp_path), nvml=NvmlHandle.open(nvml), cores=2.0, own_pid=4242)
    event = sampler.sample(12.5)
    assert event.t_ms == 12.5
    assert event.rss_bytes is not None and event.rss_bytes > 30 << 20
    assert event.vram_bytes == 900 << 20  # only the engine's process, not another one on the GPU
    assert event.others_load == 1.5
    assert event.cpu_percent is not None
    sampler.close()
    assert nvml.shutdown


def test_without_nvml_vram_is_unknown_not_an_error(tmp_path: Path, child: subprocess.Popen[bytes]) -> None:
    handle = NvmlHandle.open(RecordedNvml([], fail_init=True))
    assert handle.why is not None and "Driver Not Loaded" in handle.why
    sampler = ResourceSampler(child.pid, proc_root=str(tmp_path), nvml=handle, cores=2.0)
    event = sampler.sample()
    assert event.vram_bytes is None
    assert event.others_load is None  # no loadavg under this root: unknown


def test_a_process_that_is_gone_samples_as_unknown(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    sampler = ResourceSampler(proc.pid, proc_root=str(tmp_path), nvml=NvmlHandle(why="none"), cores=1.0)
    event = sampler.sample()
    assert event.rss_bytes is None and event.cpu_percent is None


def test_cgroup_quota_v2_and_v1(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cgroup_quota(str(tmp_path)) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_quota(str(tmp_path)) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("400000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_quota(str(v1)) == 4.0
    assert os.path.isdir(tmp_path)


def _facts(repeats: int) -> Facts:
    facts = Facts()
    src = Source("test", "test")
    facts.set("sampling.temperature", 0.0, src)
    facts.set("sampling.repeat_penalty", 1.0, src)
    facts.set("run.output_text", "I like cats. " * repeats + "Fine.", src)
    facts.events_observed = True
    return facts


def test_judge_announces_fired_updated_and_resolved(rulebase: RuleBase) -> None:
    judge = LiveJudge(rulebase)
    _, first = judge.update(_facts(5), 100.0)
    fired = next(e for e in first if e.finding["id"] == "LD401")
    assert fired.state == "fired"
    _, soon = judge.update(_facts(6), 200.0)
    assert not [e for e in soon if e.finding["id"] == "LD401"]  # a small change, too soon to re-announce
    _, later = judge.update(_facts(9), 200.0 + UPDATE_EVERY_MS)
    updated = [e for e in later if e.finding["id"] == "LD401"]
    assert [e.state for e in updated] == ["updated"]
    assert updated[0].finding["message"] != fired.finding["message"]  # the loop grew
    clean = _facts(0)
    clean.set("run.output_text", "A short, varied answer with nothing repeated in it at all, really.", Source("t", "t"))
    _, gone = judge.update(clean, 5000.0)
    assert ("LD401", "resolved") in {(e.finding["id"], e.state) for e in gone}


def test_the_final_evaluation_announces_every_change(rulebase: RuleBase) -> None:
    judge = LiveJudge(rulebase)
    judge.update(_facts(5), 100.0)
    _, final = judge.update(_facts(7), 150.0, final=True)
    assert [e.state for e in final if e.finding["id"] == "LD401"] == ["updated"]
