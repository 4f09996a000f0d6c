"""Crash causes: which known engine failure a crash in a log is, with its fix in each engine's words.

`CAUSES` is the table: for every cause, the family of messages that name it across engine versions
(as the engines print them: llama.cpp / ggml, llama-cpp-python, Ollama, PyTorch under vLLM/TGI,
and the kernel's own segfault lines in a journal), what it means, and the fix for each engine. The
crash parser (crash_parser.py) reads a log for those messages (crash_patterns.py) and for the
evidence some causes need, and writes one `crash_cause` event per cause found, plus
`crash_evidence` events for the lines that support it; the rule of class engine.crash renders them,
and a crash no entry explains stays with the generic crash rule.

Where each fix was checked is in `Fix.checked`; README.md of fixtures/logs/crashes lists the
strings' sources. Pure data.
"""

from __future__ import annotations

from doctor.sources.engines._ggml.cause import GGML, Cause, Fix, fix_data, fix_for, runs_ggml
from doctor.sources.engines._ggml.crash_config import CONFIG_CAUSES
from doctor.sources.engines._ggml.crash_context import BUS_ERROR, CONTEXT_CAUSES, DLL_MISSING, GPU_DTYPE
from doctor.sources.engines._ggml.crash_launch import LAUNCH_CAUSES
from doctor.sources.engines._ggml.crash_setup import (
    APE_NO_INTERPRETER,
    DEEPSPEED_RESERVE,
    HIPBLASLT_DATA,
    SETUP_CAUSES,
)

# -- the table -------------------------------------------------------------------------------------

AMX = Cause(
    "amx_repack", "llama.cpp's AMX / weight-repacking CPU kernel crashed",
    "llama.cpp moves supported quantised weights into an 'extra' CPU buffer (AMX on Intel Xeons of the "
    "Sapphire, Emerald and Granite Rapids generations, CPU_REPACK elsewhere) and multiplies them with a "
    "special kernel; on some of these machines and builds that kernel crashes on the first batch of two or "
    "more tokens. It is an engine bug, not a problem of the model or the settings (Ollama traced it in its "
    "own builds to AMX code compiled by GCC 11, fixed in Ollama 0.32.2 by building with GCC 13).",
    Fix(
        "Turn weight repacking off (llama.cpp -nr / --no-repack: the extra buffer types are not used), or use a "
        "build without AMX.",
        change=(("use_extra_bufts", False),),
        checked="llama.cpp common/arg.cpp (-nr/--no-repack, env LLAMA_ARG_REPACK, parse_bool_value) and "
        "common/common.cpp (use_extra_bufts = !no_extra_bufts), ggml/src/ggml-cpu/CMakeLists.txt (GGML_NATIVE "
        "adds -march=native; with it OFF the AMX options default OFF), ggml-cpu.cpp (the AMX buffer type exists "
        "only with __AMX_INT8__), all in the llama.cpp vendored by llama-cpp-python 0.3.36; llama_cpp/llama.py "
        "0.3.36 (Llama() calls llama_cpp.llama_model_default_params() at load) and "
        "../shared/reference/engine-crash-amx (the patch makes the crashing run complete); use_extra_bufts is "
        "in llama.h of the llama.cpp vendored by Ollama v0.11.5 (e54d41b, Aug 2025), not v0.11.0 (de4c07f); "
        "Ollama commits "
        "51fc001 (v0.32.2, fixes ollama#17006 #17205), 5f8c031 (v0.5.12 'remove amx'), dcfb7a1 (v0.5.8 CPU "
        "variants), llm/llama_server.go SetupLlamaServerCommandEnv (os.Environ() passed to llama-server)",
    ),
    ("load_tensors: AMX model buffer size = N MiB", "ggml_backend_amx_buffer_set_tensor: amx repack tensor ...",
     "CPU_REPACK model buffer size = N MiB", "system_info ... AMX_INT8 = 1 ...",
     "Fatal Python error: Segmentation fault", "Segmentation fault (core dumped)",
     "kernel: python3[N]: segfault at ... in libggml-cpu.so[...]",
     "traps: ollama[N] general protection fault ip:... in libggml-cpu-sapphirerapids.so[...]",
     "#0 ... in ggml_backend_amx_mul_mat(...)", "#2 ... in ggml_cpu_extra_compute_forward ()"),
)

