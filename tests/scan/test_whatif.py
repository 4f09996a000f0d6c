"""What-if budgets: `scan --ram SIZE --vram SIZE[,SIZE]` plans for a machine you are not on - the
verdict, the shortfall, the room left and the largest context / most GPU layers under that budget -
and the runtime overhead the verdict adds to llama.cpp's buffers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.cli import main
from doctor.core.errors import UsageError
from doctor.derive.memory import GPU_RUNTIME_OVERHEAD, HOST_CACHE_MARGIN, HOST_PRIVATE_OVERHEAD, HOST_RUNTIME_OVERHEAD
from doctor.derive.whatif import parse_size

MIB = 1 << 20
GIB = 1 << 30


def scan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["scan", "--format", "json", *args])
    report = json.loads(capsys.readouterr().out)
    return code, {name: fact.get("value") for name, fact in report["facts"]["facts"].items()} | {
        "#findings": [f["id"] for f in report["findings"]], "#inputs": report["facts"].get("inputs", [])}


@pytest.mark.parametrize(("text", "size"), [
    ("24G", 24 * GIB), ("24GiB", 24 * GIB), ("24gb", 24 * 10**9), ("512M", 512 * MIB), ("1.5G", 3 * GIB // 2),
    ("768MiB", 768 * MIB), ("4096", 4096), ("2T", 2 << 40),
])
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "-1G", "0", "5 parsecs", "2P"])
def test_bad_sizes_are_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError):
        parse_size(text, "--ram")


def test_bad_budget_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    assert main(["scan", "--no-trace", "--ram", "lots"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("llm-doctor: error: --ram 'lots' is not a size")


def test_a_ram_budget_that_is_too_small_names_the_shortfall_and_what_fits(
        capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    # n_ctx 8192 with an f32 cache: 92.1 MiB weights + 360 MiB KV + 166.4 MiB compute + 0.2 MiB output
    # (+ the repacked weight copy where this machine's llama.cpp makes one: 32.06 MiB net with AMX)
    code, f = scan(capsys, "--no-trace", "--ctx-size", "8192", "--type-k", "f32", "--type-v", "f32", "--ram", "512M")
    buffers = round((92.10 + 360 + 166.38 + 0.19) * MIB) + f.get("derived.weights_repack_extra_bytes", 0)
    assert abs(f["derived.host_need_bytes"] - buffers) < MIB
    assert f["host.ram.available"] == 512 * MIB
    assert f["derived.ram_budget"] == 512 * MIB - HOST_PRIVATE_OVERHEAD - HOST_CACHE_MARGIN
    # the KV cache and compute buffer alone (private memory: they cannot be paged) do not fit: killed
    assert f["derived.ram_runs"] is False and f["derived.fits_ram"] is False and code == 1
    assert f["derived.host_floor_bytes"] > 512 * MIB
    assert f["derived.host_short_bytes"] == f["derived.host_need_bytes"] - f["derived.ram_budget"]
    assert f["derived.host_room_bytes"] == 0
    assert 0 < f["derived.max_ctx_fit"] < 8192 and f["derived.max_ctx_fit"] % 256 == 0
    assert "LD313" in f["#findings"]  # the compute buffer is what tips it over
    assert not any(k.startswith("run.") for k in f)  # a stated budget runs no trace here
    assert any("what-if budget" in i for i in f["#inputs"])


def test_a_budget_between_the_least_memory_and_everything_resident_pages_the_mapped_weights(
        capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    """Measured under a cgroup limit (bench/fit_vs_llamacpp.py): the process is not killed when only
    the memory-mapped weights do not fit; the kernel evicts them and every token reads them again."""
    code, f = scan(capsys, "--no-trace", "--ctx-size", "8192", "--type-k", "f32", "--type-v", "f32", "--ram", "690M")
    assert f["derived.host_floor_bytes"] <= 690 * MIB < f["derived.host_need_bytes"] + f["derived.host_overhead_bytes"]
    assert f["derived.ram_runs"] is True and f["derived.fits_ram"] is False
    assert 0 < f["derived.weights_paged_bytes"] <= f["derived.weights_mapped_bytes"]
    assert "LD317" in f["#findings"] and not {"LD312", "LD313", "LD314"} & set(f["#findings"])
    assert code == 0  # a warning: it runs, slowly
    # with mmap off the weights are the process's own memory: the same budget kills it
    code, f = scan(capsys, "--no-trace", "--ctx-size", "8192", "--type-k", "f32", "--type-v", "f32", "--ram", "690M",
                   "--no-mmap")
    assert f["derived.weights_mapped_bytes"] == 0 and f["derived.ram_runs"] is False and code == 1
    assert "LD317" not in f["#findings"]


def test_the_same_plan_fits_a_larger_budget_and_says_the_room_left(
        capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    _, f = scan(capsys, "--no-trace", "--ctx-size", "8192", "--type-k", "f32", "--type-v", "f32", "--ram", "1G")
    assert f["derived.fits_ram"] is True and f["derived.ram_runs"] is True and f["derived.host_short_bytes"] == 0
    assert f["derived.host_room_bytes"] == (GIB - HOST_PRIVATE_OVERHEAD - HOST_CACHE_MARGIN
                                            - f["derived.host_need_bytes"])
    # (+ the file pages of weights llama.cpp repacked, where this machine repacks: resident after the load)
    assert f["derived.host_peak_bytes"] == (f["derived.host_need_bytes"] + HOST_RUNTIME_OVERHEAD
                                            + f.get("derived.weights_repack_replaced_bytes", 0))
    assert f["derived.max_ctx_fit"] == 8192  # the training context: nothing larger is planned
    assert not {"LD312", "LD313", "LD314", "LD317"} & set(f["#findings"])


def test_vram_budgets_plan_gpus_this_machine_does_not_have(capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    _, f = scan(capsys, "--no-trace", "--ctx-size", "8192", "--vram", "1G,1G", "--ram", "8G")
    assert f["host.gpu.count"] == 2 and f["engine.gpu_offload_supported"] is True
    assert f["config.n_gpu_layers"] == -1  # a GPU is planned, so every layer goes to it
    assert f["derived.vram_budget"] == 2 * GIB - 2 * GPU_RUNTIME_OVERHEAD
    assert f["derived.fits_vram"] is True and f["derived.max_gpu_layers"] == 31
    _, small = scan(capsys, "--no-trace", "--ctx-size", "8192", "--vram", "700M", "--ram", "8G")
    assert small["derived.fits_vram"] is False and small["derived.gpu_short_bytes"] > 0
    assert 0 <= small["derived.max_gpu_layers"] < 31
    assert small["derived.gpu_need_bytes"] - small["derived.gpu_short_bytes"] == small["derived.vram_budget"]


def test_the_text_view_says_the_verdict_and_the_room(capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    main(["scan", "--no-trace", "--format", "text", "--color", "never", "--ram", "1G"])
    out = capsys.readouterr().out
    memory = next(line for line in out.splitlines() if line.startswith("  memory:"))
    assert "RAM fits:" in memory and "left" in memory and "largest context" in memory


MACHINES = Path(__file__).resolve().parents[2] / "fixtures" / "machines"
# the two CPU kinds the suite runs on, recorded live (issue 37): an AMD EPYC (AVX-512, no AMX: llama.cpp
# makes no copy of Q4_1 weights) and an Intel Xeon with AMX (the AMX buffer holds a repacked copy)
CPU_KINDS = {"amd-epyc": MACHINES / "vm-virtio", "xeon-amx": MACHINES / "xeon-amx-vm"}
F32_8K = ("--ctx-size", "8192", "--type-k", "f32", "--type-v", "f32")


def on(kind: str | None, smollm2: Path) -> list[str]:
    """Scan options that pin the machine: a recorded CPU kind, or (None) this machine."""
    return ["--replay-machine", str(CPU_KINDS[kind]), "--model", str(smollm2)] if kind else []


@pytest.mark.parametrize("kind", [None, *CPU_KINDS])
def test_the_markdown_view_says_it_too(capsys: pytest.CaptureFixture[str], smollm2: Path, kind: str | None) -> None:
    """512 MiB: the KV cache and compute buffer alone do not fit, with or without a repacked copy of the
    weights, so the verdict is the same on every CPU (at 640 MiB it is not: see below)."""
    main(["scan", "--no-trace", "--format", "markdown", *F32_8K, "--ram", "512M", *on(kind, smollm2)])
    out = capsys.readouterr().out
    assert "**Memory:** RAM does not fit: needs " in out and "short by" in out


def test_the_what_if_under_both_cpu_kinds(capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    """640 MiB on the two recorded CPUs: on the AMX Xeon llama.cpp keeps an AMX copy of the Q4_1 matrix
    weights (the engine's system line says AMX_INT8 = 1 and the host has the tiles), which is the
    process's own memory: it does not fit. On the AMD EPYC nothing is copied (CPU_REPACK has no Q4_1
    kernel): it runs, paging the mapped weights. The sums differ by exactly the copy."""
    _, amx = scan(capsys, "--no-trace", *F32_8K, "--ram", "640M", *on("xeon-amx", smollm2))
    _, amd = scan(capsys, "--no-trace", *F32_8K, "--ram", "640M", *on("amd-epyc", smollm2))
    assert amx["host.cpu.flags"] != amd["host.cpu.flags"] and "amx_int8" in amx["host.cpu.flags"]
    assert amx["derived.weights_repack_buffers"] == "AMX" and amx["derived.weights_repack_extra_bytes"] > 0
    assert amd.get("derived.weights_repack_extra_bytes", 0) == 0
    assert amx["derived.host_need_bytes"] - amd["derived.host_need_bytes"] == amx["derived.weights_repack_extra_bytes"]
    assert amx["derived.ram_runs"] is False and "LD317" not in amx["#findings"]
    assert amd["derived.ram_runs"] is True and amd["derived.fits_ram"] is False and "LD317" in amd["#findings"]


@pytest.mark.parametrize("kind", list(CPU_KINDS))
@pytest.mark.parametrize("ram", ["140M", "100M"])
def test_a_budget_the_weights_barely_fit_says_nothing_usable_fits(
        capsys: pytest.CaptureFixture[str], smollm2: Path, kind: str, ram: str) -> None:
    """Issue 37: `scan --ram 100M --no-trace` (94 MiB of weights, 13.6 MiB left) said "The largest context
    that fits is 0 tokens ... Ask for the context you need (it fits)". Where no context fits beside the
    weights the report says so, and asks for a context nowhere."""
    code, f = scan(capsys, "--no-trace", "--ram", ram, *on(kind, smollm2))
    assert code == 1 and f["derived.max_ctx_fit"] == 0 and "derived.ctx_fit_recommended" not in f
    assert "LD312" not in f["#findings"] and {"LD319", "LD314"} & set(f["#findings"])
    main(["scan", "--no-trace", "--format", "text", "--color", "never", "--ram", ram, *on(kind, smollm2)])
    out = capsys.readouterr().out
    assert "no context fits beside the weights" in out
    assert "0 tokens" not in out and "(it fits)" not in out and "n_ctx=0" not in out and "--ctx-size 0" not in out


def test_a_llama_server_plan_counts_its_prompt_cache(capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    """llama-server keeps earlier prompts' KV states in RAM up to --cache-ram (8192 MiB unless set;
    measured growing per prompt: tests/server/test_prompt_cache_memory.py): LD318 caps it at the room left."""
    code, f = scan(capsys, "--no-trace", "--engine", "llama.cpp", "--ram", "1G")
    assert f["config.cache_ram"] == 8192 * MIB and f["derived.fits_ram"] is True
    assert f["derived.cache_ram_fit_mib"] == f["derived.host_room_bytes"] // MIB
    assert "LD318" in f["#findings"] and code == 0
    _, roomy = scan(capsys, "--no-trace", "--engine", "llama.cpp", "--ram", "16G")
    assert "LD318" not in roomy["#findings"]  # 8 GiB of cache fits beside this plan
    _, embedded = scan(capsys, "--no-trace", "--ram", "1G")  # llama-cpp-python keeps no prompt cache
    assert "config.cache_ram" not in embedded and "LD318" not in embedded["#findings"]
