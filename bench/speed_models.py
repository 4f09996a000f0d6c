"""The real-shape models bench/speed_table.py runs: exact tensor shapes and llama-quantize's type mixes,
random valid blocks (doctor/sources/live/embedded/kernel_gguf.py), plus the default SmolLM2 (real weights).

Shapes from the models' published configs: Llama-3.2-1B (16 layers, 2048 / 8192, 32 heads of 64, 8 KV
heads, 128256 tokens, tied), IBM Granite-3.0-1B-A400M (granitemoe: 24 layers, 1024, 16 heads of 64,
8 KV heads, 32 experts of 512, 8 used, 49155 tokens, tied, its four scales). Type mixes as
llama.cpp's llama-quantize makes them (src/llama-quant.cpp of the vendored source): the tied
embedding (the output) in Q6_K for the quantized types (Q8_0 stays Q8_0); Q4_K_M puts attn_v and
ffn_down in Q6_K on the layers `use_more_bits` picks (the first and last eighth, every third between),
the rest in Q4_K.
"""

from __future__ import annotations

from collections.abc import Callable

from doctor.sources.live.embedded.kernel_gguf import Shape

LLAMA_1B = Shape("llama", "Llama 3.2 1B", 16, 2048, 8192, 32, 8, 64, 128256, tied=True, ctx=131072,
                 rope_base=500000.0)
GRANITE_MOE = Shape("granitemoe", "Granite 3.0 1B A400M", 24, 1024, 512, 16, 8, 64, 49155, tied=True, ctx=4096,
                    n_expert=32, n_expert_used=8,
                    extra=(("attention.scale", 0.015625), ("embedding_scale", 12.0), ("residual_scale", 0.22),
                           ("logit_scale", 6.0)))
SMOLLM2 = "smollm2-135m-q4_1"  # the default model, real weights (Q4_1, its tied embedding Q8_0)

# name -> (shape, mix); the mix names llama-quantize's file type
MODELS: dict[str, tuple[Shape | None, str]] = {
    SMOLLM2: (None, "Q4_1"),
    "llama-1b-q4_0": (LLAMA_1B, "Q4_0"),
    "llama-1b-q4_1": (LLAMA_1B, "Q4_1"),
    "llama-1b-q4_k_m": (LLAMA_1B, "Q4_K_M"),
    "llama-1b-q6_k": (LLAMA_1B, "Q6_K"),
    "llama-1b-q8_0": (LLAMA_1B, "Q8_0"),
    "llama-1b-f16": (LLAMA_1B, "F16"),
    "granite-moe-1b-q4_k_m": (GRANITE_MOE, "Q4_K_M"),
}


def use_more_bits(i_layer: int, n_layer: int) -> bool:
    return i_layer < n_layer // 8 or i_layer >= 7 * n_layer // 8 or (i_layer - n_layer // 8) % 3 == 2


def mix(name: str, shape: Shape) -> Callable[[str, int | None], str]:
    """Each matrix's type in a `name` file, as llama-quantize types it."""
    base = "Q4_K" if name == "Q4_K_M" else name
    head = name if name in ("F16", "Q8_0") else "Q6_K"

    def type_of(tensor: str, layer: int | None) -> str:
        if tensor in ("output.weight", "token_embd.weight"):
            return head if tensor == "output.weight" or shape.tied else base
        if name == "Q4_K_M" and layer is not None and use_more_bits(layer, shape.n_layer) and (
                ".attn_v." in tensor or ".ffn_down" in tensor):
            return "Q6_K"
        return base

    return type_of
