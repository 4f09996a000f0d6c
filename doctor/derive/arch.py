"""Per-architecture memory: what the plain attention formula in doctor/derive/memory.py does not cover.

Checked against llama.cpp's own figures for real model shapes (fixtures/record_arch.py: no_alloc
loads of sparse GGUFs; bench/arch_table.py prints the table):

- MLA (DeepSeek-V2/V3, files converted with `key_length_mla`): one KV "head" holding the latent of
  kv_lora_rank + rope dims (the file's key_length) and no V cache at all - llama.cpp reads V as a
  view of the latent (src/llama-kv-cache.cpp). Files without `key_length_mla` are the older
  conversion and take the plain per-head formula.
- Recurrent state (src/llama-memory-recurrent.cpp): each recurrent layer keeps, per sequence, an
  R tensor of n_embd_r() and an S tensor of n_embd_s() f32 values, whatever n_ctx is:
  Mamba:   r = (d_conv - 1) x d_inner,  s = d_state x d_inner
  Mamba-2: r = (d_conv - 1) x (d_inner + 2 x n_group x d_state),  s = d_state x d_inner
  LFM2:    r = (l_cache - 1) x n_embd,  s = 0  (short convolutions)
  with max(1, n_seq_max) cells. Hybrids (LFM2) hold KV on the layers with KV heads and state on
  the layers with none (head_count_kv = 0 in the per-layer array).
- Compute buffer terms the attention/logits model lacks: the MoE expert peak
  n_tok x 4 x (3 x n_expert_used x n_ff_exp + 4 x n_embd), plus the f16 KQ mask under flash
  attention (n_kv x n_tok x 2), which sets the buffer when experts are wide (Mixtral); and the
  logits peak's activation share, 2 x n_embd per token with an f16 K cache and 3 x n_embd with a
  quantised one or none (fitted on the 66 recorded settings).
- Where ggml's graph allocator (ggml-alloc.c: best fit, parents reused in place, inputs allocated
  first) puts the tensors under a peak, read from its allocation trace on the recorded settings:
  shared experts (DeepSeek-V2/V3) keep ffn_norm allocated while the routed experts run, so the sum
  of the routed outputs - the final hidden state, normed in place - is placed above ffn_moe_down:
  the logits sit over n_tok x 4 x ((4 + n_expert_used) x n_embd + 2 x n_expert + n_expert_used)
  bytes (embeddings, ffn_norm, ffn_inp, the router's logits/argsort/weights, the expert rows, the
  sum). Absorbed MLA without flash attention holds the query at n_head x (kv_lora_rank + rope)
  per token and a contiguous copy of V from the latent (kv_lora_rank x n_kv, f16) beside KQ.
  Not modelled (the allocator's layout, not a tensor, decides them; see bench/results/arch_table.md):
  a hole left below ffn_inp that takes the expert sum instead (DeepSeek, 4 streams with flash
  attention: estimate +13%), a mask still allocated under the last layer (Gemma 3, q8_0 cache at
  32k: -6.6%), the final state one slot higher (LFM2 at 4096 with flash attention: -5.6%).

Architectures not listed in STATE here and in memory.KV_UNMODELLED stay "not modelled": the
estimator says so rather than guessing.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.core.facts import Facts

MAX_LAYERS = 512  # llama.cpp's LLAMA_MAX_LAYERS (src/llama-hparams.h); a log line claiming more is not a model

# recurrent architectures whose state this module sizes: arch -> how n_embd_r / n_embd_s are made
STATE: dict[str, str] = {"mamba": "mamba", "mamba2": "mamba2", "lfm2": "shortconv"}
MLA = ("deepseek2", "deepseek3", "kimi", "glm4moe_mla")
STATE_BYTES = 4  # type_r / type_s default to f32 (llama_context_params has no knob for them)


def _int(facts: Facts, name: str) -> int:
    value = facts.value(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def modelled(facts: Facts) -> bool:
    """This module sizes the model's cache (so memory.KV_UNMODELLED does not apply): an MLA
    architecture, or a recurrent one whose state dimensions the file gives."""
    arch = str(facts.value("model.arch", "")).lower()
    return arch in MLA or (arch in STATE and state_per_layer(facts) is not None)


def is_mla(facts: Facts) -> bool:
    arch = str(facts.value("model.arch", "")).lower()
    return arch in MLA and _int(facts, "model.kv_lora_rank") > 0 and _int(facts, "model.head_dim_k_mla") > 0


def mla_head_dim_v(facts: Facts, head_dim_v: int) -> int:
    """V elements per KV head: 0 under MLA (V is a view of the cached latent)."""
    return 0 if is_mla(facts) else head_dim_v


def state_per_layer(facts: Facts) -> list[int] | None:
    """Recurrent state bytes of each layer for ONE sequence (0 on attention layers); None if not recurrent."""
    arch = str(facts.value("model.arch", "")).lower()
    kind = STATE.get(arch)
    n_layer = _int(facts, "model.n_layer")
    if kind is None or not n_layer or not 0 < n_layer <= MAX_LAYERS:
        return None
    heads = facts.value("model.n_head_kv_per_layer")
    recurrent = ([h == 0 for h in heads] if isinstance(heads, list) and len(heads) == n_layer
                 else [_int(facts, "model.n_head_kv") == 0] * n_layer)
    if kind == "shortconv":
        l_cache, n_embd = _int(facts, "model.shortconv_l_cache"), _int(facts, "model.n_embd")
        if not (l_cache and n_embd):
            return None
        r, s = (l_cache - 1) * n_embd, 0
    else:
        d_conv, d_inner, d_state = (_int(facts, f"model.ssm_{k}") for k in ("d_conv", "d_inner", "d_state"))
        if not (d_conv and d_inner and d_state):
            return None
        groups = _int(facts, "model.ssm_n_group") if kind == "mamba2" else 0
        r, s = (d_conv - 1) * (d_inner + 2 * groups * d_state), d_state * d_inner
    return [(r + s) * STATE_BYTES if rec else 0 for rec in recurrent]


def state_bytes(facts: Facts, n_seq: int) -> int | None:
    per_layer = state_per_layer(facts)
    return None if per_layer is None else sum(per_layer) * max(1, n_seq)


@dataclass(frozen=True, slots=True)
class ComputeExtra:
    """What the compute model needs beyond memory.ComputeShape."""

    moe_ff: int = 0  # n_expert_used x n_ff_exp
    has_kv: bool = True
    # [shared experts] the routed experts' output stays under the final hidden state
    n_expert: int = 0
    n_expert_used: int = 0
    shared_expert: bool = False
    # [MLA] the absorbed query (n_head x (kv_lora_rank + rope)) and the V view of the cached latent
    mla_q: int = 0  # n_head x key_length (elements per token)
    mla_rank: int = 0  # kv_lora_rank


NO_EXTRA = ComputeExtra()


def compute_extra(facts: Facts) -> ComputeExtra:
    used, ff = _int(facts, "model.n_expert_used"), _int(facts, "model.n_ff_exp")
    if used and not ff:
        ff = _int(facts, "model.n_ff")  # Mixtral-style files give the expert width as feed_forward_length
    arch = str(facts.value("model.arch", "")).lower()
    has_kv = not (arch in STATE and _int(facts, "model.n_head_kv") == 0)
    shared = bool(used) and _int(facts, "model.n_expert_shared") > 0
    mla_q = mla_rank = 0
    if is_mla(facts):
        mla_q = _int(facts, "model.n_head") * _int(facts, "model.head_dim_k")
        mla_rank = _int(facts, "model.kv_lora_rank")
    return ComputeExtra(used * ff if used else 0, has_kv, _int(facts, "model.n_expert"), used, shared, mla_q, mla_rank)


def adjust_peaks(logits: int, attention: int, *, n_tok: int, n_kv: int, n_embd: int, flash_attn: bool,
                 type_k: str, extra: ComputeExtra, n_vocab: int = 0, n_embd_kv: int = 0) -> tuple[int, int]:
    """Refine memory.compute_peaks' (logits, attention) for the K type and MoE experts."""
    if extra.has_kv and type_k == "f16":
        logits -= n_tok * n_embd * 4  # one activation row fewer than with a quantised (or no) cache
    if extra.moe_ff:
        moe = n_tok * 4 * (3 * extra.moe_ff + 4 * n_embd) + (n_kv * n_tok * 2 if flash_attn else 0)
        attention = max(attention, moe)
    if extra.shared_expert:
        # ffn_norm stays allocated for the shared expert while the routed experts run, so the sum of
        # the routed outputs (the final hidden state, normed in place) is placed above ffn_moe_down:
        # input embeddings, ffn_norm, ffn_inp, the router's logits/argsort/weights, n_expert_used
        # rows of expert output, then the sum, and the f32 logits on top.
        below = n_tok * 4 * ((4 + extra.n_expert_used) * n_embd + 2 * extra.n_expert + extra.n_expert_used)
        logits = max(logits, n_tok * n_vocab * 4 + below)
    if extra.mla_q and attention:
        # absorbed MLA without flash attention: the query is n_head x (kv_lora_rank + rope) wide, not
        # 2 x n_embd_k_gqa, and V is made contiguous from the cached latent (kv_lora_rank x n_kv, f16)
        attention += n_tok * 4 * extra.mla_q + n_kv * extra.mla_rank * 2 - n_tok * 4 * 2 * n_embd_kv
    return logits, attention
