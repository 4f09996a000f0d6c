"""Speed output pasted into a report, read into facts: llama-bench's markdown table (every era's
header and test labels, built with markdown_printer's own widths and formats), its CSV and JSONL,
and the device lines pasted beside them (nvidia-smi, lscpu, /proc/cpuinfo, macOS, ggml-vulkan).
The real tables are llama.cpp's published ones (fixtures/logs/llama-bench/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.sources.engines.llamacpp.bench_table import parse_header, parse_row, parse_test, pick

ROOT = Path(__file__).resolve().parent.parent.parent
BENCH = ROOT / "fixtures/logs/llama-bench"


def _md(fields: list[tuple[str, int]], rows: list[list[str]]) -> str:
    """A table as markdown_printer writes it: ` %*s |` per field, dashes ending in ':' for right-aligned."""
    head = "|" + "".join(f" {name:>{w}} |" if w > 0 else f" {name:<{-w}} |" for name, w in fields)
    dash = "|" + "".join(f" {'-' * (abs(w) - 1)}{':' if w > 0 else '-'} |" for _, w in fields)
    body = ["|" + "".join(f" {v:>{w + (1 if n == 't/s' else 0)}} |" if w > 0 else f" {v:<{-w}} |"
                          for (n, w), v in zip(fields, row, strict=True)) for row in rows]
    return "\n".join([head, dash, *body]) + "\n"


NEW_FIELDS = [("model", -30), ("size", 10), ("params", 10), ("backend", -10), ("ngl", 3), ("threads", 7),
              ("fa", 2), ("test", 13), ("t/s", 20)]


def test_the_2026_header_and_depth_tests_are_read() -> None:
    text = _md(NEW_FIELDS, [["qwen2 1.5B Q4_0", "885.97 MiB", "1.54 B", "CUDA", "99", "8", "1", "pp512 @ d4096",
                             "5765.41 ± 20.55"]]).splitlines()
    columns = parse_header(text[0])
    assert columns == ["model", "size", "params", "backend", "ngl", "threads", "fa", "test", "t/s"]
    row = parse_row(text[2], columns, 3)
    assert row is not None
    assert (row.n_prompt, row.n_gen, row.depth, row.tok_s, row.phase) == (512, 0, 4096, 5765.41, "prefill")
    assert row.size_bytes == int(885.97 * (1 << 20)) and row.n_params == 1_540_000_000
    assert row.settings == {"n_gpu_layers": "99", "n_threads": "8", "flash_attn": "1"}


@pytest.mark.parametrize(("label", "want"), [
    ("pp512", (512, 0, 0)), ("tg128", (0, 128, 0)), ("pp 512", (512, 0, 0)), ("tg 128", (0, 128, 0)),
    ("pp512+tg128", (512, 128, 0)), ("tg32 @ d16384", (0, 32, 16384)), ("512", None), ("pp", None)])
def test_test_labels_of_every_era(label: str, want: tuple[int, int, int] | None) -> None:
    assert parse_test(label) == want


def test_the_first_header_printed_field_names() -> None:
    """Aug 2023: `| model | backend | n_gpu_layers | test | t/s |`, no size or params."""
    fields = [("model", -30), ("backend", -10), ("n_gpu_layers", 12), ("test", -10), ("t/s", 16)]
    text = _md(fields, [["LLaMA 7B mostly Q4_0", "CUDA", "99", "tg 128", "131.42 ± 0.59"]]).splitlines()
    columns = parse_header(text[0])
    assert columns is not None
    row = parse_row(text[2], columns)
    assert row is not None and row.settings == {"n_gpu_layers": "99"} and row.size_bytes is None


def test_pick_takes_the_first_models_fastest_rows_at_depth_zero() -> None:
    fields = [("model", -30), ("size", 10), ("params", 10), ("backend", -10), ("threads", 7), ("test", 13),
              ("t/s", 20)]
    rows_text = _md(fields, [
        ["llama 7B Q4_0", "3.56 GiB", "6.74 B", "CPU", "4", "pp64", "23.18 ± 0.06"],
        ["llama 7B Q4_0", "3.56 GiB", "6.74 B", "CPU", "4", "tg16", "12.22 ± 0.07"],
        ["llama 7B Q4_0", "3.56 GiB", "6.74 B", "CPU", "8", "tg16", "16.71 ± 0.66"],
        ["llama 7B Q4_0", "3.56 GiB", "6.74 B", "CPU", "8", "tg16 @ d4096", "19.00 ± 0.10"],
        ["llama 13B Q4_0", "6.86 GiB", "13.02 B", "CPU", "8", "tg16", "30.00 ± 0.31"],
    ]).splitlines()
    columns = parse_header(rows_text[0])
    assert columns is not None
    rows = [r for r in (parse_row(t, columns) for t in rows_text[2:]) if r is not None]
    prefill, decode = pick(rows)
    assert prefill is not None and prefill.tok_s == 23.18
    assert decode is not None and decode.tok_s == 16.71 and decode.settings["n_threads"] == "8"


def test_a_row_that_is_not_the_tables_shape_is_left_out() -> None:
    columns = ["model", "backend", "test", "t/s"]
    assert parse_row("| llama | CUDA | tg128 |", columns) is None
    assert parse_row("| llama | CUDA | tg128 | fast |", columns) is None


def _facts(analyze, path: Path) -> dict[str, object]:
    report = analyze(path)
    return {f.name: (f.value if f.known else f"unknown: {f.unknown}") for f in report.facts}


def test_published_table_without_hardware_asks_which_gpu(analyze) -> None:
    facts = _facts(analyze, BENCH / "readme-2023-cuda-7b-13b.log")
    assert facts["run.decode_tps"] == 132.19  # the first model's fastest generation row
    assert facts["bench.rows"] == 6 and facts["bench.backend"] == "CUDA"
    assert facts["model.weights_bytes"] == int(3.56 * (1 << 30))
    assert facts["config.n_gpu_layers"] == 99
    assert str(facts["spec.device"]).startswith("unknown: which GPU ran this?")
    assert "run.prefill_tps" not in facts  # that table has no pp rows


def test_cpu_thread_sweep_asks_which_cpu(analyze) -> None:
    facts = _facts(analyze, BENCH / "readme-2023-cpu-threads.log")
    assert facts["run.decode_tps"] == 16.71 and facts["config.n_threads"] == 8
    assert facts["run.prefill_tps"] == 59.0
    assert str(facts["spec.device"]).startswith("unknown: which CPU ran this?")


def test_jsonl_names_the_gpu_and_the_cpu(analyze) -> None:
    facts = _facts(analyze, BENCH / "readme-2023-jsonl-3090ti.log")
    assert facts["run.prefill_tps"] == pytest.approx(2410.97, abs=0.01)
    assert facts["run.decode_tps"] == pytest.approx(130.97, abs=0.01)
    assert facts["host.gpu[0].name"] == "NVIDIA GeForce RTX 3090 Ti"
    assert facts["spec.device"] == "NVIDIA GeForce RTX 3090 Ti" and facts["spec.mem_bw_gbs"] == 1008
    assert facts["spec.host_device"] == "Intel Core i9-13900K" and facts["spec.kind"] == "gpu"
    assert facts["engine.name"] == "llama.cpp"


def test_nvidia_smi_pasted_with_the_table_names_the_gpu(analyze) -> None:
    facts = _facts(analyze, BENCH / "dgx-spark-gb10-2026.log")
    assert facts["host.gpu[0].name"] == "NVIDIA GB10"
    assert facts["spec.device"] == "NVIDIA GB10 (DGX Spark)" and facts["spec.mem_bw_gbs"] == 273
    assert facts["run.decode_tps"] == 83.43 and facts["bench.decode_test"] == "tg32"  # not the @ d4096 rows
    assert facts["run.prefill_tps"] == 4505.82


def test_metal_table_asks_which_apple_chip(analyze) -> None:
    facts = _facts(analyze, BENCH / "mac-m2-ultra-2026.log")
    assert facts["bench.backend"] == "MTL,BLAS"
    assert str(facts["spec.device"]).startswith("unknown: which Apple chip ran this?")


@pytest.mark.parametrize(("lines", "name", "value"), [
    ("|   0  NVIDIA GeForce RTX 4090        Off |   00000000:01:00.0  On |                  Off |\n",
     "host.gpu[0].name", "NVIDIA GeForce RTX 4090"),
    ("Model name:                           AMD Ryzen 9 7950X 16-Core Processor\n", "host.cpu.model",
     "AMD Ryzen 9 7950X 16-Core Processor"),
    ("model name\t: Intel(R) Xeon(R) Platinum 8480+\n", "host.cpu.model", "Intel(R) Xeon(R) Platinum 8480+"),
    ("      Chip: Apple M2 Ultra\n", "host.cpu.model", "Apple M2 Ultra"),
    ("ggml_vulkan: 0 = AMD Radeon RX 7900 XTX (RADV NAVI31) (radv) | uma: 0 | fp16: 1 | warp size: 64\n",
     "host.gpu[0].name", "AMD Radeon RX 7900 XTX (RADV NAVI31)"),
])
def test_device_lines_pasted_beside_a_speed(analyze, tmp_path: Path, lines: str, name: str, value: str) -> None:
    log = tmp_path / "paste.log"
    log.write_text(lines + "llama_perf_context_print:        eval time =    1000.00 ms /   100 runs   (   10.00 ms "
                   "per token,   100.00 tokens per second)\n")
    facts = _facts(analyze, log)
    assert facts[name] == value
    assert facts["run.decode_tps"] == 100.0
    assert "spec.device" in facts


def test_a_cut_nvidia_smi_name_asks_for_the_full_one(analyze, tmp_path: Path) -> None:
    log = tmp_path / "paste.log"
    log.write_text("|   0  NVIDIA GeForce RTX 4070 ...    Off |   00000000:01:00.0  On |                  N/A |\n"
                   + (BENCH / "readme-2023-cuda-7b-13b.log").read_text())
    facts = _facts(analyze, log)
    assert "nvidia-smi cut the GPU's name" in str(facts["spec.device"])


def test_a_model_name_that_is_not_a_cpu_is_not_read(analyze, tmp_path: Path) -> None:
    log = tmp_path / "paste.log"
    log.write_text("Model name: Llama-3.1-8B-Instruct\n" + (BENCH / "readme-2023-cpu-threads.log").read_text())
    assert "host.cpu.model" not in _facts(analyze, log)


# vllm/engine/metrics.py (V0) and vllm/v1/metrics/loggers.py (V1) stats lines, as the reference notes give them
V0_STATS = ("INFO 05-22 02:21:{s:02d} metrics.py:229] Avg prompt throughput: {p:.1f} tokens/s, Avg generation "
            "throughput: {g:.1f} tokens/s, Running: {r} reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: "
            "0.3%, CPU KV cache usage: 0.0%.\n")
V1_STATS = ("INFO 05-16 17:33:{s:02d} [loggers.py:271] Engine 000: Avg prompt throughput: {p:.1f} tokens/s, Avg "
            "generation throughput: {g:.1f} tokens/s, Running: {r} reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, "
            "Prefix cache hit rate: 0.0%\n")


@pytest.mark.parametrize("fmt", [V0_STATS, V1_STATS], ids=["v0", "v1"])
def test_vllm_decode_speed_comes_from_intervals_with_one_request_and_no_prompt(analyze, tmp_path: Path,
                                                                               fmt: str) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(fmt.format(s=1, p=812.4, g=20.0, r=1)  # a prompt was processed in this interval
                   + fmt.format(s=11, p=0.0, g=41.3, r=1)
                   + fmt.format(s=21, p=0.0, g=38.9, r=1)
                   + fmt.format(s=31, p=0.0, g=150.2, r=4))  # four requests: a batch's throughput
    facts = _facts(analyze, log)
    assert facts["run.decode_tps"] == 41.3
    assert str(facts["spec.device"]).startswith("unknown: which device ran this?")


def test_vllm_batched_intervals_give_no_decode_speed(analyze, tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(V1_STATS.format(s=1, p=0.0, g=150.2, r=4) + V1_STATS.format(s=11, p=300.0, g=30.0, r=1))
    assert "run.decode_tps" not in _facts(analyze, log)
