"""Which device's published spec a log's speed is held to (doctor/derive/spec_lookup.py), and the one
fact that would settle it when the log does not say."""

from __future__ import annotations

from pathlib import Path

from doctor.core.facts import Facts, Source
from doctor.derive.spec_lookup import derive_spec, gpu_used

ROOT = Path(__file__).resolve().parent.parent.parent
SRC = Source("test", "spec_lookup")


def _spec(facts: Facts) -> str:
    derive_spec(facts)
    found = facts.get("spec.device")
    assert found is not None
    return str(found.value) if found.known else f"? {found.unknown}"


def test_a_full_offload_is_held_to_the_gpu_and_the_cpu_row_is_the_host_side() -> None:
    facts = Facts()
    for name, value in (("run.decode_tps", 40.0), ("run.offloaded_layers", 33), ("run.total_layers", 33),
                        ("host.gpu[0].name", "NVIDIA GeForce RTX 4090"),
                        ("host.cpu.model", "AMD Ryzen 9 7950X 16-Core Processor")):
        facts.set(name, value, SRC)
    assert _spec(facts) == "NVIDIA GeForce RTX 4090"
    assert facts.value("spec.kind") == "gpu" and facts.value("spec.mem_bw_gbs") == 1008
    assert facts.value("spec.host_device") == "AMD Ryzen 9 7950X" and facts.value("spec.host_mem_bw_gbs") == 83.2
    assert "whitepaper" in str(facts.get("spec.mem_bw_gbs").source.text)  # type: ignore[union-attr]


def test_no_layers_on_the_gpu_is_a_cpu_run_even_with_a_gpu_named() -> None:
    facts = Facts()
    for name, value in (("run.decode_tps", 4.4), ("run.offloaded_layers", 0),
                        ("host.gpu[0].name", "NVIDIA A100-SXM4-80GB"),
                        ("host.cpu.model", "Intel(R) Xeon(R) Platinum 8480+")):
        facts.set(name, value, SRC)
    assert gpu_used(facts) is False
    assert _spec(facts) == "Intel Xeon Platinum 8480+"
    assert facts.value("spec.kind") == "cpu" and facts.value("spec.mem_bw_gbs") == 307.2


def test_an_apple_chip_whose_core_count_the_name_hides_gets_its_lower_bandwidth() -> None:
    facts = Facts()
    facts.set("run.decode_tps", 30.0, SRC)
    facts.set("engine.backends", ["CPU", "Metal"], SRC)
    facts.set("host.gpu[0].name", "MTL0 (Apple M3 Max)", SRC)  # ggml-metal's 2025 `GPU name:` line
    assert _spec(facts) == "Apple M3 Max"
    assert facts.value("spec.kind") == "apple" and facts.value("spec.mem_bw_gbs") == 300


def test_what_would_settle_it() -> None:
    cuda = Facts()
    cuda.set("run.decode_tps", 50.0, SRC)
    cuda.set("bench.backend", "CUDA", SRC)
    assert _spec(cuda).startswith("? which GPU ran this? the log shows a CUDA backend")
    vm = Facts()
    vm.set("run.decode_tps", 5.0, SRC)
    vm.set("engine.backends", ["CPU"], SRC)
    vm.set("host.cpu.model", "Intel(R) Xeon(R) CPU @ 2.20GHz", SRC)
    assert "does not name the exact CPU model" in _spec(vm)
    unlisted = Facts()
    unlisted.set("run.decode_tps", 5.0, SRC)
    unlisted.set("host.gpu[0].name", "Moore Threads MTT S80", SRC)
    assert _spec(unlisted).startswith("? the spec table has no row for Moore Threads MTT S80")
    bare = Facts()
    bare.set("run.prefill_tps", 500.0, SRC)
    assert _spec(bare).startswith("? which device ran this?")


def test_nothing_is_looked_up_without_a_measured_speed() -> None:
    facts = Facts()
    facts.set("host.gpu[0].name", "NVIDIA GeForce RTX 4090", SRC)
    derive_spec(facts)
    assert facts.get("spec.device") is None


def test_an_ollama_server_log_with_its_verbose_block_is_held_to_the_gpu_it_names(analyze, tmp_path: Path) -> None:
    log = tmp_path / "ollama.log"
    log.write_text((ROOT / "fixtures/logs/ollama/healthy-v0.5.7-journald.log").read_text()
                   + (ROOT / "fixtures/logs/ollama/cli-verbose.log").read_text())
    facts = analyze(log).facts
    assert facts.value("spec.device") == "NVIDIA GeForce RTX 4070"
    assert facts.value("spec.mem_bw_gbs") == 504 and facts.value("run.decode_tps") == 49.19


def test_llama_cli_timings_with_their_cuda_device_line(analyze) -> None:
    facts = analyze(ROOT / "fixtures/logs/llama.cpp/partial-offload-slow.log").facts
    assert facts.value("spec.device") == "NVIDIA GeForce RTX 3060"
    assert facts.value("spec.pcie_gbs") == 31.5  # PCIe 4.0 x16 one way
