"""Weight repacking: the second copy of the matrix weights llama.cpp's CPU backend makes, sized.

A step of the memory budget (doctor/derive/memory.py and plan.py, marked [repack hook]). llama.cpp's CPU backend has
"extra buffer types" (ggml/src/ggml-cpu/ggml-cpu.cpp, ggml_backend_cpu_get_extra_buffer_types) that
hold weights in a layout their own matrix kernels read: AMX (Intel AMX_INT8 with AVX512_VNNI) first,
then CPU_REPACK (AVX2 / AVX512 / ARM NEON). llama_model::load_tensors gives each weight the first
buffer type of its layer's list whose device supports the weight's op (llama-model-loader.cpp,
select_weight_buft); the CPU list is: a GPU's pinned host buffer (CUDA, ROCm, MUSA, Vulkan, SYCL,
CANN), then the extra buffer types (unless use_extra_bufts is off: `-nr` / `--no-repack`), then plain
CPU memory. So:

- only matrix weights can move: the op of the tensor's name (llama-arch.cpp LLM_TENSOR_INFOS) is
  MUL_MAT or MUL_MAT_ID (`MATMUL`, `MATMUL_ID` below); token_embd (GET_ROWS) and norms stay, but a
  model without output.weight reuses token_embd as its output (MUL_MAT): that duplicate moves;
- AMX (ggml-cpu/amx/amx.cpp, supports_op) takes MUL_MAT weights of Q4_0, Q4_1, Q8_0 with rows of a
  multiple of 32 elements, Q4_K, Q5_K, Q6_K, IQ4_XS with rows of a multiple of 256, F16 with rows of
  a multiple of 16, when the number of rows (ne1) is a multiple of 32. It stores each weight packed
  (amx/mmq.cpp, ggml_backend_amx_get_alloc_size): ne1 rows of (ne0 / block) blocks, each block its
  type's size plus 4 bytes for Q8_0 (the s8s8 compensation), Q4_K and Q5_K, 2 for IQ4_XS; F16 as is;
- CPU_REPACK (ggml-cpu/repack.cpp, ggml_repack_get_optimal_repack_type) takes 2-D MUL_MAT and 3-D
  MUL_MAT_ID weights of the types its build has kernels for (the table REPACK below: Q4_0 / Q4_K /
  IQ4_NL / MXFP4 on AVX2, Q2_K on AVX512, more on ARM), when ne1 is a multiple of 8 or 4; the copy
  has the tensor's own size (ggml_nbytes);
- every tensor in a buffer is padded to the buffer's 32-byte alignment (ggml-alloc.c).

What RAM holds. With mmap the file stays mapped whole (llama-model-loader unmaps only the ends outside
the range of the tensors left in CPU memory), and the engine prints both buffers (`CPU_Mapped` +
`AMX`): right after the load the process's RSS holds the file's pages of the moved tensors too (they
were read to make the copy). But those pages are clean file pages nothing reads again: the kernel
drops them under memory pressure, before it would swap or kill anything. So the memory budget charges
the copy in place of the originals it stands in for (derived.weights_repack_extra_bytes = copy -
replaced; a tied output's copy replaces nothing: token_embd stays for the input), while the comparison
with the engine's printed buffers (doctor/derive/vs_engine.py) adds the whole copy to the mapped
file, and so does derived.host_peak_bytes (the resident memory the process shows when RAM is ample;
measured on the AMX Xeon: 95 MiB more anonymous memory with repacking on, the 92 MiB mapping resident
either way). Without mmap the moved tensors are read straight into the repacked buffer: the copy replaces
them in the printed buffers too. (With --mlock the mapped pages stay locked: not modelled.)

What the build can do comes from the engine's system line (`AMX_INT8 = 1`, `AVX2 = 1`, `REPACK = 1`:
engine.cpu_features, engine.cpu_repack), else from the host's CPU flags (host.cpu.flags, assuming a
build for this CPU). With a GPU backend that has a pinned host buffer, CPU-resident layers go there
and nothing is repacked (llama.cpp's `--no-host` changes that; not modelled); Metal and OpenCL have
none, so their CPU layers are repacked. KleidiAI and RISC-V builds are not modelled: their copy is left unknown.

Pure: `plan_from_facts(facts, n_layer, gpu)` reads a snapshot and returns a Repack (or None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.core.facts import Facts, Source

ALIGN = 32  # TENSOR_ALIGNMENT: the AMX and CPU_REPACK buffers' alignment
MIB = 1 << 20

# Tensor names (without `.weight`; `%d` = the layer) whose op is MUL_MAT / MUL_MAT_ID in llama.cpp's
# LLM_TENSOR_INFOS (src/llama-arch.cpp, llama-cpp-python 0.3.36), names from LLM_TENSOR_NAMES.
_BLK_MATMUL = """
altup_correct_coef altup_predict_coef altup_router attn_compressor_gate attn_compressor_kv attn_conv_proj
attn_gate attn_k attn_k_b attn_kv attn_kv_a_mqa attn_kv_b attn_output attn_output_a attn_output_b attn_q
attn_q_a attn_q_b attn_qkv attn_v attn_v_b channel_mix_key channel_mix_receptance channel_mix_value
ffn_conv_proj ffn_down ffn_down_shexp ffn_gate ffn_gate_inp ffn_gate_inp_shexp ffn_gate_shexp ffn_latent_down
ffn_latent_up ffn_routed_down ffn_routed_up ffn_up ffn_up_shexp hc_attn_down hc_attn_fn hc_attn_inject
hc_attn_up hc_ffn_down hc_ffn_fn hc_ffn_inject hc_ffn_up indexer.attn_k indexer.attn_q_b indexer.k_proj
indexer.proj indexer.q_proj indexer_compressor_gate indexer_compressor_kv inp_gate laurel_l laurel_r
nextn.eh_proj nextn.shared_head_head ple_key ple_value proj shortconv.in_proj shortconv.out_proj ssm_alpha
ssm_ba ssm_beta ssm_dt ssm_f_a ssm_f_b ssm_g ssm_g_a ssm_g_b ssm_in ssm_out ssm_x time_mix_a1 time_mix_a2
time_mix_decay_w1 time_mix_decay_w2 time_mix_g1 time_mix_g2 time_mix_gate time_mix_key time_mix_output
time_mix_receptance time_mix_v1 time_mix_v2 time_mix_value time_mix_w1 time_mix_w2 vis_attn_output
vis_attn_qkv vis_down vis_gate vis_up
"""
_OTHER_MATMUL = """
altup_proj altup_unembd_proj cls cls.output conf_proj convnext.%d.pw1 convnext.%d.pw2 dec.blk.%d.attn_k
dec.blk.%d.attn_o dec.blk.%d.attn_q dec.blk.%d.attn_v dec.blk.%d.cross_attn_k dec.blk.%d.cross_attn_o
dec.blk.%d.cross_attn_q dec.blk.%d.cross_attn_v dec.blk.%d.ffn_down dec.blk.%d.ffn_gate dec.blk.%d.ffn_up
dense_2 dense_3 enc.blk.%d.attn_k enc.blk.%d.attn_o enc.blk.%d.attn_q enc.blk.%d.attn_v enc.blk.%d.ffn_down
enc.blk.%d.ffn_gate enc.blk.%d.ffn_up fc markov_w2 nextn.post_projection nextn.pre_projection output
output_hc_down output_hc_fn output_hc_up per_layer_model_proj posnet.%d.attn_k posnet.%d.attn_output
posnet.%d.attn_q posnet.%d.attn_v selector_hidden
"""
MATMUL = frozenset({f"blk.%d.{n}" for n in _BLK_MATMUL.split()} | set(_OTHER_MATMUL.split()))
MATMUL_ID = frozenset(f"blk.%d.{n}" for n in ("ffn_down_exps", "ffn_gate_exps", "ffn_up_exps", "ffn_gate_up_exps",
                                                "ffn_down_chexps", "ffn_gate_chexps", "ffn_up_chexps"))
_INDEX = re.compile(r"(^|\.)(\d+)(?=\.)")

# AMX: type -> (elements per block, bytes per packed block, rows must be a multiple of)
AMX: dict[str, tuple[int, int, int]] = {
    "Q4_0": (32, 18, 32), "Q4_1": (32, 20, 32), "Q8_0": (32, 34 + 4, 32),
    "Q4_K": (256, 144 + 4, 256), "Q5_K": (256, 176 + 4, 256), "Q6_K": (256, 210, 256), "IQ4_XS": (256, 136 + 2, 256),
    "F16": (1, 2, 16),
}

# CPU_REPACK: type -> ((build features needed, all of them), ne1 multiple) tried in llama.cpp's order
REPACK: dict[str, tuple[tuple[frozenset[str], int], ...]] = {
    # (SVE at 256 bits takes Q4_0 as 8x8 too: same size, and its NEON + MATMUL_INT8 path covers it)
    "Q4_0": ((frozenset({"AVX2"}), 8), (frozenset({"NEON", "MATMUL_INT8"}), 4), (frozenset({"NEON", "DOTPROD"}), 4),
             (frozenset({"VXE"}), 4)),
    "Q4_K": ((frozenset({"AVX2"}), 8), (frozenset({"NEON", "MATMUL_INT8"}), 8), (frozenset({"NEON", "DOTPROD"}), 8)),
    "Q2_K": ((frozenset({"AVX512"}), 8),),
    "Q5_K": ((frozenset({"NEON", "MATMUL_INT8"}), 8), (frozenset({"NEON", "DOTPROD"}), 8)),
    "Q6_K": ((frozenset({"NEON", "MATMUL_INT8"}), 8), (frozenset({"NEON", "DOTPROD"}), 8)),
    "IQ4_NL": ((frozenset({"AVX2"}), 8), (frozenset({"NEON", "DOTPROD"}), 4)),
    "MXFP4": ((frozenset({"AVX2"}), 8), (frozenset({"NEON", "DOTPROD"}), 4)),
    "Q8_0": ((frozenset({"NEON", "MATMUL_INT8"}), 4), (frozenset({"NEON", "DOTPROD"}), 4)),
    "Q1_0": ((frozenset({"NEON", "MATMUL_INT8"}), 4), (frozenset({"NEON", "DOTPROD"}), 4)),
}

UNMODELLED = frozenset({"KLEIDIAI", "RISCV_V"})  # extra buffer types of their own / other kernels
# GPU backends whose pinned host buffer comes before the extra buffer types in the CPU list
HOST_BUFFER_BACKENDS = frozenset({"CUDA", "ROCM", "HIP", "MUSA", "VULKAN", "SYCL", "CANN", "BLAS_CUDA"})
# host.cpu.flags (/proc/cpuinfo) -> the build feature a native build would have
_FLAG_FEATURES = {"avx2": "AVX2", "avx512f": "AVX512", "avx512_vnni": "AVX512_VNNI", "amx_int8": "AMX_INT8",
                  "asimd": "NEON", "asimddp": "DOTPROD", "i8mm": "MATMUL_INT8"}


def matmul_op(name: str) -> tuple[str, int | None] | None:
    """("mul_mat" | "mul_mat_id", layer or None) of a `.weight` tensor whose op is a matrix product
    (token_embd is GET_ROWS: its tied-output duplicate is added by weights_table)."""
    if not name.endswith(".weight"):
        return None  # biases are added (GGML_OP_ADD), never multiplied
    base = name[: -len(".weight")]
    m = _INDEX.search(base)
    template = base[: m.start(2)] + "%d" + base[m.end(2):] if m else base
    layer = int(m.group(2)) if m and base.startswith("blk.") else None
    if template in MATMUL:
        return "mul_mat", layer
    if template in MATMUL_ID:
        return "mul_mat_id", layer
    return None


OPS = ("mul_mat", "mul_mat_id", "tied_output")  # tied_output: token_embd reused as the output (MUL_MAT)


@dataclass(frozen=True, slots=True)
class Weight:
    """One row of model.matmul_weights: `count` tensors of the same layer, op, type and shape."""

    layer: int  # 0..n_layer-1; n_layer = the output layer
    op: str  # one of OPS
    type: str  # ggml type name, upper case
    ne: tuple[int, int, int]
    n_bytes: int  # ggml_nbytes of one tensor
    count: int = 1

    def row(self) -> list[object]:
        return [self.layer, self.op, self.type, list(self.ne), self.n_bytes, self.count]

    @property
    def duplicate(self) -> bool:
        """A second tensor made from data another tensor keeps (the tied output): it replaces nothing."""
        return self.op == "tied_output"

    @classmethod
    def from_row(cls, row: object) -> Weight | None:
        if not (isinstance(row, list) and len(row) == 6):
            return None
        layer, op, type_, ne, n_bytes, count = row
        if not (isinstance(layer, int) and op in OPS and isinstance(type_, str)
                and isinstance(ne, list) and len(ne) == 3 and all(isinstance(x, int) and x > 0 for x in ne)
                and isinstance(n_bytes, int) and n_bytes >= 0 and isinstance(count, int) and count > 0):
            return None
        return cls(layer, op, type_.upper(), (ne[0], ne[1], ne[2]), n_bytes, count)


def weights_table(tensors: list[tuple[str, str, tuple[int, ...], int]], n_layer: int,
                  tied_output: bool) -> list[Weight]:
    """The matrix weights of a tensor table [(name, type, dims, n_bytes)], grouped; a tied output
    (no output.weight) adds token_embd once more as the output layer's MUL_MAT weight."""
    groups: dict[tuple[int, str, str, tuple[int, int, int], int], int] = {}
    for name, type_name, dims, n_bytes in tensors:
        found = ("tied_output", n_layer) if name == "token_embd.weight" and tied_output else matmul_op(name)
        if found is None or not dims:
            continue
        op, layer = found
        shape = (*dims, 1, 1, 1)
        key = (n_layer if layer is None or layer > n_layer else layer, op, type_name.upper(),
               (shape[0], shape[1], shape[2]), n_bytes)
        groups[key] = groups.get(key, 0) + 1
    return [Weight(layer, op, t, ne, nb, count) for (layer, op, t, ne, nb), count in sorted(groups.items())]


