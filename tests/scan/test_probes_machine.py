"""CPU, RAM, GPU (NVML and sysfs), engine and benchmark probes on recorded machines; every probe
failure is an unknown with its reason, never an exception."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from doctor.core.facts import Facts
from doctor.sources.probes import registry
from doctor.sources.probes.base import Probe, ProbeContext, Reporter, Roots, run_probe
from doctor.sources.probes.cpu import collect_cpu
from doctor.sources.probes.engine import collect_engine
from doctor.sources.probes.gpu import collect_gpus
from doctor.sources.probes.gpubench import bench_facts
from doctor.sources.probes.memory import collect_memory
from doctor.sources.probes.pcie import link_gbs, nvml_bus_to_sysfs, speed_to_gen
from doctor.sources.probes.readbench import cached_fraction, mapped_by, measure_read
from doctor.sources.probes.replay import RecordedNvml, load_machine
from tests.scan.conftest import MACHINES

GIB = 1 << 30


def machine(name: str):
    return load_machine(MACHINES / name)


def test_container_quota_and_memory_limit() -> None:
    roots = machine("container-quota").roots
    cpu, mem = collect_cpu(roots), collect_memory(roots)
    assert (cpu.value("host.cpu.logical_cores"), cpu.value("host.cpu.physical_cores")) == (64, 32)
    assert cpu.value("host.cpu.quota_cores") == 4.0 and cpu.value("host.cpu.usable_cores") == 4
    assert "cpu.max: 400000 100000" in (cpu.get("host.cpu.quota_cores").source.text or "")
    assert cpu.value("host.container") is True
    assert mem.value("host.ram.cgroup_limit") == 16 * GIB
    assert mem.value("host.ram.total") == 16 * GIB  # not the host's 251 GiB
    assert mem.value("host.ram.available") == 16 * GIB - 412 * 2**20


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n")
    (tmp_path / "proc/self/status").write_text("Cpus_allowed_list:\t0-3,8-11\n")
    (tmp_path / "proc/cpuinfo").write_text("model name\t: X\nflags\t\t: fpu sse2 avx avx2\n")
    base = tmp_path / "sys/fs/cgroup/cpu,cpuacct/docker/abc"
    base.mkdir(parents=True)
    (base / "cpu.cfs_quota_us").write_text("250000\n")
    (base / "cpu.cfs_period_us").write_text("100000\n")
    mem = tmp_path / "sys/fs/cgroup/memory"
    mem.mkdir(parents=True)
    (mem / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "no limit"
    roots = Roots(sysfs=str(tmp_path / "sys"), proc=str(tmp_path / "proc"), live=False,
                  psutil=load_machine(MACHINES / "hdd-server").roots.psutil)
    cpu = collect_cpu(roots)
    assert cpu.value("host.cpu.quota_cores") == 2.5 and cpu.value("host.cpu.affinity_cores") == 8
    assert cpu.value("host.cpu.usable_cores") == 2.5
    assert cpu.value("host.cpu.avx2") is True and cpu.value("host.cpu.avx512") is False
    assert not collect_memory(roots).has("host.ram.cgroup_limit")


@pytest.mark.parametrize("v2", [True, False], ids=["v2", "v1"])
def test_a_containers_page_cache_counts_as_available(tmp_path: Path, v2: bool) -> None:
    """Inactive page cache inside the limit is reclaimed before anything is killed (measured under a
    cgroup limit, bench/fit_vs_llamacpp.py): available is the limit less the working set."""
    (tmp_path / "proc/self").mkdir(parents=True)
    mib = 1 << 20
    if v2:
        (tmp_path / "proc/self/cgroup").write_text("0::/\n")
        base = tmp_path / "sys/fs/cgroup"
        base.mkdir(parents=True)
        (base / "memory.max").write_text(f"{2048 * mib}\n")
        (base / "memory.current").write_text(f"{1500 * mib}\n")
        (base / "memory.stat").write_text(f"anon {300 * mib}\nfile {1200 * mib}\ninactive_file {1000 * mib}\n")
    else:
        (tmp_path / "proc/self/cgroup").write_text("12:memory:/docker/abc\n")
        base = tmp_path / "sys/fs/cgroup/memory/docker/abc"
        base.mkdir(parents=True)
        (base / "memory.limit_in_bytes").write_text(f"{2048 * mib}\n")
        (base / "memory.usage_in_bytes").write_text(f"{1500 * mib}\n")
        (base / "memory.stat").write_text(f"cache {1200 * mib}\ninactive_file {900 * mib}\n"
                                          f"total_inactive_file {1000 * mib}\n")
    roots = Roots(sysfs=str(tmp_path / "sys"), proc=str(tmp_path / "proc"), live=False,
                  psutil=load_machine(MACHINES / "hdd-server").roots.psutil)
    mem = collect_memory(roots)
    assert mem.value("host.ram.cgroup_limit") == 2048 * mib
    assert mem.value("host.ram.available") == (2048 - 500) * mib  # not 548 MiB: 1000 MiB of it is old cache
    assert "working set" in (mem.get("host.ram.available").source.text or "")


def test_laptop_swap_and_flags() -> None:
    roots = machine("laptop-no-gpu").roots
    cpu, mem = collect_cpu(roots), collect_memory(roots)
    assert cpu.value("host.cpu.governor") == "powersave" and cpu.value("host.vm") == "none"
    assert "avx_vnni" in cpu.value("host.cpu.flags") and cpu.value("host.cpu.avx512") is False
    assert mem.value("host.ram.swap_used") == 2 * GIB


def test_nvml_full_link_and_spec_bandwidth() -> None:
    facts = collect_gpus(machine("nvme-workstation-rtx4090").roots)
    assert facts.value("host.gpu.count") == 1 and facts.value("host.gpu.driver") == "550.107.02"
    assert facts.value("host.gpu[0].name") == "NVIDIA GeForce RTX 4090"
    assert facts.value("host.gpu[0].bandwidth_spec_gbs") == 1008.1  # 10501 MHz x 2 x 384 bits / 8
    assert facts.value("host.gpu[0].pci_bus_id") == "0000:01:00.0"
    assert facts.value("host.gpu[0].pcie.gen_current") == 1  # idle downshift ...
    assert facts.value("host.gpu[0].busy") is False  # ... judged as idle, not degraded
    assert facts.value("host.gpu[0].pcie.slot_limited") is False
    assert facts.value("host.gpu[0].pcie.spec_gbs") == 31.5
    assert facts.value("host.gpu[0].processes") == [{"pid": 2211, "bytes": 412 * 2**20}]


def test_nvml_slot_limited() -> None:
    facts = collect_gpus(machine("slot-limited-gen3x4").roots)
    assert (facts.value("host.gpu[0].pcie.gen_max"), facts.value("host.gpu[0].pcie.width_max")) == (3, 4)
    assert (facts.value("host.gpu[0].pcie.gen_gpu_max"), facts.value("host.gpu[0].pcie.width_gpu_max")) == (4, 16)
    assert facts.value("host.gpu[0].pcie.slot_limited") is True
    assert facts.value("host.gpu[0].pcie.spec_gbs") == 3.94


def test_nvml_errors_become_unknowns_with_the_reason() -> None:
    m = machine("nvme-workstation-rtx4090")
    data = copy.deepcopy(m.meta["nvml"])
    data["devices"][0]["errors"] = {"nvmlDeviceGetMemoryBusWidth": "NOT_SUPPORTED",
                                    "nvmlDeviceGetUtilizationRates": "GPU_IS_LOST"}
    data["devices"][0]["memory_v2"] = False  # a driver < 515: memory info v1 only
    facts = collect_gpus(Roots(sysfs=m.roots.sysfs, nvml=RecordedNvml(data), live=False))
    assert facts.value("host.gpu[0].vram_total") == 25757220864  # fell back to v1
    assert not facts.has("host.gpu[0].mem_bus_bits")
    assert "Not Supported" in (facts.get("host.gpu[0].mem_bus_bits").unknown or "")
    assert "bus width" in (facts.get("host.gpu[0].bandwidth_spec_gbs").unknown or "")
    assert not facts.has("host.gpu[0].util_gpu") and facts.value("host.gpu[0].name") == "NVIDIA GeForce RTX 4090"


@pytest.mark.parametrize(("name", "count", "vendor"), [
    ("laptop-no-gpu", 0, "none"),   # the Iris Xe is integrated
    ("hdd-server", 0, "none"),      # the BMC's ASPEED VGA is not a GPU for inference
    ("vm-virtio", 0, "none"),
])
def test_without_nvml_the_pci_bus_decides(name: str, count: int, vendor: str) -> None:
    facts = collect_gpus(machine(name).roots)
    assert facts.value("host.gpu.count") == count and facts.value("host.gpu.vendor") == vendor
    assert "Library Not Found" in (facts.get("host.gpu.driver").unknown or "")


def test_sysfs_link_of_a_gpu_nvml_cannot_see(tmp_path: Path) -> None:
    """An AMD card: no NVML, the PCIe link from sysfs, the slot limit from the bridge above it."""
    src = MACHINES / "slot-limited-gen3x4"
    data = json.loads((src / "machine.json").read_text())
    data["nvml"] = {"init_error": "DRIVER_NOT_LOADED"}
    m = load_machine(src)
    roots = Roots(sysfs=m.roots.sysfs, proc=m.roots.proc, nvml=RecordedNvml(data["nvml"]), live=False)
    facts = collect_gpus(roots)
    assert facts.value("host.gpu.count") == 1
    assert facts.value("host.gpu[0].pcie.slot_limited") is True
    assert (facts.value("host.gpu[0].pcie.gen_max"), facts.value("host.gpu[0].pcie.width_max")) == (3, 4)
    assert "Driver Not Loaded" in (facts.get("host.gpu[0].vram_total").unknown or "")


def test_link_arithmetic() -> None:
    assert [speed_to_gen(s) for s in ("2.5 GT/s PCIe", "8 GT/s", "16.0 GT/s PCIe", "Unknown speed", None)] == \
        [1, 3, 4, None, None]
    assert (link_gbs(4, 16), link_gbs(3, 4), link_gbs(None, 16)) == (31.5, 3.94, None)
    assert nvml_bus_to_sysfs("00000000:01:00.0") == "0000:01:00.0"


def test_engine_answers() -> None:
    facts = collect_engine(machine("nvme-workstation-rtx4090").meta["engine"])
    assert facts.value("engine.gpu_offload_supported") is True
    assert facts.value("engine.backends") == ["CPU", "CUDA"]
    assert "AVX512" in facts.value("engine.cpu_features") and "LLAMAFILE" not in facts.value("engine.cpu_features")
    missing = collect_engine({"error": "ModuleNotFoundError: No module named 'llama_cpp'"})
    assert "not importable" in (missing.get("engine.gpu_offload_supported").unknown or "")


def test_the_installed_engine() -> None:
    facts = collect_engine()
    import llama_cpp

    assert facts.value("engine.version") == llama_cpp.__version__
    assert facts.value("engine.gpu_offload_supported") == bool(llama_cpp.llama_supports_gpu_offload())


def test_recorded_benchmarks() -> None:
    rep = Reporter("gpubench")
    bench_facts(machine("slot-limited-gen3x4").meta["bench"], rep, "recorded")
    assert rep.facts.value("host.gpu[0].pcie.h2d_measured_gbs") == 3.3
    assert rep.facts.value("host.gpu[0].pcie.gen_under_load") == 3
    assert rep.facts.value("host.ram.bandwidth_measured_gbs") == 61.8


def test_a_probe_that_crashes_leaves_unknowns() -> None:
    def boom(ctx: ProbeContext) -> Facts:
        raise ZeroDivisionError("division by zero")

    facts = run_probe(Probe("boom", "passive", "test", ("host.cpu.model",), boom), ProbeContext())
    fact = facts.get("host.cpu.model")
    assert fact is not None and not fact.known and "probe boom failed: ZeroDivisionError" in (fact.unknown or "")


def test_the_registry_table_names_each_probe_with_its_own_name_and_cost() -> None:
    assert [(p.name, p.cost) for p in registry.PROBES] == [(name, cost) for name, _, cost in registry.TABLE]


def test_heavy_probes_only_with_bench() -> None:
    assert all(p.cost != "heavy" for p in registry.select(bench=False))
    assert {p.name for p in registry.select(bench=True)} >= {"readbench", "gpubench"}
    assert [p.name for p in registry.select(bench=False, only={"gpu"})] == ["gpu"]


def test_recorded_machines_never_run_benchmarks_here() -> None:
    m = machine("laptop-no-gpu")
    facts = registry.collect(ProbeContext(roots=m.roots, model_path="/nonexistent", bench=True),
                             [p for p in registry.PROBES if p.cost == "heavy"])
    assert "not recorded for laptop-no-gpu" in (facts.get("host.ram.bandwidth_measured_gbs").unknown or "")


def test_read_speed_checks_the_page_cache_first(tmp_path: Path) -> None:
    path = tmp_path / "blob.bin"
    path.write_bytes(os.urandom(32 << 20))
    fraction, how = cached_fraction(str(path))
    assert how in ("cachestat", "mincore") and fraction > 0.5  # just written: in the page cache
    facts = measure_read(str(path), Roots(), seconds=5)
    assert facts.value("model.storage.read_mb_s") > 0
    assert facts.has("model.storage.cached_fraction") and facts.has("model.storage.read_upper_bound")
    text = facts.get("model.storage.read_mb_s").source.text or ""
    assert "O_DIRECT" in text or "dropping this file's cached pages" in text


def test_files_mapped_by_another_process_are_found(tmp_path: Path) -> None:
    path = tmp_path / "mapped.bin"
    path.write_bytes(b"x" * 65536)
    code = ("import mmap,sys,time; f=open(sys.argv[1],'rb'); m=mmap.mmap(f.fileno(),0,access=mmap.ACCESS_READ); "
            "print('ok',flush=True); time.sleep(30)")
    child = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ok"
        deadline = time.time() + 5
        while child.pid not in mapped_by(Roots(), str(path)) and time.time() < deadline:
            time.sleep(0.05)
        assert child.pid in mapped_by(Roots(), str(path))
    finally:
        child.kill()
        child.wait()
