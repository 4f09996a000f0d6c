"""llama.cpp's own words for the fixes of the crash causes its log may show (the crash table,
../_ggml/crashes.py), by the cause's key: where the cause's settings change in llama.cpp's spelling
(engine.py) does not say it all. Each was checked where the cause's `checked` says.
"""

from __future__ import annotations

FIXES: dict[str, str] = {
    "amx_repack":
        "-nr   (--no-repack; or LLAMA_ARG_REPACK=false in the environment; builds from about Aug 2025 have it); "
        "or build without AMX: cmake -B build -DGGML_NATIVE=OFF",
    "illegal_instruction":
        "cmake -B build -DGGML_NATIVE=OFF   (or build on this machine; release builds with -DGGML_BACKEND_DL=ON "
        "-DGGML_CPU_ALL_VARIANTS=ON pick the CPU variant at run time)",
    "context_shift_unsupported":
        "--no-context-shift  (or a larger --ctx-size); builds since about Aug/Sep 2025 have context shift off by "
        "default and disable it for models that cannot shift",
    "unknown_architecture":
        "update llama.cpp (git pull && cmake --build build, or a newer release)",
    "cuda_illegal_address":
        "-fa off   (then -sm none / CUDA_VISIBLE_DEVICES=0 for one GPU; CUDA_LAUNCH_BLOCKING=1 to find the "
        "kernel); update llama.cpp",
    "cuda_arch_missing":
        "cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=<compute capability, e.g. 86>",
    "cuda_driver_old":
        "update the NVIDIA driver, or build with the CUDA toolkit your driver supports",
    "cublas_error":
        "update llama.cpp; -fa off; CUDA_LAUNCH_BLOCKING=1 to find the call",
    "cuda_error":
        "update llama.cpp; CUDA_LAUNCH_BLOCKING=1; report the three 'CUDA error' lines with your command",
    "assert_n_batch":
        "-b <tokens> -ub <tokens>",
    "assert_ubatch_embeddings":
        "-ub <tokens> -b <tokens>",
    "assert_cuda_cpy_2gb":
        "update llama.cpp (or a smaller --ctx-size)",
    "assert_no_token_sampled":
        "-ngl 0 to compare; another quant; drop --grammar / --logit-bias",
    "assert_token_out_of_vocab":
        "use a draft model (-md) with the same vocabulary; re-download the model",
    "assert_too_many_experts":
        "update llama.cpp",
    "assert_host_alloc":
        "a smaller --ctx-size; check free -h and the container's memory limit",
}