ILLEGAL_INSTRUCTION = Cause(
    "illegal_instruction", "The engine build uses a CPU instruction this processor does not have",
    "A build made for another CPU (-march=native on a newer machine, or an AVX-512 / AVX2 build) stops with "
    "SIGILL at the first instruction this CPU lacks.",
    Fix(
        "Use a build made for this CPU: build it on this machine, or turn native optimisation off.",
        checked="llama.cpp ggml/CMakeLists.txt (GGML_NATIVE, GGML_BACKEND_DL, GGML_CPU_ALL_VARIANTS) and "
        "ggml/src/ggml-cpu/CMakeLists.txt, vendored by llama-cpp-python 0.3.36; Ollama "
        "ml/backend/ggml/ggml/src/CMakeLists.txt (CPU variants)",
    ),
    ("Illegal instruction (core dumped)", "Fatal Python error: Illegal instruction",
     "traps: llama-server[N] trap invalid opcode ip:... in libggml-cpu.so[...]",
     "signal: illegal instruction (core dumped)", "exit status 0xc000001d"),
)

K_SHIFT = Cause(
    "context_shift_unsupported", "Context shift on a model that cannot shift",
    "When the context fills, llama.cpp's context shift discards old tokens and re-rotates the keys ('K-shift'); "
    "models whose KV cache cannot be rotated that way (DeepSeek-2 MLA in 2024 builds, multi-position RoPE, "
    "recurrent or some hybrid caches) abort instead.",
    Fix(
        "Keep the conversation inside the context (a larger context, or shorter requests), or turn context "
        "shift off so a full context ends the request instead of the process.",
        change=(("n_ctx", "<larger>"),),
        checked="llama.cpp src/llama-kv-cache.cpp (GGML_ABORT text, get_can_shift) and common/arg.cpp "
        "(--context-shift / --no-context-shift), tools/server/server-context.cpp ('ctx_shift is not supported "
        "by this context, it will be disabled'), vendored by llama-cpp-python 0.3.36; older abort texts in the "
        "llama.cpp vendored by Ollama v0.3.14/v0.5.0 ('Deepseek2 does not support K-shift'), v0.6.0 ('The "
        "current context does not support K-shift'), v0.9.0-v0.13.0; Ollama llm/status.go errorPrefixes",
    ),
    ("llama.cpp:18021: Deepseek2 does not support K-shift",
     "src/llama.cpp:9638: The current context does not support K-shift",
     "src/llama-kv-cache.cpp:630: The current KV cache / model configuration does not support K-shift"),
)

UNKNOWN_ARCH = Cause(
    "unknown_architecture", "The model's architecture is newer than this engine build",
    "The GGUF declares an architecture the engine's llama.cpp does not know yet, so it refuses the file; the "
    "file itself is usually fine.",
    Fix(
        "Upgrade the engine to a build that knows the architecture (the model card or the llama.cpp release "
        "notes name the first build that supports it).",
        checked="llama.cpp src/llama-model.cpp (both throws), llama_cpp/_internals.py 0.3.36 (ValueError "
        "'Failed to load model from file'); Ollama v0.13.0 llm/server.go (the 'not supported by your version' "
        "rewrite); public report abetlen/llama-cpp-python#1994 (../shared/corpus/108: llama4, support landed "
        "in llama.cpp b5074)",
    ),
    ("llama_model_load: error loading model: error loading model architecture: unknown model architecture: 'X'",
     "llama_model_load: error loading model: unknown model architecture: 'X'",
     "unsupported model architecture: 'X'",
     "ValueError: Failed to load model from file: PATH   (after one of the above)",
     "Error: this model is not supported by your version of Ollama. You may need to upgrade"),
)

_CUDA_CHECKED = ("ggml/src/ggml-cuda/ggml-cuda.cu ggml_cuda_error ('CUDA error: %s', 'current device: %d, in "
                 "function %s at %s:%d', GGML_ABORT) and common.cuh (CUBLAS_CHECK, cublas_get_error_str), "
                 "vendored by llama-cpp-python 0.3.36; 2023 format 'CUDA error %d at %s:%d: %s' "
                 "(ggml-org/llama.cpp#3199 via engine_log_signatures.md); PyTorch's c10 CUDA error text")

