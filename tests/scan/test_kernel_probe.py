"""The kernel probe (doctor/sources/live/embedded/kernels.py, kernel_child.py, kernel_gguf.py): what a
model needs timed, valid random blocks in the probe GGUFs, the child's times turned into rates and
attention costs, the cache per machine, engine build, repacking, type and thread count, and watch's
read of what scan kept. No engine, except the one test marked `engine` that times a small probe."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from doctor.core import json_cache
from doctor.core.facts import Facts, Source
from doctor.sources.live.embedded import kernel_gguf as kg
from doctor.sources.live.embedded import kernel_times, kernels
from doctor.sources.probes.gguf_model import collect_model

SRC = Source("config", "test")
XEON = "model name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu avx512f amx_tile\n"
EPYC = "model name\t: AMD EPYC 9R14 96-Core Processor\nflags\t\t: fpu avx512f avx512_vnni\n"


def model_facts(path: Path, **values: Any) -> Facts:
    facts = collect_model(str(path))
    for name, value in {"config.n_threads": 1, "config.n_threads_batch": 2, "config.n_gpu_layers": 0,
                        "host.gpu.count": 0, **values}.items():
        facts.set(name, value, SRC)
    return facts


def test_a_model_needs_its_cpu_weight_types_at_the_planned_threads(model_files) -> None:
    path = model_files("llama-3-8b-instruct-q4_k_m")
    req = kernels.request_from(model_facts(path), usable=2)
    assert req is not None
    assert req.types == ("Q4_K", "Q6_K") and req.moe_types == ()
    assert req.heads == kernel_times.Heads(32, 8, 128)
    assert req.decode_threads == (1, 2) and req.prefill_threads == (2,)  # the engine's and all cores
    assert req.extra_bufts is True
    assert req.rows == (2048, 5632)  # an 8B model's 4096 x 14336 rows, capped (a 1-layer probe would be 120 MB)
    triaged = kernels.request_from(model_facts(path, **{"run.triage_change": "repack_off"}), usable=2)
    assert triaged is not None and triaged.extra_bufts is False  # the setting the trace ran with (AMX)
    on_gpu = model_facts(path, **{"host.gpu.count": 1, "config.n_gpu_layers": -1})
    assert kernels.request_from(on_gpu, usable=2) is None  # nothing of it on the CPU
    moe = kernels.request_from(model_facts(model_files("mixtral-8x7b-instruct-q4_k_m")), usable=2)
    assert moe is not None and moe.moe_types and moe.n_expert == 8 and moe.n_expert_used == 2


def test_the_probe_has_the_model_s_own_row_widths_where_its_types_blocks_fit() -> None:
    """SmolLM2 (Q4_1, a Q8_0 head): rows of 576 and 1536, the dot products its kernels run; a K-quant's
    256-weight blocks do not fit 576 (no such model exists): the default widths."""
    assert kernels._rows(576, 1536, ["Q4_1", "Q8_0"]) == (576, 1536)
    assert kernels._rows(576, 1536, ["Q4_K"]) == (2048, 5632)
    req = kernels.Request(("Q4_1", "Q8_0"), heads=kernel_times.Heads(9, 3, 64), rows=(576, 1536))
    shape = kernels.type_shape("Q4_1", req)
    assert (shape.n_embd, shape.n_ff, shape.n_head, shape.head_dim) == (576, 1536, 9, 64)  # the model's heads
    size = sum(kg.weights(kg.tensors(shape, kg.uniform("Q4_1"))).values()) * 5 / 8  # Q4_1: 5 bits a weight
    assert 0.75 * kernels.PROBE_BYTES < size < 1.25 * kernels.PROBE_BYTES
    assert "dense/Q4_1/r576x1536/decode/1" in kernels._keys(req)  # kept apart from other widths'
    head = kernels.Request(("Q4_1", "Q8_0"), rows=(576, 1536), head_only=("Q8_0",), prefill_threads=(2,))
    assert [k for k in kernels._keys(head) if "prefill" in k] == ["dense/Q4_1/r576x1536/prefill/2"]  # no prompt rate


def test_the_planned_threads_come_first_and_the_others_only_within_the_target(tmp_path: Path) -> None:
    """A first scan's probe: the engine's own counts for every job; all cores' marked optional (the child
    leaves them out once past its target, and the figures say which are missing)."""
    req = kernels.Request(("Q4_1",), heads=kernel_times.Heads(9, 3, 64), decode_threads=(1, 2),
                          prefill_threads=(2,), rows=(576, 1536))
    jobs = kernels._jobs(req, set(kernels._keys(req)), tmp_path)
    assert [j.kind for j in jobs] == ["dense", "attn"]
    assert all(j.spec["optional"] == {"decode": [2], "prefill": []} for j in jobs)  # planned: decode 1, prefill 2
    assert jobs[0].spec["decode_threads"] == [1, 2] and jobs[0].spec["reps"] == kernel_times.REPS
    head = kernels.Request(("Q4_1", "Q8_0"), decode_threads=(1, 2), prefill_threads=(2,), rows=(576, 1536),
                           head_only=("Q8_0",), head_types=("Q8_0",))
    q8 = [j for j in kernels._jobs(head, set(kernels._keys(head)), tmp_path) if j.type_name == "Q8_0"]
    assert q8[0].spec["optional"]["decode"] == []  # a prompt runs the head at its decode rate on 2 threads
    only = kernels._jobs(req, {"dense/Q4_1/r576x1536/decode/2"}, tmp_path)
    assert len(only) == 1 and only[0].spec["decode_threads"] == [2] and only[0].spec["prefill_threads"] == []


@pytest.mark.parametrize("type_name", ["Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q6_K", "Q2_K", "BF16", "MXFP4"])
def test_probe_files_hold_the_shapes_and_valid_blocks_of_the_type(tmp_path: Path, type_name: str) -> None:
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize

    shape = kg.Shape("llama", "t", 1, 256, 512, 2, 1, 128, 64, tied=False)
    table = kg.tensors(shape, kg.uniform(type_name))
    path = kg.write(shape, table, tmp_path / "p.gguf", type_name)
    reader = GGUFReader(str(path))
    got = {t.name: (t.tensor_type.name, [int(x) for x in t.shape]) for t in reader.tensors}
    assert got["blk.0.ffn_down.weight"] == (type_name, [512, 256])
    assert got["blk.0.attn_k.weight"] == (type_name, [256, 128])  # one KV head of 128
    values = dequantize(reader.get_tensor(list(got).index("blk.0.ffn_up.weight")).data,
                        reader.tensors[list(got).index("blk.0.ffn_up.weight")].tensor_type)
    assert np.isfinite(values).all() and np.abs(values).max() < 100  # small positive scales: no NaN, no infinity
    # q and o (256 x 2 heads of 128), k and v (one head), the feed-forward, the head; not the embedding
    assert kg.weights(table) == {type_name: 2 * 256 * 256 + 2 * 256 * 128 + 3 * 256 * 512 + 256 * 64}


def test_the_child_s_last_line_of_a_job_is_kept_and_what_it_left_is_said(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The child prints a job's line after each stage (a cap keeps what finished); the parent keeps the last,
    and a scan says why the other thread counts were left for later (busy cores, or past the target)."""
    req = kernels.Request(("Q4_1",), decode_threads=(1, 2), prefill_threads=(2,), rows=(576, 1536))
    steps = [[0.002, 1.0]] * 6
    partial = {"id": "dense/Q4_1/r576x1536", "decode": {"1": steps}, "prefill": {}}
    last = {**partial, "prefill": {"2": [[0.02, 1.0], [0.02, 1.0]]}, "skipped": {"decode": [2]}, "skipped_why": "busy"}
    monkeypatch.setattr(kernels, "run_child", lambda spec, timeout_s=0.0: ([partial, last], None))
    monkeypatch.setattr(kernels, "engine_build", lambda: "0.3.36:test")
    said: list[str] = []
    facts = kernels.kernel_facts(req, XEON, folder=str(tmp_path / "k"), progress=said.append)
    assert [r[:3] for r in facts.value("host.cpu.kernel_prefill")] == [["Q4_1", "mul_mat", 2]]  # the last line's
    assert facts.value("host.cpu.kernel_missing") == ["dense/Q4_1/r576x1536/decode/2"]
    assert "2 of 3 figures" in said[1] and "Q4_1 decode at 2 threads" in said[1] and "cores so busy" in said[1]


