"""The llama.cpp memory model: KV cache, weights, compute buffer, and what each device needs.

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

Pure math on dataclasses (KvShape, WeightLayout, ComputeShape, Plan -> Budget): no Facts here.
doctor/derive/plan.py builds a Plan from the facts and sets the derived.* facts of the budget;
the process overheads below are measured (bench/fit_vs_llamacpp.py, bench/cuda_context.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import doctor.derive.arch as estimate_arch
import doctor.derive.repack as estimate_repack
from doctor.core.vocab import KV_TYPES

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


# -- what the engine's process needs beyond its buffers ---------------------------------------

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