ILLEGAL_ADDRESS = Cause(
    "cuda_illegal_address", "A GPU kernel read or wrote outside its memory",
    "CUDA reports an illegal memory access (or a misaligned address / unspecified launch failure) when a "
    "kernel goes out of bounds; the error surfaces at the next synchronisation, so the function named is often "
    "not the culprit. It is an engine or driver bug, usually tied to one feature: flash attention, CUDA graphs, "
    "a multi-GPU split, or a quantisation type.",
    Fix(
        "Find the feature that triggers it and turn it off, then update the engine: flash attention off, one GPU, "
        "CUDA_LAUNCH_BLOCKING=1 to see the kernel that failed.",
        change=(("flash_attn", False),),
        checked=_CUDA_CHECKED + "; llama.cpp common/arg.cpp (-fa, -sm), llama_cpp/llama.py (flash_attn), "
        "Ollama envconfig/config.go (OLLAMA_FLASH_ATTENTION)",
    ),
    ("CUDA error: an illegal memory access was encountered", "  current device: 0, in function F at FILE:LINE",
     "FILE:LINE: CUDA error", "CUDA error 700 at FILE:LINE: an illegal memory access was encountered",
     "RuntimeError: CUDA error: an illegal memory access was encountered",
     "CUDA error: misaligned address", "CUDA error: unspecified launch failure"),
)

NO_KERNEL_IMAGE = Cause(
    "cuda_arch_missing", "The engine was not built for this GPU's architecture",
    "The build holds no GPU code for this GPU's architecture (its compute capability, or an AMD gfx target): "
    "CUDA says 'no kernel image is available for execution on the device', CUDA and HIP say 'invalid device "
    "function', ROCm's libraries find no code object or Tensile library for the gfx version. A build for newer "
    "or older GPUs only, or an AMD GPU that ROCm does not ship kernels for.",
    Fix(
        "Use a build compiled for this GPU's architecture (CUDA: its compute capability; ROCm: its gfx target), "
        "or, for an AMD GPU close to a supported one, make ROCm treat it as that target (HSA_OVERRIDE_GFX_VERSION).",
        checked=_CUDA_CHECKED + "; CMAKE_CUDA_ARCHITECTURES in llama.cpp ggml/src/ggml-cuda/CMakeLists.txt; "
        "cudaErrorInvalidDeviceFunction / hipErrorInvalidDeviceFunction ('invalid device function'), "
        "hipErrorNoBinaryForGpu; Ollama docs/gpu.mdx (HSA_OVERRIDE_GFX_VERSION, e.g. 10.3.0 for gfx1034)",
    ),
    ("CUDA error: no kernel image is available for execution on the device", "CUDA error: invalid device function",
     "HIP error: invalid device function",
     "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!",
     "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file or directory "
     "for GPU arch : gfx1103"),
)

CUDA_DRIVER = Cause(
    "cuda_driver_old", "The NVIDIA driver is older than the CUDA runtime the engine was built with",
    "The engine's CUDA runtime needs a newer kernel driver than the one installed.",
    Fix(
        "Update the NVIDIA driver, or use an engine build for the CUDA version the driver supports (nvidia-smi "
        "shows it).",
        checked=_CUDA_CHECKED + " (cudaGetErrorString texts)",
    ),
    ("CUDA error: CUDA driver version is insufficient for CUDA runtime version",
     "CUDA error: the provided PTX was compiled with an unsupported toolchain."),
)

CUBLAS = Cause(
    "cublas_error", "A cuBLAS call failed (not for lack of memory)",
    "A matrix multiplication in cuBLAS failed: an unsupported type or shape on this GPU, a driver / cuBLAS "
    "mismatch, or an earlier kernel fault that cuBLAS only reported.",
    Fix(
        "Update the engine and the driver; to narrow it down run with CUDA_LAUNCH_BLOCKING=1, and try without "
        "flash attention or with another quantisation.",
        checked=_CUDA_CHECKED,
    ),
    ("CUDA error: CUBLAS_STATUS_EXECUTION_FAILED", "  cublasGemmEx(...)",
     "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx( handle, ...)`",
     "cuBLAS error 13 at FILE:LINE"),
)

CUDA_OTHER = Cause(
    "cuda_error", "A CUDA call failed",
    "The GPU runtime returned an error the engine cannot recover from; the lines after 'CUDA error' name the "
    "call and the function.",
    Fix(
        "Read the error text and the function it names; update the engine and the driver; run with "
        "CUDA_LAUNCH_BLOCKING=1 to see where it happens.",
        checked=_CUDA_CHECKED,
    ),
    ("CUDA error: <cudaGetErrorString text>", "HIP error: <hipGetErrorString text>"),
)


def _assert(cid: str, title: str, meaning: str, fix: Fix, *family: str) -> Cause:
    return Cause(cid, title, meaning, fix, family)


_ASSERT_SRC = "vendored by llama-cpp-python 0.3.36 and by Ollama v0.3.14-v0.13.0"

