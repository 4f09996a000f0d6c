"""Memory and timing math: derived facts computed from the facts the sources gave.

KV cache bytes follow llama.cpp's allocation exactly (src/llama-context.cpp, src/llama-kv-cache.cpp):
n_batch is clamped to the n_ctx asked for and n_ubatch to n_batch, and only then is n_ctx padded to a
multiple of 256 (context_params); without a unified KV each of n_seq_max streams gets
n_ctx_seq = pad256(n_ctx / n_seq_max) cells; each layer holds one K tensor of n_embd_k_gqa x cells
x streams elements and one V tensor likewise, sized by ggml_nbytes (elements x type_size / block).
Sliding-window layers get pad256(min(n_ctx_seq, n_swa x (n_seq if unified else 1) + n_ubatch)) cells
(the clamped n_ubatch) unless swa_full (src/llama-kv-cache-iswa.cpp); a window larger than the
context gets the context.

Weights are placed the way src/llama-model.cpp places them: the input layer (token embedding)
always stays on the CPU; of the n_layer repeating layers plus the output layer (index n_layer),
the last n_gpu_layers go to the GPU (i_gpu_start = n_layer + 1 - n_gpu_layers; negative = all).
A model without output.weight reuses token_embd as the output, duplicated onto the output's device.

The compute buffer is what ggml's graph allocator reserves for the worst-case ubatch
(llama_context::sched_reserve: a prompt graph of min(n_ctx, n_ubatch) tokens - the clamped
n_ubatch, so a context of 128 reserves for 128 tokens over 256 cells -, all of them outputs).
There is no closed form in llama.cpp; the model below has the two peaks the allocator sees,
fitted on SmolLM2-135M's printed `CPU compute buffer size` over 31 recorded settings
(fixtures/logs/llama-cpp-python/buffers/, within 5% of every one):
  logits peak:    n_tok x (n_vocab x 4 + 3 x n_embd x 4)          (f32 logits of every token)
  attention peak: n_tok x n_kv x (n_head x 4 + 4)                  (f32 KQ and its mask; no flash attention)
                  + n_tok x 4 x (5 x n_embd + 2 x n_embd_kv_gqa)
With flash attention the KQ matrix is never materialised and the logits peak is the buffer.
GPU backends were not calibrated (no GPU here); they reserve similar graphs per device.

Everything here is pure: `derive(facts)` reads a snapshot and adds `derived.*` (and a few summary
`run.*`) facts, each with an `estimate` source that says how it was computed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from doctor.core import engines
from doctor.core.facts import Facts, Source
from doctor.core.stats import percentile
from doctor.core.vocab import KV_TYPES, MAX_LAYERS
from doctor.derive import arch as estimate_arch
from doctor.derive import mmproj as estimate_mmproj
from doctor.derive import repack as estimate_repack

KV_PAD = 256
MIB = 1 << 20
# Bounds on what a model or machine can be: larger values come from a damaged or hostile input and
# would make the per-layer and per-GPU loops below allocate or spin without end.
MAX_GPUS = 64


# Architectures whose cache the plain per-layer formula does not describe.
KV_UNMODELLED = ("mamba", "mamba2", "rwkv", "rwkv6", "rwkv7", "jamba", "deepseek2", "deepseek3",
                 "qwen3next", "lfm2", "granitehybrid", "falcon-h1", "plamo2", "nemotron_h", "bert",
                 "nomic-bert", "t5", "t5encoder")


def pad(n: int, multiple: int = KV_PAD) -> int:
    return ((n + multiple - 1) // multiple) * multiple


@dataclass(frozen=True, slots=True)
class KvShape:
    """What the KV size depends on, per model and settings."""

    n_layer: int
    n_head_kv: list[int]  # per layer
    head_dim_k: int
    head_dim_v: int
    swa: tuple[bool, ...] = ()  # per layer: uses the sliding window (empty = none do)
    n_swa: int = 0  # sliding-window size in tokens

    @classmethod
    def uniform(cls, n_layer: int, n_head_kv: int, head_dim_k: int, head_dim_v: int) -> KvShape:
        return cls(n_layer, [n_head_kv] * n_layer, head_dim_k, head_dim_v)

    def is_swa(self, layer: int) -> bool:
        return self.n_swa > 0 and layer < len(self.swa) and self.swa[layer]


def type_bytes(type_name: str, n_elements: int, row: int | None = None) -> int:
    """ggml_nbytes: elements x type size / block size; a row must hold whole blocks."""
    block, size = KV_TYPES[type_name.lower()]
    if n_elements % block or (row is not None and row % block):
        raise ValueError(f"rows of {row or n_elements} elements are not whole {type_name} blocks of {block}")
    return n_elements // block * size


@dataclass(frozen=True, slots=True)
class ContextParams:
    """The sizes llama_context derives from what was asked (src/llama-context.cpp, constructor)."""

    n_ctx: int  # cells in all: padded to 256, then n_ctx_seq x streams when not unified
    n_ctx_seq: int  # cells per stream
    streams: int
    n_batch: int  # clamped to the n_ctx asked for (causal attention), before n_ctx is padded
    n_ubatch: int  # clamped to n_batch

    @property
    def n_tokens_reserve(self) -> int:
        """Tokens of the worst-case graph sched_reserve builds: min(n_ctx, n_ubatch)."""
        return max(1, min(self.n_ctx, self.n_ubatch))


def context_params(n_ctx: int, n_seq: int = 1, unified: bool = False, n_batch: int = 512,
                   n_ubatch: int = 512) -> ContextParams:
    """llama.cpp's order: n_batch = min(n_ctx, n_batch) and n_ubatch = min(n_batch, n_ubatch) on the
    n_ctx that was asked for; then n_ctx = pad256(n_ctx); without a unified KV each of n_seq
    streams gets n_ctx_seq = pad256(n_ctx / n_seq) cells and n_ctx becomes n_ctx_seq x n_seq."""
    asked = max(n_ctx, 1)
    batch = max(1, min(asked, n_batch if n_batch > 0 else asked))
    ubatch = max(1, min(batch, n_ubatch if n_ubatch > 0 else batch))
    padded = pad(asked)
    if unified or n_seq <= 1:
        return ContextParams(padded, padded, 1, batch, ubatch)
    seq = pad(padded // n_seq)
    return ContextParams(seq * n_seq, seq, n_seq, batch, ubatch)


def kv_cells(n_ctx: int, n_seq: int = 1, unified: bool = False) -> tuple[int, int]:
    """(cells per stream, streams) as llama.cpp allocates them."""
    cp = context_params(n_ctx, n_seq, unified)
    return cp.n_ctx_seq, cp.streams


def swa_cells(cells: int, n_swa: int, n_seq: int = 1, unified: bool = False, n_ubatch: int = 512,
              swa_full: bool = False) -> int:
    """Cells per stream of a sliding-window layer (llama_kv_cache_iswa)."""
    if swa_full or n_swa <= 0:
        return cells
    return pad(min(cells, n_swa * (n_seq if unified else 1) + n_ubatch))


def kv_layer_bytes(shape: KvShape, n_ctx: int, type_k: str = "f16", type_v: str = "f16", n_seq: int = 1,
                   unified: bool = False, *, swa_full: bool = True, n_ubatch: int = 512,
                   n_batch: int | None = None) -> list[int]:
    """KV bytes of each layer (0 for a layer without KV). `n_ctx` as asked: the sliding-window
    cache is sized with n_ubatch after llama.cpp clamps it to that n_ctx."""
    cp = context_params(n_ctx, n_seq, unified, n_batch if n_batch is not None else n_ubatch, n_ubatch)
    cells, streams, n_ubatch = cp.n_ctx_seq, cp.streams, cp.n_ubatch
    out = []
    for layer, heads in enumerate(shape.n_head_kv):
        if heads <= 0:
            out.append(0)  # a layer without KV (recurrent or shared)
            continue
        c = swa_cells(cells, shape.n_swa, n_seq, unified, n_ubatch, swa_full) if shape.is_swa(layer) else cells
        out.append(type_bytes(type_k, shape.head_dim_k * heads * c * streams, shape.head_dim_k * heads)
                   + type_bytes(type_v, shape.head_dim_v * heads * c * streams, shape.head_dim_v * heads))
    return out


def kv_bytes(shape: KvShape, n_ctx: int, type_k: str = "f16", type_v: str = "f16",
             n_seq: int = 1, unified: bool = False, *, swa_full: bool = True, n_ubatch: int = 512,
             n_batch: int | None = None) -> int:
    return sum(kv_layer_bytes(shape, n_ctx, type_k, type_v, n_seq, unified, swa_full=swa_full, n_ubatch=n_ubatch,
                              n_batch=n_batch))


def kv_bytes_per_token(shape: KvShape, type_k: str = "f16", type_v: str = "f16") -> float:
    block_k, size_k = KV_TYPES[type_k]
    block_v, size_v = KV_TYPES[type_v]
    return sum(h * (shape.head_dim_k * size_k / block_k + shape.head_dim_v * size_v / block_v)
               for h in shape.n_head_kv if h > 0)


# -- weights, compute buffer, fit ------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class WeightLayout:
    """Weight bytes by where llama.cpp can place them."""

    layer_bytes: list[int]  # each repeating layer
    input_bytes: int  # token embedding and other non-layer tensors: always on the CPU
    output_bytes: int  # output norm and lm head (layer index n_layer)
    output_tied: bool = False  # no lm head: token_embd is duplicated onto the output's device
    tied_bytes: int = 0  # bytes of token_embd (the duplicate), when tied

    @property
    def n_layer(self) -> int:
        return len(self.layer_bytes)

    @property
    def total(self) -> int:
        return sum(self.layer_bytes) + self.input_bytes + self.output_bytes


@dataclass(frozen=True, slots=True)
class Placement:
    gpu_bytes: int
    host_bytes: int
    gpu_layers: int  # of n_layer + 1 (the output layer counts as one)
    output_on_gpu: bool
    first_gpu_layer: int  # repeating layers from here on are on the GPU


def gpu_layer_start(n_layer: int, n_gpu_layers: int) -> int:
    """First layer index on the GPU; n_layer is the output layer (llama_model::load_tensors)."""
    ngl = n_layer + 1 if n_gpu_layers < 0 else n_gpu_layers
    return max(n_layer + 1 - ngl, 0)


def place_weights(layout: WeightLayout, n_gpu_layers: int, gpu: bool = True) -> Placement:
    n = layout.n_layer
    if not gpu or n_gpu_layers == 0:
        return Placement(0, layout.total, 0, False, n + 1)
    start = gpu_layer_start(n, n_gpu_layers)
    on_gpu = sum(layout.layer_bytes[start:])
    output_on_gpu = start <= n
    host = layout.input_bytes + sum(layout.layer_bytes[:start])
    if output_on_gpu:
        on_gpu += layout.output_bytes + (layout.tied_bytes if layout.output_tied else 0)
    else:
        host += layout.output_bytes
    return Placement(on_gpu, host, n + 1 - start, output_on_gpu, start)


@dataclass(frozen=True, slots=True)
class ComputeShape:
    n_vocab: int
    n_embd: int
    n_head: int
    n_embd_kv: int  # n_head_kv x head_dim_k (largest layer)
    extra: estimate_arch.ComputeExtra = estimate_arch.NO_EXTRA  # [arch hook] MoE width, KV present


def compute_peaks(shape: ComputeShape, n_ctx_seq_cells: int, n_ubatch: int, n_batch: int, n_ctx: int,
                  flash_attn: bool, type_k: str = "f16") -> tuple[int, int]:
    """(logits peak, attention peak) in bytes for the worst-case ubatch (see the module docstring).
    `n_ctx` is the context asked for: llama.cpp clamps the batch to it before padding it."""
    n_tok = max(1, min(n_ubatch, n_batch, n_ctx))
    logits = n_tok * (shape.n_vocab * 4 + 3 * shape.n_embd * 4)
    attention = 0
    if not flash_attn:
        attention = (n_tok * n_ctx_seq_cells * (shape.n_head * 4 + 4)
                     + n_tok * 4 * (5 * shape.n_embd + 2 * shape.n_embd_kv))
    # [arch hook] the K type's share of the logits peak, MoE experts (doctor/derive/arch.py)
    return estimate_arch.adjust_peaks(logits, attention, n_tok=n_tok, n_kv=n_ctx_seq_cells, n_embd=shape.n_embd,
                                      flash_attn=flash_attn, type_k=type_k, extra=shape.extra, n_vocab=shape.n_vocab,
                                      n_embd_kv=shape.n_embd_kv)


def compute_bytes(shape: ComputeShape, n_ctx_seq_cells: int, n_ubatch: int, n_batch: int, n_ctx: int,
                  flash_attn: bool, type_k: str = "f16") -> int:
    return max(compute_peaks(shape, n_ctx_seq_cells, n_ubatch, n_batch, n_ctx, flash_attn, type_k))


@dataclass(frozen=True, slots=True)
class Budget:
    """Bytes each device needs for one setting."""

    weights_gpu: int
    weights_host: int
    kv_gpu: int
    kv_host: int
    compute_gpu: int
    compute_host: int
    gpu_layers: int
    output_host: int = 0  # llama_context's output buffer: n_seq_max rows of f32 logits, in host memory
    work_host: int = 0  # the CPU backend's scratch buffer for the largest op (cpu_work_bytes), never printed
    mmproj_gpu: int = 0  # the vision projector's weights + compute buffer (mtmd puts it on the GPU)
    mmproj_host: int = 0

    @property
    def gpu(self) -> int:
        return self.weights_gpu + self.kv_gpu + self.compute_gpu + self.mmproj_gpu

    @property
    def host(self) -> int:
        return (self.weights_host + self.kv_host + self.compute_host + self.output_host + self.work_host
                + self.mmproj_host)


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything the budget depends on: the model and the settings."""

    layout: WeightLayout
    kv: KvShape | None
    compute: ComputeShape | None
    n_ctx: int
    n_gpu_layers: int
    type_k: str = "f16"
    type_v: str = "f16"
    n_seq: int = 1
    unified: bool = False
    n_batch: int = 512
    n_ubatch: int = 512
    flash_attn: bool = False
    offload_kqv: bool = True
    swa_full: bool = True
    gpu: bool = True
    state: tuple[int, ...] = ()  # [arch hook] recurrent state bytes per layer for one sequence
    n_ff: int = 0  # feed-forward width (0: unknown), for the CPU backend's work buffer
    act_row: float = 0.0  # bytes per activation element the weights' dot product converts to (0: none)
    mmproj: int = 0  # [mmproj hook] the vision projector's weights + compute (doctor/derive/mmproj.py)
    repack: estimate_repack.Repack | None = None  # [repack hook] the CPU backend's repacked weight copy

    def with_(self, **changes: object) -> Plan:
        from dataclasses import replace

        return replace(self, **changes)  # type: ignore[arg-type]


