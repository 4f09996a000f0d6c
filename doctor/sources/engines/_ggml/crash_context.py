"""Crash causes read from how the process ended or from the hardware it met, rows of the crash table
(crashes.py): a bus error, a Windows program that could not load its DLLs, a GPU generation without a data
type or kernel the engine chose. Pure data.

Strings: glibc's strsignal ("Bus error") and Windows' ntstatus.h (STATUS_DLL_NOT_FOUND 0xC0000135,
STATUS_INVALID_IMAGE_FORMAT 0xC000007B, STATUS_DLL_INIT_FAILED 0xC0000142) through the endings table
(doctor/sources/logs/endings.py); vLLM's dtype and quantization checks (vllm/config: "Bfloat16 is only
supported on GPUs with compute capability of at least 8.0. Your %s GPU has compute capability %s.", "The
quantization method %s is not supported for the current GPU. Minimum capability: %d. Current capability:
%d."), Triton's fp8 check ("type fp8e4nv not supported in this architecture. The supported fp8 dtypes are
(...)") and flash-attn's ("FlashAttention only supports Ampere GPUs or newer.").
"""

from __future__ import annotations

from doctor.sources.engines._ggml.cause import Cause, Fix

BUS_ERROR = Cause(
    "bus_error", "The engine died of a bus error (SIGBUS)",
    "A bus error is a read of a memory-mapped page that cannot be served: the model file was truncated or "
    "replaced while the engine had it mapped, it lives on a network or FUSE filesystem that dropped the page, "
    "or a PyTorch server's shared memory (/dev/shm, 64 MB in a default Docker container) ran out.",
    Fix(
        "Check the model file is complete and on a local disk, and do not replace it while an engine uses it; "
        "read it into memory instead of mapping it; a PyTorch server in Docker needs room in /dev/shm.",
        change=(("use_mmap", False),),
        after=" (the file is read into memory instead of mapped), or copy the model to a local disk",
        checked="glibc strsignal (SIGBUS 'Bus error'); llama.cpp src/llama-mmap.cpp (the model file is mapped) "
        "and common/arg.cpp (--no-mmap); vLLM docs/deployment/docker (--ipc=host or --shm-size for PyTorch's "
        "shared memory); TGI README (docker run --shm-size 1g)",
    ),
    ("Bus error (core dumped)", "signal: bus error (core dumped)", "Fatal Python error: Bus error",
     "died with <Signals.SIGBUS: 7>", "exited with code 135"),
)

DLL_MISSING = Cause(
    "dll_not_found", "Windows could not start the engine: a DLL is missing or of the wrong kind",
    "The process ended before its first line with STATUS_DLL_NOT_FOUND (0xC0000135), STATUS_INVALID_IMAGE_FORMAT "
    "(0xC000007B) or STATUS_DLL_INIT_FAILED (0xC0000142): a DLL it links to (the CUDA runtime and cuBLAS of a "
    "CUDA build, the Visual C++ runtime) is not on PATH, or another version of it is found first.",
    Fix(
        "Install the Microsoft Visual C++ Redistributable (x64); for a CUDA build, put the CUDA runtime DLLs of "
        "the build's CUDA version next to the executable (or install that toolkit), and remove other CUDA "
        "folders from PATH.",
        checked="Windows ntstatus.h (0xC0000135, 0xC000007B, 0xC0000142); llama.cpp releases ship the CUDA runtime "
        "DLLs beside the CUDA builds (cudart-llama-bin-win-*.zip); Ollama llm/exit_status_windows.go prints the "
        "NTSTATUS text",
    ),
    ("exit status 0xc0000135", "exit code -1073741515", "Process finished with exit code -1073741515 (0xC0000135)",
     "exit status 0xc000007b", "exit code 3221225794"),
)

GPU_DTYPE = Cause(
    "gpu_dtype_unsupported", "The GPU is too old for a data type or kernel the engine chose",
    "bfloat16 needs an NVIDIA GPU of compute capability 8.0 (Ampere) or newer, FP8 kernels 8.9 (Ada) or 9.0 "
    "(Hopper), FlashAttention 2 Ampere or newer, and each quantization method has its own minimum; on an older "
    "GPU (Pascal 6.x, Volta 7.0, Turing 7.5) the engine refuses the model's data type, or a kernel fails to "
    "compile for it. The model and the memory are fine.",
    Fix(
        "Run the model in float16 instead of bfloat16, use a quantisation and KV-cache type this GPU supports "
        "(not FP8 / NVFP4 / MXFP4 below their minimum capability), or use a newer GPU.",
        checked="vLLM vllm/config (the bfloat16 check and the quantization method's get_min_capability), "
        "--dtype half, --kv-cache-dtype; Triton's fp8e4nv check; flash-attn csrc flash_api.cpp; TGI launcher "
        "--dtype float16",
    ),
    ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has "
     "compute capability 7.5.",
     "ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 89. "
     "Current capability: 86.",
     "ValueError(\"type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', "
     "'fp8e5')\")",
     "RuntimeError: FlashAttention only supports Ampere GPUs or newer."),
)

CONTEXT_CAUSES: tuple[Cause, ...] = (BUS_ERROR, DLL_MISSING, GPU_DTYPE)
# how the process ended (doctor/sources/logs/endings.py Ending.key) -> the cause that ending names by itself
BY_ENDING = {"sigbus": BUS_ERROR, "dll_not_found": DLL_MISSING}