def test_the_child_s_times_become_rates_and_attention_costs() -> None:
    req = kernels.Request(("Q4_0",), heads=kernel_times.Heads(9, 3, 64), decode_threads=(1,), prefill_threads=(1,))
    shape = kernels.type_shape("Q4_0")
    table = kg.tensors(shape, kg.uniform("Q4_0"))
    job = kernel_times.Job({"id": "dense/Q4_0"}, "dense", "Q4_0", table, shape, rows="r2048x5632")
    w = float(sum(kg.weights(table).values()))
    steps = [[0.05, 1.0]] + [[w / 7e9, 1.0]] * 3 + [[w / 6e9, 1.0]] * 2  # the first step is warm-up
    result = {"decode": {"1": steps}, "prefill": {"1": [[0.2, 0.5], [0.25, 0.5]]}}
    got = kernel_times.figures_from(job, result, {}, 1000.0, 0.0)
    decode = got["dense/Q4_0/r2048x5632/decode/1"]
    assert decode["best"] == pytest.approx(7e9) and decode["typ"] == pytest.approx(7e9)  # median of 5 steady
    prefill = got["dense/Q4_0/r2048x5632/prefill/1"]
    assert prefill["busy"] is True and prefill["share"] == 0.5  # half its threads' time: kept an hour only
    assert prefill["best"] > prefill["typ"] > 0
    # a prompt of 0.2 s that took 1.7 s with its threads idle half of it stalled on busy cores: no figure from it
    stalled = kernel_times.figures_from(job, {"decode": {"1": steps}, "prefill": {"1": [[1.7, 0.5]]}}, {}, 1000.0, 0.7)
    assert "dense/Q4_0/r2048x5632/prefill/1" not in stalled and "dense/Q4_0/r2048x5632/decode/1" in stalled
    attn_shape = kernels.attention_shape(req.heads)  # type: ignore[arg-type]
    attn_table = kg.tensors(attn_shape, kg.uniform("Q4_0"))
    wa = float(sum(kg.weights(attn_table).values()))
    layers = attn_shape.n_layer
    shallow = wa / 7e9 + layers * (20e-6 + 256 * 100e-9)  # 20 us a layer, 100 ns a cell
    deep = shallow + layers * 256 * 100e-9  # 256 more cells
    attn = kernel_times.Job({"id": "attn"}, "attn", "Q4_0", attn_table, attn_shape, req.kv_label(), "r2048x5632")
    result = {"decode": {"1": [[shallow, 1.0]] * 4}, "decode_deep": {"1": [[deep, 1.0]] * 4},
              "prefill": {"1": [[0.01, 1.0]] * 2}, "prefill_deep": {"1": [[0.01 + 32 * layers * 256 * 25e-9, 1.0]] * 2}}
    costs = kernel_times.figures_from(attn, result, got, 1000.0, 0.0)
    entry = costs[f"attn/h9k3d64/{req.kv_label()}/Q4_0/r2048x5632/decode/1"]
    assert entry["best"] == pytest.approx(100e-9) and entry["layer_best"] == pytest.approx(20e-6, rel=1e-3)
    assert costs[f"attn/h9k3d64/{req.kv_label()}/Q4_0/r2048x5632/prefill/1"]["typ"] == pytest.approx(25e-9)
    facts = kernels.to_facts(req, {**got, **costs}, "test")
    assert facts.value("host.cpu.kernel_decode") == [["Q4_0", "mul_mat", 1, 7.0, 7.0]]
    assert facts.value("host.cpu.kernel_attention")[0][:2] == [1, 100.0]


