"""What one token costs a model on the CPU side, by the kernel llama.cpp runs each matrix through.

Floor: derive (pure: facts in, numbers out). Strings: none shown to users; the constants' measurements
are in docs/speed.md and bench/results/speed_table.md.

The byte stream alone does not say how long a CPU token takes: on a core, unpacking a quantised block
costs more than reading it, and the cost differs by type. So the matrix weights
(`model.matmul_weights`, the GGUF probe's table) are split by what runs them:

- decode: every active weight goes once through the type's dot-product kernel (one token, one
  column): `DECODE_RATE[type]` weights per multiply-add of the float32 GEMM figure on the same cores;
- prefill: llama.cpp's tiled GEMM (ggml-cpu's llamafile_sgemm: F32, F16, BF16, Q8_0, Q4_0, Q5_0,
  IQ4_NL in MUL_MAT) reaches `PREFILL_EFF[type]` of the float32 GEMM figure; other types (Q4_1,
  K-quants) and every MUL_MAT_ID (the experts of a MoE: llamafile_sgemm is not called there) go
  through the generic dot-product loop at `PREFILL_EFF["vec"]`;
- the lm head: a prompt asks for the logits of its last token only, so prefill pays the head once per
  batch (a decode token's worth of it), not once per token;
- attention at depth: 4 x n_head x head_dim FLOPs per layer per cached position; in prefill batched at
  the F16 GEMM's efficiency, in decode a chain of short per-head products and softmaxes that ran at
  `DECODE_ATTN_EFF` of one core's GEMM rate and no faster on a second thread (the bench's depth rows).

Where the GGUF's table is missing (a pasted log), one class holds every active parameter, of the
file's type.
"""

from __future__ import annotations

from dataclasses import dataclass

# Fitted on the 1-thread rows of bench/speed_table.py (the 2-core AMX Xeon, repacking off, quiet);
# validated on its 2-thread rows (docs/speed.md, bench/results/speed_table.md).
# decode: weights through the dot-product kernel per multiply-add of the f32 GEMM, by type
DECODE_RATE = {"q4_0": 0.098, "q8_0": 0.105, "f16": 0.078, "other": 0.098}  # other: Q4_0's (not measured apart)
# prefill: share of the f32 GEMM figure the tiled kernels reach, by type; "vec": the generic loop
PREFILL_EFF = {"q4_0": 0.57, "q8_0": 0.59, "f16": 0.64, "vec": 0.28}
DECODE_ATTN_EFF = 0.0245  # decode attention: share of ONE core's GEMM rate (per-head products, softmax)
TILED = {"Q4_0": "q4_0", "Q5_0": "q4_0", "IQ4_NL": "q4_0", "Q8_0": "q8_0", "F16": "f16", "BF16": "f16",
         "F32": "f16"}


def type_class(ggml_type: str) -> str:
    """The decode-rate class of a ggml type name (Q4_0, Q8_0, F16, ...; anything else: "other")."""
    return TILED.get(ggml_type.upper(), "other")


@dataclass(frozen=True, slots=True)
class Mats:
    """Active matrix weights per token on the CPU, by the kernel that runs them."""

    decode: tuple[tuple[str, float], ...] = ()  # (type class, weights) incl. the head
    prefill: tuple[tuple[str, float], ...] = ()  # (prefill class, weights per token) without the head
    head: tuple[tuple[str, float], ...] = ()  # (type class, weights) of the lm head: once per prefill batch
    attn_flops_per_pos: float = 0.0  # per token per cached position, the CPU layers

    def decode_seconds(self, gflops: float, one_core_gflops: float, depth: float) -> float:
        """One decode token through the dot-product kernels at `gflops`, attention at one core's rate."""
        macs = gflops * 1e9 / 2
        t = sum(w / (DECODE_RATE.get(c, DECODE_RATE["other"]) * macs) for c, w in self.decode)
        return t + self.attn_flops_per_pos * depth / (one_core_gflops * 1e9 * DECODE_ATTN_EFF)

    def prefill_seconds(self, gflops: float, batch: int, mean_depth: float) -> float:
        """One prefill token: the GEMMs at their kernel's efficiency, the head once per batch."""
        g = gflops * 1e9
        t = sum(2 * w / (g * PREFILL_EFF[c]) for c, w in self.prefill)
        head = sum(w / (DECODE_RATE.get(c, DECODE_RATE["other"]) * g / 2) + 2 * w / (g * PREFILL_EFF.get(c, 0.28))
                   for c, w in self.head)
        return t + head / max(1, batch) + self.attn_flops_per_pos * mean_depth / (g * PREFILL_EFF["f16"])


def cpu_mats(rows: object, n_layer: int, first_gpu_layer: int, head_on_gpu: bool, expert_share: float,
             attn_flops_per_pos_layer: float) -> Mats | None:
    """The CPU side's matrix weights from model.matmul_weights rows [layer, op, type, ne, bytes, count]
    (layer n_layer = the output); None when the table is missing."""
    if not isinstance(rows, list) or not rows:
        return None
    decode: dict[str, float] = {}
    prefill: dict[str, float] = {}
    head: dict[str, float] = {}
    for row in rows:
        if not (isinstance(row, list) and len(row) == 6 and isinstance(row[0], int) and isinstance(row[3], list)):
            return None
        layer, op, ggml_type, ne, _, count = row
        weights = float(count)
        for d in ne:
            weights *= d
        cls = type_class(str(ggml_type))
        if layer >= n_layer:
            if head_on_gpu:
                continue
            head[cls] = head.get(cls, 0.0) + weights
            decode[cls] = decode.get(cls, 0.0) + weights
            continue
        if layer >= first_gpu_layer:
            continue
        if op == "mul_mat_id":
            weights *= 1 - expert_share
        decode[cls] = decode.get(cls, 0.0) + weights
        kernel = "vec" if op == "mul_mat_id" or cls == "other" else cls
        prefill[kernel] = prefill.get(kernel, 0.0) + weights
    cpu_layers = min(first_gpu_layer, n_layer)
    return Mats(tuple(decode.items()), tuple(prefill.items()), tuple(head.items()),
                attn_flops_per_pos_layer * cpu_layers)


def fallback_mats(weight_class: str, cpu_params: float, attn_flops_per_pos: float) -> Mats:
    """Without the tensor table: every active CPU parameter in one class, the head not told apart."""
    weight_class = {"bf16": "f16", "f32": "f16"}.get(weight_class, weight_class)
    kernel = weight_class if weight_class in PREFILL_EFF else "vec"
    return Mats(((weight_class, cpu_params),), ((kernel, cpu_params),), (), attn_flops_per_pos)
