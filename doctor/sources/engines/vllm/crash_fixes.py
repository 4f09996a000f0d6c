"""vLLM's own words for the fixes of the crash causes its log may show (the crash table,
../_ggml/crashes.py), by the cause's key: where the cause's settings change in vLLM's spelling
(engine.py) does not say it all. Each was checked where the cause's `checked` says.
"""

from __future__ import annotations

FIXES: dict[str, str] = {
    "unknown_architecture":
        "pip install --upgrade vllm   (or a release that lists the architecture as supported)",
    "cuda_illegal_address":
        "--enforce-eager   (no CUDA graphs); CUDA_LAUNCH_BLOCKING=1 to find the kernel; upgrade vLLM",
    "cuda_arch_missing":
        "install a vLLM / PyTorch build for this GPU (pip install vllm with the matching CUDA)",
    "cuda_driver_old":
        "update the NVIDIA driver, or install the vLLM/PyTorch wheel for your driver's CUDA version",
    "cublas_error":
        "--enforce-eager; check --dtype against the GPU (bfloat16 needs compute capability 8.0); upgrade vLLM",
    "cuda_error":
        "CUDA_LAUNCH_BLOCKING=1; upgrade vLLM",
    "gpu_dtype_unsupported":
        "--dtype half (float16) below compute capability 8.0; a checkpoint in a quantization this GPU supports "
        "(the error names its minimum capability) and --kv-cache-dtype auto instead of fp8",
    "bus_error":
        "docker run --ipc=host (or --shm-size 16g): PyTorch's workers share tensors through /dev/shm; keep the "
        "model on a local disk",
}
