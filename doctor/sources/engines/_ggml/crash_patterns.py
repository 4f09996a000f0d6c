"""The lines that name a crash cause (crashes.py) by themselves, and the evidence around a crash: the
crash parser's patterns and its table of line kinds. Strings: the engines' own messages (see each
cause's `family` and `checked`). Pure.
"""

from __future__ import annotations

import re

from doctor.sources.engines._ggml.crash_config import KERNEL_GRID, NCCL_SYSTEM, TP_HEADS
from doctor.sources.engines._ggml.crash_launch import ESTIMATE_NAN, METAL_WATCHDOG
from doctor.sources.engines._ggml.crashes import (
    APE_NO_INTERPRETER,
    ASSERT_CPY_INT_MAX,
    ASSERT_EXPERTS,
    ASSERT_GET_ROWS,
    ASSERT_HOST_MEMORY,
    ASSERT_N_BATCH,
    ASSERT_SAMPLER,
    ASSERT_UBATCH,
    CUBLAS,
    CUDA_DRIVER,
    CUDA_TENSOR_ON_CPU,
    GPU_DTYPE,
    HIPBLASLT_DATA,
    ILLEGAL_ADDRESS,
    K_SHIFT,
    NO_KERNEL_IMAGE,
    UNKNOWN_ARCH,
    Cause,
)
from doctor.sources.logs import endings
from doctor.sources.logs.base import LineKind, LineKinds
from doctor.sources.logs.matcher import gated

# -- matching --------------------------------------------------------------------------------------

def _assert_re(expr: str) -> object:
    """A GGML_ASSERT of `expr` in both of its formats: `FILE:LINE: GGML_ASSERT(expr) failed` (ggml_abort,
    since mid 2024) and `GGML_ASSERT: FILE:LINE: expr` (the fprintf of earlier builds)."""
    return gated(r"GGML_ASSERT(?:\(|: \S+:\d+: )" + re.escape(expr))


# vLLM's, TGI's and DeepSpeed-Inference's wordings (v0.9: "num_heads (N) must be divisible by mp_size (M)", v0.10:
# "{param} (N) ...", v0.12: "Number of attention heads (N) ...", the containers' sentence without numbers)
TP_HEADS_RE = gated(r"Total number of attention heads \((\d+)\) must be divisible by tensor parallel size \((\d+)\)"
                    r"|`num_heads` must be divisible by `num_shards` \(got `num_heads`: (\d+) and `num_shards`: (\d+)"
                    r"|\b(?:n_heads|num_heads|num_kv|num_attention_heads|num_attn_heads|Number of attention heads)"
                    r" \((\d+)\) must be divisible by mp_size \((\d+)\)"
                    r"|the attention_heads require to be divisible by the world_size")

