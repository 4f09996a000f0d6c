"""The memory budget: weights per device as llama.cpp places them, KV with sliding windows, fit,
the largest layers/context that fit, and the decode floor."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.core.facts import Facts, Source
from doctor.derive import derive
from doctor.derive.memory import (
    GPU_RUNTIME_OVERHEAD,
    MIB,
    ComputeShape,
    KvShape,
    Plan,
    WeightLayout,
    budget,
    context_params,
    gpu_layer_start,
    kv_bytes,
    kv_layer_bytes,
    max_ctx_fit,
    max_gpu_layers,
    place_weights,
    swa_cells,
)
from doctor.sources.probes.gguf_model import collect_model

GIB = 1 << 30
LAYOUT = WeightLayout(layer_bytes=[100] * 4, input_bytes=50, output_bytes=30)
TIED = WeightLayout(layer_bytes=[100] * 4, input_bytes=50, output_bytes=2, output_tied=True, tied_bytes=50)


@pytest.mark.parametrize(("ngl", "start", "gpu", "host", "layers"), [
    (0, 5, 0, 480, 0),          # nothing offloaded
    (1, 4, 30, 450, 1),         # only the output layer: llama.cpp offloads from the end
    (2, 3, 130, 350, 2),        # output + the last repeating layer
    (5, 0, 430, 50, 5),         # everything but the input embedding, which always stays on the CPU
    (99, 0, 430, 50, 5),        # more than there are
    (-1, 0, 430, 50, 5),        # -1 = all
])
def test_layers_go_to_the_gpu_from_the_end(ngl: int, start: int, gpu: int, host: int, layers: int) -> None:
    assert gpu_layer_start(4, ngl) == min(start, 5)
    place = place_weights(LAYOUT, ngl)
    assert (place.gpu_bytes, place.host_bytes, place.gpu_layers) == (gpu, host, layers)
    assert place.gpu_bytes + place.host_bytes == LAYOUT.total


def test_a_tied_lm_head_is_duplicated_onto_the_gpu() -> None:
    place = place_weights(TIED, -1)
    assert place.gpu_bytes == 400 + 2 + 50  # layers + output norm + the copy of token_embd
    assert place.host_bytes == 50
    assert place_weights(TIED, 0).host_bytes == TIED.total  # on the CPU there is no copy


def test_no_gpu_means_everything_on_the_host() -> None:
    assert place_weights(LAYOUT, -1, gpu=False).gpu_bytes == 0


def test_sliding_window_layers_get_a_smaller_cache_unless_swa_full() -> None:
    shape = KvShape(4, [2, 2, 2, 2], 128, 128, swa=(True, False, True, False), n_swa=1024)
    full = kv_layer_bytes(shape, 8192, swa_full=True)
    small = kv_layer_bytes(shape, 8192, swa_full=False, n_ubatch=512)
    assert full == [2 * 128 * 8192 * 2 * 2] * 4
    assert swa_cells(8192, 1024, n_ubatch=512) == 1536  # pad256(min(8192, 1024 + 512))
    assert small[0] == 2 * 128 * 1536 * 2 * 2 and small[1] == full[1]
    assert kv_bytes(shape, 8192, swa_full=False) == sum(small)


def test_small_and_odd_contexts_follow_llama_cpps_order() -> None:
    """llama_context: n_batch = min(n_ctx asked, n_batch), n_ubatch = min(n_batch, n_ubatch), then
    n_ctx = pad256(n_ctx), then n_ctx_seq = pad256(n_ctx / n_seq) per stream (src/llama-context.cpp)."""
    cp = context_params(128)
    assert (cp.n_ctx, cp.n_ctx_seq, cp.n_batch, cp.n_ubatch, cp.n_tokens_reserve) == (256, 256, 128, 128, 128)
    cp = context_params(300, n_seq=4)  # pad(300) = 512 -> 128 per stream -> pad 256 -> 4 x 256
    assert (cp.n_ctx, cp.n_ctx_seq, cp.streams, cp.n_ubatch) == (1024, 256, 4, 300)
    assert context_params(300, n_seq=4, unified=True).n_ctx == 512
    assert context_params(4096, n_batch=256, n_ubatch=1024).n_ubatch == 256
    # a sliding window larger than the context gets the context; the window is sized with the clamped
    # n_ubatch: n_ctx 128 -> pad256(min(256, 4096 + 128)) = 256, n_ctx 2048 -> pad256(min(2048, 1024 + 512))
    shape = KvShape(2, [2, 2], 128, 128, swa=(True, False), n_swa=4096)
    small = kv_layer_bytes(shape, 128, swa_full=False)
    assert small[0] == small[1] == 2 * 128 * 256 * 2 * 2
    shape = KvShape(2, [2, 2], 128, 128, swa=(True, False), n_swa=1024)
    assert kv_layer_bytes(shape, 2048, swa_full=False)[0] == 2 * 128 * 1536 * 2 * 2
    assert kv_layer_bytes(shape, 1100, swa_full=False, n_ubatch=512, n_batch=512)[0] == 2 * 128 * 1280 * 2 * 2
    # the compute buffer: a context of 128 reserves a 128-token graph over 256 cells, not 512 tokens
    p = plan(n_ctx=128, flash_attn=False, n_gpu_layers=0)
    logits = 128 * (128256 * 4 + 2 * 4096 * 4)  # f16 K cache: 2 x n_embd per token (doctor/derive/arch.py)
    assert budget(p).compute_host == max(logits, 128 * 256 * (32 * 4 + 4) + 128 * 4 * (5 * 4096 + 2 * 1024))


def test_gemma2_swa_from_the_gguf(model_files) -> None:
    facts = collect_model(str(model_files("gemma-2-9b-it-q4_k_m")))
    assert facts.value("model.swa_layers") == 21  # llama.cpp's pattern 2: every other layer
    mask = facts.value("model.swa_per_layer")
    assert mask[:4] == [1, 0, 1, 0]
    for engine, swa_full in (("llama-cpp-python", True), ("llama.cpp", False)):
        f = Facts()
        f.merge(facts)
        for name, value in {"config.n_ctx": 8192, "config.type_k": "f16", "config.type_v": "f16",
                            "config.engine": engine}.items():
            f.set(name, value, Source("test", "t"))
        derive(f)
        per_layer_full = 8 * 256 * 2 * 2 * 8192
        if swa_full:
            assert f.value("derived.kv_bytes") == 42 * per_layer_full
        else:
            assert f.value("derived.kv_bytes") == 21 * per_layer_full + 21 * 8 * 256 * 2 * 2 * 4608  # pad(4096+512)


def plan(**changes: object) -> Plan:
    base = Plan(layout=WeightLayout([200 * MIB] * 32, 300 * MIB, 400 * MIB), kv=KvShape.uniform(32, 8, 128, 128),
                compute=ComputeShape(128256, 4096, 32, 1024), n_ctx=8192, n_gpu_layers=-1, flash_attn=True)
    return base.with_(**changes)


def test_kv_and_compute_follow_the_layers_to_their_device() -> None:
    b = budget(plan(n_gpu_layers=17))  # output + 16 repeating layers
    per_layer_kv = 8 * 128 * 2 * 2 * 8192
    assert b.kv_gpu == 16 * per_layer_kv and b.kv_host == 16 * per_layer_kv
    assert b.compute_gpu > 0 and b.compute_host > 0
    assert budget(plan(n_gpu_layers=17, offload_kqv=False)).kv_gpu == 0


def test_max_gpu_layers_is_the_boundary() -> None:
    p = plan(n_gpu_layers=0)
    room = 5 * GIB
    best = max_gpu_layers(p, room)
    assert 0 < best < 33
    assert budget(p.with_(n_gpu_layers=best)).gpu <= room < budget(p.with_(n_gpu_layers=best + 1)).gpu
    assert max_gpu_layers(p, 100 * GIB) == 33


def test_max_ctx_fit_is_the_boundary() -> None:
    p = plan()
    room = 9 * GIB
    best = max_ctx_fit(p, room, None, 131072)
    assert best is not None and best % 256 == 0
    assert budget(p.with_(n_ctx=best)).gpu <= room < budget(p.with_(n_ctx=best + 256)).gpu
    assert max_ctx_fit(p, 1 * GIB, None, 131072) is None  # not even 256 tokens next to 6.9 GiB of weights


def scan_facts(model: Facts, **values: object) -> Facts:
    facts = Facts()
    facts.merge(model)
    for name, value in values.items():
        facts.set(name.replace("__", "."), value, Source("test", "t"))
    return derive(facts)


@pytest.fixture(scope="module")
def llama3(model_files) -> Facts:
    return collect_model(str(model_files("llama-3-8b-instruct-q4_k_m")))


def test_an_8b_model_on_a_24_gb_card(llama3: Facts) -> None:
    f = scan_facts(llama3, **{"config.n_ctx": 8192, "config.n_gpu_layers": -1, "config.type_k": "f16",
                              "config.type_v": "f16", "host.gpu.count": 1, "host.gpu[0].vram_free": 23 * GIB,
                              "host.gpu[0].bandwidth_spec_gbs": 1008.1, "host.ram.available": 50 * GIB,
                              "config.prompt_tokens": 1000, "config.max_new_tokens": 500})
    assert f.value("derived.kv_bytes") == GIB  # 128 KiB per token x 8192
    assert f.value("derived.gpu_layers") == 33 and f.value("derived.total_layers") == 33
    assert f.value("derived.weights_host_bytes") == f.value("model.input_bytes")  # only the embedding stays
    assert f.value("derived.fits_vram") is True and f.value("derived.oom_phase") == "none"
    assert f.value("derived.vram_budget") == 23 * GIB - GPU_RUNTIME_OVERHEAD
    assert f.value("derived.max_gpu_layers") == 33 and f.value("derived.gpu_layers_fit_recommended") == -1
    # decode floor: every weight but the embedding table, plus the KV of the 1500 tokens needed
    read = f.value("derived.weights_gpu_bytes") + 131072 * 1500
    assert f.value("derived.decode_bytes_per_token") == read
    assert f.value("derived.decode_floor_ms") == pytest.approx(read / 1008.1e9 * 1000, rel=1e-3)


def test_an_oversized_plan_names_the_phase_and_what_fits(llama3: Facts) -> None:
    base = {"config.n_gpu_layers": -1, "config.type_k": "f16", "config.type_v": "f16", "host.gpu.count": 1,
            "host.ram.available": 50 * GIB}
    weights = scan_facts(llama3, **base, **{"config.n_ctx": 4096, "host.gpu[0].vram_free": 4 * GIB})
    assert weights.value("derived.oom_phase") == "weights" and weights.value("derived.oom_device") == "gpu"
    assert 0 < weights.value("derived.max_gpu_layers") < 33
    kv = scan_facts(llama3, **base, **{"config.n_ctx": 65536, "config.flash_attn": "enabled",
                                       "host.gpu[0].vram_free": 12 * GIB})
    assert kv.value("derived.oom_phase") == "kv_cache"
    assert kv.value("derived.max_ctx_fit") < 65536 and kv.value("derived.max_ctx_fit") % 256 == 0
    compute = scan_facts(llama3, **base, **{"config.n_ctx": 32768, "config.flash_attn": "disabled",
                                            "host.gpu[0].vram_free": 10 * GIB + 512 * MIB})
    assert compute.value("derived.oom_phase") == "compute"  # a 512 x 32768 x 32-head f32 KQ matrix
    assert compute.value("derived.compute_gpu_bytes") > 2 * GIB


def test_moe_decode_reads_only_the_routed_experts(model_files) -> None:
    model = collect_model(str(model_files("mixtral-8x7b-instruct-q4_k_m")))
    f = scan_facts(model, **{"config.n_ctx": 4096, "config.n_gpu_layers": -1, "config.type_k": "f16",
                             "config.type_v": "f16", "host.gpu.count": 1, "host.gpu[0].vram_free": 80 * GIB,
                             "host.gpu[0].bandwidth_spec_gbs": 2039.0})
    per_token = f.value("derived.decode_bytes_per_token")
    assert per_token < 0.4 * f.value("derived.weights_gpu_bytes")  # 2 of 8 experts, not the whole 26 GiB


def test_a_mamba_model_gets_its_recurrent_state_not_a_kv_cache(model_files) -> None:
    """Mamba-130m: 24 layers x ((d_conv 4 - 1) x d_inner 1536 + d_state 16 x 1536) f32 per sequence."""
    model = collect_model(str(model_files("mamba-130m-f16")))
    f = scan_facts(model, **{"config.n_ctx": 4096, "config.type_k": "f16", "config.type_v": "f16",
                             "config.n_parallel": 2, "host.ram.available": 8 * GIB})
    assert f.value("derived.kv_bytes") == 0
    assert f.value("derived.state_bytes") == 24 * (3 * 1536 + 16 * 1536) * 4 * 2
    assert f.value("derived.fits_ram") is True


def test_a_recurrent_model_says_unknown_rather_than_guess(model_files) -> None:
    model = collect_model(str(model_files("mamba-130m-f16")))
    model.set("model.arch", "rwkv6", Source("test", "an architecture whose state is not modelled"))
    f = scan_facts(model, **{"config.n_ctx": 4096, "config.type_k": "f16", "config.type_v": "f16",
                             "host.ram.available": 8 * GIB})
    assert not f.has("derived.kv_bytes")
    assert "not modelled" in (f.get("derived.kv_bytes").unknown or "")
    assert not f.has("derived.fits_ram") and f.get("derived.fits_ram") is not None


def test_the_estimate_matches_the_real_runs_own_kv(smollm2: Path) -> None:
    """derive() on a saved SmolLM2 model + the settings of the real engine's log gives its KV bytes."""
    from doctor.sources.logs.entry import analyze_bytes

    buffers = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "llama-cpp-python" / "buffers"
    log = buffers / "ctx4096_q4_0_fa.log"
    facts = analyze_bytes(log.read_bytes())
    facts.merge(collect_model(str(smollm2)))
    derive(facts)
    assert facts.value("derived.kv_bytes") == facts.value("run.kv_bytes") or \
        round(facts.value("derived.kv_bytes") / MIB, 2) == round(facts.value("run.kv_bytes") / MIB, 2)
    assert facts.value("derived.weights_host_bytes") == pytest.approx(facts.value("run.weights_host_bytes"), rel=0.01)


