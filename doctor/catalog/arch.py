"""Facts of the per-architecture memory model (issue 16): the GGUF keys probes/gguf_arch.py reads,
the recurrent state and the split explained (doctor/estimate_arch.py, doctor/estimate_split.py),
and the estimate set against what the engine allocated (doctor/estimate_vs_engine.py)."""

FACTS: list[tuple[str, str, str | None, str]] = [
    ("model.kv_lora_rank", "int", None, "MLA latent width (attention.kv_lora_rank)"),
    ("model.head_dim_k_mla", "int", None, "MLA per-head K width (attention.key_length_mla): the file is MLA-converted"),
    ("model.head_dim_v_mla", "int", None, "MLA per-head V width (attention.value_length_mla)"),
    ("model.ssm_d_conv", "int", None, "SSM convolution kernel (ssm.conv_kernel)"),
    ("model.ssm_d_inner", "int", None, "SSM inner size (ssm.inner_size)"),
    ("model.ssm_d_state", "int", None, "SSM state size (ssm.state_size)"),
    ("model.ssm_n_group", "int", None, "Mamba-2 group count (ssm.group_count)"),
    ("model.shortconv_l_cache", "int", None, "LFM2 short-convolution cache length (shortconv.l_cache)"),
    ("model.n_ff_exp", "int", None, "feed-forward width of one expert (expert_feed_forward_length)"),
    ("model.n_ff", "int", None, "feed-forward width (feed_forward_length; the widest layer)"),
    ("derived.state_bytes", "int", "bytes", "recurrent state (Mamba, LFM2) for the sequences in force"),
    ("derived.output_gpu_bytes", "int", "bytes", "the output layer's bytes on the GPU (0 when it stays on the CPU)"),
    ("derived.split_sum", "str", None, "weights + KV + compute vs the budget, on the device that fails first"),
    ("derived.split_device", "str", None, "gpu | host: the device split_sum is about"),
    ("derived.split_constraint", "str", None, "first term that no longer fits: weights | kv_cache | compute | none"),
    ("derived.split_short_bytes", "int", "bytes", "how much the sum exceeds the budget"),
]