# The CPU backend's work buffer: ggml_backend_cpu_graph_compute allocates (new[], outside every
# buffer llama.cpp prints) the largest per-op scratch of the graph it runs (ggml_graph_plan). For a
# matrix product whose weight type multiplies against another type (its vec_dot_type), the f32
# operand is first converted into that type there:
# - weights: quantised -> q8_0 / q8_1 / q8_K rows (34/32, 36/32, 292/256 bytes per element), f16 and
#   bf16 -> 2 bytes, f32 -> none; the widest input is the FFN's down projection, n_ff x n_tokens;
# - attention without flash attention, V in f16/bf16: the f32 KQ matrix, n_kv x n_tokens x n_head,
#   becomes 2-byte rows for KQ x V - at a full context n_kv is every cell of the stream, so this grows
#   with the context: 72 MiB for SmolLM2 at 8192 tokens in 512-token ubatches (4.5 MiB after one batch).
# Measured (bench/fit_vs_llamacpp.py): the peak resident memory minus the printed buffers is this
# buffer (at the state reached) + 105.6..106.5 MiB at all 36 settings; decoding a 2048-token f16
# context to its end added 13.8 MiB (this model: 13.5), an f32 one 0.1 MiB (this model: 0).
ACT_ROW_BYTES = {"f32": 0.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q8_1": 36 / 32, "q8_k": 292 / 256}


def act_row_bytes(file_type: str | None) -> float:
    """Bytes per element of the type the weights' dot products convert activations to, by the file's
    quantisation label (mixed files: the type of most of their tensors)."""
    label = (file_type or "").upper()
    if label in ("ALL_F32", "F32"):
        return 0.0
    if label in ("F16", "BF16"):
        return 2.0
    if label in ("Q4_1", "Q5_1"):
        return ACT_ROW_BYTES["q8_1"]
    if label in ("Q4_0", "Q5_0", "Q8_0", "IQ4_NL", "MXFP4_MOE"):
        return ACT_ROW_BYTES["q8_0"]
    return ACT_ROW_BYTES["q8_k"]  # k-quants and i-quants (super-blocks of 256), the widest of the three


def cpu_work_bytes(plan: Plan, n_tok: int, n_ctx_seq: int, repeat_on_host: bool) -> int:
    """The CPU backend's work buffer for the worst-case ubatch (n_tok tokens) at a full context,
    when repeating layers run on the CPU (with every layer on a GPU the host graph holds no product)."""
    if plan.compute is None or not repeat_on_host:
        return 0
    weights = math.ceil(max(plan.n_ff, plan.compute.n_embd) * n_tok * plan.act_row)
    attention = 0
    if not plan.flash_attn and plan.type_v in ("f16", "bf16") and plan.compute.n_head > 0:
        attention = n_ctx_seq * n_tok * plan.compute.n_head * 2
    return max(weights, attention)


def budget(plan: Plan) -> Budget:
    place = place_weights(plan.layout, plan.n_gpu_layers, plan.gpu)
    kv_gpu = kv_host = 0
    if plan.kv is not None:
        per_layer = kv_layer_bytes(plan.kv, plan.n_ctx, plan.type_k, plan.type_v, plan.n_seq, plan.unified,
                                   swa_full=plan.swa_full, n_ubatch=plan.n_ubatch, n_batch=plan.n_batch)
        for layer, size in enumerate(per_layer):
            if plan.offload_kqv and place.gpu_layers and layer >= place.first_gpu_layer:
                kv_gpu += size
            else:
                kv_host += size
    for layer, size in enumerate(plan.state):  # [arch hook] recurrent state sits with its layer, like KV
        size *= max(1, plan.n_seq)
        if plan.offload_kqv and place.gpu_layers and layer >= place.first_gpu_layer:
            kv_gpu += size
        else:
            kv_host += size
    comp_gpu = comp_host = work = 0
    if plan.compute is not None:
        cp = context_params(plan.n_ctx, plan.n_seq, plan.unified, plan.n_batch, plan.n_ubatch)
        logits, attention = compute_peaks(plan.compute, cp.n_ctx_seq, cp.n_ubatch, cp.n_batch, cp.n_ctx,
                                          plan.flash_attn, plan.type_k)
        n_tok = cp.n_tokens_reserve
        repeat_on_gpu = place.gpu_layers - (1 if place.output_on_gpu else 0) > 0
        repeat_on_host = place.first_gpu_layer > 0
        comp_gpu = max(logits if place.output_on_gpu else 0, attention if repeat_on_gpu else 0)
        comp_host = max(0 if place.output_on_gpu else logits, attention if repeat_on_host else 0,
                        n_tok * plan.compute.n_embd * 4)  # the input embeddings are always built on the host
        work = cpu_work_bytes(plan, n_tok, cp.n_ctx_seq, repeat_on_host)
    output = plan.n_seq * plan.compute.n_vocab * 4 if plan.compute is not None else 0
    on_gpu = plan.gpu and place.gpu_layers > 0  # [mmproj hook] mtmd's use_gpu follows the GPU backend
    host = place.host_bytes + estimate_repack.extra_on_host(plan.repack, place.first_gpu_layer, place.output_on_gpu)
    return Budget(place.gpu_bytes, host, kv_gpu, kv_host, comp_gpu, comp_host, place.gpu_layers, output,
                  work, plan.mmproj if on_gpu else 0, 0 if on_gpu else plan.mmproj)


def max_gpu_layers(plan: Plan, vram_budget: int) -> int:
    """Largest n_gpu_layers (0..n_layer+1) whose GPU share fits in `vram_budget` bytes."""
    best = 0
    for ngl in range(1, plan.layout.n_layer + 2):
        if budget(plan.with_(n_gpu_layers=ngl, gpu=True)).gpu <= vram_budget:
            best = ngl
        else:
            break
    return best


def max_ctx_fit(plan: Plan, vram_budget: int | None, ram_budget: int | None, limit: int) -> int | None:
    """Largest n_ctx (a multiple of 256, at most `limit`) for which both devices fit; None if none does."""
    def fits(n_ctx: int) -> bool:
        b = budget(plan.with_(n_ctx=n_ctx))
        gpu_ok = vram_budget is None or b.gpu == 0 or b.gpu <= vram_budget
        host_ok = ram_budget is None or b.host <= ram_budget
        return gpu_ok and host_ok

    lo, hi = 0, max(1, limit // KV_PAD)
    if not fits(KV_PAD):
        return None
    while lo < hi:  # largest k with fits(k * 256)
        mid = (lo + hi + 1) // 2
        if fits(mid * KV_PAD):
            lo = mid
        else:
            hi = mid - 1
    return max(lo, 1) * KV_PAD


# -- derive ----------------------------------------------------------------------------------

def _src(name: str, text: str) -> Source:
    return Source("estimate", f"estimate.{name}", text=text)


def shape_from_facts(facts: Facts) -> KvShape | None:
    n_layer = facts.value("model.n_layer")
    if not isinstance(n_layer, int) or not 0 < n_layer <= MAX_LAYERS:
        return None
    per_layer = facts.value("model.n_head_kv_per_layer")
    n_head = facts.value("model.n_head")
    n_head_kv = facts.value("model.n_head_kv", n_head)
    if isinstance(per_layer, list) and len(per_layer) == n_layer and all(isinstance(h, int) for h in per_layer):
        heads = list(per_layer)
    elif isinstance(n_head_kv, int) and n_head_kv > 0:
        heads = [n_head_kv] * n_layer
    elif estimate_arch.state_per_layer(facts) is not None:  # [arch hook] all-recurrent: state, no KV
        return KvShape(n_layer, [0] * n_layer, 0, 0)
    else:
        return None
    hd_k = facts.value("model.head_dim_k")
    hd_v = facts.value("model.head_dim_v", hd_k)
    if not isinstance(hd_k, int):
        n_embd = facts.value("model.n_embd")
        if isinstance(n_embd, int) and isinstance(n_head, int) and n_head > 0:
            hd_k = n_embd // n_head
            hd_v = hd_k if not isinstance(hd_v, int) else hd_v
        else:
            return None
    if not isinstance(hd_v, int):
        hd_v = hd_k
    hd_v = estimate_arch.mla_head_dim_v(facts, hd_v)  # [arch hook] MLA caches the latent only
    n_swa = facts.value("model.n_swa", 0)
    mask = facts.value("model.swa_per_layer")
    swa: tuple[bool, ...] = ()
    if isinstance(n_swa, int) and n_swa > 0 and isinstance(mask, list) and len(mask) == n_layer:
        swa = tuple(bool(v) for v in mask)
    return KvShape(n_layer, heads, hd_k, hd_v, swa, n_swa if isinstance(n_swa, int) and swa else 0)


def derive(facts: Facts) -> Facts:
    """Add derived facts in place and return the same snapshot."""
    for step in (_derive_run_summaries, _derive_kv, _derive_context, _derive_threads, _derive_load,
                 _derive_offload, _derive_mmproj, _derive_budget, _derive_ctx_reduced, _derive_decode_floor,
                 _derive_gpu_ratios, _derive_output, _derive_vs_engine, _derive_spec):
        try:
            step(facts)
        except (ArithmeticError, ValueError):
            # facts no real run has (zero head dims, values at the edge of 64 bits from a damaged or
            # hostile input): that derivation is left out; the rules needing it say unknown
            continue
    return facts


def _derive_spec(facts: Facts) -> None:
    from doctor.derive.spec_lookup import derive_spec  # the spec table loads only for a measured speed

    derive_spec(facts)


def _derive_vs_engine(facts: Facts) -> None:
    """[vs-engine hook] the estimate against the buffers the engine printed (doctor/derive/vs_engine.py)."""
    from doctor.derive.vs_engine import derive_vs_engine

    derive_vs_engine(facts, cpu_compute=cpu_compute_bytes)


def cpu_compute_bytes(facts: Facts) -> int | None:
    """The compute buffer of a CPU-only run from the shape and the run's settings (no layout needed)."""
    if _opt_int(facts, "run.compute_gpu_bytes") or _opt_int(facts, "run.weights_gpu_bytes"):
        return None
    shape = compute_shape_from_facts(facts)
    plan_ctx = _opt_int(facts, "config.n_ctx")
    if shape is None or not plan_ctx:
        return None
    n_seq = max(1, _opt_int(facts, "config.n_parallel") or 1)
    cells, _ = kv_cells(plan_ctx, n_seq, facts.value("config.kv_unified") is True)
    n_batch = _opt_int(facts, "config.n_batch") or 512
    n_ubatch = min(n_batch, _opt_int(facts, "config.n_ubatch") or 512)
    fa = str(facts.value("config.flash_attn", "disabled")).lower() in ("enabled", "on", "true", "1")
    type_k = str(facts.value("config.type_k", "f16")).lower()
    return compute_bytes(shape, cells, n_ubatch, n_batch, pad(plan_ctx), fa, type_k)


def _opt_int(facts: Facts, name: str) -> int | None:
    value = facts.value(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _derive_output(facts: Facts) -> None:
    """run.output_repetition / repeat_span / repeat_count from the generated text (doctor/core/repetition.py).

    Added by the watch task: the looping span found in run.output_text, with the span itself in the
    source text so it shows as evidence."""
    text = facts.value("run.output_text")
    if not isinstance(text, str) or facts.has("run.output_repetition"):
        return
    from doctor.core.repetition import find_loop, tokens_of

    loop = find_loop(text)
    if loop is None:
        n = len(tokens_of(text))
        facts.set("run.output_repetition", 0.0, _src("output", f"no repeated span in {n} words of output"))
        return
    how = (f"\"{loop.span[:120]}\" x{loop.count} ({loop.period} words each) covers {loop.share:.0%} "
           f"of the last {loop.tokens} words of output")
    facts.set("run.output_repetition", loop.share, _src("output", how))
    facts.set("run.repeat_count", loop.count, _src("output", how))
    facts.set("run.repeat_span", loop.span, _src("output", how))


def _derive_kv(facts: Facts) -> None:
    arch = str(facts.value("model.arch", "")).lower()
    if arch and arch in KV_UNMODELLED and not estimate_arch.modelled(facts):  # [arch hook]
        facts.set_default("model.kv_model_supported", False,
                          _src("kv", f"architecture {arch} keeps recurrent or compressed state"))
        for name in ("derived.kv_bytes", "derived.kv_bytes_per_token"):
            facts.unknown(name, f"KV size is not modelled for architecture {arch}", _src("kv", arch))
        return
    shape = shape_from_facts(facts)
    if shape is None:
        facts.unknown("derived.kv_bytes", "model shape unknown (n_layer, n_head_kv, head dims)", _src("kv", ""))
        return
    if arch:
        facts.set_default("model.kv_model_supported", True, _src("kv", arch))
    type_k = str(facts.value("config.type_k", "")).lower()
    type_v = str(facts.value("config.type_v", "")).lower() or type_k
    if type_k not in KV_TYPES or type_v not in KV_TYPES:
        facts.unknown("derived.kv_bytes", "KV cache types unknown", _src("kv", f"type_k={type_k!r} type_v={type_v!r}"))
        return
    formula = (f"{shape.n_layer} layers x {max(shape.n_head_kv)} KV heads x ({shape.head_dim_k} x {type_k}"
               f" + {shape.head_dim_v} x {type_v})")
    per_token = kv_bytes_per_token(shape, type_k, type_v)
    facts.set("derived.kv_bytes_per_token", round(per_token), _src("kv", formula))
    f16_per_token = kv_bytes_per_token(shape, "f16", "f16")
    if f16_per_token:
        facts.set("derived.kv_type_factor", round(per_token / f16_per_token, 4), _src("kv", "bytes per token vs f16"))
    n_seq_state = _int_fact(facts, "config.n_parallel", 1)
    state = estimate_arch.state_bytes(facts, n_seq_state)  # [arch hook] recurrent state (Mamba, LFM2)
    if state is not None:
        facts.set("derived.state_bytes", state, _src("kv", f"recurrent state, f32, x {max(1, n_seq_state)} sequence(s)"
                                                     " (doctor/derive/arch.py)"))
    n_ctx = asked_ctx(facts)
    if n_ctx is None:
        return
    n_seq = facts.value("config.n_parallel", 1)
    n_seq = n_seq if isinstance(n_seq, int) and n_seq > 0 else 1
    unified = bool(facts.value("config.kv_unified", False))
    n_batch = _int_fact(facts, "config.n_batch", 512)
    cp = context_params(n_ctx, n_seq, unified, n_batch, _int_fact(facts, "config.n_ubatch", 512))
    cells, streams, n_ubatch = cp.n_ctx_seq, cp.streams, cp.n_ubatch
    swa_full = _swa_full(facts)
    n_swa = facts.value("model.n_swa", 0)
    if isinstance(n_swa, int) and n_swa > 0 and not shape.swa and not swa_full:
        facts.unknown("derived.kv_bytes", "which layers use the sliding window is unknown, and SWA layers get a"
                      " smaller cache without swa_full", _src("kv", f"n_swa {n_swa}"))
        return
    how = f"{formula} x {cells} cells x {streams} stream(s)"
    if shape.swa and not swa_full:
        how += (f"; {sum(shape.swa)} sliding-window layers x "
                f"{swa_cells(cells, shape.n_swa, n_seq, unified, n_ubatch)} cells")
    facts.set("derived.kv_cells", cells * streams, _src("kv", how))
    opts: dict[str, Any] = {"swa_full": swa_full, "n_ubatch": n_ubatch, "n_batch": cp.n_batch}
    try:
        facts.set("derived.kv_bytes", kv_bytes(shape, n_ctx, type_k, type_v, n_seq, unified, **opts),
                  _src("kv", how))
        facts.set("derived.kv_bytes_f16", kv_bytes(shape, n_ctx, "f16", "f16", n_seq, unified, **opts),
                  _src("kv", how.replace(type_k, "f16")))
        facts.set("derived.kv_bytes_q8_0", kv_bytes(shape, n_ctx, "q8_0", "q8_0", n_seq, unified, **opts),
                  _src("kv", "same cells at q8_0"))
    except ValueError as exc:
        facts.unknown("derived.kv_bytes", str(exc), _src("kv", how))


PLANNED = "planned prompt + max new tokens"


def _needed_tokens(facts: Facts) -> tuple[int | None, str]:
    prompt = facts.value("config.prompt_tokens")
    new = facts.value("config.max_new_tokens")
    if isinstance(prompt, int) and isinstance(new, int):
        return prompt + new, PLANNED
    seen = [(facts.value(name), how) for name, how in (
        ("run.tokens_used_max", "most tokens a sequence held in the input"),
        ("server.request_tokens_max", "largest request seen"),
        ("run.prompt_tokens_max", "largest prompt seen"))]
    known = [(value, how) for value, how in seen if isinstance(value, int)]
    if not known:
        return None, ""
    return max(known, key=lambda vh: vh[0])


def _needed_from_events(facts: Facts, n_seq_ctx: object) -> tuple[int | None, str]:
    """When no counts were printed, the overflow events still say the context was too small."""
    asked = [e.data.get("n_tokens") for kind in ("prompt_too_long", "truncation") for e in facts.events(kind)]
    numbers = [a for a in asked if isinstance(a, int) and a > 0]
    if numbers:
        return max(numbers), "tokens the rejected or truncated request asked for"
    full = facts.events("ctx_full") or facts.events("context_shift") or [
        e for e in facts.events("decode_failed") if e.data.get("ret") == 1]
    if full and isinstance(n_seq_ctx, int) and n_seq_ctx > 0:
        return 2 * n_seq_ctx, "the context ran out: at least double it"
    return None, ""


def _derive_context(facts: Facts) -> None:
    n_ctx = facts.value("config.n_ctx")
    n_par = facts.value("config.n_parallel", 1)
    n_par = n_par if isinstance(n_par, int) and n_par > 0 else 1
    n_seq_ctx = facts.value("config.n_ctx_seq")
    if not isinstance(n_seq_ctx, int) and isinstance(n_ctx, int):
        unified = bool(facts.value("config.kv_unified", False))
        n_seq_ctx = n_ctx if unified or n_par == 1 else n_ctx // n_par
        facts.set("derived.n_ctx_seq", n_seq_ctx, _src("context", f"n_ctx {n_ctx} / {n_par} slot(s)"))
    elif isinstance(n_seq_ctx, int):
        facts.set("derived.n_ctx_seq", n_seq_ctx, _src("context", "engine's per-sequence context"))
    planned_prompt, planned_reply = facts.value("config.prompt_tokens"), facts.value("config.max_new_tokens")
    if isinstance(planned_prompt, int) and isinstance(planned_reply, int):
        facts.set("derived.plan_tokens_needed", planned_prompt + planned_reply,
                  _src("context", f"planned prompt {planned_prompt} + reply {planned_reply}"))
    need, how = _needed_tokens(facts)
    if need is None:
        need, how = _needed_from_events(facts, n_seq_ctx)
    if need is None:
        return
    facts.set("derived.tokens_needed", need, _src("context", how))
    train = facts.value("model.n_ctx_train")
    recommended = pad(need + max(64, need // 10))  # room for the reply's end and the chat template
    how_rec = f"{need} tokens needed + 10% headroom, rounded up to 256"
    if how != PLANNED and isinstance(n_seq_ctx, int) and n_seq_ctx - 1 <= need <= n_seq_ctx:
        # what was seen filled the context, so the real need is unknown and larger: double it
        recommended, how_rec = pad(2 * n_seq_ctx), f"the {n_seq_ctx}-token context filled up: double it"
    elif (how != PLANNED and isinstance(n_seq_ctx, int) and need < n_seq_ctx - 1
          and (facts.events("ctx_full") or [e for e in facts.events("decode_failed") if e.data.get("ret") == 1])):
        # the KV cache filled although no sequence filled its own context: sequences sharing one
        # buffer (llama-server --kv-unified) filled it together, so one sequence's need says too little
        recommended = pad(2 * n_seq_ctx)
        how_rec = f"the {n_seq_ctx}-token KV buffer the sequences share filled up: double it"
    if isinstance(train, int) and train > 0:
        recommended = min(recommended, train)
    facts.set("derived.ctx_recommended", recommended,
              _src("context", how_rec + (f", capped at n_ctx_train {train}" if isinstance(train, int) else "")))
    facts.set("derived.ctx_slot_recommended", recommended * n_par,
              _src("context", f"{recommended} per slot x {n_par} slot(s)"))
    if isinstance(n_seq_ctx, int) and n_seq_ctx > 0:
        facts.set("derived.tokens_over", max(0, need - n_seq_ctx),
                  _src("context", f"{need} needed - {n_seq_ctx} per sequence"))
        facts.set("derived.ctx_headroom", round(n_seq_ctx / max(need, 1), 3), _src("context", f"{n_seq_ctx} / {need}"))
        kv_tok = facts.value("derived.kv_bytes_per_token")
        if isinstance(kv_tok, int) and isinstance(n_ctx, int):
            need_cells = pad(need) * n_par
            facts.set("derived.kv_bytes_at_need", kv_tok * need_cells,
                      _src("context", f"{kv_tok} B/token x {need_cells} cells"))
    prompt = facts.value("config.prompt_tokens", facts.value("run.prompt_tokens"))
    if isinstance(prompt, int) and isinstance(n_seq_ctx, int):
        facts.set("derived.safe_max_new_tokens", max(0, n_seq_ctx - prompt),
                  _src("context", f"{n_seq_ctx} per sequence - {prompt} prompt tokens"))


def _derive_threads(facts: Facts) -> None:
    threads = facts.value("config.n_threads")
    usable = facts.value("host.cpu.usable_cores")
    usable_fact = facts.get("host.cpu.usable_cores")
    if not isinstance(usable, int | float):
        physical = facts.value("host.cpu.physical_cores")
        usable = physical if isinstance(physical, int) else None
    if isinstance(usable, int | float) and usable > 0:
        # a limit read from a log or a pasted command keeps its line as the evidence
        src = (usable_fact.source if usable_fact is not None and usable_fact.source.kind == "log"
               else _src("threads", "physical cores within the CPU quota and affinity"))
        facts.set("derived.threads_recommended", max(1, int(usable)), src)
        if isinstance(threads, int) and threads > 0:
            facts.set("derived.threads_over", round(threads / usable, 3),
                      _src("threads", f"{threads} threads / {usable:g} usable cores"))


def _derive_load(facts: Facts) -> None:
    path = facts.get("model.path")
    if path is not None and isinstance(path.value, str) and not facts.has("model.path_storage"):
        from doctor.core.path_storage import path_storage

        found = path_storage(path.value)
        if found is not None:
            facts.set("model.path_storage", found[0], path.source)
    load_ms = facts.value("run.load_ms")
    size = facts.value("model.file_bytes")
    if isinstance(load_ms, int | float) and isinstance(size, int) and load_ms > 0:
        facts.set("run.load_mb_s", round(size / 1e6 / (load_ms / 1000), 1),
                  _src("load", f"{size} bytes in {load_ms:.0f} ms"))
    read = facts.value("model.storage.read_mb_s")
    if isinstance(read, int | float) and read > 0 and isinstance(size, int):
        facts.set("derived.load_expected_ms", round(size / 1e6 / read * 1000, 1),
                  _src("load", f"{size} bytes at {read:.0f} MB/s"))


def _derive_offload(facts: Facts) -> None:
    off = facts.value("run.offloaded_layers")
    total = facts.value("run.total_layers")
    if isinstance(off, int) and isinstance(total, int) and total > 0:
        facts.set("run.gpu_layers_share", round(off / total, 4), _src("offload", f"{off}/{total} layers"))


def _derive_run_summaries(facts: Facts) -> None:
    steps = facts.value("run.decode_ms")
    if isinstance(steps, list) and steps and all(isinstance(s, int | float) for s in steps):
        # the first step often carries one-time warm-up; judge jitter on the steady state
        steady = [float(s) for s in (steps[1:] if len(steps) > 4 else steps)]
        p50 = percentile(steady, 50)
        src = _src("decode", f"{len(steady)} steady decode steps")
        facts.set_default("run.decode_ms_p50", round(p50, 3), src)
        facts.set_default("run.decode_ms_p99", round(percentile(steady, 99), 3), src)
        facts.set_default("run.decode_ms_max", round(max(steady), 3), src)
        facts.set_default("run.decode_ms_mean", round(sum(steady) / len(steady), 3), src)
        facts.set_default("run.decode_ms_total", round(sum(float(s) for s in steps), 3), src)
        facts.set_default("run.decode_tokens", len(steps), src)
        if p50 > 0:
            facts.set_default("run.decode_spike_ratio", round(percentile(steady, 99) / p50, 3), src)
            facts.set_default("run.decode_spikes", sum(1 for s in steady if s > 3 * p50), src)
    total = facts.value("run.decode_ms_total")
    n = facts.value("run.decode_tokens")
    if isinstance(total, int | float) and isinstance(n, int) and total > 0 and n > 0:
        facts.set_default("run.decode_tps", round(n / (total / 1000), 2),
                          _src("decode", f"{n} tokens in {total:.0f} ms"))
    prefill = facts.value("run.prefill_ms")
    if isinstance(prefill, int | float) and isinstance(total, int | float) and prefill + total > 0:
        facts.set_default("run.prefill_share", round(prefill / (prefill + total), 4),
                          _src("run", f"prefill {prefill:.0f} ms vs decode {total:.0f} ms"))


# -- memory budget and decode floor ----------------------------------------------------------

# What the engine's process holds on top of the buffers llama.cpp prints (weights, KV, compute,
# output) and the CPU backend's work buffer (cpu_work_bytes), measured rather than guessed:
# - host: the process itself - interpreter and libraries resident, the vocabulary, graph metadata,
#   the heap around the buffers. bench/fit_vs_llamacpp.py loads SmolLM2 through llama-cpp-python
#   0.3.36 at 36 settings (n_ctx 64..8192, f16/q8_0/f32 KV, 1 or 4 sequences), runs the worst-case
#   batch, makes every page the engine allocated resident, and reads the process's peak resident
#   memory (VmHWM): it is the printed buffers + the work buffer + 105.6 to 106.5 MiB at every
#   setting (median 105.9). Of that, 83.4 MiB (81.7..85.0 over the 36) is the process's own private memory
#   (RssAnon beyond the anonymous buffers: the interpreter with llama_cpp imported, the vocabulary,
#   the heap) and the rest is the engine's and interpreter's code pages - shared, and already in the
#   page cache where the engine ran before. A native llama.cpp process has no interpreter and needs less.
# - what a memory limit really does (the same loads under a cgroup v1 memory limit, the model file
#   dropped from the page cache first, 16 tokens generated after the worst-case batch): memory-mapped
#   weights are page cache the kernel may evict, so the process is not killed when they do not fit -
#   it re-reads them from disk for every token (n_ctx 512 f32: 16.6 ms/token with everything
#   resident; 20 MiB short, 100 MB read per token and 103 ms/token; 70 MiB short, 305 ms/token). It
#   runs at full speed from its private memory + the weights + 2.5..2.9 MiB of page cache (the code
#   pages it uses were cached by earlier runs), and is killed below its private memory + 16.0..18.6 MiB:
#   the least page cache the kernel keeps for a process faulting its weights back in. Without mmap the
#   weights are private memory: killed below private + 1.5 MiB (measured at n_ctx 512 f32).
HOST_PRIVATE_OVERHEAD = round(83.4 * MIB)
HOST_SHARED_OVERHEAD = round(22.5 * MIB)
HOST_RUNTIME_OVERHEAD = HOST_PRIVATE_OVERHEAD + HOST_SHARED_OVERHEAD  # the peak RSS beyond the buffers
HOST_CACHE_MARGIN = 3 * MIB  # page cache beyond the resident pages to run without re-reading from disk
HOST_MAPPED_MINIMUM = 18 * MIB  # the least page cache of mapped weights below which the process is killed
GPU_RUNTIME_OVERHEAD = 527 * MIB
HOST_OVERHEAD_HOW = ("measured: the private memory of a real llama-cpp-python run beyond its buffers, + 3 MiB of page "
                     "cache (bench/fit_vs_llamacpp.py, under cgroup memory limits)")
GPU_OVERHEAD_HOW = "CUDA context per GPU, 527 MiB measured on an H200 (bench/cuda_context.py)"


def _int_fact(facts: Facts, name: str, default: int) -> int:
    value = facts.value(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _swa_full(facts: Facts) -> bool:
    value = facts.value("config.swa_full")
    if isinstance(value, bool):
        return value
    # the engine's default (doctor/core/engines.py): llama.cpp's CLI and server false, the C API (llama-cpp-python) true
    return engines.defaults(facts.value("config.engine", facts.value("engine.name"))).swa_full


def _flash_attn(facts: Facts) -> bool:
    value = str(facts.value("config.flash_attn", "disabled")).lower()
    return value in ("enabled", "auto", "on", "true", "1")


def layout_from_facts(facts: Facts) -> WeightLayout | None:
    layers = facts.value("model.layer_bytes")
    n_layer = facts.value("model.n_layer")
    if not (isinstance(layers, list) and 0 < len(layers) <= MAX_LAYERS and all(isinstance(b, int) for b in layers)):
        return None
    if isinstance(n_layer, int) and len(layers) != n_layer:
        return None
    inp = facts.value("model.input_bytes")
    out = facts.value("model.output_bytes")
    if not isinstance(inp, int) or not isinstance(out, int):
        return None
    tied = facts.value("model.output_tied") is True
    return WeightLayout(list(layers), inp, out, tied, inp if tied else 0)


def compute_shape_from_facts(facts: Facts) -> ComputeShape | None:
    n_vocab, n_embd, n_head = (facts.value(f"model.{k}") for k in ("n_vocab", "n_embd", "n_head"))
    shape = shape_from_facts(facts)
    if not (isinstance(n_head, int) and n_head > 0) and estimate_arch.state_per_layer(facts) is not None:
        n_head = 0  # [arch hook] all-recurrent (Mamba): no attention term
    elif not isinstance(n_head, int) or n_head <= 0:
        return None
    if not all(isinstance(v, int) and v > 0 for v in (n_vocab, n_embd)) or shape is None:
        return None
    return ComputeShape(n_vocab, n_embd, n_head, max(shape.n_head_kv) * shape.head_dim_k,
                        estimate_arch.compute_extra(facts))


def _gpu_present(facts: Facts) -> bool:
    count = facts.value("host.gpu.count")
    return isinstance(count, int) and count > 0


def _vram_free(facts: Facts) -> int | None:
    count = facts.value("host.gpu.count")
    if not isinstance(count, int) or not 0 < count <= MAX_GPUS:
        return None
    free = [facts.value(f"host.gpu[{i}].vram_free") for i in range(count)]
    if not all(isinstance(f, int) for f in free):
        return None
    return sum(free)  # llama.cpp splits layers over GPUs in proportion to their free memory


def asked_ctx(facts: Facts) -> int | None:
    """The context as asked (llama.cpp clamps the batch to it before padding): config.n_ctx_requested
    where a source knows it, else config.n_ctx (an engine log prints the padded value, and the batch
    it prints is already clamped)."""
    for name in ("config.n_ctx_requested", "config.n_ctx"):
        value = facts.value(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def plan_from_facts(facts: Facts) -> Plan | None:
    layout = layout_from_facts(facts)
    n_ctx = asked_ctx(facts)
    if layout is None or n_ctx is None:
        return None
    arch = str(facts.value("model.arch", "")).lower()
    kv = None if arch in KV_UNMODELLED and not estimate_arch.modelled(facts) else shape_from_facts(facts)
    type_k = str(facts.value("config.type_k", "f16")).lower()
    type_v = str(facts.value("config.type_v", type_k)).lower()
    if type_k not in KV_TYPES or type_v not in KV_TYPES:
        kv = None
    n_batch = _int_fact(facts, "config.n_batch", 512)
    ngl = _int_fact(facts, "config.n_gpu_layers", 0)
    gpu = _gpu_present(facts) and facts.value("engine.gpu_offload_supported") is not False
    proj = estimate_mmproj.projector(facts, _flash_attn(facts))  # [mmproj hook]
    mmproj = proj.weights + (proj.compute or 0) if proj is not None else 0
    return Plan(layout=layout, kv=kv, compute=compute_shape_from_facts(facts), n_ctx=n_ctx, n_gpu_layers=ngl,
                type_k=type_k, type_v=type_v, n_seq=max(1, _int_fact(facts, "config.n_parallel", 1)),
                unified=facts.value("config.kv_unified") is True, n_batch=n_batch,
                n_ubatch=min(n_batch, _int_fact(facts, "config.n_ubatch", 512)), flash_attn=_flash_attn(facts),
                offload_kqv=facts.value("config.offload_kqv") is not False, swa_full=_swa_full(facts), gpu=gpu,
                state=tuple(estimate_arch.state_per_layer(facts) or ()), n_ff=max(0, _int_fact(facts, "model.n_ff", 0)),
                act_row=act_row_bytes(facts.value("model.file_type")), mmproj=mmproj,
                repack=estimate_repack.plan_from_facts(facts, layout.n_layer, gpu))  # [repack hook]


def _derive_mmproj(facts: Facts) -> None:
    """[mmproj hook] the vision projector's own figures (doctor/derive/mmproj.py)."""
    estimate_mmproj.derive(facts, _flash_attn(facts))


def _derive_budget(facts: Facts) -> None:
    plan = plan_from_facts(facts)
    if plan is None:
        return
    b = budget(plan)
    n_total = plan.layout.n_layer + 1
    settings = (f"n_ctx {plan.n_ctx}, n_gpu_layers {plan.n_gpu_layers}, {plan.type_k}/{plan.type_v}, "
                f"n_ubatch {plan.n_ubatch}, flash attention {'on' if plan.flash_attn else 'off'}")
    src = _src("budget", settings)
    facts.set("derived.total_layers", n_total, _src("budget", "n_layer repeating layers + the output layer"))
    facts.set("derived.weights_bytes", plan.layout.total, _src("budget", "sum of per-tensor sizes"))
    facts.set("derived.gpu_layers", b.gpu_layers, src)
    facts.set("derived.weights_gpu_bytes", b.weights_gpu,
              _src("budget", f"layers {n_total - b.gpu_layers}..{n_total - 1} of 0..{n_total - 1} on the GPU"))
    facts.set("derived.weights_host_bytes", b.weights_host,
              _src("budget", "token embedding (always on the CPU) + layers not offloaded"))
    place = place_weights(plan.layout, plan.n_gpu_layers, plan.gpu)  # [repack hook] doctor/derive/repack.py
    estimate_repack.set_facts(facts, plan.repack, place.first_gpu_layer, place.output_on_gpu)
    if plan.kv is not None:
        facts.set("derived.kv_gpu_bytes", b.kv_gpu, src)
        facts.set("derived.kv_host_bytes", b.kv_host, src)
    if plan.compute is not None:
        cp = context_params(plan.n_ctx, plan.n_seq, plan.unified, plan.n_batch, plan.n_ubatch)
        how = _src("budget", f"worst-case ubatch of {cp.n_tokens_reserve} tokens; {settings}")
        facts.set("derived.compute_bytes", b.compute_gpu + b.compute_host, how)
        facts.set("derived.compute_gpu_bytes", b.compute_gpu, how)
        facts.set("derived.compute_host_bytes", b.compute_host, how)
    complete = plan.kv is not None and plan.compute is not None
    if not complete:
        reason = ("KV cache not modelled for this model" if plan.kv is None
                  else "compute buffer needs n_vocab, n_embd, n_head")
        for name in ("derived.fits_vram", "derived.fits_ram", "derived.max_ctx_fit"):
            facts.unknown(name, reason, src)
    proj = " + the vision projector" if plan.mmproj else ""
    facts.set("derived.gpu_need_bytes", b.gpu, _src("budget", f"weights + KV + compute{proj if b.mmproj_gpu else ''}"
                                                              " on the GPU"))
    facts.set("derived.host_need_bytes", b.host,
              _src("budget", f"weights + KV + compute + output buffer{proj if b.mmproj_host else ''}"
                             " + the CPU backend's work buffer in host memory"))
    if plan.compute is not None:
        facts.set("derived.cpu_work_bytes", b.work_host,
                  _src("budget", "the CPU backend's scratch for the largest product at a full context "
                                 "(ggml_graph_plan work size; llama.cpp does not print it)"))

    vram_free = _vram_free(facts)
    vram_budget = None
    if vram_free is not None:
        count = _int_fact(facts, "host.gpu.count", 1)
        overhead = GPU_RUNTIME_OVERHEAD * count
        vram_budget = max(0, vram_free - overhead)
        facts.set("derived.gpu_overhead_bytes", overhead, _src("budget", f"{count} x {GPU_OVERHEAD_HOW}"))
        facts.set("derived.vram_budget", vram_budget,
                  _src("budget", f"free VRAM {vram_free / MIB:.0f} MiB - {count} x {GPU_RUNTIME_OVERHEAD / MIB:.0f} MiB"
                                 " CUDA context"))
    available = facts.value("host.ram.available")
    ram_budget = None
    host_overhead = HOST_PRIVATE_OVERHEAD + HOST_CACHE_MARGIN
    if isinstance(available, int):
        ram_budget = max(0, available - host_overhead)
        facts.set("derived.host_overhead_bytes", host_overhead, _src("budget", HOST_OVERHEAD_HOW))
        facts.set("derived.ram_budget", ram_budget,
                  _src("budget", f"available RAM {available / MIB:.0f} MiB - {host_overhead / MIB:.1f} MiB "
                                 "the engine's process needs beyond its buffers (measured)"))
    mapped = place.host_bytes if facts.value("config.use_mmap") is not False else 0
    margin = HOST_MAPPED_MINIMUM if mapped else HOST_CACHE_MARGIN
    floor = b.host - mapped + HOST_PRIVATE_OVERHEAD + margin  # below it the kernel kills the process
    if complete:
        facts.set("derived.host_peak_bytes", b.host + HOST_RUNTIME_OVERHEAD  # [repack hook] + the replaced
                  + _int_fact(facts, "derived.weights_repack_replaced_bytes", 0),  # file pages, resident after load
                  _src("budget", "weights + KV + compute in host memory + the process's own overhead"))
        facts.set("derived.weights_mapped_bytes", mapped,
                  _src("budget", "weights in host memory left in the memory-mapped file" if mapped else
                       "mmap off: the weights are the process's own memory"))
        facts.set("derived.host_floor_bytes", floor,
                  _src("budget", "KV + compute + output + work buffer + the process's private memory + "
                       + ("18 MiB of the mapped weights' page cache" if mapped else "3 MiB of page cache")
                       + " (measured under cgroup limits: below it the kernel kills the process)"))

    phase, device = "none", "none"
    if vram_budget is not None and plan.gpu and b.gpu_layers > 0:
        fits = b.gpu <= vram_budget
        facts.set("derived.weights_fit_vram", b.weights_gpu <= vram_budget, src)
        facts.set("derived.kv_fits_vram", b.weights_gpu + b.kv_gpu <= vram_budget, src)
        if complete:
            facts.set("derived.fits_vram", fits, src)
            facts.set("derived.gpu_short_bytes", max(0, b.gpu - vram_budget), src)
            facts.set("derived.gpu_room_bytes", max(0, vram_budget - b.gpu),
                      _src("budget", "free VRAM left after the CUDA context and the plan's buffers"))
        if not fits:
            device = "gpu"
            phase = ("weights" if b.weights_gpu > vram_budget else
                     "kv_cache" if b.weights_gpu + b.kv_gpu > vram_budget else "compute")
    if ram_budget is not None and complete and isinstance(available, int):
        runs = floor <= available
        own = max(0, available - HOST_PRIVATE_OVERHEAD - margin)  # for the buffers that cannot be paged out
        fits_ram = runs and b.host <= ram_budget
        facts.set("derived.fits_ram", fits_ram, src)
        facts.set("derived.ram_runs", runs,
                  _src("budget", f"the process's least memory {floor / MIB:.1f} MiB against {available / MIB:.0f} MiB"
                                 + (" (the mapped weights paged from disk)" if mapped and not fits_ram else "")))
        facts.set("derived.host_short_bytes", max(0, b.host - ram_budget), src)
        facts.set("derived.host_room_bytes", max(0, ram_budget - b.host) if fits_ram else 0,
                  _src("budget", "available RAM left after the process and the plan's buffers"))
        cache_ram = facts.value("config.cache_ram")  # llama-server's prompt cache (doctor/core/engines.py)
        if fits_ram and isinstance(cache_ram, int) and cache_ram > 0:
            facts.set("derived.cache_ram_fit_mib", (ram_budget - b.host) // MIB,
                      _src("budget", "the RAM left after the plan, in MiB: the largest --cache-ram that keeps "
                                     "everything resident"))
        if runs and not fits_ram:
            facts.set("derived.weights_paged_bytes", min(mapped, b.host - ram_budget),
                      _src("budget", "mapped weights that cannot stay in the page cache: re-read from disk per token"))
        if not runs and device == "none":
            device = "host"
            weights_own = b.weights_host - mapped
            phase = ("weights" if weights_own > own else
                     "kv_cache" if weights_own + b.kv_host > own else "compute")
    if complete and (vram_budget is not None or ram_budget is not None):
        facts.set("derived.oom_phase", phase, src)
        facts.set("derived.oom_device", device, src)
        if device != "none":
            need, room = (b.gpu, vram_budget) if device == "gpu" else (b.host - mapped, own)
            facts.set("derived.oom_need_bytes", need,
                      _src("budget", f"weights + KV + compute on the {device}"
                                     + (" (the mapped weights left out: they can be paged)" if device == "host"
                                        and mapped else "")))
            facts.set("derived.oom_budget_bytes", room,
                      _src("budget", f"free {device} memory minus the margin"))

    if complete:  # [split hook] the sum that fails, term by term (doctor/derive/split.py)
        _explain_split(facts, plan, b, vram_budget, ram_budget)
    if vram_budget is not None and complete:
        best = max_gpu_layers(plan, vram_budget)
        fit_how = f"largest n_gpu_layers whose weights + KV + compute fit in {vram_budget / MIB:.0f} MiB"
        facts.set("derived.max_gpu_layers", best, _src("budget", fit_how))
        facts.set("derived.gpu_layers_fit_recommended", -1 if best >= n_total else best,
                  _src("budget", "all layers (-1)" if best >= n_total else f"{best} of {n_total} layers fit"))
    if complete and (vram_budget is not None or ram_budget is not None):
        train = facts.value("model.n_ctx_train")
        limit = train if isinstance(train, int) and train > 0 else max(plan.n_ctx, 131072)
        limit = max(limit, plan.n_ctx)
        best_ctx = max_ctx_fit(plan, vram_budget if plan.gpu and b.gpu_layers else None, ram_budget, limit)
        if best_ctx is None:
            facts.set("derived.max_ctx_fit", 0, _src("budget", "not even 256 tokens fit next to the weights"))
        else:
            facts.set("derived.max_ctx_fit", best_ctx,
                      _src("budget", f"largest multiple of 256 up to {limit} that fits with n_gpu_layers "
                                     f"{plan.n_gpu_layers}"))
            need = facts.value("derived.ctx_recommended")
            rec = min(need, best_ctx) if isinstance(need, int) else best_ctx
            facts.set("derived.ctx_fit_recommended", rec,
                      _src("budget", "the context needed, or the largest that fits if smaller"))


def _explain_split(facts: Facts, plan: Plan, b: Budget, vram_budget: int | None, ram_budget: int | None) -> None:
    from doctor.derive import split as estimate_split

    place = place_weights(plan.layout, plan.n_gpu_layers, plan.gpu)
    output = plan.layout.output_bytes + (plan.layout.tied_bytes if plan.layout.output_tied else 0)
    gpu = host = None
    if vram_budget is not None and plan.gpu and b.gpu_layers > 0:
        gpu = estimate_split.DeviceSum("GPU", b.weights_gpu, output if place.output_on_gpu else 0, b.kv_gpu,
                                       b.compute_gpu, vram_budget, b.mmproj_gpu)
    if ram_budget is not None:
        host = estimate_split.DeviceSum("host", b.weights_host, 0 if place.output_on_gpu else plan.layout.output_bytes,
                                        b.kv_host, b.compute_host, ram_budget, b.mmproj_host)
    estimate_split.explain(facts, gpu, host)


def _derive_ctx_reduced(facts: Facts) -> None:
    """A smaller context to try after a KV-cache OOM: the largest that fits when memory is known,
    otherwise half of what failed."""
    n_ctx = facts.value("config.n_ctx")
    if not isinstance(n_ctx, int) or n_ctx <= 256:
        return
    fit = facts.value("derived.max_ctx_fit")
    if isinstance(fit, int) and 0 < fit < n_ctx:
        facts.set("derived.ctx_reduced", fit, _src("context", "the largest context that fits in free memory"))
    else:
        facts.set("derived.ctx_reduced", pad(n_ctx // 2),
                  _src("context", f"half of n_ctx {n_ctx} (free memory unknown: try, then adjust)"))


def _derive_decode_floor(facts: Facts) -> None:
    """Bytes read per generated token / memory bandwidth: a floor on ms per token."""
    plan = plan_from_facts(facts)
    if plan is None or plan.kv is None:
        return
    place = place_weights(plan.layout, plan.n_gpu_layers, plan.gpu)
    # decode reads every weight once per token except the embedding table (one row) and, for MoE,
    # the experts that are not routed to
    n_expert, used = facts.value("model.n_expert", 0), facts.value("model.n_expert_used", 0)
    experts = facts.value("model.expert_bytes", 0)
    unused_share = 0.0
    if isinstance(n_expert, int) and n_expert > 0 and isinstance(used, int) and isinstance(experts, int):
        unused_share = experts / max(1, sum(plan.layout.layer_bytes)) * (1 - used / n_expert)
    gpu_weights = place.gpu_bytes
    host_weights = place.host_bytes - plan.layout.input_bytes
    if plan.layout.output_tied and not place.output_on_gpu:
        host_weights += plan.layout.tied_bytes  # the tied lm head is the embedding table, read in full
    gpu_weights = int(gpu_weights * (1 - unused_share))
    host_weights = int(host_weights * (1 - unused_share))
    tokens = facts.value("derived.tokens_needed")
    ctx_tokens = min(tokens, pad(plan.n_ctx)) if isinstance(tokens, int) else pad(plan.n_ctx)
    kv_tok = kv_bytes_per_token(plan.kv, plan.type_k, plan.type_v)
    kv_read = int(kv_tok * ctx_tokens)
    share_gpu = (place.gpu_layers - (1 if place.output_on_gpu else 0)) / max(1, plan.layout.n_layer)
    kv_gpu = int(kv_read * share_gpu) if plan.offload_kqv else 0
    gpu_bytes, host_bytes = gpu_weights + kv_gpu, host_weights + kv_read - kv_gpu
    how = f"weights read per token + KV of {ctx_tokens} tokens"
    facts.set("derived.decode_bytes_per_token", gpu_bytes + host_bytes, _src("decode", how))
    facts.set("derived.decode_gpu_bytes_per_token", gpu_bytes, _src("decode", how))
    facts.set("derived.decode_host_bytes_per_token", host_bytes, _src("decode", how))
    gpu_bw = facts.value("host.gpu[0].bandwidth_measured_gbs", facts.value("host.gpu[0].bandwidth_spec_gbs"))
    host_bw = facts.value("host.ram.bandwidth_measured_gbs")
    if isinstance(gpu_bw, int | float) and gpu_bw > 0:
        facts.set("derived.gpu_bandwidth_gbs", float(gpu_bw), _src("decode", "measured device copy, else spec"))
    if isinstance(host_bw, int | float) and host_bw > 0:
        facts.set("derived.host_bandwidth_gbs", float(host_bw), _src("decode", "measured host copy"))
    floor = 0.0
    parts = []
    for n_bytes, bw, where in ((gpu_bytes, gpu_bw, "GPU"), (host_bytes, host_bw, "RAM")):
        if n_bytes <= 0:
            continue
        if not isinstance(bw, int | float) or bw <= 0:
            facts.unknown("derived.decode_floor_ms", f"{where} memory bandwidth unknown (scan --bench measures it)",
                          _src("decode", how))
            return
        floor += n_bytes / (bw * 1e9) * 1000
        parts.append(f"{n_bytes / MIB:.0f} MiB at {bw:.0f} GB/s ({where})")
    facts.set("derived.decode_floor_ms", round(floor, 3), _src("decode", " + ".join(parts)))
    if plan.gpu and isinstance(gpu_bw, int | float) and gpu_bw > 0 and place.first_gpu_layer > 0:
        full = place_weights(plan.layout, -1, True)
        full_bytes = full.gpu_bytes + kv_read
        full_ms = full_bytes / (gpu_bw * 1e9) * 1000 * (1 - unused_share)
        facts.set("derived.decode_floor_full_gpu_ms", round(full_ms, 3), _src(
            "decode", f"{full_bytes / MIB:.0f} MiB at {gpu_bw:.0f} GB/s if every layer were on the GPU"))
        if full_ms > 0:
            facts.set("derived.offload_slowdown", round(floor / full_ms, 2),
                      _src("decode", f"{floor:.1f} ms / {full_ms:.1f} ms per token"))


def _derive_gpu_ratios(facts: Facts) -> None:
    """Measured against spec: memory bandwidth and the pinned host-to-device copy over PCIe."""
    count = facts.value("host.gpu.count")
    if not isinstance(count, int):
        return
    for i in range(min(count, MAX_GPUS)):
        p = f"host.gpu[{i}]"
        for measured, spec, out in ((f"{p}.bandwidth_measured_gbs", f"{p}.bandwidth_spec_gbs", f"{p}.bandwidth_ratio"),
                                    (f"{p}.pcie.h2d_measured_gbs", f"{p}.pcie.spec_gbs", f"{p}.pcie.h2d_ratio")):
            m, s = facts.value(measured), facts.value(spec)
            if isinstance(m, int | float) and isinstance(s, int | float) and s > 0:
                facts.set(out, round(m / s, 3), _src("gpu", f"{m:g} GB/s measured / {s:g} GB/s spec"))
