"""Small real-shape GGUF files with random weights, written with the `gguf` package: what the kernel
probe (kernels.py) runs through the engine, and what bench/speed_table.py builds its real-shape
models with.

A file holds llama.cpp's tensor names and shapes (ne0 first) for a llama-like architecture (llama,
qwen2, olmoe, granitemoe: attention, a dense or mixture-of-experts feed-forward, norms) and valid
blocks of each weight type: random quants with a small positive scale in each of the type's f16
fields (ggml-common.h's block layouts), so no NaN or infinity reaches a kernel; F16/BF16 matrices
N(0, 0.02); norms 1. One tile of blocks is written over and over (1 MiB), which is what makes a
file of hundreds of MiB take a fraction of a second.

Machine access (writes files). Strings: none shown to users.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ALIGN = 32
TILE_BYTES = 1 << 20

# byte offsets of each type's f16 scale fields (ggml-common.h): set to small positive values
F16_FIELDS: dict[str, tuple[int, ...]] = {
    "Q4_0": (0,), "Q5_0": (0,), "Q8_0": (0,), "Q4_1": (0, 2), "Q5_1": (0, 2), "Q2_K": (80, 82), "Q3_K": (108,),
    "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,), "IQ2_XXS": (0,), "IQ2_XS": (0,), "IQ2_S": (0,),
    "IQ3_XXS": (0,), "IQ3_S": (0,), "IQ1_S": (0,), "IQ4_NL": (0,), "IQ4_XS": (0,), "TQ1_0": (52,),
    "TQ2_0": (64,),
}
E8M0_FIELDS = {"MXFP4": 0}  # one E8M0 exponent byte
FLOAT_TYPES = ("F32", "F16", "BF16")
# what a probe can build valid blocks of (IQ1_M and NVFP4 keep their scales in packed bits: not here)
BUILDABLE = frozenset(F16_FIELDS) | frozenset(E8M0_FIELDS) | frozenset(FLOAT_TYPES)
# general.file_type (llama.cpp's llama_ftype): a type's own file, or llama-quantize's mix of that name
FILE_TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9, "Q2_K": 10, "Q3_K": 12,
              "Q4_K": 15, "Q4_K_M": 15, "Q5_K": 17, "Q5_K_M": 17, "Q6_K": 18, "IQ4_NL": 25, "BF16": 32, "MXFP4": 38}

Tensor = tuple[str, tuple[int, ...], str]  # name, ne (ne0 first), ggml type name


@dataclass(frozen=True, slots=True)
class Shape:
    """A model's hyper-parameters as llama.cpp reads them (a real model's, or a probe's)."""

    arch: str
    name: str
    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_vocab: int
    tied: bool = True
    ctx: int = 4096
    rope_base: float = 10000.0
    qkv_bias: bool = False
    qk_norm_full: bool = False  # olmoe: q/k norms over the whole projection
    n_expert: int = 0
    n_expert_used: int = 0
    extra: tuple[tuple[str, float], ...] = field(default=())  # further float keys, without the arch prefix


def tensors(shape: Shape, type_of: Callable[[str, int | None], str]) -> list[Tensor]:
    """The tensor table; `type_of(name, layer)` gives each matrix's type (layer None: embedding, head)."""
    e, f, nh, nkv, hd, v = shape.n_embd, shape.n_ff, shape.n_head, shape.n_head_kv, shape.head_dim, shape.n_vocab
    out: list[Tensor] = [("token_embd.weight", (e, v), type_of("token_embd.weight", None)),
                         ("output_norm.weight", (e,), "F32")]
    if not shape.tied:
        out.append(("output.weight", (e, v), type_of("output.weight", None)))
    for i in range(shape.n_layer):
        p = f"blk.{i}"

        def mat(name: str, ne: tuple[int, ...], layer: int = i) -> Tensor:
            return name, ne, type_of(name, layer)

        out += [(f"{p}.attn_norm.weight", (e,), "F32"), mat(f"{p}.attn_q.weight", (e, nh * hd)),
                mat(f"{p}.attn_k.weight", (e, nkv * hd)), mat(f"{p}.attn_v.weight", (e, nkv * hd)),
                mat(f"{p}.attn_output.weight", (nh * hd, e)), (f"{p}.ffn_norm.weight", (e,), "F32")]
        if shape.qkv_bias:
            out += [(f"{p}.attn_q.bias", (nh * hd,), "F32"), (f"{p}.attn_k.bias", (nkv * hd,), "F32"),
                    (f"{p}.attn_v.bias", (nkv * hd,), "F32")]
        if shape.qk_norm_full:
            out += [(f"{p}.attn_q_norm.weight", (nh * hd,), "F32"), (f"{p}.attn_k_norm.weight", (nkv * hd,), "F32")]
        if shape.n_expert:
            n = shape.n_expert
            out += [(f"{p}.ffn_gate_inp.weight", (e, n), "F32"), mat(f"{p}.ffn_gate_exps.weight", (e, f, n)),
                    mat(f"{p}.ffn_down_exps.weight", (f, e, n)), mat(f"{p}.ffn_up_exps.weight", (e, f, n))]
        else:
            out += [mat(f"{p}.ffn_gate.weight", (e, f)), mat(f"{p}.ffn_up.weight", (e, f)),
                    mat(f"{p}.ffn_down.weight", (f, e))]
    return out


