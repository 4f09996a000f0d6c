"""What one token costs a model on the CPU side, timed by the engine's own kernels on this machine.

Floor: derive (pure: facts in, numbers out). Strings: none shown to users; what was measured and how
is in docs/speed.md and bench/results/speed_table.md.

The byte stream alone does not say how long a CPU token takes, nor does a float32 GEMM: llama.cpp
runs each weight type through its own kernels (int8 dot products with VNNI, repacked weights, AMX
tiles, llamafile's tiled GEMM, the generic loop for experts), at rates that differ by CPU far more
than by type. So the rates are the engine's own, measured by the kernel probe
(doctor/sources/live/embedded/kernels.py: host.cpu.kernel_decode / kernel_prefill / kernel_attention,
each a best and a typical figure per type, op and thread count), and this module adds up the
model's own shapes against them (`model.matmul_weights`, the GGUF probe's table):

- decode: every active weight once through its type's dot-product kernel (one token, one column);
  an expert (MUL_MAT_ID) at the experts' rate where measured, else its type's;
- prefill: every active weight x 2 FLOPs per prompt token at the type's prompt rate (MUL_MAT, or
  MUL_MAT_ID for experts); the lm head once per prompt batch (llama.cpp computes the logits of the
  last token only), at its decode rate;
- attention: per layer, per KV cell llama.cpp attends over (it pads the cells to 256:
  `llama_kv_cache::get_n_kv`), per token; plus what a decode step costs per layer beyond its weights
  and cells (graph, norms, rope, thread barriers) - all measured with the model's own head shape.

Where the table is missing (a pasted log), one type holds every active parameter: the file's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

BEST, TYPICAL = 0, 1  # which figure of a probe row: the fastest run (a bound) or the median (what is usual)
KV_PAD = 256  # llama.cpp attends over at least 256 cells, in steps of 256

# a file type's label (general.file_type as the GGUF probe names it, or a log's "Q4_K - Medium") ->
# the type most of its matrices are in (llama-quantize's mixes: Q4_K_M is Q4_K with Q6_K for some)
FILE_TYPE_MAIN = (("iq4_xs", "IQ4_XS"), ("iq4_nl", "IQ4_NL"), ("q2_k", "Q2_K"), ("q3_k", "Q3_K"), ("q4_k", "Q4_K"),
                  ("q5_k", "Q5_K"), ("q6_k", "Q6_K"), ("q4_0", "Q4_0"), ("q4_1", "Q4_1"), ("q5_0", "Q5_0"),
                  ("q5_1", "Q5_1"), ("q8_0", "Q8_0"), ("mxfp4", "MXFP4"), ("bf16", "BF16"), ("f16", "F16"),
                  ("f32", "F32"))
FLOAT_TYPES = ("F32", "F16", "BF16")


def main_type(file_type_label: str) -> str | None:
    """The main ggml type of a file type label, or None when it names none."""
    label = file_type_label.lower().replace(" - ", "_").replace(" ", "_")
    for key, name in FILE_TYPE_MAIN:
        if key in label:
            return name
    return None


@dataclass(frozen=True, slots=True)
class Mats:
    """Active matrix weights per token on the CPU, by (ggml type, op)."""

    decode: tuple[tuple[str, str, float], ...] = ()  # (type, op, weights) incl. the head
    prefill: tuple[tuple[str, str, float], ...] = ()  # (type, op, weights per token) without the head
    head: tuple[tuple[str, float], ...] = ()  # (type, weights) of the lm head: once per prompt batch
    cpu_layers: int = 0  # repeating layers on the CPU (attention and per-layer costs)

    def types(self) -> set[str]:
        return {t for t, _, _ in self.decode} | {t for t, _, _ in self.prefill}


@dataclass(frozen=True, slots=True)
class Kernels:
    """The kernel probe's rows: (type, op, threads) -> (best, typical) in G weights/s (decode) or
    GFLOP/s (prefill); threads -> attention costs (ns per layer per cell; ms per layer)."""

    decode: dict[tuple[str, str, int], tuple[float, float]] = field(default_factory=dict)
    prefill: dict[tuple[str, str, int], tuple[float, float]] = field(default_factory=dict)
    attention: dict[int, tuple[float | None, ...]] = field(default_factory=dict)

    @classmethod
    def from_rows(cls, decode: Any, prefill: Any, attention: Any) -> Kernels | None:
        out = cls()
        for rows, table in ((decode, out.decode), (prefill, out.prefill)):
            for row in rows if isinstance(rows, list) else []:
                if isinstance(row, list) and len(row) == 5 and all(_pos(x) for x in row[3:]):
                    table[(str(row[0]).upper(), str(row[1]), int(row[2]))] = (float(row[3]), float(row[4]))
        for row in attention if isinstance(attention, list) else []:
            if isinstance(row, list) and len(row) == 7 and isinstance(row[0], int):
                out.attention[row[0]] = tuple(float(x) if isinstance(x, int | float) else None for x in row[1:])
        return out if out.decode or out.prefill else None

    def threads(self) -> set[int]:
        return {t for _, _, t in self.decode} | {t for _, _, t in self.prefill}

    def decode_rate(self, type_name: str, op: str, threads: int) -> tuple[float, float] | None:
        return self.decode.get((type_name, op, threads)) or self.decode.get((type_name, "mul_mat", threads))

    def prefill_rate(self, type_name: str, op: str, threads: int) -> tuple[float, float] | None:
        return self.prefill.get((type_name, op, threads))


def _pos(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and x > 0


MINOR = 0.02  # a type with less than this share of the weights (a MoE's F32 router) is not probed on its own


def _rate(table: dict[tuple[str, str, int], tuple[float, float]], key: tuple[str, str, int], share: float,
          which: int) -> float | None:
    """The rate for (type, op, threads); for a minor type without its own figure, the slowest measured at
    those threads (its time stays a bound's worth); None where a type that matters was not measured."""
    rate = table.get(key) or table.get((key[0], "mul_mat", key[2]))
    if rate is not None:
        return rate[which]
    if share < MINOR:
        return min((r[which] for (_, _, t), r in table.items() if t == key[2]), default=None)
    return None


def decode_seconds(mats: Mats, k: Kernels, threads: int, which: int) -> float | None:
    """The weights of one decode token through their kernels; None when a type was not measured."""
    total, weights = 0.0, sum(w for _, _, w in mats.decode) or 1.0
    for type_name, op, w in mats.decode:
        rate = _rate(k.decode, (type_name, op, threads), w / weights, which)
        if rate is None:
            return None
        total += w / (rate * 1e9)
    return total


def prefill_seconds(mats: Mats, k: Kernels, threads: int, batch: int, which: int) -> float | None:
    """One prompt token: its products at the prompt rates, the head once per batch at its decode rate."""
    total, weights = 0.0, sum(w for _, _, w in mats.prefill) or 1.0
    for type_name, op, w in mats.prefill:
        rate = k.prefill.get((type_name, op, threads))
        value = rate[which] if rate is not None else \
            _rate({key: r for key, r in k.prefill.items() if key[1] == op}, (type_name, op, threads), w / weights,
                  which)
        if value is None:
            return None
        total += 2 * w / (value * 1e9)
    for type_name, w in mats.head:
        head = _rate(k.decode, (type_name, "mul_mat", threads), 0.0, which)
        if head is None:
            return None
        total += w / (head * 1e9) / max(1, batch)
    return total


def kv_cells(used: int, cells: int) -> int:
    """The cells llama.cpp attends over with `used` cells filled (at least 256, a multiple of 256)."""
    return min(max(cells, KV_PAD), max(KV_PAD, math.ceil(max(1, used) / KV_PAD) * KV_PAD))


def decode_cells(start: int, steps: int, cells: int) -> float:
    """Mean cells attended over by `steps` decode tokens placed from position `start`."""
    steps = max(1, steps)
    return sum(kv_cells(start + i + 1, cells) for i in range(steps)) / steps


def prefill_cells(start: int, prompt: int, ubatch: int, cells: int) -> float:
    """Mean cells per prompt token: each micro-batch attends over the cells filled once it is placed."""
    prompt, ubatch = max(1, prompt), max(1, ubatch)
    total = 0.0
    for first in range(0, prompt, ubatch):
        n = min(ubatch, prompt - first)
        total += n * kv_cells(start + first + n, cells)
    return total / prompt


def attention_seconds(k: Kernels, threads: int, layers: int, cells: float, phase: str,
                      which: int) -> tuple[float, float] | None:
    """(the KV cells' cost, the per-layer cost) of one token on `layers` CPU layers; None unmeasured."""
    row = k.attention.get(threads)
    if row is None or layers <= 0:
        return None if layers > 0 else (0.0, 0.0)
    dec_b, dec_t, pre_b, pre_t, layer_b, layer_t = row
    per_cell = (dec_b, dec_t)[which] if phase == "decode" else (pre_b, pre_t)[which]
    per_layer = (layer_b, layer_t)[which] if phase == "decode" else 0.0
    if per_cell is None:
        return None
    return layers * cells * per_cell * 1e-9, layers * (per_layer or 0.0) * 1e-3


# a published CPU (no probe): a barrier after each graph node that every thread passes, one cache-line
# hand-over (~0.1 us between cores) per thread per barrier, ~20 nodes a layer
BARRIERS_PER_LAYER = 20
BARRIER_MS_PER_THREAD = 0.0001


def barrier_seconds(cpu_layers: int, threads: int) -> float:
    """A published CPU's per-token cost beyond its weights (no probe): the thread barriers of its layers."""
    return cpu_layers * BARRIERS_PER_LAYER * BARRIER_MS_PER_THREAD * max(0, threads - 1) / 1000


def cpu_mats(rows: object, n_layer: int, first_gpu_layer: int, head_on_gpu: bool, expert_share: float) -> Mats | None:
    """The CPU side's matrix weights from model.matmul_weights rows [layer, op, type, ne, bytes, count]
    (layer n_layer = the output); None when the table is missing."""
    if not isinstance(rows, list) or not rows:
        return None
    decode: dict[tuple[str, str], float] = {}
    prefill: dict[tuple[str, str], float] = {}
    head: dict[str, float] = {}
    for row in rows:
        if not (isinstance(row, list) and len(row) == 6 and isinstance(row[0], int) and isinstance(row[3], list)):
            return None
        layer, op, ggml_type, ne, _, count = row
        weights = float(count) * math.prod(ne)
        type_name = str(ggml_type).upper()
        kind = "mul_mat_id" if op == "mul_mat_id" else "mul_mat"
        if layer >= n_layer:
            if not head_on_gpu:
                head[type_name] = head.get(type_name, 0.0) + weights
                decode[(type_name, "mul_mat")] = decode.get((type_name, "mul_mat"), 0.0) + weights
            continue
        if layer >= first_gpu_layer:
            continue
        if kind == "mul_mat_id":
            weights *= 1 - expert_share
        decode[(type_name, kind)] = decode.get((type_name, kind), 0.0) + weights
        prefill[(type_name, kind)] = prefill.get((type_name, kind), 0.0) + weights
    return Mats(tuple((t, o, w) for (t, o), w in decode.items()), tuple((t, o, w) for (t, o), w in prefill.items()),
                tuple(head.items()), min(first_gpu_layer, n_layer))


def fallback_mats(type_name: str, cpu_params: float, cpu_layers: int) -> Mats:
    """Without the tensor table: every active CPU parameter in one type, the head not told apart."""
    return Mats(((type_name, "mul_mat", cpu_params),), ((type_name, "mul_mat", cpu_params),), (), cpu_layers)


def kernel_gaps(keys: Any, phase: str | None = None, threads: int | None = None) -> str:
    """The kernel probe's missing figures (host.cpu.kernel_missing: its cache keys) in words, by thread count
    ("Q8_0 prefill, attention prefill at 2 threads"); only `phase`'s at `threads` where given; "" when none."""
    by_count: dict[str, set[str]] = {}
    for key in keys if isinstance(keys, list | tuple) else []:
        parts = str(key).split("/")
        if len(parts) < 4 or (phase and parts[-2] != phase) or (threads is not None and parts[-1] != str(threads)):
            continue
        what = {"dense": parts[1], "moe": f"{parts[1]} experts", "attn": "attention"}.get(parts[0], parts[0])
        by_count.setdefault(parts[-1], set()).add(f"{what} {parts[-2]}")
    return "; ".join(f"{', '.join(sorted(v))} at {t} thread{'' if t == '1' else 's'}"
                     for t, v in sorted(by_count.items()))
