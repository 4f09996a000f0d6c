"""The GGUF keys that per-architecture memory needs beyond the plain attention shape.

Called from doctor/sources/probes/gguf_model.py's model_facts with the file's metadata. It writes the facts
doctor/derive/arch.py reads: the MLA latent (DeepSeek-V2/V3, Kimi: `kv_lora_rank`, and the
`key_length_mla` that says the file was converted for MLA), recurrent state dimensions (Mamba,
Mamba-2 and the hybrids built on it: `ssm.*`; LFM2: `shortconv.l_cache`) and the MoE expert
feed-forward width. Keys are llama.cpp's (src/llama-arch.cpp `LLM_KV_*`).
"""

from __future__ import annotations

from typing import Any

from doctor.sources.probes.base import Reporter

ARCH_KEYS: tuple[tuple[str, str], ...] = (
    # fact (its unit is the catalogue's), key under "<arch>."
    ("model.kv_lora_rank", "attention.kv_lora_rank"),
    ("model.head_dim_k_mla", "attention.key_length_mla"),
    ("model.head_dim_v_mla", "attention.value_length_mla"),
    ("model.ssm_d_conv", "ssm.conv_kernel"),
    ("model.ssm_d_inner", "ssm.inner_size"),
    ("model.ssm_d_state", "ssm.state_size"),
    ("model.ssm_n_group", "ssm.group_count"),
    ("model.shortconv_l_cache", "shortconv.l_cache"),
    ("model.n_ff_exp", "expert_feed_forward_length"),
    ("model.n_expert_shared", "expert_shared_count"),
    ("model.n_ff", "feed_forward_length"),
)


def arch_facts(md: dict[str, Any], arch: str, rep: Reporter) -> None:
    for fact, key in ARCH_KEYS:
        value = md.get(f"{arch}.{key}")
        if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
            value = max(value)  # per-layer widths: the widest layer
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 32:
            rep.set(fact, int(value), text=f"{arch}.{key}")
