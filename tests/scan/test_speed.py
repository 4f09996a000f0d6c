"""Is it slow? The model's cost per token from the GGUF tensor table and the placement, and each
phase's verdict against the ceilings (doctor/derive/speed.py): a bound made of the read bandwidth and
the engine's own kernel rates (the kernel probe's rows, given here), a misfit where a run beats it,
threads only where the probe measured a gain, contention first; the core-share window
(doctor/sources/probes/cpustat.py) and the bandwidth probe's cache and replay
(doctor/sources/probes/ceilings.py). Sparse real-shape GGUFs, no engine, no GPU."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from doctor.core import catalog, json_cache
from doctor.core.facts import Facts, Source
from doctor.derive import derive
from doctor.sources.probes import ceilings, cpustat
from doctor.sources.probes.base import ProbeContext, Reporter, Roots, run_probe
from doctor.sources.probes.gguf_model import collect_model

SRC = Source("config", "test")


def facts_for(path: Path, **values: Any) -> Facts:
    facts = collect_model(str(path))
    base = {"config.n_ctx": 4096, "config.n_gpu_layers": 0, "host.gpu.count": 0, "config.n_threads": 2,
            "host.cpu.usable_cores": 2.0, "host.cpu.logical_cores": 2, "run.prompt_tokens": 256,
            "run.decode_tokens": 32}
    for name, value in {**base, **values}.items():
        if value is not None:
            facts.set(name, value, SRC)
    return derive(facts)


def kernels(decode: dict[int, float], prefill: dict[int, float] | None = None, cell_ns: float = 40.0,
            layer_ms: float = 0.01, types: tuple[str, ...] = ("Q4_K", "Q6_K")) -> dict[str, Any]:
    """The kernel probe's rows: every type at `decode[t]` G weights/s and `prefill[t]` GFLOP/s (best; the
    typical figure 10% slower), attention `cell_ns` per layer per KV cell, `layer_ms` per layer."""
    prefill = prefill or {t: 20 * g for t, g in decode.items()}
    counts = sorted(set(decode) | set(prefill))
    return {"host.cpu.kernel_decode": [[ty, "mul_mat", t, g, g / 1.1] for ty in types for t, g in decode.items()],
            "host.cpu.kernel_prefill": [[ty, "mul_mat", t, g, g / 1.1] for ty in types for t, g in prefill.items()],
            "host.cpu.kernel_attention": [[t, cell_ns, cell_ns * 1.1, cell_ns / 4, cell_ns / 4 * 1.1, layer_ms,
                                           layer_ms * 1.1] for t in counts]}


def judged(facts: Facts) -> set[str]:
    """The rule ids that fire on these facts (scan mode, the built-in rules)."""
    from doctor.judge.evaluate import build_report
    from doctor.judge.rulebase import load_rulebase

    return {f.id for f in build_report(load_rulebase(), facts, command="scan", mode="scan").findings}


def test_dense_decode_streams_every_layer_and_the_head_not_the_embedding(model_files) -> None:
    facts = facts_for(model_files("llama-3-8b-instruct-q4_k_m"))
    layers = sum(facts.value("model.layer_bytes"))
    kv_at_depth = 32 * 8 * 128 * 2 * 2 * 272  # f16 K and V of 32 layers x 8 KV heads x 128, at 256 + 32 / 2
    assert facts.value("derived.speed_depth") == 272
    assert facts.value("derived.decode_bytes_per_token_cpu") == layers + facts.value("model.output_bytes") + kv_at_depth
    assert facts.value("derived.decode_bytes_per_token_gpu") == 0
    # 2 FLOPs per parameter, less the embedding table (a row gather), plus attention at the prompt's depth
    flops = facts.value("derived.prefill_flops_per_token")
    active = facts.value("model.n_params") - 128256 * 4096
    assert 2 * active < flops < 2 * active * 1.02
    assert not facts.has("derived.prefill_pcie_bytes_per_batch")  # no GPU: nothing copied


def test_moe_decode_reads_only_the_routed_experts(model_files) -> None:
    facts = facts_for(model_files("mixtral-8x7b-instruct-q4_k_m"), **{"run.prompt_tokens": 1, "run.decode_tokens": 1})
    experts = facts.value("model.expert_bytes")
    layers = sum(facts.value("model.layer_bytes"))
    weights = layers - experts * (1 - 2 / 8) + facts.value("model.output_bytes")
    got = facts.value("derived.decode_bytes_per_token_cpu")
    assert abs(got - weights) <= 32 * 8 * 128 * 2 * 2 + 8  # + the KV of the one token of depth
    assert got < 0.4 * facts.value("model.weights_bytes")  # 13B of 47B parameters are active


def test_partial_offload_splits_the_stream_and_copies_cpu_weights_per_batch(model_files) -> None:
    facts = facts_for(model_files("llama-3-8b-instruct-q4_k_m"), **{
        "host.gpu.count": 1, "config.n_gpu_layers": 16, "engine.gpu_offload_supported": True})
    per_layer = facts.value("model.layer_bytes")
    cpu_layers = sum(per_layer[:17])  # 33 offloadable (32 + output): the last 16 on the GPU, output among them
    assert facts.value("derived.prefill_pcie_bytes_per_batch") == cpu_layers
    assert facts.value("derived.decode_bytes_per_token_gpu") > sum(per_layer[17:])
    assert facts.value("derived.decode_bytes_per_token_cpu") > cpu_layers


def test_a_many_core_decode_is_held_by_memory_bandwidth(model_files) -> None:
    facts = facts_for(model_files("llama-3-8b-instruct-q4_k_m"), **{
        "host.ram.read_bw_gbs": 20.0, "host.ram.read_bw_all_gbs": 20.0, **kernels({2: 200.0}),
        "run.decode_tps": 2.0, "run.prefill_tps": 20.0, "host.cpu.other_busy": 0.02})
    assert facts.value("speed.decode.bound") == "memory-bandwidth:cpu"
    assert facts.value("speed.decode.ceiling_source") == "measured"
    ceiling = 20e9 / facts.value("derived.decode_bytes_per_token_cpu")
    assert facts.value("speed.decode.ceiling_tok_s") == pytest.approx(ceiling * 0.98, rel=0.005)  # 2% others
    assert facts.value("speed.decode.fraction") == pytest.approx(2.0 / facts.value("speed.decode.ceiling_tok_s"),
                                                                   abs=0.001)
    assert facts.value("speed.prefill.bound") == "compute:cpu"
    # expected: the bus at its full rate is what the kernels cannot beat: at most the ceiling
    assert 0 < facts.value("speed.decode.expected_tok_s") <= facts.value("speed.decode.ceiling_tok_s")


def test_on_few_cores_the_engine_s_own_kernels_bind_and_set_the_expected_speed(model_files) -> None:
    """The 2-core Xeon's shape: a core reads 15 GB/s but its K-quant dot products get through far fewer
    weights a second; the ceiling is their best, the expected speed their median."""
    path = model_files("llama-3-8b-instruct-q4_k_m")
    facts = facts_for(path, **{"host.ram.read_bw_gbs": 28.5, "host.ram.read_bw_all_gbs": 28.5,
                               **kernels({2: 8.0}, cell_ns=0.0, layer_ms=0.0), "run.decode_tps": 1.0})
    assert facts.value("speed.decode.bound") == "compute:cpu"
    text = facts.get("speed.decode.ceiling_tok_s").source.text
    assert text.index("compute:cpu") < text.index("memory-bandwidth:cpu")  # the slowest first
    weights = sum(r[5] * r[3][0] * r[3][1] * r[3][2] for r in facts.value("model.matmul_weights"))
    assert facts.value("speed.decode.ceiling_tok_s") == pytest.approx(8e9 / weights, rel=0.01)
    assert facts.value("speed.decode.expected_tok_s") == pytest.approx(8e9 / 1.1 / weights, rel=0.01)


def test_a_probe_stopped_at_its_cap_names_the_figures_it_lacks_rather_than_guessing(model_files) -> None:
    """The first scan's kernel probe stopped before Q6_K's prompt and attention (busy cores): the prefill
    verdict says which figures would settle it, decode keeps the bus as its ceiling and says compute:cpu was
    left out and why."""
    rows = kernels({2: 8.0})
    rows["host.cpu.kernel_decode"] = [r for r in rows["host.cpu.kernel_decode"] if r[0] == "Q4_K"]
    rows["host.cpu.kernel_prefill"] = [r for r in rows["host.cpu.kernel_prefill"] if r[0] == "Q4_K"]
    del rows["host.cpu.kernel_attention"]
    missing = ["attn/h32k8d128/f16/f16/fa0/Q4_K/r2048x5632/decode/2",
               "attn/h32k8d128/f16/f16/fa0/Q4_K/r2048x5632/prefill/2",
               "dense/Q6_K/r2048x5632/decode/2", "dense/Q6_K/r2048x5632/prefill/2"]
    facts = facts_for(model_files("llama-3-8b-instruct-q4_k_m"), **{
        "host.ram.read_bw_gbs": 28.5, "host.ram.read_bw_all_gbs": 28.5, **rows, "host.cpu.kernel_missing": missing,
        "run.decode_tps": 1.0, "run.prefill_tps": 10.0})
    settle = facts.value("speed.prefill.settle")
    assert "Q6_K decode, Q6_K prefill, attention prefill at 2 threads" in settle and "next traced" in settle
    assert not facts.has("speed.prefill.fraction")  # no ceiling guessed without them
    assert facts.value("speed.decode.bound") == "memory-bandwidth:cpu"
    note = facts.get("speed.decode.bound").source.text
    assert "compute:cpu left out" in note and "Q6_K decode, attention decode at 2 threads" in note


def test_a_speed_above_its_ceiling_is_the_ceiling_s_defect_never_a_verdict(model_files) -> None:
    """Issue 36: decode 2.8x past a "ceiling" fitted on another CPU. Past 1.05 x the ceiling the bound is
    ceiling-misfit, the term that did not fit is named, and no rule judges the run against it."""
    facts = facts_for(model_files("llama-3-8b-instruct-q4_k_m"), **{
        "host.ram.read_bw_gbs": 28.5, "host.ram.read_bw_all_gbs": 28.5, **kernels({1: 8.0, 2: 8.2}),
        "config.n_threads": 1, "run.decode_tps": 2.8 * 8e9 / 7.5e9})
    assert facts.value("speed.decode.bound") == "ceiling-misfit"
    assert facts.value("speed.decode.misfit_term") == "compute:cpu"
    assert facts.value("speed.decode.fraction") > 1.05
    fired = judged(facts)
    assert "LD827" in fired and not {"LD820", "LD821", "LD825"} & fired
    within = facts_for(model_files("llama-3-8b-instruct-q4_k_m"), **{
        "host.ram.read_bw_gbs": 28.5, "host.ram.read_bw_all_gbs": 28.5, **kernels({1: 8.0, 2: 8.2}),
        "config.n_threads": 1, "run.decode_tps": 0.9})
    assert within.value("speed.decode.bound") == "compute:cpu" and not within.has("speed.decode.misfit_term")


def test_threads_are_advised_only_where_the_probe_measured_all_cores_faster(model_files) -> None:
    """Issue 36: a second thread gained 2% on the AMD EPYC, yet LD825 led. More threads are advised only
    where the kernel probe times all cores at least 10% faster."""
    path = model_files("llama-3-8b-instruct-q4_k_m")
    base = {"host.ram.read_bw_gbs": 15.0, "host.ram.read_bw_all_gbs": 28.0, "config.n_threads": 1,
            "config.n_threads_batch": 1, "run.decode_tps": 0.9, "host.cpu.other_busy": 0.0}
    flat = facts_for(path, **base, **kernels({1: 8.0, 2: 8.16}, {1: 100.0, 2: 102.0}))
    assert flat.value("speed.decode.bound") == "compute:cpu"
    assert flat.value("speed.decode.threads_gain") == pytest.approx(1.02, abs=0.01)
    assert "LD825" not in judged(flat)
    faster = facts_for(path, **base, **kernels({1: 8.0, 2: 15.0}, {1: 100.0, 2: 190.0}))
    assert faster.value("speed.decode.bound") == "threads"
    assert faster.value("speed.decode.threads_gain") > 1.5
    assert "the kernel probe: 1 thread(s)" in faster.get("speed.decode.bound").source.text
    assert "LD825" in judged(faster)
    unprobed = facts_for(path, **base, **kernels({1: 8.0}, {1: 100.0}))  # only the engine's count measured
    assert unprobed.value("speed.decode.bound") == "compute:cpu" and not unprobed.has("speed.decode.threads_gain")


def test_contention_outranks_threads_and_is_named_without_a_ceiling(model_files) -> None:
    path = model_files("llama-3-8b-instruct-q4_k_m")
    busy = facts_for(path, **{"host.ram.read_bw_gbs": 15.0, "host.ram.read_bw_all_gbs": 28.0, "config.n_threads": 1,
                              **kernels({1: 8.0, 2: 15.0}), "run.decode_tps": 0.4, "host.cpu.other_busy": 0.6})
    assert busy.value("speed.decode.bound") == "contention" and busy.value("speed.cores_shared") is True
    fired = judged(busy)
    assert "LD830" in fired and "LD825" not in fired
    # watch before any scan kept a ceiling: nothing to hold the speed to, the shared cores still named
    bare = facts_for(path, **{"config.n_threads": 2, "run.decode_tps": 0.4, "host.cpu.other_busy": 0.7})
    assert bare.value("speed.decode.bound") == "contention" and bare.value("speed.cores_shared") is True
    assert "memory read bandwidth" in bare.value("speed.decode.settle")
    assert "LD830" in judged(bare)


def test_without_kernel_figures_the_bus_is_the_only_bound_and_nothing_is_expected(model_files) -> None:
    facts = facts_for(model_files("llama-3-8b-instruct-q4_k_m"), **{
        "host.ram.read_bw_gbs": 20.0, "host.ram.read_bw_all_gbs": 20.0, "run.decode_tps": 1.0,
        "run.prefill_tps": 10.0})
    assert facts.value("speed.decode.bound") == "memory-bandwidth:cpu"
    assert not facts.has("speed.decode.expected_tok_s")
    assert facts.value("speed.prefill.bound") == "unknown"
    assert "kernel rates" in facts.value("speed.prefill.settle")


def test_other_processes_on_the_cores_bind_and_the_ceiling_is_their_share(model_files) -> None:
    ceil = {"host.ram.read_bw_gbs": 20.0, "host.ram.read_bw_all_gbs": 20.0, **kernels({2: 200.0})}
    quiet = facts_for(model_files("llama-3-8b-instruct-q4_k_m"), **ceil, **{"run.decode_tps": 2.0})
    busy = facts_for(model_files("llama-3-8b-instruct-q4_k_m"), **ceil, **{
        "run.decode_tps": 2.0, "host.cpu.other_busy": 0.5})  # one of the two cores
    assert busy.value("speed.decode.bound") == "contention"
    assert "50% of the cores" in busy.get("speed.decode.bound").source.text
    assert busy.value("speed.decode.ceiling_tok_s") == pytest.approx(quiet.value("speed.decode.ceiling_tok_s") / 2,
                                                                      rel=0.01)


def test_without_ceilings_the_verdict_says_what_would_settle_it(model_files) -> None:
    facts = facts_for(model_files("llama-3-8b-instruct-q4_k_m"), **{"run.decode_tps": 2.0})
    assert facts.value("speed.decode.tok_s") == 2.0
    assert facts.value("speed.decode.ceiling_source") == "unknown"
    assert facts.value("speed.decode.bound") == "unknown"
    assert "memory read bandwidth" in facts.value("speed.decode.settle")
    assert not facts.has("speed.decode.fraction")


def test_a_published_gpu_spec_is_the_ceiling_for_a_pasted_log(model_files) -> None:
    if not catalog.is_known("spec.kind"):
        pytest.skip("spec.* facts come with the pasted-log side's catalogue (branch speedlog)")
    facts = facts_for(model_files("llama-3-8b-instruct-q4_k_m"), **{
        "host.gpu.count": 1, "config.n_gpu_layers": -1, "engine.gpu_offload_supported": True,
        "spec.kind": "gpu", "spec.device": "RTX 4090", "spec.mem_bw_gbs": 1008.0, "spec.fp16_tflops": 165.0,
        "spec.source": "NVIDIA spec sheet", "run.decode_tps": 120.0})
    assert facts.value("speed.decode.ceiling_source") == "spec"
    assert facts.value("speed.decode.bound") == "memory-bandwidth:gpu"
    assert "RTX 4090" in facts.get("speed.decode.ceiling_source").source.text
    assert 0.5 < facts.value("speed.decode.fraction") < 1.0


def test_a_quantized_prompt_on_a_gpu_is_held_to_the_int8_peak_not_the_fp16_one(model_files) -> None:
    """Issue 36: llama.cpp runs a quantized model's prompt on int8 MMQ kernels; the FP16 tensor figure is
    a ceiling in the wrong unit. Without an int8 figure the prompt is not judged, and the verdict says why."""
    from doctor.derive.speed_ceilings import gpu_unit

    gpu = {"host.gpu.count": 1, "config.n_gpu_layers": -1, "engine.gpu_offload_supported": True,
           "spec.kind": "gpu", "spec.device": "RTX 3090", "spec.mem_bw_gbs": 936.0, "spec.fp16_tflops": 71.0,
           "spec.source": "NVIDIA spec sheet", "run.prefill_tps": 3000.0}
    path = model_files("llama-3-8b-instruct-q4_k_m")
    with_int8 = facts_for(path, **gpu, **{"spec.int8_tops": 284.0})
    assert with_int8.value("speed.prefill.bound") == "compute:gpu:int8"
    flops = with_int8.value("derived.prefill_flops_per_token")
    assert with_int8.value("speed.prefill.ceiling_tok_s") == pytest.approx(284e12 / flops, rel=0.01)
    without = facts_for(path, **gpu)
    assert without.value("speed.prefill.bound") == "unknown" and "int8" in without.value("speed.prefill.settle")
    assert gpu_unit({"F16"}, "gpu") == "fp16" and gpu_unit({"BF16"}, "gpu") == "bf16"
    assert gpu_unit({"Q4_K", "Q6_K"}, "apple") == "fp16"  # Apple GPUs have no int8 matrix units
    assert gpu_unit({"F32"}, "gpu") == "fp32"


@pytest.mark.parametrize(("values", "bound"), [
    ({"server.waiting_max": 3, "server.running_max": 4, "config.n_parallel": 4, "host.gpu.count": 0,
      "config.n_threads": 8, "host.cpu.usable_cores": 8.0}, "cores"),
    ({"server.waiting_max": 3, "server.running_max": 4, "config.n_parallel": 4, "server.kv_usage_max": 98.0}, "kv"),
    ({"server.waiting_max": 3, "server.running_max": 4, "config.n_parallel": 4, "host.gpu.count": 1}, "slots"),
])
def test_capacity_names_the_bound_that_holds(values: dict[str, Any], bound: str) -> None:
    facts = derive(Facts.from_values(values))
    assert facts.value("derived.capacity_bound") == bound


def _stat(tmp_path: Path, busy: int, idle: int, steal: int, cpus: int = 2) -> str:
    root = tmp_path / f"proc{busy}"
    root.mkdir()
    lines = [f"cpu  {busy} 0 0 {idle} 0 0 0 {steal} 0 0"] + [f"cpu{i} 0 0 0 0 0 0 0 0 0 0" for i in range(cpus)]
    (root / "stat").write_text("\n".join(lines) + "\n")
    return str(root)


def test_core_share_is_others_busy_time_over_all_cpu_time(tmp_path: Path) -> None:
    before = cpustat.read_times(_stat(tmp_path, 1000, 1000, 0))
    after = cpustat.read_times(_stat(tmp_path, 1000 + 300, 1000 + 80, 20))  # 4 s on 2 CPUs at 100 ticks/s
    assert before is not None and after is not None and after.cpus == 2
    tick = 1 / cpustat.CLK_TCK
    share = cpustat.share(before, after, own_s=100 * tick, wall_s=2.0)  # we used 1 s of the 3 s busy
    assert share is not None
    assert share.other_busy == pytest.approx(200 / 400, abs=0.001)
    assert share.steal_pct == pytest.approx(5.0)
    assert cpustat.read_times(str(tmp_path / "nowhere")) is None


def test_ceilings_are_kept_per_machine_and_thread_count_and_replayed_from_a_recording(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    answer = {"bw": {"1": 12.5, "2": 24.0}, "date": "2026-12-05 22:00", "when": 1e12, "other_busy": 0.01}
    folder = ceilings.cache_folder()
    assert folder is not None
    key = ceilings.machine_key(ProbeContext())
    ceilings.store_cached(folder, key, ceilings.per_count(answer))
    two = ProbeContext(threads=1, roots=Roots(affinity=lambda: {0, 1}))
    kept = ceilings.kept_facts(1, two)  # watch: what an earlier scan kept, nothing measured
    assert kept.value("host.ram.read_bw_gbs") == 12.5 and "earlier scan" in kept.get("host.ram.read_bw_gbs").source.text
    assert ceilings.kept_facts(2, two).value("host.ram.read_bw_gbs") == 24.0  # any count kept serves
    assert ceilings.load_cached(folder, key, 1e12 + 3600)["1"]["bw"] == 12.5
    assert ceilings.load_cached(folder, key, 1e12 + json_cache.FRESH_S + 1) == {}  # a month on: measured again
    entries = ceilings.per_count(answer)
    busy = ceilings.per_count({**answer, "other_busy": 0.8})
    ceilings.store_cached(folder, key, {"1": busy["1"], "2": entries["2"]})
    assert set(ceilings.load_cached(folder, key, 1e12 + json_cache.BUSY_FRESH_S + 1)) == {"2"}  # busy cores: an hour
    rep = Reporter("ceilings")
    ceilings.ceiling_facts(entries, 1, 2, rep)
    assert rep.facts.value("host.ram.read_bw_gbs") == 12.5 and rep.facts.value("host.ram.read_bw_all_gbs") == 24.0
    assert "float32 sum over" in rep.facts.get("host.ram.read_bw_gbs").source.text
    recorded = run_probe(ceilings.PROBE, ProbeContext(roots=Roots(live=False, recorded="box",
                                                                  bench={"ceilings": {**answer, "engine_threads": 2}})))
    assert recorded.value("host.ram.read_bw_gbs") == 24.0
    assert "recorded on box" in recorded.get("host.ram.read_bw_gbs").source.text
    none = run_probe(ceilings.PROBE, ProbeContext(roots=Roots(live=False, recorded="box", bench={})))
    assert "not recorded for box" in (none.get("host.ram.read_bw_gbs").unknown or "")
    assert json.loads(json.dumps(answer)) == answer


def test_thread_counts_measured() -> None:
    assert ceilings.thread_counts(1, 2) == [1, 2]
    assert ceilings.thread_counts(8, 4) == [4]  # more threads than cores: measured at the cores
    assert ceilings.thread_counts(None, 16) == [16]


def test_the_read_kernel_is_torch_where_its_import_is_paid_and_named_in_the_source(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util
    import sys

    installed = importlib.util.find_spec("torch") is not None
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert ceilings.pick_kernel(bench=False) == "numpy"  # first scan: import torch alone is ~1.2 s of CPU
    assert ceilings.pick_kernel(bench=True) == ("torch" if installed else "numpy")
    monkeypatch.setitem(sys.modules, "torch", object())
    assert ceilings.pick_kernel(bench=False) == "torch"  # already loaded: nothing to pay
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    monkeypatch.delitem(sys.modules, "torch")
    assert ceilings.pick_kernel(bench=True) == "numpy"  # a plain install without torch
    # the kernel is part of the cache key and named in each figure's source
    assert ceilings.machine_key(ProbeContext(), "torch") != ceilings.machine_key(ProbeContext(), "numpy")
    for kernel, name in (("torch", "torch.sum"), ("numpy", "numpy")):
        rep = Reporter("ceilings")
        ceilings.ceiling_facts(ceilings.per_count({"bw": {"1": 10.0}, "kernel": kernel}), 1, 1, rep)
        assert name in rep.facts.get("host.ram.read_bw_gbs").source.text


@pytest.mark.slow
@pytest.mark.skipif(not __import__("importlib").util.find_spec("torch"), reason="torch not installed")
def test_the_torch_read_kernel_measures(monkeypatch: pytest.MonkeyPatch) -> None:
    answer = ceilings.measure([1], kernel="torch")
    assert answer["kernel"] == "torch" and answer["bw"]["1"] > 0.5


def test_the_thread_sweep_shows_each_count_as_a_share_of_the_ceiling() -> None:
    from types import SimpleNamespace

    from doctor.commands.verify import _of_ceiling
    from doctor.core.report import Sweep

    judged = SimpleNamespace(facts=Facts.from_values({"speed.decode.fraction": 0.41}))
    assert _of_ceiling(judged, "decode") == "41% of ceiling"  # type: ignore[arg-type]
    past = SimpleNamespace(facts=Facts.from_values({"speed.decode.fraction": 2.8}))
    assert _of_ceiling(past, "decode") == "above the ceiling (it does not fit)"  # type: ignore[arg-type]
    assert _of_ceiling(judged, "prefill") == ""  # type: ignore[arg-type]
    sweep = Sweep("n_threads", "decode ms/token", rows=[(1, 20.0, "41% of ceiling"), (2, 11.0, "74% of ceiling"),
                                                         (4, None, "budget spent")], best=2, baseline=1, gain=0.45)
    cells = sweep.lines()[1]
    assert "1: 20.0 (41% of ceiling)" in cells and "2*: 11.0 (74% of ceiling)" in cells and "4: budget spent" in cells


def test_the_read_bandwidth_sets_the_decode_floor_and_the_bench_line_shows_both(model_files) -> None:
    """Issue 36: after `scan --bench` there was no RAM line and derived.decode_floor_ms stayed unknown."""
    from doctor.core.report import Report
    from doctor.views.render.text import bench_figures

    facts = facts_for(model_files("llama-3-8b-instruct-q4_k_m"), **{
        "host.ram.read_bw_gbs": 14.0, "host.ram.read_bw_all_gbs": 28.0})
    floor = facts.value("derived.decode_floor_ms")
    assert floor == pytest.approx(facts.value("derived.decode_bytes_per_token") / 28e9 * 1000, rel=1e-3)
    line = ", ".join(bench_figures(Report(command="scan", engine=None, facts=facts)))
    assert "RAM read 28 GB/s on all cores (14 GB/s at the engine's threads)" in line
    assert f"decode floor {floor:.0f} ms a token" in line