def test_figures_are_kept_per_machine_engine_build_and_repacking(tmp_path: Path) -> None:
    folder = str(tmp_path)
    key = kernels.machine_key(XEON, extra_bufts=False, build="0.3.36:abc")
    assert key != kernels.machine_key(EPYC, extra_bufts=False, build="0.3.36:abc")
    assert key != kernels.machine_key(XEON, extra_bufts=True, build="0.3.36:abc")
    assert key != kernels.machine_key(XEON, extra_bufts=False, build="0.3.37:abc")
    now = time.time()
    quiet = {"best": 7e9, "typ": 6e9, "when": now - 3 * 86400, "busy": False}
    busy = {"best": 2e9, "typ": 1e9, "when": now - 2 * 3600, "busy": True}
    kernels.store(folder, key, {"dense/Q4_0/decode/1": quiet, "dense/Q4_0/decode/2": busy})
    kept = kernels.load(folder, key, now)
    assert set(kept) == {"dense/Q4_0/decode/1"}  # a measurement on busy cores is kept an hour only
    assert kernels.load(folder, key, now + json_cache.FRESH_S) == {}
    assert json.loads(next(tmp_path.glob("*.json")).read_text())["key"] == key


def test_watch_reads_what_scan_kept_and_never_measures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    req = kernels.Request(("Q4_0",), decode_threads=(1,), prefill_threads=(1,), extra_bufts=False)
    key = kernels.machine_key(XEON, False)
    now = time.time()
    kernels.store(str(tmp_path), key, {"dense/Q4_0/r2048x5632/decode/1": {"best": 7e9, "typ": 6e9, "when": now,
                                                                      "busy": False}})
    monkeypatch.setattr(kernels, "measure", lambda *a, **k: pytest.fail("watch must not measure"))
    facts = kernels.kernel_facts(req, XEON, measure_missing=False, folder=str(tmp_path))
    assert facts.value("host.cpu.kernel_decode") == [["Q4_0", "mul_mat", 1, 7.0, 6.0]]
    assert "kept" in facts.get("host.cpu.kernel_decode").source.text
    assert facts.value("host.cpu.kernel_missing") == ["dense/Q4_0/r2048x5632/prefill/1"]
    assert "a traced scan measures it" in facts.get("host.cpu.kernel_missing").source.text