ASSERT_N_BATCH = _assert(
    "assert_n_batch", "One decode call got more tokens than n_batch",
    "llama_decode was given more tokens at once than the logical batch size (n_batch): an application that "
    "passes a whole prompt or embedding input in one batch, larger than n_batch.",
    Fix(
        "Raise the batch size to at least the longest input, or split the input into batches of n_batch.",
        change=(("n_batch", "<tokens>"), ("n_ubatch", "<tokens>")),
        checked="llama.cpp src/llama-context.cpp (GGML_ASSERT(n_tokens_all <= cparams.n_batch)), " + _ASSERT_SRC,
    ),
    "GGML_ASSERT(n_tokens_all <= cparams.n_batch) failed", "GGML_ASSERT: llama.cpp:N: n_tokens_all <= cparams.n_batch",
)
ASSERT_UBATCH = _assert(
    "assert_ubatch_embeddings", "An embedding / encoder input is longer than the physical batch",
    "Embedding, reranking and encoder models (non-causal attention) must see a whole input in one micro-batch, "
    "so an input longer than n_ubatch aborts.",
    Fix(
        "Set the physical batch (n_ubatch) and n_batch to at least the longest input, or truncate inputs.",
        change=(("n_ubatch", "<tokens>"), ("n_batch", "<tokens>")),
        checked="llama.cpp src/llama-context.cpp (both asserts), " + _ASSERT_SRC,
    ),
    "GGML_ASSERT((cparams.causal_attn || cparams.n_ubatch >= n_tokens_all) && \"non-causal attention requires "
    "n_ubatch >= n_tokens\") failed",
    "GGML_ASSERT(cparams.n_ubatch >= n_tokens && \"encoder requires n_ubatch >= n_tokens\") failed",
)
ASSERT_CPY_INT_MAX = _assert(
    "assert_cuda_cpy_2gb", "A CUDA copy of more than 2 GiB (a very large context)",
    "Older ggml CUDA builds could not copy a tensor over INT_MAX bytes; a very large context (its KV cache "
    "copied during a context shift, defragmentation or a quantised-cache conversion) hits it. The llama.cpp "
    "vendored by llama-cpp-python 0.3.36 no longer has this limit.",
    Fix(
        "Update the engine (newer ggml lifted the limit), or use a smaller context.",
        checked="ggml/src/ggml-cuda/cpy.cu: GGML_ASSERT(ggml_nbytes(src0) <= INT_MAX) in the ggml vendored by "
        "Ollama v0.3.14, v0.6.0, v0.13.0; absent from the llama.cpp vendored by llama-cpp-python 0.3.36",
    ),
    "GGML_ASSERT(ggml_nbytes(src0) <= INT_MAX) failed",
)
ASSERT_SAMPLER = _assert(
    "assert_no_token_sampled", "The sampler had no token left to pick",
    "Every candidate token was filtered out: usually NaN or infinite logits (a broken quantisation, or an "
    "fp16 overflow on this backend), or a grammar / logit bias that excludes every token.",
    Fix(
        "Check the logits: try another quantisation of the model or CPU only (no GPU layers) to compare, and "
        "remove a grammar or logit bias that may exclude every token.",
        change=(("n_gpu_layers", 0),),
        after=' to compare; another quant of the model',
        checked="llama.cpp src/llama-sampler.cpp (src/llama-sampling.cpp in older builds): GGML_ASSERT(cur_p.selected "
        ">= 0 && cur_p.selected < (int32_t) cur_p.size), " + _ASSERT_SRC,
    ),
    "GGML_ASSERT(cur_p.selected >= 0 && cur_p.selected < (int32_t) cur_p.size) failed",
)
ASSERT_GET_ROWS = _assert(
    "assert_token_out_of_vocab", "A token id outside the model's vocabulary",
    "The embedding lookup got a token id larger than the vocabulary: tokens made by another tokenizer "
    "(a draft model with a different vocabulary, tokens cached from another model) or a GGUF whose vocabulary "
    "and embedding sizes disagree.",
    Fix(
        "Tokenize with the model's own tokenizer; for speculative decoding use a draft model with the same "
        "vocabulary; re-download the GGUF if its vocabulary does not match its embeddings.",
        checked="ggml/src/ggml-cpu/ops.cpp get_rows: GGML_ASSERT(i01 >= 0 && i01 < ne01), " + _ASSERT_SRC,
    ),
    "GGML_ASSERT(i01 >= 0 && i01 < ne01) failed",
)
ASSERT_EXPERTS = _assert(
    "assert_too_many_experts", "The model has more experts than this engine build supports",
    "LLAMA_MAX_EXPERTS was 160 in mid-2024 builds, 256 in early 2025, 384 in late 2025 and 1024 in the llama.cpp "
    "of llama-cpp-python 0.3.36; a mixture-of-experts model with more experts needs a newer build.",
    Fix(
        "Upgrade the engine to a build that supports this many experts.",
        checked="src/llama-model.cpp GGML_ASSERT(hparams.n_expert <= LLAMA_MAX_EXPERTS) and src/llama-hparams.h "
        "(160 in Ollama v0.3.14's llama.cpp, 256 in v0.6.0, 384 in v0.13.0, 1024 in llama-cpp-python 0.3.36)",
    ),
    "GGML_ASSERT(hparams.n_expert <= LLAMA_MAX_EXPERTS) failed",
)
ASSERT_HOST_MEMORY = _assert(
    "assert_host_alloc", "ggml could not allocate host memory",
    "ggml_init's malloc of its context buffer failed: the process ran out of RAM (or hit a memory limit).",
    Fix(
        "Free RAM or raise the memory limit; use a smaller context or model.",
        change=(("n_ctx", "<smaller>"),),
        after="; check the host's free memory and any container limit",
        checked="ggml/src/ggml.c ggml_init: GGML_ASSERT(ctx->mem_buffer != NULL), " + _ASSERT_SRC,
    ),
    "GGML_ASSERT(ctx->mem_buffer != NULL) failed",
)