def _pad(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def amx_bytes(w: Weight) -> int | None:
    """Bytes of one tensor in the AMX buffer, or None when AMX does not take it."""
    spec = AMX.get(w.type)
    if spec is None or w.op == "mul_mat_id" or w.ne[1] % 32:
        return None
    block, size, row_multiple = spec
    if w.ne[0] % row_multiple:
        return None
    if w.type == "F16":
        return _pad(w.n_bytes)
    return _pad(w.ne[1] * (w.ne[0] // block) * size)


def repack_bytes(w: Weight, features: frozenset[str]) -> int | None:
    """Bytes of one tensor in the CPU_REPACK buffer (its own size), or None when no kernel takes it."""
    dims = 3 if w.ne[2] > 1 else 2 if w.ne[1] > 1 else 1
    if dims != (3 if w.op == "mul_mat_id" else 2):
        return None
    for needs, multiple in REPACK.get(w.type, ()):
        if needs <= features and w.ne[1] % multiple == 0:
            return _pad(w.n_bytes)
    return None


@dataclass(frozen=True, slots=True)
class Build:
    """What the engine build's CPU backend offers, and where that was read."""

    features: frozenset[str]
    amx: bool
    repack: bool
    how: str


@dataclass(frozen=True, slots=True)
class Repack:
    """The repacked copy for one setting, per layer index 0..n_layer (n_layer = the output layer)."""

    copy: tuple[int, ...]  # bytes of the AMX + CPU_REPACK buffers (what the engine prints)
    replaced: tuple[int, ...]  # bytes of the originals the copy stands in for (the tied output's: none)
    buffers: tuple[tuple[str, int], ...] = ()  # (buffer name, bytes)
    tensors: int = 0
    how: str = ""

    @property
    def extra(self) -> tuple[int, ...]:
        """The RAM the copy adds per layer: the copy less the originals it stands in for."""
        return tuple(c - r for c, r in zip(self.copy, self.replaced, strict=True))


def build_from_facts(facts: Facts) -> Build | None:
    """The build's CPU features: the engine's system line, else this host's flags (a native build)."""
    features = facts.value("engine.cpu_features")
    flags = facts.value("host.cpu.flags")
    host_amx = None if not isinstance(flags, list) else ("amx_int8" in flags and "amx_tile" in flags)
    if isinstance(features, list) and features:
        feats = frozenset(str(f).upper() for f in features)
        repack = facts.value("engine.cpu_repack")
        # ggml_amx_init asks the kernel for the AMX tiles: a CPU without them gets no AMX buffer
        amx = "AMX_INT8" in feats and "AVX512_VNNI" in feats and host_amx is not False
        return Build(feats, amx, repack is not False, "the engine's system line")
    if isinstance(flags, list) and flags:
        feats = frozenset(_FLAG_FEATURES[f] for f in flags if f in _FLAG_FEATURES)
        return Build(feats, bool(host_amx) and "AVX512_VNNI" in feats, True,
                     "this CPU's flags (a llama.cpp build for this CPU assumed)")
    return None


def _gpu_blocks(facts: Facts, gpu: bool) -> bool:
    """A GPU backend whose pinned host buffer takes the CPU layers' weights before the extra types."""
    if not gpu:
        return False
    backends = facts.value("engine.backends")
    if not isinstance(backends, list) or not backends:
        return True  # a GPU build of unknown kind: CUDA is the common one
    return any(str(b).upper() in HOST_BUFFER_BACKENDS for b in backends)


def plan_for(weights: list[Weight], build: Build, n_layer: int) -> Repack:
    """Where each matrix weight goes (AMX first, then CPU_REPACK), and the bytes of the copy."""
    copy, replaced = [0] * (n_layer + 1), [0] * (n_layer + 1)
    buffers: dict[str, int] = {}
    tensors = 0
    for w in weights:
        size = amx_bytes(w) if build.amx else None
        buffer = "AMX"
        if size is None and build.repack:
            size, buffer = repack_bytes(w, build.features), "CPU_REPACK"
        if size is None:
            continue
        layer = min(max(w.layer, 0), n_layer)
        copy[layer] += size * w.count
        replaced[layer] += 0 if w.duplicate else w.n_bytes * w.count
        buffers[buffer] = buffers.get(buffer, 0) + size * w.count
        tensors += w.count
    names = " + ".join(f"{name} {size / MIB:.2f} MiB" for name, size in sorted(buffers.items()))
    how = (f"{tensors} matrix weights repacked ({names}; {build.how})" if tensors
           else f"no matrix weight of this model has a repacking kernel on this build ({build.how})")
    return Repack(tuple(copy), tuple(replaced), tuple(sorted(buffers.items())), tensors, how)


def none(n_layer: int, how: str) -> Repack:
    return Repack((0,) * (n_layer + 1), (0,) * (n_layer + 1), (), 0, how)


def plan_from_facts(facts: Facts, n_layer: int, gpu: bool) -> Repack | None:
    """The repacked copy the settings in `facts` make (zeros, with the reason, when none is made), or
    None when it cannot be told (no tensor table, nothing known about the build)."""
    if facts.value("config.use_extra_bufts") is False:
        return none(n_layer, "weight repacking off (use_extra_bufts = false, -nr)")
    if _gpu_blocks(facts, gpu):
        return none(n_layer, "the GPU backend's pinned host buffer takes the CPU layers' weights first")
    rows = facts.value("model.matmul_weights")
    build = build_from_facts(facts)
    if not isinstance(rows, list) or build is None or build.features & UNMODELLED:
        return None
    if not (build.amx or build.repack):
        return none(n_layer, f"no AMX and no REPACK in this build ({build.how})")
    weights = [w for w in (Weight.from_row(r) for r in rows) if w is not None]
    return plan_for(weights, build, n_layer)


def on_host(per_layer: tuple[int, ...], first_gpu_layer: int, output_on_gpu: bool) -> int:
    """The bytes of the layers left on the CPU (index n_layer is the output layer)."""
    if not per_layer:
        return 0
    n_layer = len(per_layer) - 1
    return sum(per_layer[:min(first_gpu_layer, n_layer)]) + (0 if output_on_gpu else per_layer[n_layer])


def extra_on_host(repack: Repack | None, first_gpu_layer: int, output_on_gpu: bool) -> int:
    """[repack hook] of memory.budget: the host bytes the copy adds for the layers on the CPU."""
    return on_host(repack.extra, first_gpu_layer, output_on_gpu) if repack is not None else 0


def set_facts(facts: Facts, repack: Repack | None, first_gpu_layer: int, output_on_gpu: bool) -> None:
    """derived.weights_repack_bytes / _extra_bytes / _buffers for the layers the plan leaves on the CPU."""
    if repack is None:
        return
    src = Source("estimate", "estimate.repack", text=repack.how)
    copy = on_host(repack.copy, first_gpu_layer, output_on_gpu)
    facts.set("derived.weights_repack_bytes", copy, src)
    replaced = on_host(repack.replaced, first_gpu_layer, output_on_gpu)
    facts.set("derived.weights_repack_replaced_bytes", replaced, src)
    facts.set("derived.weights_repack_extra_bytes", copy - replaced, Source(
        "estimate", "estimate.repack", text=f"the copy {copy / MIB:.2f} MiB - the originals it stands in for "
                                            f"{replaced / MIB:.2f} MiB (their file pages are droppable)"))
    facts.set("derived.weights_repack_buffers", " + ".join(name for name, _ in repack.buffers) if copy else "none",
              src)