# Lines that name their cause by themselves: (cause, confidence, pattern). First match wins.
EXPLICIT: tuple[tuple[Cause, str, object], ...] = (
    (K_SHIFT, "high", gated(r"does not support K-shift")),
    # an empty name (no general.architecture key) is a file that is not a model: the model rules' (a failed
    # load, class model.corrupt), not this
    (UNKNOWN_ARCH, "high", gated(r"(?:unknown|unsupported) model architecture: '([^']+)'")),
    (UNKNOWN_ARCH, "high", gated(r"this model is not supported by your version of Ollama")),
    # hipBLASLt without its kernel data (before the rocBLAS / HIP entries: its line names a TensileLibrary too)
    (HIPBLASLT_DATA, "high", gated(r"rocblaslt error: (?:Cannot read|Could not load) \"?(\S*?TensileLibrary[\w.-]*)"
                                   r"|rocblaslt warning: No paths matched .*HIPBLASLT_TENSILE_LIBPATH")),
    # binfmt-support's run-detectors: no interpreter takes the program's format (a llamafile's APE)
    (APE_NO_INTERPRETER, "high", gated(r"run-detectors: unable to find an interpreter for")),
    (NO_KERNEL_IMAGE, "high", gated(r"no kernel image is available for execution on the device"
                                    r"|\binvalid device function\b|hipErrorNoBinaryForGpu"
                                    r"|Unable to find code object for all current devices"
                                    r"|TensileLibrary\w*\.dat: No such file or directory for GPU arch")),
    # the GPU's generation lacks the data type or kernel (vLLM's checks, Triton's, flash-attn's)
    (GPU_DTYPE, "high", gated(r"Bfloat16 is only supported on GPUs with compute capability of at least"
                              r"|The quantization method \S+ is not supported for the current GPU"
                              r"|type fp8\w* not supported in this architecture"
                              r"|FlashAttention only supports Ampere GPUs or newer")),
    (CUDA_DRIVER, "high", gated(r"CUDA driver version is insufficient for CUDA runtime version"
                                r"|PTX was compiled with an unsupported toolchain")),
    (ILLEGAL_ADDRESS, "high", gated(r"an illegal memory access was encountered|\bmisaligned address\b"
                                    r"|unspecified launch failure")),
    (CUBLAS, "high", gated(r"CUBLAS_STATUS_(?!ALLOC_FAILED|SUCCESS)[A-Z_]+|cuBLAS error \d+ at ")),
    (ASSERT_N_BATCH, "high", _assert_re("n_tokens_all <= cparams.n_batch")),
    (ASSERT_UBATCH, "high", gated(r"non-causal attention requires n_ubatch >= n_tokens"
                                  r"|encoder requires n_ubatch >= n_tokens")),
    (ASSERT_CPY_INT_MAX, "high", _assert_re("ggml_nbytes(src0) <= INT_MAX")),
    (ASSERT_SAMPLER, "high", _assert_re("cur_p.selected >= 0")),
    (ASSERT_GET_ROWS, "high", _assert_re("i01 >= 0 && i01 < ne01")),
    (ASSERT_EXPERTS, "high", _assert_re("hparams.n_expert <= LLAMA_MAX_EXPERTS")),
    (ASSERT_HOST_MEMORY, "high", _assert_re("ctx->mem_buffer != NULL")),
    # a CUDA extension's CHECK_CUDA (TORCH_CHECK(x.device().is_cuda(), #x " must be a CUDA tensor"))
    (CUDA_TENSOR_ON_CPU, "high", gated(r"\b\w+ must be a CUDA tensor")),
    # configuration errors of the PyTorch servers (crash_config.py): the heads against the tensor-parallel size
    # (vLLM's, TGI's, DeepSpeed's wordings), NCCL's shared memory (its own warning names /dev/shm) or a system call it
    # failed, a kernel launched with too large a grid (CUDA's error text, the Ascend runtime's check)
    (TP_HEADS, "high", TP_HEADS_RE),
    (NCCL_SYSTEM, "high", gated(r"NCCL WARN (?:Error while creating shared memory segment|Error: failed to extend)"
                                r" /dev/shm/|NCCL WARN Call to posix_fallocate failed")),
    (NCCL_SYSTEM, "medium", gated(r"(?:NCCL ?|Nccl|NCCL_)(?:[Ee]rror|ERROR).{0,200}?unhandled system error")),
    (KERNEL_GRID, "high", gated(r"KernelLaunch failed because value \d+ for parameter \w+ is invalid"
                                r"|\binvalid configuration argument\b")),
    # the run ended outside the engine's code (crash_launch.py): the GPU's watchdog, a front-end's estimate
    (METAL_WATCHDOG, "high", gated(r"kIOGPUCommandBufferCallbackErrorImpactingInteractivity")),
    (ESTIMATE_NAN, "high", gated(r"\b(?:requires|needs|estimated?)\b[^.]{0,40}?\bNaN(?: undefined|\s*[KMGT]?i?B)\b")),
)
# a DeepSpeed-Inference run (deepspeed.init_inference; its config's mp_size / kernel injection; its traceback frames)
DEEPSPEED_INFERENCE = gated(r"\bmp_size\b|\binit_inference\b|replace_with_kernel_inject|DeepSpeed[- ]Inference"
                            r"|DeepSpeedTransformerInference|deepspeed[/\\](?:inference|ops[/\\]transformer[/\\]inference)[/\\]")
# the GPU generation and the board around a crash: an architecture (compute capability, an AMD gfx target,
# an sm_ list) and an embedded platform (Jetson / Tegra, Raspberry Pi, Rockchip RK3588)
GPU_ARCH = gated(r"\b(gfx\d{3,4}[a-f]?)\b|compute capability:? (\d+\.\d+)|\bcompute=(\d+\.\d+)\b"
                 r"|capability (sm_\d{2,3})\b")
