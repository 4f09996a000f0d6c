"""The CPU side's cost per token by kernel (doctor/derive/speed_cost.py): decode through each type's
dot-product kernel, prefill through llamafile's tiled GEMM or the generic loop (experts, other types),
the lm head once per prefill batch, and decode attention that grows with the depth. Synthetic
model.matmul_weights rows [layer, op, type, ne, bytes, count]; no GGUF, no engine."""

from __future__ import annotations

import pytest

from doctor.derive.speed_cost import DECODE_RATE, PREFILL_EFF, cpu_mats, fallback_mats, type_class

DENSE = [[0, "mul_mat", "Q4_0", [2048, 2048, 1], 0, 4], [1, "mul_mat", "Q4_0", [2048, 2048, 1], 0, 4],
         [2, "tied_output", "Q4_0", [2048, 128256, 1], 0, 1]]
MOE = [[0, "mul_mat", "Q4_0", [2048, 2048, 1], 0, 4], [0, "mul_mat_id", "Q4_0", [2048, 1024, 64], 0, 3]]


def test_types_fall_in_the_kernel_classes_llama_cpp_runs() -> None:
    assert [type_class(t) for t in ("Q4_0", "q8_0", "F16", "BF16", "Q4_1", "Q4_K")] == \
        ["q4_0", "q8_0", "f16", "f16", "other", "other"]


def test_decode_reads_every_active_weight_through_its_kernel() -> None:
    mats = cpu_mats(DENSE, n_layer=2, first_gpu_layer=2, head_on_gpu=False, expert_share=0.0,
                    attn_flops_per_pos_layer=0.0)
    assert mats is not None
    weights = 8 * 2048 * 2048 + 2048 * 128256
    assert dict(mats.decode) == {"q4_0": weights}
    # one token: weights / (rate x multiply-adds per second)
    assert mats.decode_seconds(100.0, 100.0, 0) == pytest.approx(weights / (DECODE_RATE["q4_0"] * 50e9))


def test_prefill_pays_the_head_once_per_batch_not_per_token() -> None:
    mats = cpu_mats(DENSE, 2, 2, False, 0.0, 0.0)
    assert mats is not None
    assert dict(mats.prefill) == {"q4_0": 8 * 2048 * 2048}  # the head is not a per-token product
    one, many = mats.prefill_seconds(100.0, 1, 0), mats.prefill_seconds(100.0, 4096, 0)
    layers = 2 * 8 * 2048 * 2048 / (100e9 * PREFILL_EFF["q4_0"])
    assert many == pytest.approx(layers, rel=0.05)
    assert one > 2 * many


def test_experts_run_the_generic_loop_and_only_the_routed_share() -> None:
    mats = cpu_mats(MOE, 1, 1, True, 1 - 8 / 64, 0.0)
    assert mats is not None
    prefill = dict(mats.prefill)
    assert prefill["vec"] == pytest.approx(3 * 2048 * 1024 * 64 * 8 / 64)  # MUL_MAT_ID: no tiled GEMM
    assert prefill["q4_0"] == 4 * 2048 * 2048


def test_gpu_layers_and_a_gpu_head_are_not_the_cpu_s() -> None:
    mats = cpu_mats(DENSE, 2, 1, True, 0.0, 1000.0)
    assert mats is not None
    assert dict(mats.decode) == {"q4_0": 4 * 2048 * 2048}
    assert mats.head == ()
    assert mats.attn_flops_per_pos == 1000.0  # one layer of two on the CPU


def test_decode_attention_grows_with_depth_at_one_core_s_rate() -> None:
    mats = cpu_mats(DENSE, 2, 2, False, 0.0, 4 * 32 * 64)
    assert mats is not None
    shallow, deep = mats.decode_seconds(200.0, 100.0, 0), mats.decode_seconds(200.0, 100.0, 1000)
    assert deep - shallow == pytest.approx(2 * 4 * 32 * 64 * 1000 / (100e9 * 0.0245), rel=0.01)
    # a second thread speeds the weights, not the attention (the bench's 2-thread depth rows)
    assert mats.decode_seconds(400.0, 100.0, 1000) - mats.decode_seconds(400.0, 100.0, 0) == \
        pytest.approx(deep - shallow)


def test_without_the_tensor_table_one_class_holds_the_parameters() -> None:
    mats = fallback_mats("bf16", 1e9, 0.0)
    assert dict(mats.decode) == {"f16": 1e9}
    assert dict(fallback_mats("other", 1e9, 0.0).prefill) == {"vec": 1e9}
    assert cpu_mats(None, 2, 2, False, 0.0, 0.0) is None


def test_thread_barriers_cost_a_cache_line_hand_over_per_thread_not_a_fixed_share() -> None:
    """AmpereOne A192 (192 threads) ran Llama 3.2 3B at 23.5 tok/s (42.5 ms a token; geerlingguy/
    ai-benchmarks): the barrier cost of 28 layers at 192 threads must stay well inside it (it was
    108 ms, a 209% "fraction"), and vanish at 1 thread."""
    from doctor.derive.speed import Cost, overhead_s

    cost = Cost(0, 1, 1.0, 0, n_layer=28, gpu_layers=0, depth=0, weight_type="other")
    assert overhead_s(cost, 1) == 0.0
    assert 0.005 < overhead_s(cost, 192) < 0.02
    assert overhead_s(cost, 2) < 0.0001  # 2 threads: the bench's 2-thread rows need none


def _rows(model: str) -> tuple[list[list[object]], int, int]:
    """model.matmul_weights rows of a bench model, from bench/speed_table.py's tensor list."""
    from bench.speed_table import MODELS, tensors

    spec, mat, _, _ = MODELS[model]
    assert spec is not None
    n_layer, rows = spec["n_layer"], []
    for name, shape, ggml_type in tensors(spec, mat):
        if len(shape) < 2:
            continue
        ne = [*shape, 1][:3]
        if name == "token_embd.weight":
            if spec.get("tied"):
                rows.append([n_layer, "tied_output", ggml_type, ne, 0, 1])
            continue
        layer = n_layer if name == "output.weight" else int(name.split(".")[1])
        rows.append([layer, "mul_mat_id" if "_exps" in name else "mul_mat", ggml_type, ne, 0, 1])
    return rows, n_layer, spec["n_head"] * 4 * spec["head_dim"]


@pytest.mark.parametrize(("model", "batch", "prefill", "decode", "depth"), [
    ("llama-1b-q4_0", 64, 40.7, 5.6, 72), ("qwen-3b-q8_0", 32, 13.8, 2.4, 40),
    ("olmoe-1b-7b-q4_0", 64, 22.6, 5.8, 72), ("llama-1b-f16", 176, 46.2, 4.3, 264)])
def test_the_quiet_bench_rows_are_met_within_20_percent(model: str, batch: int, prefill: float, decode: float,
                                                         depth: int) -> None:
    """Measured on the 2-core Xeon at 1 thread, quiet (bench/results/speed_table.md), against the GEMM
    figure stored with them (142.9 GFLOP/s): the constants must keep reproducing them."""
    rows, n_layer, attn = _rows(model)
    share = 1 - 8 / 64 if model.startswith("olmoe") else 0.0
    mats = cpu_mats(rows, n_layer, n_layer, False, share, attn)
    assert mats is not None
    got_decode = 1 / mats.decode_seconds(142.9, 142.9, depth)
    got_prefill = 1 / mats.prefill_seconds(142.9, batch, batch / 2)
    assert got_decode / decode == pytest.approx(1.0, abs=0.2)
    assert got_prefill / prefill == pytest.approx(1.0, abs=0.2)