# Not a ggml crash: a PyTorch server's CUDA extension handed CPU tensors. It stands in this table because
# the crash table is where a crash's cause gets its name and each engine's fix (TGI's own words:
# ../tgi/crash_fixes.py).
CUDA_TENSOR_ON_CPU = Cause(
    "cuda_kernels_without_gpu", "The server's custom CUDA kernels were handed tensors on the CPU",
    "A CUDA extension checks that its inputs live on the GPU ('x must be a CUDA tensor'); on a machine without "
    "a GPU, or in a container started without one, the model runs on the CPU and the first call into such a "
    "kernel fails - TGI's custom kernels for BLOOM and similar models do it on every request.",
    Fix(
        "Run the server where it sees the GPU (a container started with the GPU: docker run --gpus all), or turn "
        "its custom CUDA kernels off on a machine without one.",
        checked="text-generation-inference server/custom_kernels/custom_kernels/fused_attention_cuda.cu and "
        "fused_bloom_attention_cuda.cu (v0.9-v1.x: #define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x "
        "\" must be a CUDA tensor\")), launcher/src/main.rs (--disable-custom-kernels, env DISABLE_CUSTOM_KERNELS), "
        "README (PR #773: to run without GPUs leave out --gpus all and add --disable-custom-kernels)",
    ),
    ("attention_scores_2d must be a CUDA tensor", "query_layer must be a CUDA tensor"),
)

CAUSES: tuple[Cause, ...] = (
    AMX, ILLEGAL_INSTRUCTION, K_SHIFT, UNKNOWN_ARCH, ILLEGAL_ADDRESS, NO_KERNEL_IMAGE, CUDA_DRIVER, CUBLAS,
    CUDA_OTHER, ASSERT_N_BATCH, ASSERT_UBATCH, ASSERT_CPY_INT_MAX, ASSERT_SAMPLER, ASSERT_GET_ROWS,
    ASSERT_EXPERTS, ASSERT_HOST_MEMORY, CUDA_TENSOR_ON_CPU, *CONTEXT_CAUSES, *SETUP_CAUSES, *LAUNCH_CAUSES,
    *CONFIG_CAUSES,
)
BY_ID = {c.id: c for c in CAUSES}
CUDA_CAUSES = (ILLEGAL_ADDRESS, NO_KERNEL_IMAGE, CUDA_DRIVER, CUBLAS, CUDA_OTHER)
CUDA_BLOCK = 4  # lines of a "CUDA error" block: the error, "current device ...", the failing call

__all__ = ["AMX", "APE_NO_INTERPRETER", "BUS_ERROR", "BY_ID", "CAUSES", "CUDA_CAUSES", "DEEPSPEED_RESERVE",
           "DLL_MISSING", "GGML", "GPU_DTYPE", "HIPBLASLT_DATA", "Cause", "Fix", "fix_data", "fix_for",
           "runs_ggml"]