PLATFORM = gated(r"\b(Jetson[\w -]*|Tegra|Orin|Xavier|Raspberry Pi[\w ]*|BCM27[0-9]{2}|RK3588\w*|rk3588\w*|Rockchip)")
# a CUDA/HIP error whose text is none of the above (out of memory is the OOM rules' to explain)
CUDA_ERROR = gated(r"\b(?:CUDA|HIP|ROCm|MUSA) error(?::| \d+ at \S+:\d+:)\s*"
                   r"(?!out of memory|CUBLAS_STATUS_ALLOC_FAILED|the resource allocation failed)(\S.*)$")
CUDA_WHERE = gated(r"current device: (-?\d+), in function (\w+) at (\S+)")
CUBLAS_CALL = gated(r"(?:^|\s)(cublas[A-Z]\w*)\(")
LCP_LOAD_FAILED = gated(r"Failed to load model from file: ")
# the process died by a signal: segfault family, and SIGILL
SEGV = gated(r"Segmentation fault|\bsegfault at\b|general protection fault|\bSIGSEGV\b|signal: segmentation fault"
             r"|exit status 0xc0000005|Signals\.SIGSEGV")
SIGILL = gated(r"Illegal instruction|trap invalid opcode|\bSIGILL\b|signal: illegal instruction"
               r"|exit status 0xc000001d")
# the kernel's own lines: "comm[pid]: segfault at ..." / "traps: comm[pid] general protection fault ..."
KERNEL_TRAP = gated(r"\S+\[\d+\]:? (?:segfault at|general protection fault|trap invalid opcode)")
ENGINE_WORDS = re.compile(r"llama|python|ollama|ggml|vllm|text-generation|koboldcpp|lms", re.IGNORECASE)
# evidence for the AMX / repack crash
AMX_BUFFER = gated(r"\b(AMX|CPU_REPACK|CPU_AARCH64|[A-Za-z]+-REPACK) model buffer size")
AMX_REPACK_LINE = gated(r"amx repack tensor")
AMX_FEATURE = gated(r"\bAMX_INT8 = 1\b")
AMX_FRAME = gated(r"ggml_backend_amx_\w+|ggml::cpu::amx::|ggml_cpu_extra_\w+|ggml::cpu::repack::\w+"
                  r"|libggml-cpu-sapphirerapids")
AMX_VARIANT = gated(r"libggml-cpu-sapphirerapids|ggml-cpu-sapphirerapids\.dll")
# an Intel Xeon generation with AMX: 4th/5th gen Scalable (x4xx / x5xx), Xeon W-2400/3400/2500/3500,
# Xeon Max 9400, Xeon 6 with P-cores (6xxxP); QEMU/cloud model names and the kernel's family/model line
AMX_CPU = gated(r"Xeon\(R\) (?:Platinum|Gold|Silver|Bronze) [3-9][45]\d\d|Xeon\(R\) w[3579]-[23][45]\d\d"
                r"|Xeon\(R\) (?:CPU )?Max 94\d\d|Xeon\(R\) 6\d\d\dP\b|Sapphire ?Rapids|Emerald ?Rapids"
                r"|Granite ?Rapids|family: 0x6, model: 0x(?:8f|cf|ad|ae)\b|\bamx_int8\b")

# The kinds of line this parser reads, in the order it tries them. Their `lines` are its gate (the
# analyzer hands it no others); their `scan` the candidate lines it adds to the scan: only those no
# other parser's triggers already select (the llama.cpp parser's take every line with "error",
# "failed", "GGML_A", "buffer size =", "Segmentation fault", "SIGSEGV", "SSE3 = "...), so the scan
# over every byte stays as fast.
# the first half of a cause's sentence that a wrap cut (the parser reads such a line joined with its next): the
# heads checks' openings
WRAPPED_HEADS = gated(r"Total number of attention heads \(|\b(?:n_heads|num_heads|num_attention_heads) \(\d+\) must be"
                      r"|`num_heads` must be")