def uniform(type_name: str) -> Callable[[str, int | None], str]:
    """Every matrix of one type."""
    return lambda name, layer: type_name


def tile(type_name: str, nbytes: int = TILE_BYTES) -> bytes:
    """A run of valid random blocks of the type (repeated over each tensor)."""
    import numpy as np
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    rng = np.random.default_rng(7)
    _, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
    n_blocks = nbytes // size
    if type_name == "F32":
        return np.ones(n_blocks, dtype=np.float32).tobytes()
    if type_name == "F16":
        return (rng.standard_normal(n_blocks) * 0.02).astype(np.float16).tobytes()
    if type_name == "BF16":
        wide = (rng.standard_normal(n_blocks) * 0.02).astype(np.float32)
        return (wide.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    if type_name not in BUILDABLE:
        raise ValueError(f"no valid random blocks for {type_name}")
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for offset in F16_FIELDS.get(type_name, ()):
        scale = rng.uniform(0.002, 0.01, n_blocks).astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
        raw[:, offset:offset + 2] = scale
    if type_name in E8M0_FIELDS:
        raw[:, E8M0_FIELDS[type_name]] = rng.integers(118, 122, n_blocks, dtype=np.uint8)  # 2^-9 .. 2^-5
    return raw.tobytes()


def write(shape: Shape, table: list[Tensor], path: Path, file_type: str | None = None) -> Path:
    """Write the GGUF (header, metadata, tensor infos, then the tiled data)."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter
    from gguf.quants import quant_shape_to_byte_shape

    arch = shape.arch
    writer = GGUFWriter(str(path), arch)
    writer.add_name(shape.name)
    if file_type in FILE_TYPES:
        writer.add_file_type(FILE_TYPES[file_type])
    writer.add_string("tokenizer.ggml.model", "none")
    kv: dict[str, Any] = {"vocab_size": shape.n_vocab, "embedding_length": shape.n_embd,
                          "block_count": shape.n_layer, "context_length": shape.ctx,
                          "feed_forward_length": shape.n_ff, "attention.head_count": shape.n_head,
                          "attention.head_count_kv": shape.n_head_kv, "rope.dimension_count": shape.head_dim,
                          "attention.key_length": shape.head_dim, "attention.value_length": shape.head_dim}
    if shape.n_expert:
        kv.update({"expert_count": shape.n_expert, "expert_used_count": shape.n_expert_used})
    for key, value in kv.items():
        writer.add_uint32(f"{arch}.{key}", value)
    writer.add_float32(f"{arch}.rope.freq_base", shape.rope_base)
    writer.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)
    for key, number in shape.extra:
        writer.add_float32(f"{arch}.{key}", number)
    sizes = []
    for name, ne, type_name in table:
        qtype = GGMLQuantizationType[type_name]
        nbytes = math.prod(quant_shape_to_byte_shape(tuple(reversed(ne)), qtype))  # gguf's own size rule
        sizes.append(nbytes)
        writer.add_tensor_info(name, tuple(reversed(ne)), np.dtype(np.float32), nbytes, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    tiles = {t: tile(t) for t in {t for _, _, t in table}}
    with open(path, "r+b") as handle:
        handle.seek(0, os.SEEK_END)
        handle.write(b"\0" * (-handle.tell() % ALIGN))
        for (_, _, type_name), nbytes in zip(table, sizes, strict=True):
            chunk_src, left = tiles[type_name], nbytes
            while left > 0:
                chunk = chunk_src[: min(left, len(chunk_src))]
                handle.write(chunk)
                left -= len(chunk)
            handle.write(b"\0" * (-nbytes % ALIGN))
    return path


def weights(table: list[Tensor], skip: tuple[str, ...] = ("token_embd.weight",)) -> dict[str, int]:
    """Matrix weights by type (norms and biases left out, the embedding gather too)."""
    out: dict[str, int] = {}
    for name, ne, type_name in table:
        if len(ne) < 2 or name in skip:
            continue
        out[type_name] = out.get(type_name, 0) + math.prod(ne)
    return out
