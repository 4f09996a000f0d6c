"""The CPU side's cost per token against the engine's own kernel rates (doctor/derive/speed_cost.py):
weights by type and op through the rates the kernel probe measured, the lm head once per prompt batch,
experts at their own rate, attention per KV cell as llama.cpp pads the cells. Synthetic
model.matmul_weights rows [layer, op, type, ne, bytes, count] and probe rows; no GGUF, no engine."""

from __future__ import annotations

import pytest

from doctor.derive.speed_cost import (
    BEST,
    TYPICAL,
    Kernels,
    attention_seconds,
    cpu_mats,
    decode_cells,
    decode_seconds,
    fallback_mats,
    kv_cells,
    main_type,
    prefill_cells,
    prefill_seconds,
)

DENSE = [[0, "mul_mat", "Q4_K", [2048, 2048, 1], 0, 4], [1, "mul_mat", "Q6_K", [2048, 2048, 1], 0, 4],
         [2, "tied_output", "Q6_K", [2048, 128256, 1], 0, 1]]
MOE = [[0, "mul_mat", "Q4_0", [2048, 2048, 1], 0, 4], [0, "mul_mat_id", "Q4_0", [2048, 1024, 64], 0, 3]]
# [type, op, threads, best, typical]: G weights/s (decode), GFLOP/s (prefill)
KERNELS = Kernels.from_rows(
    [["Q4_K", "mul_mat", 1, 8.0, 7.0], ["Q6_K", "mul_mat", 1, 5.0, 4.0], ["Q4_0", "mul_mat", 1, 10.0, 9.0]],
    [["Q4_K", "mul_mat", 1, 40.0, 36.0], ["Q6_K", "mul_mat", 1, 30.0, 25.0], ["Q4_0", "mul_mat", 1, 60.0, 50.0],
     ["Q4_0", "mul_mat_id", 1, 20.0, 18.0]],
    [[1, 500.0, 600.0, 100.0, 120.0, 0.01, 0.02]])


def test_decode_runs_each_type_at_its_own_measured_rate() -> None:
    mats = cpu_mats(DENSE, n_layer=2, first_gpu_layer=2, head_on_gpu=False, expert_share=0.0)
    assert mats is not None and KERNELS is not None
    q4k, q6k = 4 * 2048 * 2048, 4 * 2048 * 2048 + 2048 * 128256
    assert {(t, op): w for t, op, w in mats.decode} == {("Q4_K", "mul_mat"): q4k, ("Q6_K", "mul_mat"): q6k}
    assert decode_seconds(mats, KERNELS, 1, BEST) == pytest.approx(q4k / 8e9 + q6k / 5e9)
    assert decode_seconds(mats, KERNELS, 1, TYPICAL) == pytest.approx(q4k / 7e9 + q6k / 4e9)
    assert decode_seconds(mats, KERNELS, 2, BEST) is None  # not measured at 2 threads: no figure, not a guess


def test_a_prompt_pays_the_head_once_per_batch_at_its_decode_rate() -> None:
    mats = cpu_mats(DENSE, 2, 2, False, 0.0)
    assert mats is not None and KERNELS is not None
    assert dict(mats.head) == {"Q6_K": 2048 * 128256}
    layers = 2 * 4 * 2048 * 2048 / 40e9 + 2 * 4 * 2048 * 2048 / 30e9
    one = prefill_seconds(mats, KERNELS, 1, 1, BEST)
    many = prefill_seconds(mats, KERNELS, 1, 4096, BEST)
    assert many == pytest.approx(layers + 2048 * 128256 / 5e9 / 4096)
    assert one == pytest.approx(layers + 2048 * 128256 / 5e9)


def test_experts_read_their_routed_share_at_the_experts_rate() -> None:
    mats = cpu_mats(MOE, 1, 1, True, 1 - 8 / 64)
    assert mats is not None and KERNELS is not None
    routed = 3 * 2048 * 1024 * 64 * 8 / 64
    assert dict(((t, op), w) for t, op, w in mats.prefill)[("Q4_0", "mul_mat_id")] == pytest.approx(routed)
    prompt = prefill_seconds(mats, KERNELS, 1, 512, BEST)
    assert prompt == pytest.approx(2 * 4 * 2048 * 2048 / 60e9 + 2 * routed / 20e9)
    # decode of one token: the experts' dot products at the type's rate where no expert row was measured
    assert decode_seconds(mats, KERNELS, 1, BEST) == pytest.approx((4 * 2048 * 2048 + routed) / 10e9)