@pytest.fixture(scope="module")
def smol(smollm2: Path) -> Facts:
    return collect_model(str(smollm2))


def smol_plan(smol: Facts, n_ctx: int, kv: str = "f16", fa: str = "disabled", **values: object) -> Facts:
    return scan_facts(smol, **{"config.n_ctx": n_ctx, "config.type_k": kv, "config.type_v": kv,
                               "config.flash_attn": fa, "config.n_gpu_layers": 0, "config.n_ubatch": 512,
                               "config.n_batch": 512, "host.gpu.count": 0}, **values)


def test_the_cpu_work_buffer_is_the_largest_converted_operand(smol: Facts) -> None:
    # SmolLM2: n_head 9, n_ff 1536, Q4_1 weights (their dot product converts activations to q8_1)
    assert smol.value("model.n_ff") == 1536 and smol.value("model.file_type") == "Q4_1"
    weights_512 = 1536 * 512 * 36 // 32
    # f16 V without flash attention: the f32 KQ of a full context becomes f16 rows (cells x tokens x heads)
    assert smol_plan(smol, 8192).value("derived.cpu_work_bytes") == 8192 * 512 * 9 * 2  # 72 MiB
    assert smol_plan(smol, 2048).value("derived.cpu_work_bytes") == 2048 * 512 * 9 * 2
    assert smol_plan(smol, 128).value("derived.cpu_work_bytes") == 256 * 128 * 9 * 2  # the batch clamped to 128
    # an f32 cache is multiplied as it is, flash attention never builds KQ: the weights' input is the largest
    assert smol_plan(smol, 8192, kv="f32").value("derived.cpu_work_bytes") == weights_512
    assert smol_plan(smol, 8192, kv="q8_0", fa="enabled").value("derived.cpu_work_bytes") == weights_512
    assert smol_plan(smol, 64, kv="f32").value("derived.cpu_work_bytes") == 1536 * 64 * 36 // 32


