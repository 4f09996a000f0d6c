"""The vision projector (an mmproj file) in the memory estimate: its weights and its encoder's compute buffer.

llama.cpp's mtmd/clip (tools/mtmd/clip.cpp) loads the projector in its own context: all its tensors
in one weight buffer (printed as `model size`) and, at warmup, a compute buffer reserved for one
image at the encoder's full resolution (`reserve_compute_meta: ... compute buffer size`). Both sit on
the GPU when there is one (mtmd's use_gpu; llama-server --no-mmproj-offload keeps them on the CPU),
beside the text model's buffers. Neither depends on n_ctx; the image does take context: n_patches /
n_merge^2 tokens per image (clip_n_output_tokens).

Weights: the sum of the file's tensor sizes (doctor/sources/probes/gguf_mmproj.py), exact. The compute buffer of
the ViT encoders with learned position embeddings and one fixed resolution (SigLIP/CLIP: Gemma 3's
projector) follows the graph clip_graph::build_vit builds for n_pos = (image_size / patch_size)^2
patches, read from ggml's allocation trace of llama.cpp's own warmup (bench/arch_table.py checks
the figures against that warmup, recorded in fixtures/):
  feed-forward peak:  ffn_up's f32 output (n_ff x n_pos) over three n_embd x n_pos rows (the
                      residual, the normed input, a freed row below them)
  attention peak:     without flash attention, KQ (n_head x n_pos x n_pos, f32) over six n_embd rows
                      (Q, K, V made contiguous, the residual, the normed input, a freed row)
With flash attention (mtmd's default where the backend has it) the feed-forward peak is the buffer.
Projectors with dynamic resolution or other encoders are charged their weights; their compute
buffer is reported as not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.core.facts import Facts, Source

# projector types whose encoder is the fixed-resolution ViT above (tools/mtmd/clip.cpp), with the
# default n_merge clip.cpp applies when the file has no projector.scale_factor
FIXED_VIT: dict[str, int] = {"gemma3": 4}


@dataclass(frozen=True, slots=True)
class Projector:
    weights: int
    compute: int | None  # None: this encoder's graph is not modelled
    image_tokens: int | None
    how: str


def _int(facts: Facts, name: str) -> int:
    value = facts.value(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def vit_compute(n_pos: int, n_embd: int, n_ff: int, n_head: int, flash_attn: bool) -> int:
    ffn = n_pos * 4 * (n_ff + 3 * n_embd)
    attention = 0 if flash_attn else n_head * n_pos * n_pos * 4 + 6 * n_pos * n_embd * 4
    return max(ffn, attention)


def projector(facts: Facts, flash_attn: bool) -> Projector | None:
    """The projector named by `mmproj.*` facts, or None when no projector was given."""
    weights = _int(facts, "mmproj.weights_bytes")
    if not weights:
        return None
    kind = str(facts.value("mmproj.projector", "")).lower()
    n_embd, n_ff, n_head = (_int(facts, f"mmproj.{k}") for k in ("n_embd", "n_ff", "n_head"))
    image, patch = _int(facts, "mmproj.image_size"), _int(facts, "mmproj.patch_size")
    if kind not in FIXED_VIT or not (n_embd and n_ff and n_head and image and patch):
        return Projector(weights, None, None, f"projector type {kind or '?'}: encoder graph not modelled")
    n_pos = (image // patch) ** 2
    merge = _int(facts, "mmproj.n_merge") or FIXED_VIT[kind]
    compute = vit_compute(n_pos, n_embd, n_ff, n_head, flash_attn)
    how = (f"{kind} ViT: {n_pos} patches of {image} px / {patch} px, "
           f"{'feed-forward' if flash_attn else 'KQ'} peak, flash attention {'on' if flash_attn else 'off'}")
    return Projector(weights, compute, n_pos // (merge * merge), how)


def derive(facts: Facts, flash_attn: bool) -> Projector | None:
    """Write derived.mmproj_* facts; return the projector for the budget."""
    proj = projector(facts, flash_attn)
    if proj is None:
        return None
    src = Source("estimate", "estimate.mmproj", text=proj.how)
    weights_src = Source("estimate", "estimate.mmproj", text="sum of the projector's tensor sizes")
    facts.set("derived.mmproj_weights_bytes", proj.weights, weights_src)
    if proj.compute is None:
        facts.unknown("derived.mmproj_compute_bytes", proj.how, src)
        return proj
    facts.set("derived.mmproj_compute_bytes", proj.compute, src)
    facts.set("derived.mmproj_bytes", proj.weights + proj.compute, src)
    if proj.image_tokens:
        facts.set("derived.image_tokens", proj.image_tokens, src)
    return proj