EXPLICIT_KIND = LineKind(
    "explicit", (*(pattern for _, _, pattern in EXPLICIT), WRAPPED_HEADS),
    (r"K-shift", r"model architecture", r"not supported by your version", r"rocblaslt (?:error|warning)",
     r"run-detectors: unable to find",
     r"kernel image|invalid device function|NoBinaryForGpu|code object for all current|TensileLibrary",
     r"compute capability of at least|Minimum capability|not supported in this architecture"
     r"|FlashAttention only supports",
     r"CUDA driver version|unsupported toolchain", r"illegal memory access|misaligned address|launch failure",
     r"CUBLAS_STATUS|cuBLAS error", r"GGML_ASSERT", r"must be a CUDA tensor",
     r"must be divisible by tensor parallel size|must be divisible by `num_shards`|must be divisible by mp_size"
     r"|divisible by the world_size|Total number of attention heads \(",
     r"NCCL WARN", r"unhandled system error", r"KernelLaunch failed|invalid configuration argument",
     r"ErrorImpactingInteractivity", r"NaN undefined|NaN [KMGT]i?B"),
    scan=(r"K-shift", r"model architecture", r"must be a CUDA tensor", r"rocblaslt (?:error|warning)",
          r"run-detectors: unable to find", r"ErrorImpactingInteractivity", r"NaN undefined|NaN [KMGT]i?B",
          r"must be divisible by tensor parallel size|must be divisible by `num_shards`|must be divisible by mp_size"
          r"|divisible by the world_size|Total number of attention heads \(",
          r"NCCL WARN", r"unhandled system error", r"KernelLaunch failed|invalid configuration argument",
          r"invalid device function|NoBinaryForGpu|code object for all current|TensileLibrary",
          r"compute capability of at least|Minimum capability|not supported in this architecture"
          r"|FlashAttention only supports"))
# the lines after a CUDA error that say where it happened
CUDA_DETAIL_KIND = LineKind("cuda_detail", (CUDA_WHERE, CUBLAS_CALL), (r"current device: ", r"cublas[A-Z]\w*\("))
CUDA_ERROR_KIND = LineKind("cuda_error", (CUDA_ERROR,), (r"(?:CUDA|HIP|ROCm|MUSA) error",), scan=())
LCP_LOAD_FAILED_KIND = LineKind("lcp_load_failed", (LCP_LOAD_FAILED,), (r"Failed to load model from file",), scan=())
AMX_EVIDENCE_KIND = LineKind(
    "amx_evidence",
    (AMX_BUFFER, AMX_REPACK_LINE, AMX_FEATURE, AMX_VARIANT, AMX_FRAME, AMX_CPU),
    (r"model buffer size", r"amx repack", r"AMX_INT8 = 1", r"ggml_backend_amx_|ggml::cpu::|ggml_cpu_extra_",
     r"sapphirerapids", r"Xeon|Rapids|family: 0x6, model|amx_int8"),
    scan=(r"amx repack", r"ggml_backend_amx_|ggml::cpu::|ggml_cpu_extra_|sapphirerapids",
          r"Xeon|Rapids|amx_int8"))
SIGNAL_KIND = LineKind(
    "signal", (SIGILL, SEGV, endings.ENDING),
    (r"Segmentation fault|segfault at|general protection fault|SIGSEGV|signal: segmentation|0xc0000005",
     r"Illegal instruction|invalid opcode|SIGILL|signal: illegal|0xc000001d", *endings.FRAGMENTS),
    scan=(r"segfault at|general protection|signal: segm",
          r"Illegal instruction|invalid opcode|SIGILL|signal: illegal|0xc000001d", *endings.FRAGMENTS))
# the hardware around a crash (the device lines are other parsers' candidates already; the boards are not)
CONTEXT_KIND = LineKind(
    "context", (GPU_ARCH, PLATFORM, DEEPSPEED_INFERENCE),
    (r"gfx[0-9]{3}|compute capability|compute=[0-9]|capability sm_",
     r"Jetson|Tegra|Orin|Xavier|Raspberry Pi|BCM27[0-9][0-9]|RK3588|rk3588|Rockchip",
     r"mp_size|init_inference|replace_with_kernel_inject|DeepSpeed[- ]Inference|DeepSpeedTransformerInference"
     r"|deepspeed[/\\](?:inference|ops)[/\\]"),
    scan=(r"Jetson|Tegra|Raspberry Pi|BCM27[0-9][0-9]|RK3588|rk3588|Rockchip",
          r"mp_size|init_inference|replace_with_kernel_inject|DeepSpeed[- ]Inference|DeepSpeedTransformerInference"
          r"|deepspeed[/\\](?:inference|ops)[/\\]"))

KINDS = LineKinds(
    EXPLICIT_KIND,
    CUDA_DETAIL_KIND,
    CUDA_ERROR_KIND,
    LCP_LOAD_FAILED_KIND,
    AMX_EVIDENCE_KIND,
    SIGNAL_KIND,
    CONTEXT_KIND,
)
GATE = KINDS.gate
TRIGGERS = KINDS.triggers
