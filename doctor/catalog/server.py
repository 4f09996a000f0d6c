"""Fact names read from serving engines (vLLM, TGI, Ollama) about KV pools and requests."""

FACTS: list[tuple[str, str, str | None, str]] = [
    ("server.kv_tokens", "int", "tokens", "tokens the KV pool holds (vLLM GPU KV cache size, blocks x block size)"),
    ("server.kv_blocks_gpu", "int", "blocks", "vLLM GPU KV blocks"),
    ("server.kv_blocks_cpu", "int", "blocks", "vLLM CPU (swap) KV blocks"),
    ("server.max_concurrency", "float", None, "vLLM max concurrency at max length"),
    ("server.kv_available_bytes", "int", "bytes", "memory left for the KV cache (may be negative)"),
    ("server.kv_usage_max", "float", "%", "highest KV cache usage seen in periodic stats"),
    ("server.preemptions", "int", "count", "requests preempted"),
    ("server.running_max", "int", "requests", "most requests running at once"),
    ("server.waiting_max", "int", "requests", "most requests waiting at once"),
    ("server.weights_bytes", "int", "bytes", "model loading size the server reported"),
    ("server.request_tokens_max", "int", "tokens", "largest request (prompt + max tokens) seen"),
    ("server.limit_tokens", "int", "tokens", "the limit a rejected request hit"),
    ("server.limit_name", "str", None, "which limit a rejected request hit (max_model_len, max_num_batched_tokens, ...)"),
    ("server.ollama.num_ctx", "int", "tokens", "Ollama context in force for the runner"),
    ("server.ollama.layers_model", "int", "layers", "Ollama: layers in the model"),
    ("server.ollama.layers_offload", "int", "layers", "Ollama: layers offloaded"),
    ("server.ollama.memory_required_full", "int", "bytes", "Ollama: memory for full offload"),
    ("server.ollama.memory_available", "int", "bytes", "Ollama: GPU memory available"),
    ("server.ollama.runner_start_s", "float", "s", "Ollama: runner start time"),
    ("server.ollama.gpu_gated_avx", "bool", None, "Ollama skipped the GPU because the CPU lacks AVX"),
]
