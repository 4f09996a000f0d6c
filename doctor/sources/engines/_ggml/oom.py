"""ggml's GPU out-of-memory messages, written once for every engine that runs ggml.

llama.cpp prints them in its own log (read by the llama.cpp parser, `BACKEND_OOM`); an engine that
wraps llama.cpp in a runner of its own (Ollama) relays the runner's last lines, and places the OOM
by what its own estimate covered (`RUNNER_OOM`). The strings: ggml-cuda.cu `ggml_cuda_error` ("CUDA
error: %s", cudaGetErrorString), the 2023 format "CUDA error %d at %s:%d: %s", common.cuh
`CUBLAS_CHECK` ("cuBLAS error %d at %s:%d", cublas_get_error_str), Vulkan's ErrorOutOfDeviceMemory,
Metal's allocation failures and command-buffer status, SYCL's "Insufficient Memory".

Pure.
"""

from __future__ import annotations

from doctor.sources.logs.matcher import gated

# cuBLAS / hipBLAS could not get memory for its handle or workspace
CUBLAS_STATUS = r"(?:CU|HIP)BLAS_STATUS_(?:ALLOC_FAILED|NOT_INITIALIZED)"
# CUBLAS_CHECK with status 1 (not initialized) or 3 (alloc failed)
CUBLAS_ERROR = r"cuBLAS error [13] "
# cudaGetErrorString's words for an allocation of the runtime's own resources that failed
RESOURCE = r"(?:CUDA|ROCm) error: the (?:resource allocation failed|library was not initialized)"

# every GPU backend's out-of-memory message in llama.cpp's own log; groups: 1 the backend (CUDA, ROCm,
# MUSA), 2 the bytes of a Vulkan device allocation
BACKEND_OOM = gated(r"\b(CUDA|ROCm|MUSA) error: out of memory|CUDA error \d+ at .*: out of memory"
                    r"|" + CUBLAS_STATUS + "|" + CUBLAS_ERROR + "at"
                    r"|" + RESOURCE +
                    r"|ErrorOutOfDeviceMemory|Device memory allocation of size (\d+) failed"
                    r"|kIOGPUCommandBufferCallbackErrorOutOfMemory|Insufficient Memory"
                    r"|failed to allocate Metal buffer of (\d+) bytes|"
                    r"ggml_metal\w*: error: failed to allocate buffer, size =\s*([\d.]+) MiB")

# a runner aborting on a failed CUDA/ROCm call that ran out of memory: a pool or cuBLAS allocation at
# compute time, or (2023 builds, "CUDA error 2 at file:line") any allocation; not a buffer that llama.cpp
# names (cudaMalloc failed / unable to allocate ... buffer), which the llama.cpp parser places itself
RUNNER_OOM = gated(r"\b(?:CUDA|ROCm|HIP) error(?: 2 at \S+)?: out of memory|\b2 at \S+ggml-cuda\.cu:\d+: out of memory"
                   r"|" + CUBLAS_STATUS + "|" + CUBLAS_ERROR + "|" + RESOURCE)
# the lines RUNNER_OOM may match, as a scan fragment (RE2)
RUNNER_OOM_LINES = r"out of memory|CUBLAS_STATUS_(?:ALLOC_FAILED|NOT_INITIALIZED)|" + CUBLAS_ERROR
