"""Pasted results get a verdict (issue 36, items 6-7): the machine as users write it (`analyze
--hardware`), the hardware read from what they paste beside a result, the usual range of the device
class, and the slow causes the paste shows. The pastes are real (bench/data/public_posts, each with
its thread's URL in the .yaml beside it, or the thread quoted here); the llama-bench row of the
issue's RTX 3090 case is written with llama-bench's own column layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.core.facts import Facts, Source
from doctor.derive import derive
from doctor.derive.model_guess import guess
from doctor.judge.evaluate import diagnose
from doctor.sources.hardware_text import apply, parse
from doctor.sources.inputs import read_input

ROOT = Path(__file__).resolve().parent.parent.parent
POSTS = ROOT / "bench/data/public_posts"
SRC = Source("test", "pasted")


def _report(rulebase, path: Path, hardware: str | None = None):  # type: ignore[no-untyped-def]
    facts = read_input(str(path))
    if hardware:
        apply(facts, hardware)
    return diagnose(facts, rulebase, command="analyze", mode="analyze")


def _ids(report) -> set[str]:  # type: ignore[no-untyped-def]
    return {f.id for f in report.findings}


# -- the machine as users write it -------------------------------------------------------------

@pytest.mark.parametrize(("text", "gpu", "count", "cpu"), [
    ("RTX 3090", "NVIDIA GeForce RTX 3090", 1, None),
    ("2x 4090", "NVIDIA GeForce RTX 4090", 2, None),
    ("M1 Ultra 64-core GPU, 128 GB", "Apple M1 Ultra", 1, None),
    ("Raspberry Pi 5", None, 1, "Raspberry Pi 5 (BCM2712)"),
    ("i5-4278U, DDR3", None, 1, "Intel Core i5-4278U (Haswell-U)"),
    ("Ryzen 9 7950X, DDR5-6000", None, 1, "AMD Ryzen 9 7950X"),
    # post 027's page ("AMD Ryzen Max+ 395"): the "+" is the product's own, not a join
    ("Ryzen AI Max+ 395", "AMD Ryzen AI Max+ 395 (Radeon 8060S iGPU)", 1, None),
    ("RTX 4090 + Ryzen 9 7950X", "NVIDIA GeForce RTX 4090", 1, "AMD Ryzen 9 7950X"),
    # post 022's issue title: Intel's hyphen written as a space, DDR3L with its speed
    ("Intel Core i5 4278U, 8GB DDR3L-1600", None, 1, "Intel Core i5-4278U (Haswell-U)"),
])
def test_hardware_as_users_write_it_maps_to_the_spec_table(text: str, gpu: str | None, count: int,
                                                           cpu: str | None) -> None:
    hw = parse(text)
    assert (hw.gpu.name if hw.gpu else None) == gpu
    assert hw.gpu_count == count
    assert (hw.cpu.name if hw.cpu else None) == cpu


def test_what_the_text_adds_beside_the_device() -> None:
    assert parse("M1 Ultra 64-core GPU, 128 GB").gpu_cores == 64
    assert parse("M1 Ultra 64-core GPU, 128 GB").ram_bytes == 128 << 30
    assert (parse("Ryzen 9 7950X, DDR5-6000").mem_type, parse("Ryzen 9 7950X, DDR5-6000").mem_mts) == ("DDR5", 6000)
    assert parse("RX 7900 XTX, Resizable BAR disabled").rebar is False
    assert parse("RX 7900 XTX, ReBAR on").rebar is True
    assert parse("3090 on an x1 riser").pcie_width == 1
    title = parse("Intel Core i5 4278U, 8GB DDR3L-1600")
    assert (title.mem_type, title.mem_mts, title.ram_bytes) == ("DDR3L", 1600, 8 << 30)


def _spec_bw(values: dict[str, object], hardware: str) -> float:
    facts = Facts()
    for name, value in values.items():
        facts.set(name, value, SRC)  # type: ignore[arg-type]
    apply(facts, hardware)
    return float(derive(facts).value("spec.mem_bw_gbs"))


def test_installed_memory_and_gpu_cores_make_the_bandwidth_specific() -> None:
    cpu_run = {"run.decode_tps": 10.0, "config.n_gpu_layers": 0, "engine.backends": ["CPU"]}
    assert _spec_bw(cpu_run, "Ryzen 9 7950X") == 83.2  # the row: DDR5-5200 x 2 channels
    assert _spec_bw(cpu_run, "Ryzen 9 7950X, DDR5-6000") == 96.0  # 2 x 6000 x 8 B
    assert _spec_bw(cpu_run, "i9-13900K, DDR4-3200") == 51.2
    gpu_run = {"run.decode_tps": 10.0, "engine.backends": ["CPU", "Metal"]}
    assert _spec_bw(gpu_run, "M3 Max") == 300.0  # the name hides the cores: the lower variant
    assert _spec_bw(gpu_run, "M3 Max 40-core GPU") == 400.0


def test_the_paste_names_the_gpu_and_hardware_adds_only_what_it_lacks(rulebase) -> None:
    # llama.cpp issue 27097: the Vulkan line names the RX 7900 XTX; the BAR state is in the title
    report = _report(rulebase, POSTS / "001.txt", "RTX 3090, Resizable BAR disabled")
    assert report.facts.value("spec.device") == "AMD Radeon RX 7900 XTX"
    assert report.facts.value("host.gpu[0].rebar") is False


# -- "normal" is the range the device class reaches ---------------------------------------------

RTX_3090_ROW = (
    "| model                          |       size |     params | backend    | ngl |            test |"
    "                  t/s |\n"
    "| ------------------------------ | ---------: | ---------: | ---------- | --: | --------------: |"
    " -------------------: |\n"
    "| llama 8B Q4_K - Medium         |   4.58 GiB |     8.03 B | CUDA       |  99 |           tg128 |"
    "         45.00 ± 0.10 |\n")


def test_an_rtx_3090_at_a_quarter_of_its_bound_is_below_the_usual_range(rulebase, tmp_path: Path) -> None:
    log = tmp_path / "3090.txt"
    log.write_text(RTX_3090_ROW)
    report = _report(rulebase, log, "RTX 3090")
    facts = report.facts
    assert facts.value("speed.decode.placement") == "below"
    assert facts.value("speed.decode.efficiency") == pytest.approx(0.236, abs=0.01)
    assert facts.value("speed.decode.usual_low") >= 0.45  # CUDA GPUs with 2.5 GB+ models reach ~half or more
    assert "LD821" in _ids(report) and "LD820" not in _ids(report)
    finding = next(f for f in report.findings if f.id == "LD821")
    assert "below the usual range" in finding.message and "normal" not in finding.message


def test_a_run_within_its_class_range_is_normal(rulebase) -> None:
    # llama.cpp PR 4766: the maintainer's RTX 4090 run, F16 7B at 61 tok/s (82% of the bound)
    report = _report(rulebase, POSTS / "009.txt")
    assert report.facts.value("speed.decode.placement") == "within"
    assert "LD820" in _ids(report) and "LD821" not in _ids(report)


def test_a_tiny_model_is_not_placed_in_a_larger_models_range() -> None:
    facts = Facts()
    for name, value in {"run.decode_tps": 1900.0, "model.weights_bytes": 76_000_000, "model.n_params": 117_000_000,
                        "host.gpu[0].name": "NVIDIA GeForce RTX 3080", "engine.backends": ["CPU", "CUDA"],
                        "config.n_gpu_layers": 99}.items():
        facts.set(name, value, SRC)  # type: ignore[arg-type]
    derive(facts)
    assert facts.value("speed.decode.efficiency") is not None
    assert not facts.has("speed.decode.placement")  # no public runs of models under 0.5 GB


def test_the_stored_ranges_are_the_public_data() -> None:
    from bench.speed_ranges import main

    assert main(["--check"]) == 0


# -- the hardware read from what users paste ----------------------------------------------------

PASTES = {
    # noonghunna/club-3090 issue 518: nvidia-smi -L on a 3x 3090 rig
    "smi_l": "GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-7cbcc10d-cc69-baf3-8d79-5fb5866cbee2)\n"
             "GPU 1: NVIDIA GeForce RTX 3090 (UUID: GPU-8f5e7766-7946-0a60-6342-d2f3a937edf8)\n",
    # ollama issue 4531: ollama ps while llama3:70b runs on a 4090
    "ollama_ps": "NAME            ID              SIZE    PROCESSOR       UNTIL\n"
                 "llama3:70b      be39eb53a197    41 GB   42%/58% CPU/GPU 4 minutes from now\n",
    # whisper.cpp issue 7: lscpu on an RK3588 (4 little A55, 2x2 big A76)
    "lscpu_big_little": "CPU(s):                 8\n  On-line CPU(s) list:  0-7\nVendor ID:              ARM\n"
                        "  Model name:           Cortex-A55\n    Model:              0\n"
                        "    Thread(s) per core: 1\n    Core(s) per socket: 4\n    Socket(s):          1\n"
                        "  Model name:           Cortex-A76\n    Model:              0\n"
                        "    Thread(s) per core: 1\n    Core(s) per socket: 2\n    Socket(s):          2\n",
    # llama.cpp PR 2011: Metal's working set on a 32 GB M1 Max
    "metal": "ggml_metal_init: recommendedMaxWorkingSetSize = 21845.34 MB\nggml_metal_init: hasUnifiedMemory"
             "             = true\n",
}


@pytest.mark.parametrize(("paste", "want"), [
    ("smi_l", {"host.gpu[0].name": "NVIDIA GeForce RTX 3090", "host.gpu[1].name": "NVIDIA GeForce RTX 3090",
               "host.gpu.count": 2}),
    ("ollama_ps", {"model.name": "llama3:70b", "run.gpu_share": 0.58}),
    ("lscpu_big_little", {"host.cpu.logical_cores": 8, "host.cpu.physical_cores": 8, "host.cpu.perf_cores": 4}),
    ("metal", {"host.gpu[0].working_set": 21_845_340_000}),
])
def test_hardware_pasted_beside_a_result_is_read(tmp_path: Path, paste: str, want: dict[str, object]) -> None:
    log = tmp_path / "paste.txt"
    log.write_text(PASTES[paste])
    facts = read_input(str(log))
    for name, value in want.items():
        assert facts.value(name) == value, name


def test_the_sycl_device_table_names_the_gpu(rulebase) -> None:
    # r/LocalLLaMA 1ghvwsj (easyfab's A770): llama-bench rows pasted without their header
    report = _report(rulebase, POSTS / "010.txt")
    assert report.facts.value("spec.device") == "Intel Arc A770 16GB"
    assert report.facts.value("speed.decode.tok_s") == 72.66


def test_an_ollama_name_gives_the_size_a_verbose_block_lacks(rulebase) -> None:
    assert guess("llama3.2:3b") == (3_000_000_000, 1_818_749_999, "q4_k_m")
    assert guess("qwen2.5:14b-instruct-q8_0")[2] == "q8_0"  # type: ignore[index]
    assert guess("mistral") is None  # no size in the name
    assert guess("OLLAMA_KEEP_ALIVE:" + "9" * 400 + "m0s") is None  # a size no float holds: no model (fuzzed)
    # geerlingguy/ai-benchmarks issue 24: obench on a Raspberry Pi 500+
    report = _report(rulebase, POSTS / "006.txt", "Raspberry Pi 500+")
    assert report.facts.value("speed.decode.placement") == "within"


def test_a_gguf_file_or_a_name_with_size_and_quant_gives_the_size() -> None:
    # the file names and words of am17an/llama.cpp issue 28 and ollama issues 9753, 9306
    assert guess("gemma-4-12B-it-Q4_K_M.gguf") == (12_000_000_000, 7_274_999_999, "q4_k_m")
    assert guess("llama-2-7b-chat.Q4_K_M.gguf")[2] == "q4_k_m"  # type: ignore[index]
    assert guess("llama 3.3 70B-q4_K_M")[0] == 70_000_000_000  # type: ignore[index]
    assert guess("llama3 8b Q6")[2] == "q6_k"  # type: ignore[index]  # a bare Q6 is the K-quant
    assert guess("Phi-3-mini-4k-instruct.IQ4_XS.gguf") is None  # no parameter count in the name
    assert guess("Llama-3.1-8B-Instruct") is None  # no quantisation: only Ollama's names have a default


def test_a_hybrid_cpus_performance_cores_are_the_threads_to_use(rulebase) -> None:
    # post 041 (geerlingguy/sbc-reviews issue 107): llama-bench at 2 threads on an i3-1315U, 2 P-cores + 4 E-cores,
    # llama.cpp's own choice there; LD826 counted all 6 cores and told it to use them, against LD840
    report = _report(rulebase, POSTS / "041.txt", "Intel Core i3-1315U")
    assert report.facts.value("derived.threads_recommended") == 2
    assert report.facts.value("derived.threads_usable") == 6
    assert not {"LD826", "LD511", "LD840"} & _ids(report)


# -- the causes the paste shows ---------------------------------------------------------------

def test_resizable_bar_off_is_named_when_the_run_is_below_its_range(rulebase) -> None:
    # llama.cpp issue 27097: RX 7900 XTX, Vulkan, 13.89 tok/s with the BAR off
    named = _report(rulebase, POSTS / "001.txt", "Resizable BAR disabled")
    assert named.facts.value("speed.decode.placement") == "below"
    assert "LD842" in _ids(named)
    assert "LD842" not in _ids(_report(rulebase, POSTS / "001.txt"))


def _causes(values: dict[str, object]) -> Facts:
    facts = Facts()
    for name, value in values.items():
        facts.set(name, value, SRC)  # type: ignore[arg-type]
    return derive(facts)


def test_threads_against_cores() -> None:
    base = {"run.decode_tps": 3.8, "model.weights_bytes": 2_100_000_000, "model.n_params": 3_800_000_000,
            "engine.backends": ["CPU"], "config.n_gpu_layers": 0}
    # an RK3588 at its default 8 threads: 4 of them on the little cores (llama.cpp issue 7176)
    big_little = _causes({**base, "config.n_threads": 8, **{k: v for k, v in
                          {"host.cpu.model": "Rockchip RK3588", "host.cpu.physical_cores": 8,
                           "host.cpu.perf_cores": 4}.items()}})
    assert "4 performance cores of 8" in str(big_little.value("speed.cause.threads"))
    smt = _causes({**base, "config.n_threads": 16, "host.cpu.physical_cores": 8, "host.cpu.logical_cores": 16})
    assert "16 threads on 8 physical cores" in str(smt.value("speed.cause.threads"))
    fine = _causes({**base, "config.n_threads": 4, "host.cpu.physical_cores": 8, "host.cpu.perf_cores": 4})
    assert not fine.has("speed.cause.threads")


def test_kv_and_placement_causes() -> None:
    base = {"run.decode_tps": 60.0, "model.weights_bytes": 3_820_000_000, "model.n_params": 6_740_000_000,
            "host.gpu[0].name": "NVIDIA GeForce RTX 3090 Ti", "engine.backends": ["CPU", "CUDA"]}
    assert _causes({**base, "config.offload_kqv": False}).has("speed.cause.kv_cpu")
    cuda_fa = _causes({**base, "config.type_k": "q5_1", "config.type_v": "q5_1", "config.flash_attn": "enabled"})
    assert "attention runs on the CPU" in str(cuda_fa.value("speed.cause.kv_cpu"))
    # a q8_0 pair CUDA's default kernels cover at a 128-wide head: not the cause
    assert not _causes({**base, "config.type_k": "q8_0", "config.type_v": "q8_0", "model.head_dim_k": 128,
                        "config.flash_attn": "enabled"}).has("speed.cause.kv_cpu")
    # the head size unknown (a paste without the model's shape): below the range, the quantized cache is named as
    # the likeliest place, marked inferred (LD841 then says it with medium confidence)
    likely = _causes({**base, "config.type_k": "q8_0", "config.type_v": "q8_0", "config.flash_attn": "enabled"})
    assert likely.value("speed.cause.kv_cpu_inferred") is True
    assert "CUDA builds compile" not in str(likely.value("speed.cause.kv_cpu"))
    cpu_only = _causes({**base, "engine.backends": ["CPU"], "config.n_gpu_layers": 0})
    assert cpu_only.has("speed.cause.cpu_build")
    split = _causes({**base, "run.gpu_share": 0.58})
    assert "42% of the model on the CPU" in str(split.value("speed.cause.offload"))


def test_weights_larger_than_the_cards_memory_are_a_split() -> None:
    # the case of ollama issue 3818: llama3:70b-instruct (Q4_K_M, about 42 GB) on an RTX 4090 (24 GB); the maintainer:
    # "quite a bit of the model is running on CPU in this case so it's expected to be slow" (the post gives no
    # speed: the decode figure here is the test's)
    base = {"run.decode_tps": 2.5, "model.weights_bytes": 42_400_000_000, "model.n_params": 70_000_000_000,
            "host.gpu[0].name": "NVIDIA GeForce RTX 4090"}
    assert "runs from host RAM" in str(_causes(base).value("speed.cause.offload"))
    # two of them hold it
    assert not _causes({**base, "host.gpu[1].name": "NVIDIA GeForce RTX 4090", "host.gpu.count": 2}).has(
        "speed.cause.offload")
