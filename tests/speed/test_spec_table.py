"""The published-spec table (doctor/derive/specs): it loads, every row cites a source, and device names
as engines print them find the most specific row. The name cases are the ones the table's author
checked the data with (names as CUDA, ROCm, Vulkan, SYCL, Metal and /proc/cpuinfo print them)."""

from __future__ import annotations

import pytest

from doctor.core.errors import InternalError
from doctor.derive.specs import DATA, parse, table

GPU = ("gpu", "apple")
GPU_CASES = {
    "NVIDIA GeForce RTX 4090": "NVIDIA GeForce RTX 4090",
    "NVIDIA GeForce RTX 4070 Ti SUPER": "NVIDIA GeForce RTX 4070 Ti SUPER",
    "NVIDIA GeForce RTX 4070 Ti": "NVIDIA GeForce RTX 4070 Ti",
    "NVIDIA GeForce RTX 4070": "NVIDIA GeForce RTX 4070",
    "NVIDIA GeForce RTX 3060 Ti": "NVIDIA GeForce RTX 3060 Ti",
    "NVIDIA GeForce RTX 3060": "NVIDIA GeForce RTX 3060",
    "nvidia geforce rtx 3090 ti": "NVIDIA GeForce RTX 3090 Ti",
    "NVIDIA A100-SXM4-80GB": "NVIDIA A100 SXM4 80GB",
    "NVIDIA A100-PCIE-40GB": "NVIDIA A100 PCIe 40GB",
    "NVIDIA A10G": "NVIDIA A10G",
    "NVIDIA L40S": "NVIDIA L40S",
    "NVIDIA H100 80GB HBM3": "NVIDIA H100 SXM5 80GB",
    "NVIDIA H100 PCIe": "NVIDIA H100 PCIe",
    "Tesla V100-SXM2-16GB": "NVIDIA Tesla V100 SXM2",
    "Tesla T4": "NVIDIA Tesla T4",
    "Orin": "NVIDIA Jetson Orin (unknown variant)",
    "AMD Radeon RX 7900 XTX": "AMD Radeon RX 7900 XTX",
    "AMD Radeon RX 7900 XT": "AMD Radeon RX 7900 XT",
    "AMD Instinct MI300X": "AMD Instinct MI300X",
    "Radeon 8060S Graphics": "AMD Ryzen AI Max+ 395 (Radeon 8060S iGPU)",
    "Intel(R) Arc(TM) A770 Graphics": "Intel Arc A770 16GB",
    "Apple M1": "Apple M1",
    "Apple M1 Max": "Apple M1 Max",
    "Apple M2 Ultra": "Apple M2 Ultra",
    "Apple M4 Pro": "Apple M4 Pro",
}
CPU_CASES = {
    "13th Gen Intel(R) Core(TM) i9-13900K": "Intel Core i9-13900K",
    "13th Gen Intel(R) Core(TM) i5-13500": "Intel Core 13th gen desktop (Raptor Lake-S)",
    "AMD Ryzen 9 7950X 16-Core Processor": "AMD Ryzen 9 7950X",
    "AMD Ryzen 7 7700X 8-Core Processor": "AMD Ryzen 7000 desktop (Zen 4, AM5)",
    "Intel(R) Xeon(R) Platinum 8480+": "Intel Xeon Platinum 8480+",
    "Intel(R) Xeon(R) CPU @ 2.20GHz": "Intel Xeon (generic / virtualized, model unknown)",
    "AMD EPYC 9654 96-Core Processor": "AMD EPYC 9654 (Genoa)",
}


@pytest.mark.parametrize(("device", "row"), sorted(GPU_CASES.items()))
def test_gpu_names_find_the_most_specific_row(device: str, row: str) -> None:
    found = table().find(device, GPU)
    assert found is not None and found.name == row


@pytest.mark.parametrize(("device", "row"), sorted(CPU_CASES.items()))
def test_cpu_names_find_their_row(device: str, row: str) -> None:
    found = table().find(device, ("cpu",))
    assert found is not None and found.name == row