def test_a_scan_measures_only_what_is_missing_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    req = kernels.Request(("Q4_0",), decode_threads=(1,), prefill_threads=(1,), extra_bufts=False)
    asked: list[set[str]] = []

    def fake(request: kernels.Request, missing: set[str], folder: Path, proc_root: str = "/proc",
             timeout_s: float = 0.0, kept: Any = None, target_s: Any = None) -> kernels.Figures:
        asked.append(set(missing))
        return kernels.Figures({k: {"best": 5e9, "typ": 4e9, "when": time.time(), "busy": False} for k in missing})

    monkeypatch.setattr(kernels, "measure", fake)
    monkeypatch.setattr(kernels, "engine_build", lambda: "0.3.36:test")
    said: list[str] = []
    first = kernels.kernel_facts(req, XEON, folder=str(tmp_path), progress=said.append)
    assert asked == [{"dense/Q4_0/r2048x5632/decode/1", "dense/Q4_0/r2048x5632/prefill/1"}] and "once" in said[0]
    assert "2 of 2 figures in" in said[1]
    assert first.value("host.cpu.kernel_prefill") == [["Q4_0", "mul_mat", 1, 5.0, 4.0]]
    kernels.kernel_facts(req, XEON, folder=str(tmp_path), progress=said.append)
    assert len(asked) == 1 and len(said) == 2  # the second scan reads what the first kept


@pytest.mark.engine
def test_the_engine_times_its_own_kernels_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small probe through llama-cpp-python on this machine (repacking as crash triage would run it)."""
    pytest.importorskip("llama_cpp")
    from bench.common import repack_crashes_here

    monkeypatch.setattr(kernels, "PROBE_BYTES", 8 << 20)
    monkeypatch.setattr(kernels, "ATTN_DEPTH", 224)
    req = kernels.Request(("Q4_0",), heads=kernel_times.Heads(4, 2, 64), decode_threads=(1,), prefill_threads=(1,),
                          extra_bufts=not repack_crashes_here())
    cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    facts = kernels.kernel_facts(req, cpuinfo, folder=str(tmp_path / "k"))
    assert not facts.has("host.cpu.kernel_missing"), facts.get("host.cpu.kernel_missing")
    (row,) = facts.value("host.cpu.kernel_decode")
    assert row[:3] == ["Q4_0", "mul_mat", 1] and 0.05 < row[3] < 1000  # G weights/s through one core
    (attention,) = facts.value("host.cpu.kernel_attention")
    assert attention[0] == 1 and all(isinstance(x, float) for x in attention[1:])


def test_an_embedded_watch_gets_the_figures_scan_kept_with_repacking_as_triage_ran_it(
        model_files, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watch asks for repacking on (llama-cpp-python's default); on the AMX Xeon scan could only time
    the kernels with it off (crash triage): those figures serve."""
    from doctor.sources.live.embedded.hostinfo import host_facts
    from doctor.sources.live.embedded.settings import RunSettings

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = model_files("llama-3-8b-instruct-q4_k_m")
    cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    entry = {"best": 7e9, "typ": 6e9, "when": time.time(), "busy": False}
    keys = [f"dense/{t}/r2048x5632/{phase}/{n}" for t in ("Q4_K", "Q6_K") for phase in ("decode", "prefill")
            for n in (1, 2)]
    kernels.store(str(tmp_path / "llm-doctor" / "kernels"), kernels.machine_key(cpuinfo, False),
                  {k: entry for k in keys})
    facts = host_facts(str(path), settings=RunSettings(model_path=str(path), n_threads=1, n_threads_batch=2))
    rows = facts.value("host.cpu.kernel_decode")
    assert rows and {r[0] for r in rows} == {"Q4_K", "Q6_K"} and {r[2] for r in rows} <= {1, 2}
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty"))
    assert not host_facts(str(path), settings=RunSettings(model_path=str(path))).has("host.cpu.kernel_decode")
