"""The speed verdict on a pasted log (doctor/derive/speed_log.py): the cost per token from the log's
model lines, held by doctor/derive/speed.py against the published spec of the hardware the log names;
or the one fact that would settle it."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.core.facts import Facts, Source
from doctor.derive import derive
from doctor.derive.speed_log import log_cost

ROOT = Path(__file__).resolve().parent.parent.parent
BENCH = ROOT / "fixtures/logs/llama-bench"
SRC = Source("test", "speed_log")
GIB = 1 << 30


def _facts(values: dict[str, object]) -> Facts:
    facts = Facts()
    for name, value in values.items():
        facts.set(name, value, SRC)  # type: ignore[arg-type]
    return derive(facts)


def test_a_named_gpu_gives_a_verdict_with_its_spec_row_cited(analyze) -> None:
    facts = analyze(BENCH / "readme-2023-jsonl-3090ti.log").facts
    assert facts.value("speed.decode.ceiling_source") == "spec"
    assert facts.value("speed.decode.bound") == "memory-bandwidth:gpu"
    # 3.56 GiB read per token at 1008 GB/s: 263 tok/s at most; 131 measured
    assert facts.value("speed.decode.ceiling_tok_s") == pytest.approx(263.5, abs=1)
    assert facts.value("speed.decode.fraction") == pytest.approx(0.50, abs=0.01)
    assert "RTX 3090 Ti" in str(facts.get("speed.decode.ceiling_source").source.text)  # type: ignore[union-attr]
    # a quantized prompt runs on int8 MMQ: held to the card's int8 peak (320 TOPS), not its FP16 figure
    assert facts.value("speed.prefill.bound") == "compute:gpu:int8"
    assert "320" in str(facts.get("spec.int8_tops").source.text)  # type: ignore[union-attr]


@pytest.mark.parametrize(("fixture", "question"), [
    ("readme-2023-cuda-7b-13b.log", "which GPU ran this?"),
    ("readme-2023-cpu-threads.log", "which CPU ran this?"),
    ("mac-m2-ultra-2026.log", "which Apple chip ran this?"),
    ("dgx-spark-gb10-2026.log", "the model's routed share"),  # gpt-oss-20b: a MoE, and a table has no n_ff
])
def test_what_the_log_lacks_is_the_settle_fact(analyze, fixture: str, question: str) -> None:
    facts = analyze(BENCH / fixture).facts
    assert str(facts.value("speed.decode.settle")).startswith(question)
    assert facts.value("speed.decode.bound") == "unknown" and facts.value("speed.decode.ceiling_source") == "unknown"
    assert facts.value("speed.decode.tok_s") == facts.value("run.decode_tps")


def test_an_ollama_log_and_its_verbose_block(analyze, tmp_path: Path) -> None:
    log = tmp_path / "ollama.log"
    log.write_text((ROOT / "fixtures/logs/ollama/healthy-v0.5.7-journald.log").read_text()
                   + (ROOT / "fixtures/logs/ollama/cli-verbose.log").read_text())
    facts = analyze(log).facts
    # 4.58 GiB model, 33/33 layers on an RTX 4070 (504 GB/s): about 100 tok/s at most; 49 measured
    assert facts.value("speed.decode.bound") == "memory-bandwidth:gpu"
    assert facts.value("speed.decode.ceiling_tok_s") == pytest.approx(504e9 / 4917737553, rel=0.05)


def test_partial_offload_reads_the_cpu_layers_at_the_host_platforms_bandwidth() -> None:
    facts = _facts({"run.decode_tps": 5.0, "run.offloaded_layers": 10, "run.total_layers": 33,
                    "model.n_layer": 32, "model.weights_bytes": 8 * GIB, "model.n_params": 13_000_000_000,
                    "host.gpu[0].name": "NVIDIA GeForce RTX 3060",
                    "host.cpu.model": "AMD Ryzen 7 5800X 8-Core Processor"})
    assert facts.value("spec.host_mem_bw_gbs") == 51.2
    assert facts.value("speed.decode.bound") == "memory-bandwidth:cpu"
    # 23/33 of 8 GiB from RAM at 51.2 GB/s
    assert facts.value("speed.decode.ceiling_tok_s") == pytest.approx(51.2e9 / (8 * GIB * 23 / 33), rel=0.1)


def test_a_mixture_of_experts_is_not_judged_without_its_routed_share() -> None:
    facts = Facts()
    for name, value in {"model.n_params": 46_700_000_000, "model.n_layer": 32, "model.n_expert": 8,
                        "model.n_expert_used": 2, "model.file_bytes": 26_435_523_706, "spec.kind": "gpu"}.items():
        facts.set(name, value, SRC)
    cost, missing = log_cost(facts)
    assert cost is None and str(missing).startswith("the model's routed share")
    dense = Facts()
    for name, value in {"model.n_params": 8_030_000_000, "model.weights_bytes": 4_920_000_000,
                        "model.name": "llama 8B Q4_K - Medium", "spec.kind": "gpu"}.items():
        dense.set(name, value, SRC)
    cost, missing = log_cost(dense)
    assert missing is None and cost is not None and cost.decode_gpu_bytes == 4_920_000_000


def test_without_size_or_parameters_the_log_is_not_judged() -> None:
    facts = _facts({"run.decode_tps": 30.0, "host.gpu[0].name": "NVIDIA GeForce RTX 4090"})
    assert facts.value("spec.device") == "NVIDIA GeForce RTX 4090"
    assert str(facts.value("speed.decode.settle")).startswith("the model's size and parameter count")


@pytest.mark.parametrize(("backend", "ceiling", "bound"), [("CUDA", 669.0, "per-token-overhead"),
                                                           ("Metal", 167.0, "ceiling-misfit")])
def test_a_small_model_on_a_fast_gpu_is_held_by_kernel_launches(backend: str, ceiling: float, bound: str) -> None:
    """Llama 3.2 3B (1.9 GB) on an RTX 5090 (1792 GB/s: 1.06 ms of reads) measured 271 tok/s
    (geerlingguy/ai-benchmarks): launches per layer, fitted per backend on the public rows, bind. The
    launch cost is the ceiling's one fitted term: a run faster than it (Metal's 0.26 ms a layer, on a
    CUDA card) is a misfit of that term, not a verdict."""
    facts = _facts({"host.gpu.count": 1, "host.gpu[0].name": "NVIDIA GeForce RTX 5090", "config.n_gpu_layers": 999,
                    "engine.backends": ["CPU", backend], "model.weights_bytes": 1_900_000_000,
                    "model.n_params": 3_210_000_000, "run.decode_tps": 271.4})
    assert facts.value("speed.decode.bound") == bound
    assert facts.value("speed.decode.ceiling_tok_s") == pytest.approx(ceiling, rel=0.01)
    if bound == "ceiling-misfit":
        assert facts.value("speed.decode.misfit_term") == "per-token-overhead"


@pytest.mark.parametrize(("threads", "bound"), [(1, "threads"), (2, "threads"), (8, "memory-bandwidth:cpu")])
def test_few_threads_on_a_big_cpu_are_named(threads: int, bound: str) -> None:
    """llama-bench's README thread table (LLaMA 7B Q4_0 on an i9-13900K, 24 cores, 89.6 GB/s): -t 1 and
    -t 2 draw a core's share of the bus each, far below the spec; -t 8 reaches the bus."""
    facts = _facts({"host.cpu.model": "Intel Core i9-13900K", "host.cpu.usable_cores": 24.0,
                    "config.n_threads": threads, "config.n_gpu_layers": 0, "engine.backends": ["CPU"],
                    "model.weights_bytes": int(3.56 * GIB), "model.n_params": 6_740_000_000,
                    "run.decode_tps": {1: 4.05, 2: 7.8, 8: 16.71}[threads]})
    assert facts.value("speed.decode.ceiling_source") == "spec"
    assert facts.value("speed.decode.bound") == bound
    if bound == "threads":
        assert f"{threads} of 24 usable cores" in str(facts.get("speed.decode.bound").source.text)  # type: ignore[union-attr]
        assert facts.value("speed.decode.ceiling_tok_s") == pytest.approx(threads * 20e9 / (3.56 * GIB), rel=0.02)