def test_every_row_with_figures_cites_a_source_and_nothing_was_dropped() -> None:
    spec = table()
    assert len(spec.rows) > 150 and not spec.dropped
    for row in spec.rows:
        if row.mem_bw_gbs or row.fp16_tflops:
            assert row.source, row.name


def test_figures_spot_checked_against_datasheets() -> None:
    """Values from the vendors' datasheets: a changed row shows here."""
    find = table().find
    rtx4090 = find("NVIDIA GeForce RTX 4090", GPU)
    h100 = find("NVIDIA H100 80GB HBM3", GPU)
    m2 = find("Apple M2 Ultra", GPU)
    assert rtx4090 and (rtx4090.mem_bw_gbs, rtx4090.fp16_tflops, rtx4090.pcie_gen) == (1008, 165.2, 4)
    assert rtx4090.pcie_gbs == pytest.approx(31.5, abs=0.1)  # PCIe 4.0 x16, one way
    assert h100 and (h100.mem_bw_gbs, h100.fp16_tflops) == (3350, 989.5)
    assert m2 and m2.mem_bw_gbs == 800
    m3max = find("Apple M3 Max", GPU)
    assert m3max and m3max.mem_bw_low_gbs == 300 and m3max.mem_bw_gbs == 400  # 30-core variant


def test_unknown_devices_match_nothing() -> None:
    assert table().find("Moore Threads MTT S80", GPU) is None
    assert table().find("NVIDIA GeForce RTX 4090", ("cpu",)) is None


def test_rows_without_a_source_or_match_are_dropped_and_bad_numbers_read_unknown() -> None:
    doc = {"pcie": {"gens": {4: {"gbs_per_lane_per_dir": 1.969}}}, "gpus": [
        {"name": "Good", "match": ["good gpu"], "mem_bw_gbs": 500, "fp16_tflops": -3, "source": "datasheet",
         "confidence": "high", "pcie": {"gen": 4, "width": 8}},
        {"name": "No source", "match": ["nosource"], "mem_bw_gbs": 100},
        {"name": "No match", "match": [], "source": "x"},
        "junk"]}
    spec = parse(doc)
    assert [r.name for r in spec.rows] == ["Good"]
    assert len(spec.dropped) == 3
    good = spec.rows[0]
    assert good.fp16_tflops is None and good.pcie_gbs == pytest.approx(15.75)
    with pytest.raises(InternalError):
        parse(["not", "a", "mapping"])


def test_the_json_the_tool_reads_is_the_yaml_people_edit() -> None:
    """hardware.json is written from hardware.yaml by scripts/specs_json.py: run it after editing the YAML."""
    import importlib.util
    import json

    import yaml

    spec = importlib.util.spec_from_file_location("specs_json", DATA.parents[3] / "scripts" / "specs_json.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    data = yaml.safe_load(DATA.with_suffix(".yaml").read_text(encoding="utf-8"))
    assert json.loads(DATA.read_text(encoding="utf-8")) == json.loads(module.as_json(data))
    assert parse(data) == table()


@pytest.mark.parametrize("name", ["AMD Radeon RX 7600", "AMD Radeon RX 7800 XT", "AMD Radeon RX 7900 XT",
                                  "AMD Radeon RX 7900 XTX", "AMD Radeon PRO W7900", "AMD Radeon RX 9070 XT"])
def test_rdna_fp16_is_the_rate_without_dual_issue(name: str) -> None:
    """AMD's 'Peak Half Precision' for RDNA3/4 counts dual-issue; the table keeps half of it (the packed
    FP16 rate, = AMD's FP32 figure, itself dual-issue), and the row says so."""
    row = table().named(name)
    assert row is not None and row.fp16_tflops is not None and row.notes is not None
    assert "dual-issue" in row.notes
    peak = float(row.notes.split("(")[1].split(" TFLOPS")[0])
    assert row.fp16_tflops == pytest.approx(peak / 2, abs=0.01)
