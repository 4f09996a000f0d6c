"""TGI's own words for the fixes of the crash causes its log may show (the crash table,
../_ggml/crashes.py), by the cause's key: where the cause's settings change in TGI's spelling
(engine.py) does not say it all. The flags: launcher/src/main.rs (--cuda-graphs: "Use "0" to
disable", --dtype float16 | bfloat16).
"""

from __future__ import annotations

FIXES: dict[str, str] = {
    "unknown_architecture":
        "upgrade TGI (a release whose supported models list the architecture)",
    "cuda_illegal_address":
        "--cuda-graphs 0   (no CUDA graphs); CUDA_LAUNCH_BLOCKING=1 to find the kernel; upgrade TGI",
    "cublas_error":
        "--cuda-graphs 0; check --dtype against the GPU (bfloat16 needs compute capability 8.0); upgrade TGI",
    "cuda_error":
        "CUDA_LAUNCH_BLOCKING=1; upgrade TGI",
    # its custom kernels' CHECK_CUDA on a machine without a GPU (launcher/src/main.rs --disable-custom-kernels;
    # README, PR #773)
    "cuda_kernels_without_gpu":
        "--disable-custom-kernels   (and leave out --gpus all on a machine without GPUs); with a GPU: docker run "
        "--gpus all so the shards see it",
    "gpu_dtype_unsupported":
        "--dtype float16 below compute capability 8.0; a --quantize method this GPU supports",
    "bus_error":
        "docker run --shm-size 1g (the shards share tensors through /dev/shm); keep the model on a local disk",
}