def test_the_work_buffer_is_part_of_the_host_need_and_the_verdict(smol: Facts) -> None:
    from doctor.derive.memory import HOST_CACHE_MARGIN, HOST_PRIVATE_OVERHEAD

    f = smol_plan(smol, 8192)
    work = f.value("derived.cpu_work_bytes")
    buffers = sum(f.value(n) for n in ("derived.weights_host_bytes", "derived.kv_host_bytes",
                                       "derived.compute_host_bytes"))
    assert f.value("derived.host_need_bytes") == buffers + 49152 * 4 + work  # + one row of f32 logits
    # a budget the buffers alone would fit in, but not with the work buffer of a full context
    tight = smol_plan(smol, 8192, **{"host.ram.available": HOST_PRIVATE_OVERHEAD + HOST_CACHE_MARGIN + buffers
                                     + 49152 * 4 + work // 2})
    assert tight.value("derived.fits_ram") is False and tight.value("derived.host_short_bytes") == work - work // 2
    best = tight.value("derived.max_ctx_fit")
    assert best is not None and best < 8192  # the largest context that fits counts it too


def test_with_every_layer_on_the_gpu_the_host_has_no_work_buffer(smol: Facts) -> None:
    f = scan_facts(smol, **{"config.n_ctx": 8192, "config.type_k": "f16", "config.type_v": "f16",
                            "config.flash_attn": "disabled", "config.n_gpu_layers": -1, "host.gpu.count": 1,
                            "host.gpu[0].vram_free": 80 * GIB})
    assert f.value("derived.cpu_work_bytes") == 0


def test_the_least_memory_leaves_out_only_the_mapped_weights(smol: Facts) -> None:
    """Under a cgroup limit the kernel evicts memory-mapped weights instead of killing the process
    (bench/fit_vs_llamacpp.py): the least memory is the rest + the page cache it keeps for them."""
    from doctor.derive.memory import HOST_CACHE_MARGIN, HOST_MAPPED_MINIMUM, HOST_PRIVATE_OVERHEAD

    f = smol_plan(smol, 8192, kv="f32")
    need, mapped = f.value("derived.host_need_bytes"), f.value("derived.weights_mapped_bytes")
    assert mapped == f.value("derived.weights_host_bytes") > 0
    assert f.value("derived.host_floor_bytes") == need - mapped + HOST_PRIVATE_OVERHEAD + HOST_MAPPED_MINIMUM
    off = smol_plan(smol, 8192, kv="f32", **{"config.use_mmap": False})
    assert off.value("derived.weights_mapped_bytes") == 0
    assert off.value("derived.host_floor_bytes") == need + HOST_PRIVATE_OVERHEAD + HOST_CACHE_MARGIN
    floor = f.value("derived.host_floor_bytes")
    for available, runs, fits in ((floor - 1, False, False), (floor, True, False),
                                  (need + HOST_PRIVATE_OVERHEAD + HOST_CACHE_MARGIN, True, True)):
        judged = smol_plan(smol, 8192, kv="f32", **{"host.ram.available": available})
        assert (judged.value("derived.ram_runs"), judged.value("derived.fits_ram")) == (runs, fits), available
        paged = judged.value("derived.weights_paged_bytes")
        assert (paged is not None and paged > 0) == (runs and not fits)
        assert (judged.value("derived.oom_device") == "host") == (not runs)
