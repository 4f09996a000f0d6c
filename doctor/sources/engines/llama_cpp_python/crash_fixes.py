"""llama-cpp-python's own words for the fixes of the crash causes its log may show (the crash table,
../_ggml/crashes.py), by the cause's key: where the cause's settings change in llama-cpp-python's spelling
(engine.py) does not say it all. Each was checked where the cause's `checked` says.
"""

from __future__ import annotations

REBUILD_NATIVE = 'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install --force-reinstall --no-cache-dir llama-cpp-python'

FIXES: dict[str, str] = {
    "amx_repack":
        "turn the extra buffer types off (what llama.cpp's -nr / --no-repack does); 0.3.36 has no Llama() "
        "argument for it: before creating Llama, run  import llama_cpp.llama_cpp as C; _p = "
        "C.llama_model_default_params; C.llama_model_default_params = lambda: (q := _p(), setattr(q, "
        "'use_extra_bufts', False), q)[2]  — or rebuild without AMX: " + REBUILD_NATIVE,
    "illegal_instruction":
        REBUILD_NATIVE + "   (a wheel built on another machine with GGML_NATIVE)",
    "context_shift_unsupported":
        "Llama(..., n_ctx=<larger>)  (llama-cpp-python does not shift the context itself)",
    "unknown_architecture":
        "pip install --upgrade --force-reinstall --no-cache-dir llama-cpp-python   (a release whose vendored "
        "llama.cpp knows the architecture; or build from source against a newer llama.cpp)",
    "cuda_illegal_address":
        "Llama(..., flash_attn=False); CUDA_LAUNCH_BLOCKING=1 to find the kernel; pip install --upgrade "
        "llama-cpp-python",
    "cuda_arch_missing":
        'CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=<e.g. 86>" pip install --force-reinstall '
        "--no-cache-dir llama-cpp-python",
    "cuda_driver_old":
        "update the NVIDIA driver, or reinstall llama-cpp-python built with an older CUDA toolkit",
    "cublas_error":
        "pip install --upgrade llama-cpp-python; CUDA_LAUNCH_BLOCKING=1 to find the call",
    "cuda_error":
        "pip install --upgrade llama-cpp-python; CUDA_LAUNCH_BLOCKING=1",
    "assert_ubatch_embeddings":
        "Llama(..., embedding=True, n_batch=<tokens>, n_ubatch=<tokens>)",
    "assert_cuda_cpy_2gb":
        "pip install --upgrade llama-cpp-python (or a smaller n_ctx)",
    "assert_no_token_sampled":
        "Llama(..., n_gpu_layers=0) to compare; another quant; drop grammar= / logit_bias=",
    "assert_token_out_of_vocab":
        "tokenize with llm.tokenize() of the same Llama; draft model with the same vocabulary",
    "assert_too_many_experts":
        "pip install --upgrade llama-cpp-python",
    "assert_host_alloc":
        "Llama(..., n_ctx=<smaller>); check free -h and the container's memory limit",
}
