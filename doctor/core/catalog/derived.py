"""Fact names computed by doctor/derive/ from other facts (memory math)."""

FACTS: list[tuple[str, str, str | None, str]] = [
    ("derived.kv_bytes_per_token", "int", "bytes", "KV bytes per token of context (all layers, K+V)"),
    ("derived.kv_bytes", "int", "bytes", "KV cache bytes for the settings in force"),
    ("derived.kv_cells", "int", "tokens", "KV cells llama.cpp allocates (n_ctx padded)"),
    ("derived.kv_bytes_f16", "int", "bytes", "the same KV cache at f16"),
    ("derived.kv_bytes_q8_0", "int", "bytes", "the same KV cache at q8_0"),
    ("derived.kv_bytes_at_need", "int", "bytes", "KV cache sized to the tokens actually needed"),
    ("derived.kv_type_factor", "float", None, "KV bytes / KV bytes at f16"),
    ("derived.weights_bytes", "int", "bytes", "weight bytes of the model"),
    ("derived.weights_gpu_bytes", "int", "bytes", "weight bytes on the GPU for n_gpu_layers"),
    ("derived.weights_host_bytes", "int", "bytes", "weight bytes left in host memory (with the repacked copy)"),
    ("derived.weights_repack_bytes", "int", "bytes", "the repacked copy of the CPU layers' matrix weights llama.cpp "
     "makes for its AMX / CPU_REPACK kernels (doctor/derive/repack.py); 0 when none is made"),
    ("derived.weights_repack_replaced_bytes", "int", "bytes", "the original weights that copy stands in for (with "
     "mmap still mapped, but clean pages the kernel drops under pressure)"),
    ("derived.weights_repack_extra_bytes", "int", "bytes", "RAM the copy adds to the budget: the copy less the "
     "originals it stands in for"),
    ("derived.weights_repack_buffers", "str", None, "the extra buffer types that hold it: AMX, CPU_REPACK, or none"),
    ("derived.gpu_layers", "int", "layers", "layers that will run on the GPU"),
    ("derived.compute_bytes", "int", "bytes", "estimated compute buffer"),
    ("derived.compute_gpu_bytes", "int", "bytes", "estimated compute buffer on the GPU"),
    ("derived.compute_host_bytes", "int", "bytes", "estimated compute buffer in host memory"),
    ("derived.kv_gpu_bytes", "int", "bytes", "KV cache of the layers on the GPU"),
    ("derived.kv_host_bytes", "int", "bytes", "KV cache kept in host memory"),
    ("derived.total_layers", "int", "layers", "layers llama.cpp can offload: n_layer + 1 (the output layer)"),
    ("derived.gpu_need_bytes", "int", "bytes", "weights + KV + compute on the GPU"),
    ("derived.host_need_bytes", "int", "bytes", "weights + KV + compute + output + the CPU work buffer in RAM"),
    ("derived.vram_budget", "int", "bytes", "free VRAM minus the CUDA context per GPU (measured)"),
    ("derived.ram_budget", "int", "bytes", "available RAM minus the engine process's own private memory and the "
     "page cache it needs (measured)"),
    ("derived.gpu_overhead_bytes", "int", "bytes", "VRAM the runtime takes beyond the buffers (CUDA context per GPU)"),
    ("derived.cpu_work_bytes", "int", "bytes",
     "the CPU backend's scratch buffer for the largest product (not printed by llama.cpp; grows with the "
     "context for an f16 V cache without flash attention)"),
    ("derived.host_overhead_bytes", "int", "bytes", "RAM the engine's process takes beyond the buffers (measured)"),
    ("derived.weights_mapped_bytes", "int", "bytes", "weights in host memory that stay in the memory-mapped file "
     "(page cache the kernel may evict; 0 with mmap off)"),
    ("derived.host_floor_bytes", "int", "bytes", "the least memory the process runs in: everything but the mapped "
     "weights, + the page cache the kernel keeps for them (measured); below it the process is killed"),
    ("derived.cache_ram_fit_mib", "int", "MiB", "the largest llama-server --cache-ram that the RAM left after "
     "the plan holds"),
    ("derived.weights_paged_bytes", "int", "bytes", "mapped weights that do not fit beside the rest: evicted and "
     "read from disk again for every token"),
    ("derived.host_peak_bytes", "int", "bytes", "host memory the engine's process will hold: buffers + overhead "
     "(+ the file pages of repacked weights, resident after load but droppable)"),
    ("derived.gpu_room_bytes", "int", "bytes", "VRAM left after the plan (0 when it does not fit)"),
    ("derived.host_room_bytes", "int", "bytes", "RAM left after the plan (0 when it does not fit)"),
    ("derived.gpu_short_bytes", "int", "bytes", "how much more VRAM the plan needs than the budget (0 = fits)"),
    ("derived.host_short_bytes", "int", "bytes", "how much more RAM the plan needs than the budget (0 = fits)"),
    ("derived.oom_phase", "str", None, "where the plan runs out of memory first: weights, kv_cache, compute, none"),
    ("derived.input_thin", "str", None, "how little a pasted input held: a launch command, llama.cpp's system-info "
     "line, or one line (doctor/derive/thin.py); findings from it carry less confidence"),
    ("derived.input_missing", "str", None, "what would confirm a finding read from such an input"),
    ("derived.oom_device", "str", None, "the device that runs out first: gpu, host, none"),
    ("derived.oom_need_bytes", "int", "bytes", "what the plan needs on the device that runs out"),
    ("derived.oom_budget_bytes", "int", "bytes", "what that device has for it (free minus the margin)"),
    ("derived.fits_vram", "bool", None, "weights + KV + compute fit in free VRAM"),
    ("derived.fits_ram", "bool", None, "what stays on the host fits in available RAM: it runs at full speed"),
    ("derived.ram_runs", "bool", None, "the process runs in available RAM at all (the mapped weights may be "
     "paged from disk): false means the kernel kills it"),
    ("derived.weights_fit_vram", "bool", None, "the GPU share of the weights fits in free VRAM"),
    ("derived.kv_fits_vram", "bool", None, "weights + KV fit in free VRAM"),
    ("derived.max_gpu_layers", "int", "layers", "largest n_gpu_layers that fits in VRAM"),
    ("derived.max_ctx_fit", "int", "tokens", "largest context that fits next to the weights"),
    ("derived.ctx_fit_recommended", "int", "tokens", "context to ask for: the need, or the largest that fits"),
    ("derived.gpu_layers_fit_recommended", "int", "layers", "n_gpu_layers to ask for: all, or the largest that fits"),
    ("derived.tokens_needed", "int", "tokens", "prompt + tokens to generate"),
    ("derived.plan_tokens_needed", "int", "tokens", "planned prompt + planned reply (config.prompt_tokens + "
     "config.max_new_tokens)"),
    ("derived.tokens_over", "int", "tokens", "tokens needed beyond the context"),
    ("derived.ctx_recommended", "int", "tokens", "the need + 10%, rounded up to 256, capped at n_ctx_train"),
    ("derived.ctx_reduced", "int", "tokens",
     "a smaller context to try after a KV OOM: the largest that fits, else half"),
    ("derived.max_input_fit", "int", "tokens",
     "the longest prompt a request as long as the KV pool holds may have: one less (TGI: --max-input-tokens "
     "below --max-total-tokens)"),
    ("derived.ctx_reduced_seq", "int", "tokens",
     "that smaller context's share per slot: what an engine whose context counts per request is asked for"),
    ("derived.ctx_slot_recommended", "int", "tokens", "context to ask for so each server slot holds the need"),
    ("derived.ctx_headroom", "float", None, "n_ctx / tokens needed"),
    ("derived.safe_max_new_tokens", "int", "tokens", "tokens that can be generated after the prompt"),
    ("derived.decode_floor_ms", "float", "ms", "bytes read per token / memory bandwidth: no step is faster"),
    ("derived.decode_bytes_per_token", "int", "bytes", "bytes read per decode step"),
    ("derived.decode_gpu_bytes_per_token", "int", "bytes", "of those, bytes read from GPU memory"),
    ("derived.decode_host_bytes_per_token", "int", "bytes", "of those, bytes read from host RAM"),
    ("derived.decode_floor_full_gpu_ms", "float", "ms", "the floor if every layer were on the GPU"),
    ("derived.offload_slowdown", "float", None, "decode floor of the plan / floor with every layer on the GPU"),
    ("derived.gpu_bandwidth_gbs", "float", "GB/s", "GPU memory bandwidth used for the floor (measured, else spec)"),
    ("derived.host_bandwidth_gbs", "float", "GB/s", "host RAM bandwidth used for the floor (measured)"),
    ("derived.threads_recommended", "int", "threads", "threads to use: physical cores within quota; a hybrid "
     "CPU's performance cores where its P/E split is known"),
    ("derived.threads_usable", "int", "cores", "physical cores within the CPU quota and affinity (more threads "
     "than these oversubscribe the CPU)"),
    ("derived.threads_over", "float", None, "threads / usable cores"),
    ("derived.load_expected_ms", "float", "ms", "model bytes / storage read speed"),
    ("derived.n_ctx_seq", "int", "tokens", "context each sequence / slot gets"),
]