def test_attention_is_paid_per_padded_kv_cell() -> None:
    assert [kv_cells(n, 4096) for n in (1, 256, 257, 2049)] == [256, 256, 512, 2304]
    assert kv_cells(3000, 1024) == 1024  # never more cells than the context has
    assert decode_cells(2048, 32, 4096) == 2304  # llama-bench's tg at depth 2048
    assert decode_cells(250, 12, 4096) == pytest.approx((6 * 256 + 6 * 512) / 12)
    assert prefill_cells(0, 512, 256, 4096) == pytest.approx(384)  # two micro-batches: 256 then 512 cells
    assert KERNELS is not None
    cells, layer = attention_seconds(KERNELS, 1, 30, 2304, "decode", BEST)  # type: ignore[misc]
    assert cells == pytest.approx(30 * 2304 * 500e-9) and layer == pytest.approx(30 * 0.01e-3)
    assert attention_seconds(KERNELS, 1, 30, 2304, "prefill", TYPICAL) == pytest.approx((30 * 2304 * 120e-9, 0.0))
    assert attention_seconds(KERNELS, 2, 30, 2304, "decode", BEST) is None
    assert attention_seconds(KERNELS, 2, 0, 2304, "decode", BEST) == (0.0, 0.0)  # no CPU layers: nothing


def test_without_the_tensor_table_one_type_holds_the_parameters() -> None:
    mats = fallback_mats("Q4_K", 1e9, 16)
    assert mats.decode == (("Q4_K", "mul_mat", 1e9),) and mats.cpu_layers == 16
    assert cpu_mats(None, 2, 2, False, 0.0) is None
    assert [main_type(x) for x in ("MOSTLY_Q4_K_M", "Q4_K - Medium", "Q8_0", "F16", "BF16", "IQ4_XS", "unknown")] \
        == ["Q4_K", "Q4_K", "Q8_0", "F16", "BF16", "IQ4_XS", None]


def test_probe_rows_that_are_not_rates_are_left_out() -> None:
    assert Kernels.from_rows([["Q4_0", "mul_mat", 1, 0.0, 1.0]], "nonsense", None) is None
    kernels = Kernels.from_rows([["q4_0", "mul_mat", 2, 3.0, 2.0], ["Q8_0", "mul_mat", 1, True, 1.0]], [], [])
    assert kernels is not None and set(kernels.decode) == {("Q4_0", "mul_mat", 2)} and kernels.threads() == {2}


def test_a_published_cpu_barrier_cost_grows_with_threads_and_vanishes_at_one() -> None:
    """AmpereOne A192 (192 threads) ran Llama 3.2 3B at 23.5 tok/s (42.5 ms a token; geerlingguy/
    ai-benchmarks): the barrier cost of 28 layers at 192 threads must stay well inside it."""
    from doctor.derive.speed_cost import barrier_seconds

    assert barrier_seconds(28, 1) == 0.0
    assert 0.005 < barrier_seconds(28, 192) < 0.02


def test_a_minor_type_without_its_own_figure_takes_the_slowest_one_measured() -> None:
    """A MoE's F32 router is a sliver of its weights: costed at the slowest measured rate, not probed; a
    type that matters without a figure leaves the cost unknown."""
    assert KERNELS is not None
    router = cpu_mats([*DENSE, [0, "mul_mat", "F32", [2048, 32, 1], 0, 1]], 2, 2, False, 0.0)
    assert router is not None
    base = decode_seconds(cpu_mats(DENSE, 2, 2, False, 0.0), KERNELS, 1, BEST)  # type: ignore[arg-type]
    assert decode_seconds(router, KERNELS, 1, BEST) == pytest.approx(base + 2048 * 32 / 5e9)  # Q6_K's 5 G/s
    big = cpu_mats([*DENSE, [0, "mul_mat", "F32", [2048, 8192, 1], 0, 8]], 2, 2, False, 0.0)
    assert big is not None and decode_seconds(big, KERNELS, 1, BEST) is None
