"""Ollama's own words for the fixes of the crash causes its log may show (the crash table,
../_ggml/crashes.py), by the cause's key: where the cause's settings change in Ollama's spelling
(engine.py) does not say it all. Each was checked where the cause's `checked` says.
"""

from __future__ import annotations

FIXES: dict[str, str] = {
    "amx_repack":
        "Ollama 0.30-0.32.1: upgrade to 0.32.2 or later (its Linux build moved to GCC 13: 'GCC 11 builds broken "
        "AMX code which causes the Sapphire Rapids CPU backend to crash'), or set LLAMA_ARG_REPACK=false in the "
        "environment of `ollama serve` (it is passed on to the llama-server runner); 0.5.8-0.5.11: upgrade "
        "(0.5.12 dropped the AMX CPU backend)",
    "illegal_instruction":
        "no known setting: Ollama picks its CPU backend variant itself; report the CPU (lscpu) with the log at "
        "github.com/ollama/ollama/issues",
    "context_shift_unsupported":
        "PARAMETER num_ctx <larger>  (or OLLAMA_CONTEXT_LENGTH); newer Ollama releases disable the shift for "
        "such models",
    "unknown_architecture":
        "upgrade Ollama (the error 'this model is not supported by your version of Ollama' says the same)",
    "cuda_illegal_address":
        "OLLAMA_FLASH_ATTENTION=0 on the server, CUDA_VISIBLE_DEVICES=<one GPU>; upgrade Ollama",
    "cuda_arch_missing":
        "upgrade Ollama, or check that the GPU's compute capability is supported (docs/gpu.md); an AMD GPU whose "
        "gfx target ROCm does not ship (gfx1103 ...), on Linux: HSA_OVERRIDE_GFX_VERSION set to the nearest "
        "supported one on the server (e.g. 11.0.0 for an RDNA3 GPU, 10.3.0 for RDNA2), or a build for that target",
    "cuda_driver_old":
        "update the NVIDIA driver",
    "cublas_error":
        "upgrade Ollama; OLLAMA_FLASH_ATTENTION=0",
    "cuda_error":
        "upgrade Ollama; OLLAMA_DEBUG=1 to see the runner's lines",
    "assert_ubatch_embeddings":
        "PARAMETER num_batch <tokens>  (or truncate inputs to the model's context)",
    "assert_cuda_cpy_2gb":
        "upgrade Ollama (or a smaller num_ctx)",
    "assert_token_out_of_vocab":
        "re-pull the model (ollama pull <model>)",
    "assert_too_many_experts":
        "upgrade Ollama",
    "assert_host_alloc":
        "PARAMETER num_ctx <smaller>; check the host's free memory",
}