def test_a_pasted_bench_at_2_threads_on_a_named_24_core_cpu_says_so_with_the_fix(analyze, tmp_path: Path) -> None:
    """lscpu's `Model name:` line above llama-bench's README thread table at -t 2 (i9-13900K)."""
    table = (BENCH / "readme-2023-cpu-threads.log").read_text().splitlines()
    log = tmp_path / "t2.log"
    log.write_text("\n".join(["Model name:                           13th Gen Intel(R) Core(TM) i9-13900K",
                              *table[:2], *[ln for ln in table if "|          2 |" in ln]]) + "\n")
    report = analyze(log)
    assert report.facts.value("speed.decode.bound") == "threads"
    finding = next(f for f in report.findings if f.id == "LD826")
    assert "2 thread(s) of 24 cores" in finding.message
    assert report.facts.value("derived.threads_recommended") == 24  # the CPU's published cores


def test_without_a_core_count_threads_are_not_judged() -> None:
    """A CPU family row with no core count (Xeon Platinum 84xx for an 8470): 2 threads are not "more threads than
    cores" (the count defaulted to 1 and named `threads` before) and not scaled to a share of it."""
    facts = _facts({"host.cpu.model": "Intel(R) Xeon(R) Platinum 8470", "config.n_threads": 2,
                    "config.n_gpu_layers": 0, "engine.backends": ["CPU"], "model.weights_bytes": int(3.56 * GIB),
                    "model.n_params": 6_740_000_000, "run.decode_tps": 4.0})
    assert facts.value("spec.kind") == "cpu" and not facts.has("spec.cores")
    assert facts.value("speed.decode.bound") == "memory-bandwidth:cpu"
