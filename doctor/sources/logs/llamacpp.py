"""llama.cpp family: llama-cli, llama-server, the library's own lines, and llama-cpp-python.

Every era of output is read (see ../shared/reference/engine_log_signatures.md): `print_info` and
`llm_load_print_meta` metadata, offload lines, model / KV / compute / output buffer sizes under every
prefix (the last value per buffer wins: `--fit` prints them twice), `llama_print_timings` /
`llama_perf_context_print` / server `print_timings` in its three styles, context shift and
truncation in all their forms, KV-slot and decode failures, CUDA / ROCm / Vulkan / Metal / host
allocation failures split by the phase they happen in (cuBLAS handles that cannot be allocated are
OOMs too; Metal's recommendedMaxWorkingSetSize exceeded is a weights OOM), no-GPU warnings, GPU
backends that fail for a driver or runtime reason (doctor/sources/logs/gpu_failures.py), system_info and
threads, llama-cpp-python's exceptions, and what the input gives away: a CPU-only build (model
buffers on the host and no "offloaded N/M layers" line), `n_gpu_layers` in pasted code, the model path.
Patterns match message text and `key = value`, never function prefixes or column padding.

Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from doctor.core.facts import Facts, Source
from doctor.sources.logs.base import Extremes, LineKind, LineKinds, LogParser
from doctor.sources.logs.gpu_failures import gpu_failure_cause
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.matcher import gated

MIB = 1 << 20
GIB = 1 << 30
NUM = r"(-?[\d.]+|inf|-?nan)"
GPU_BACKENDS = ("CUDA", "ROCm", "HIP", "MUSA", "Metal", "Vulkan", "SYCL", "CANN", "OpenCL", "BLAS_CUDA", "KOMPUTE")

# -- patterns ------------------------------------------------------------------------------------
META = gated(r"(?:print_info|llm_load_print_meta)\s*:\s+([A-Za-z_][\w. ]*?)\s*=\s*(.*)$")
LOADED_META = gated(r"loaded meta data with \d+ key-value pairs and (\d+) tensors from (.+?) \(version")
LOADING_FROM = gated(r"(?:llama\.cpp|llama_model_load\w*|llama_load_model_from_file): loading model from (\S.*?)\s*$")
LOAD_MODE = gated(r"loading model tensors.*\((?:mmap = (true|false)|load_mode = ([\w+]+))")
OFFLOADED = gated(r"offloaded (\d+)/(\d+) layers to GPU")
BUFFER = gated(r"(?<![\w.])([A-Za-z][\w\-]*)\s+(?:(model|KV|compute|output|RS|"
               r"LoRA)\s+)?buffer size\s*=\s*([\d.]+)\s*MiB")
KV_SIZE = gated(r"size\s*=\s*([\d.]+)\s*MiB\s*\(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)(?:/\s*(\d+))? seqs\),"
                r"\s*K \((\w+)\):\s*([\d.]+)\s*MiB,\s*V \((\w+)\):\s*([\d.]+)\s*MiB")
KV_SELF = gated(r"KV self size\s*=\s*([\d.]+)\s*MiB,\s*K \((\w+)\):\s*([\d.]+)\s*MiB,\s*V "
                r"\((\w+)\):\s*([\d.]+)\s*MiB")
KV_SELF_2023 = gated(r"kv self size\s*=\s*([\d.]+)\s*MB")
VRAM_USED_2023 = gated(r"VRAM used:\s*([\d.]+)\s*MB")
MEM_REQUIRED_2023 = gated(r"mem required\s*=\s*([\d.]+)\s*MB")
KV_TYPES_OLD = gated(r"type_k = '(\w+)', type_v = '(\w+)'")
CTX_KV = gated(r"\b(n_ctx|n_ctx_seq|n_ctx_per_seq|n_seq_max|n_batch|n_ubatch|flash_attn|kv_unified|n_ctx_slot|"
               r"n_slots)\s*=\s*'?([\w.]+)")
CTX_TRAIN_OVER = gated(r"n_ctx_(?:seq|per_seq|pre_seq) \((\d+)\) > n_ctx_train \((\d+)\)")
CTX_TRAIN_WARN = gated(r"model was trained on only (\d+) context tokens \((\d+) specified\)")
QUANT_V_NEEDS_FA = gated(r"quantized V cache requires flash_attn|V cache quantization requires flash_attn"
                         r"|quantized V cache was requested, but this requires Flash Attention")
FA_DECISION = gated(r"Flash Attention (?:was auto, set to (enabled|disabled)|(enabled)|"
                    r"not supported, set to (disabled))")
TIMING = gated(r"(load|prompt eval|generation eval|eval|total|sample|sampling|samplers) time\s*=\s*" + NUM
               + r"\s*ms(?:\s*/\s*(\d+)\s*(tokens|runs))?(?:\s*\(\s*" + NUM + r"\s*ms per token,\s*" + NUM
               + r"\s*tokens per second\))?")
SERVER_TG = gated(r"\b(?:n_gen|n_decoded)\s*=\s*(\d+),\s*tg\s*=\s*([\d.]+)\s*t/s")
SYSINFO_THREADS = gated(r"n_threads\s*=\s*(\d+)(?:\s*\(n_threads_batch\s*=\s*(\d+)\))?\s*/\s*(\d+)")
SERVER_THREADS = gated(r"n_threads\s*=\s*(\d+),?\s*n_threads_batch\s*=\s*(\d+),?\s*total_threads\s*=\s*(\d+)")
FEATURE = gated(r"\b([A-Z][A-Z0-9_]+)\s*=\s*1\b")
SECTION = gated(r"(?:^|[|\"])\s*([A-Za-z][A-Za-z0-9_]*)\s+:\s")  # Ollama quotes the line: info="CUDA : ...
CUDA_FOUND = gated(r"found (\d+) (CUDA|ROCm|MUSA) devices")
CUDA_DEVICE = gated(r"Device (\d+): (.+?), (?:compute capability|gfx)[^,]*(?:,.*?VRAM: (\d+) MiB)?")
USING_DEVICE = gated(r"using device (\S+) \((.+?)\)(?: \([^)]*\))? - (\d+) MiB free")
BACKEND_LOADED = gated(r"loaded (\w+) backend from")
VULKAN_FOUND = gated(r"ggml_vulkan: Found (\d+) Vulkan devices")
METAL_DEVICE = gated(r"ggml_metal\w*: (?:found device|GPU name):\s*(.+)$")
NO_GPU = gated(r"no usable GPU found|not compiled with GPU offload support|compiled without GPU support")
GPU_INIT_FAILED = gated(r"failed to initialize (CUDA|ROCm|MUSA|Vulkan|SYCL)\s*:\s*(.*)$")
# a CUDA call failing for a driver/runtime reason, not memory (cudaGetErrorString texts; see gpu_failures.py)
GPU_RUNTIME_FAILED = gated(r"\b(CUDA|ROCm) error(?: \d+ at \S+)?: (CUDA driver version is insufficient.*"
                           r"|.*unsupported display driver.*"
                           r"|the provided PTX was compiled with an unsupported toolchain.*"
                           r"|forward compatibility was attempted.*|unknown error)$")
BACKEND_NOT_LOADED = gated(r"load_backend: failed to load (\S+)|failed to load (?:the )?(CUDA|ROCm|Vulkan) backend")
GENERATE = gated(r"generate: n_ctx = (\d+), n_batch = (\d+), n_predict = (-?\d+), n_keep = (\d+)")
SAMPLER_KV = gated(r"\b(repeat_last_n|repeat_penalty|frequency_penalty|presence_penalty|dry_multiplier|top_k|"
                   r"top_p|min_p|temp|mirostat)\s*=\s*(-?[\d.]+)")
SEED = gated(r"\bseed\s*=\s*(\d+)|sampler seed:\s*(\d+)")
# context overflow, in every form
REQUESTED_TOKENS = gated(r"Requested tokens \((\d+)\) exceed context window of (\d+)")
PROMPT_TOO_LONG = gated(r"prompt is too long \((\d+) tokens, max (\d+)\)")
REQUEST_EXCEEDS = gated(r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)")
INPUT_LARGER = gated(r"input \((\d+) tokens\) is larger than the max context size \((\d+) tokens\)")
TOO_BIG_MSGS = gated(r"Input prompt is too big compared to KV size|the request exceeds the available context size"
                     r"|input is larger than the max context size|"
                     r"This model's maximum context length is (\d+) tokens")
TRUNCATED = gated(r"input truncated, n_ctx = (\d+), n_keep = (\d+), n_left = (\d+), n_prompt_tokens = (\d+)")
STOP_TRUNCATED = gated(r"stop processing: (?:n_past|n_tokens) = (\d+), truncated = (\d+)")
CTX_SHIFT = gated(r"(?:slot )?context shift(?:, | - )n_keep = (\d+), n_left = (\d+), n_discard = (\d+)"
                  r"|context full, swapping: n_past = (\d+), n_left = (\d+), n_ctx = (\d+), n_keep = (\d+), "
                  r"n_discard = (\d+)"
                  r"|\bslot context shift\b|context limit hit - shifting")
CTX_FULL_STOP = gated(r"context full and context shift is disabled")
CTX_SHIFT_DISABLED = gated(r"context shift is disabled")
MEMORY_SLOT = gated(r"failed to find (?:a memory slot for batch|KV cache slot for ubatch) of size (\d+)")
KV_FULL = gated(r"failed to find free space in the KV cache|KV cache is full|Context size has been exceeded")
DECODE_FAILED = gated(r"failed to decode(?:, ret = (-?\d+)| the batch)|llama_decode returned (-?\d+)|"
                      r"failed to eval\b")
NEW_PROMPT = gated(r"new prompt, n_ctx_slot = (\d+), n_keep = (\d+), (?:n_prompt_tokens|task\.n_tokens) = (\d+)")
SLOT_INIT = gated(r"initializing(?: slots)?(?:,| \|)\s*n_slots\s*=\s*(\d+)(?:, n_ctx_slot = (\d+))?")
SLOT_TASK = re.compile(r"\bid +(\d+) \| task (-?\d+) \|")
NEW_SLOT = gated(r"new slot,?(?: \|.*?)? n_ctx(?:_slot)?\s*=\s*(\d+)")
# memory
CUDA_MALLOC = gated(r"allocating ([\d.]+) MiB on device (\d+): cudaMalloc failed: (.+)$")
CUDA_MALLOC_BARE = gated(r"cudaMalloc failed: out of memory|hipMalloc failed")
# llama.cpp --fit (llama_params_fit, Oct 2025 on): its plan before loading (issue 16, item 5)
FIT_PROJECTED = gated(r"projected to use (\d+) MiB of device memory vs\. (\d+) MiB of free device memory")
ALLOC_RANGE = gated(r"alloc_tensor_range: failed to allocate (\S+) buffer of size (\d+)")
GALLOCR = gated(r"(?:ggml_gallocr_reserve_n\w*|gallocr\w*): failed to allocate (\S+) buffer of size (\d+)")
CPU_ALLOC = gated(r"ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size (\d+)")
BACKEND_OOM = gated(r"\b(CUDA|ROCm|MUSA) error: out of memory|CUDA error \d+ at .*: out of memory"
                    r"|(?:CU|HIP)BLAS_STATUS_(?:ALLOC_FAILED|NOT_INITIALIZED)|cuBLAS error [13] at"
                    r"|(?:CUDA|ROCm) error: the (?:resource allocation failed|library was not initialized)"
                    r"|ErrorOutOfDeviceMemory|Device memory allocation of size (\d+) failed"
                    r"|kIOGPUCommandBufferCallbackErrorOutOfMemory|Insufficient Memory"
                    r"|failed to allocate Metal buffer of (\d+) bytes|"
                    r"ggml_metal\w*: error: failed to allocate buffer, size =\s*([\d.]+) MiB")
# Metal: the buffers placed on the GPU went past what macOS lets one process keep resident
METAL_OVER_SET = gated(r"current allocated size is greater than the recommended max working set size")
METAL_ALLOCATED = gated(r"allocated buffer, size =\s*([\d.]+) MiB,\s*\(\s*([\d.]+) / ([\d.]+)\)")
METAL_SET_SIZE = gated(r"recommendedMaxWorkingSetSize\s*=\s*([\d.]+) MB")
# settings pasted beside the log: Python keyword arguments (Llama(..., n_gpu_layers=35)) or CLI flags
NGL_SETTING = gated(r"\bn_gpu_layers\s*[=:]\s*(-?\d+)|(?:^|\s)(?:-ngl|--n-gpu-layers|--gpu-layers)[ =](-?\d+)\b")
# PyTorch's "CUDA out of memory. Tried to allocate" (vLLM, TGI) is read by doctor/sources/logs/vllm.py, which
# knows their steps
PHASE_WEIGHTS = gated(r"unable to allocate (\S+) buffer|error loading model: .*(?:alloc|memory)")
PHASE_KV = gated(r"failed to allocate buffer for kv cache|llama_kv_cache_init\(\) failed|"
                 r"kv_cache_init.*failed|failed to allocate (?:the )?KV")
PHASE_COMPUTE = gated(r"failed to allocate compute (?:pp |tg )?buffers|compute buffer allocation failed|"
                      r"failed to allocate output buffer|failed to allocate graph")
LOAD_FAILED = gated(r"error loading model: (.*)$|failed to load model(?: '([^']*)')?|"
                    r"Failed to load model from file: (.*)$"
                    r"|Model path does not exist: (.*)$|unable to load model")
CORRUPT = gated(r"data is not within the file bounds|model is corrupted or incomplete|invalid magic characters"
                r"|failed to read (?:magic|header|tensor info|tensor data)|gguf_init_from_file\w*: failed"
                r"|bad GGUF version|wrong number of tensors|unknown model architecture: '([^']*)'")
CONTEXT_FAILED = gated(r"Failed to create llama_context|failed to initialize the context: (.*)$|"
                       r"failed to create context with model")
CRASH = gated(r"GGML_ASSERT\(?|GGML_ABORT|: CUDA error$|Segmentation fault|core dumped|"
              r"terminate called after throwing"
              r"|\bAborted\b|fatal error|SIGABRT|SIGSEGV")
# llama-cpp-python
LCP_SIGNATURE = gated(r"Model metadata: \{|Available chat formats from metadata|Using gguf chat template|"
                      r"Using chat eos_token"
                      r"|Llama\.generate: |llama_cpp[/.]|Requested tokens \(|Failed to create llama_context"
                      r"|Failed to load model from file|llama_decode returned|Llama\._create_completion"
                      r"|\bLlama\(model_path=")
LCP_TEXT = gated(r"""['"]text['"]\s*:\s*(['"])(.*?)(?<!\\)\1""")
LCP_FINISH = gated(r"""['"]finish_reason['"]\s*:\s*['"](\w+)['"]""")
SERVER_SIGNATURE = gated(r"\bslot\s+\w+\s*: id\s+\d+ \| task|\bsrv\s+\w+: |server is listening|llama_server|"
                         r"INFO \[\s+\w+\] |all slots are idle|update_slots")
CLI_SIGNATURE = gated(r"\bmain: |system_info: n_threads|generate: n_ctx|sampler params|"
                      r"common_init_from_params|build: \d+ \(")
BUILD = gated(r"build(?::| =)\s*(\d+) \(([0-9a-f]+)\)")
OUTPUT_END = gated(r"llama_perf_|llama_print_timings|llama_perf_print|\bmain: |\[end of text\]|"
                   r"interrupted by user")

_MEMORY_KEYS = ("alloc", "emory", "OutOf", "rror", "ailed", "GGML_A", "bort", "egmentation", "dumped",
                "terminate", "SIG", "unable", "corrupt", "magic", "GGUF", "architecture", "not exist", "load model",
                "within the file")
_CONTEXT_KEYS = ("exceed", "too long", "too big", "larger than", "truncated", "context", "KV cache",
                 "memory slot", "cache slot", "decode", "returned", "failed to eval", "shifting")
_CTX_KV_KEYS = ("n_ctx", "n_seq_max", "n_batch", "n_ubatch", "flash_attn", "kv_unified")
_SAMPLER_KEYS = ("repeat_penalty", "top_k =", "mirostat =", "temp =")

# -- line kinds ------------------------------------------------------------------------------------
# The parser reads every candidate line (no gate): `lines` are its trigger fragments, specific enough
# that the lines worth reading are the only candidates (they are scanned over every byte of the
# input); RE2-compatible syntax (no look-around). Phases, in the order feed() runs them: "vote" (the
# engine's signature lines; llama-server or else llama-cli), "end" (the end of a llama-cli output),
# "read" (the first kind that takes the line wins; a line a terminal wrapped is read again joined
# with the next) and "rest" (llama-cpp-python's output, on a line no kind took).
#
# Every "read" kind returns True only when one of its patterns matched (or, for meta, memory,
# context, timings and the CTX_KV / sampling / system_info branches, when the plain `in` tests they
# make hold), and changes nothing when it returns False. So a kind is tried only on a line that holds
# a literal of each of its needs (`keys`, then its patterns' literals): the result is the same as
# trying every kind, found without the dozens of searches a line that no kind takes would cost. The
# literals of a gated pattern come from the pattern itself (matcher.required_literals), so they
# cannot drift from the regex; tests/logs/test_log_routing.py checks the result against trying every
# kind. Each handler keeps its own full condition: the routing only skips kinds that cannot fire.
KINDS = LineKinds(
    LineKind("lcp_signature", "_vote_lcp", (LCP_SIGNATURE,),
             (r"Model metadata|chat format|chat template|eos_token|Llama\.|llama_cpp", r"Llama\(model_path="),
             phase="vote"),
    LineKind("server_signature", "_vote_server", (SERVER_SIGNATURE,),
             (r"server is listening|all slots are idle",), phase="vote"),
    LineKind("cli_signature", "_vote_cli", (CLI_SIGNATURE,), (r"sampler params",), phase="vote"),
    LineKind("output_end", "_output_end", (OUTPUT_END,), (r"end of text|interrupted by user",), phase="end"),
    LineKind("meta", "_step_meta", ("print_info", "llm_load_print_meta"),
             (r"(?:print_info|llm_load_print_meta): +(?:arch|n_ctx_train|n_embd|n_layer |n_head|n_swa|n_expert"
              r"|n_vocab|model (?:type|ftype|params|size)|file (?:type|size)|general\.name)",)),
    LineKind("memory", "_step_memory",
             (CUDA_MALLOC, ALLOC_RANGE, GALLOCR, CPU_ALLOC, PHASE_KV, PHASE_COMPUTE, PHASE_WEIGHTS, BACKEND_OOM,
              CUDA_MALLOC_BARE, CORRUPT, LOAD_FAILED, CONTEXT_FAILED, CRASH),
             (r"failed|Failed|error|Error|unable to|out of memory|OutOf|Insufficient Memory",
              r"GGML_A|Segmentation fault|core dumped|terminate called|Aborted|SIGABRT|SIGSEGV",
              r"not within the file|corrupt|invalid magic|bad GGUF|Model path"),
             keys=_MEMORY_KEYS),
    LineKind("context", "_step_context",
             (REQUESTED_TOKENS, PROMPT_TOO_LONG, REQUEST_EXCEEDS, INPUT_LARGER, TOO_BIG_MSGS, TRUNCATED,
              STOP_TRUNCATED, CTX_FULL_STOP, CTX_SHIFT, MEMORY_SLOT, KV_FULL, CTX_SHIFT_DISABLED, DECODE_FAILED),
             (r"exceed|too long|too big|larger than|truncated|context shift|context full|shifting|KV cache|returned",
              r"stop processing"),
             keys=_CONTEXT_KEYS),
    LineKind("timings", "_step_timings", (SERVER_TG, TIMING), (r" time +=", r"(?:tg|n_gen|n_decoded) += ",
                                                                r"print_timing"),
             keys=(" time", "t/s")),
    LineKind("loaded_meta", "_step_loaded_meta", (LOADED_META,), (r"loaded meta data",)),
    LineKind("loading_from", "_step_loading_from", (LOADING_FROM,), (r"loading model from ",)),
    LineKind("metal", "_step_metal", (METAL_SET_SIZE, METAL_ALLOCATED, METAL_OVER_SET),
             (r"recommended max working set|allocated buffer, size|recommendedMaxWorkingSetSize",)),
    LineKind("settings", "_step_settings", (NGL_SETTING,), (r"n_gpu_layers|-ngl |gpu-layers",)),
    LineKind("load_mode", "_step_load_mode", (LOAD_MODE,), (r"loading model tensors",)),
    LineKind("offloaded", "_step_offloaded", (OFFLOADED,), (r"offloaded \d+/",)),
    LineKind("buffer", "_step_buffer", (BUFFER,), (r"buffer size +=",)),
    LineKind("fit_projected", "_step_fit_projected", (FIT_PROJECTED,), (r"projected to use",)),
    LineKind("kv_size", "_kv_size", (KV_SIZE, KV_SELF, KV_SELF_2023, KV_TYPES_OLD),
             (r"cells,", r"KV self size", r"kv self size", r"type_k = '")),
    LineKind("context_params", "_context_params",
             (QUANT_V_NEEDS_FA, CTX_TRAIN_OVER, CTX_TRAIN_WARN, FA_DECISION, GENERATE, SLOT_INIT, NEW_SLOT, NEW_PROMPT,
              *_CTX_KV_KEYS),
             (r"n_ctx(?:_seq|_per_seq)? +=", r"n_seq_max +=", r"n_u?batch +=", r"flash_attn +=", r"Flash Attention",
              r"kv_unified +=", r"n_slots", r"V cache (?:quantization )?requires|quantized V cache", r"> n_ctx_train",
              r"trained on only", r"generate: n_ctx", r"new prompt|new slot|initializing")),
    LineKind("hardware", "_hardware",
             (SYSINFO_THREADS, SERVER_THREADS, " = 1", CUDA_FOUND, CUDA_DEVICE, USING_DEVICE, BACKEND_LOADED,
              VULKAN_FOUND, METAL_DEVICE, NO_GPU, GPU_INIT_FAILED, GPU_RUNTIME_FAILED, BACKEND_NOT_LOADED, BUILD),
             (r"n_threads +=", r"(?:AVX2|NEON|SSE3) = ", r"found \d+ \w+ devices", r"Device \d+: ", r"using device",
              r"backend from", r"ggml_metal\w*: (?:found device|GPU name|error)",
              r"ggml_vulkan: (?:Found|Device memory)", r"no usable GPU|GPU offload support|without GPU support",
              r"build(?::| =) \d+ \(")),
    LineKind("sampling", "_sampling", (*_SAMPLER_KEYS, SEED),
             (r"repeat_penalty|top_k = |mirostat = |sampler seed|seed +=",)),
    LineKind("old_buffers", "_old_buffers", (VRAM_USED_2023, MEM_REQUIRED_2023), (r"VRAM used", r"mem required")),
    LineKind("lcp_output", "_lcp_output", (LCP_TEXT, LCP_FINISH), (r"'text': |\"text\": |finish_reason",),
             phase="rest"),
    phases=("vote", "end", "read", "rest"), gated=False,
)
TRIGGERS = KINDS.triggers
if KINDS.index is None:  # every llama.cpp line kind declares the literals it needs
    raise ImportError("doctor.sources.logs.llamacpp: its line kinds declare no literal")
_INDEX = KINDS.index  # the literal index the routing reads (tests/logs/test_log_routing.py checks it)
_VOTE, _END, _READ, _REST = (KINDS.phase(p) for p in KINDS.phases)


def _num(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _int_list(text: str) -> list[int] | None:
    values = re.findall(r"-?\d+", text)
    return [int(v) for v in values] if values else None


@dataclass(slots=True)
class _Timing:
    load_ms: float | None = None
    prompt_ms: float | None = None
    prompt_tokens: int | None = None
    eval_ms: float | None = None
    eval_tokens: int | None = None
    total_tokens: int | None = None
    prompt_tps: float | None = None
    eval_tps: float | None = None
    line: int | None = None
    used_line: LogLine | None = None  # the line that gives the tokens used (total, else the last count)


@dataclass(slots=True)
class _PendingOom:
    line: LogLine
    data: dict[str, Any]
    stage: str
    explicit: str | None = None


@dataclass(slots=True)
class _State:
    stage: str = "start"  # start → load → context → ready → run
    model_buffers: dict[str, float] = field(default_factory=dict)
    kv_buffers: dict[str, float] = field(default_factory=dict)
    compute_buffers: dict[str, float] = field(default_factory=dict)
    output_buffers: dict[str, float] = field(default_factory=dict)
    kv_size_lines: list[tuple[float, int, int]] = field(default_factory=list)  # (MiB, cells, streams)
    buffer_line: LogLine | None = None
    kv_line: LogLine | None = None
    timings: list[_Timing] = field(default_factory=list)
    current: _Timing | None = None
    decode_rates: Extremes = field(default_factory=Extremes)  # per request and in-progress (tg =), each with its line
    pending: list[_PendingOom] = field(default_factory=list)
    prompt_tokens_max: int = 0
    prompt_line: LogLine | None = None
    used_max: int = 0
    used_line: LogLine | None = None
    n_slots: int | None = None
    # server tasks whose prompt was cut ("input truncated") or whose context shifted: a later
    # "stop processing: ..., truncated = 1" for them says nothing new; for any other task it means
    # generation stopped at the end of the slot (context shift off, llama-server since late 2025)
    cut_tasks: set[str] = field(default_factory=set)
    shifted_tasks: set[str] = field(default_factory=set)
    gpu_names: dict[int, str] = field(default_factory=dict)
    gpu_vram: dict[int, int] = field(default_factory=dict)
    gpu_free: dict[str, int] = field(default_factory=dict)
    gpu_line: LogLine | None = None
    backends: set[str] = field(default_factory=set)
    backends_line: LogLine | None = None
    output: list[str] = field(default_factory=list)
    output_bytes: int = 0
    output_line: int | None = None
    capture: bool = False
    finish_reason: str | None = None
    finish_line: LogLine | None = None
    metal_set_mib: float | None = None
    metal_alloc: tuple[float, float, LogLine] | None = None  # (allocated MiB, working set MiB, line)
    metal_over: bool = False


class LlamaCppParser(LogParser):
    name = "llama.cpp"
    kinds = KINDS

    def __init__(self) -> None:
        super().__init__()
        self.s = _State()

    # -- entry -------------------------------------------------------------------------------
    def feed(self, line: LogLine) -> None:
        t = line.text
        s = self.s
        vote, end, read, rest = KINDS.plan(_INDEX.bits(t))  # the kinds this line can be, by phase
        for handler in vote:
            if handler(self, line):
                break
        for handler in end:
            handler(self, line)
        if s.pending and len(s.pending) and line.number - s.pending[0].line.number > 40:
            self._flush_oom(None)

        for handler in read:
            if handler(self, line):
                return
        if _looks_cut(t) and line.next_text and not _starts_a_line(line.next_text):
            # a line hard-wrapped by a terminal (mid-word) or an issue quote (at a space): read it with the next
            nxt = line.next_text.strip()
            for text in dict.fromkeys((line.joined(), t + nxt)):
                joined = LogLine(line.number, text, line.raw + " " + nxt)
                if self.dispatch(joined, _READ):
                    return
        for handler in rest:
            handler(self, line)

    # -- the signatures: which engine printed the log ------------------------------------------
    def _vote_lcp(self, line: LogLine) -> bool:
        if LCP_SIGNATURE.search(line.text):
            self.votes["llama-cpp-python"] += 1
        return False

    def _vote_server(self, line: LogLine) -> bool:
        if SERVER_SIGNATURE.search(line.text):
            self.votes["llama.cpp"] += 1
            self.votes["llama-server"] += 1
            return True  # not llama-cli as well
        return False

    def _vote_cli(self, line: LogLine) -> bool:
        if CLI_SIGNATURE.search(line.text):
            self.votes["llama.cpp"] += 1
            return True
        return False

    def _output_end(self, line: LogLine) -> bool:
        s = self.s
        if s.capture and OUTPUT_END.search(line.text):
            s.capture = False
        return False

    # -- the "read" kinds ----------------------------------------------------------------------
    # Each keeps its own full condition: the routing only skips kinds that cannot fire, so with
    # every literal "present" (bits = -1) it is the plain sequence of tries.
    def _step_meta(self, line: LogLine) -> bool:
        t = line.text
        if "print_info" in t or "llm_load_print_meta" in t:
            self._meta(line)  # any print_info line is taken, read or not
            return True
        return False

    def _step_memory(self, line: LogLine) -> bool:
        t = line.text
        return any(k in t for k in _MEMORY_KEYS) and self._memory(line)

    def _step_context(self, line: LogLine) -> bool:
        t = line.text
        return any(k in t for k in _CONTEXT_KEYS) and self._context_overflow(line)

    def _step_timings(self, line: LogLine) -> bool:
        t = line.text
        return (" time" in t or "t/s" in t) and self._timings(line)

    def _step_loaded_meta(self, line: LogLine) -> bool:
        m = LOADED_META.search(line.text)
        if not m:
            return False
        self._stage("load")
        self.s.model_buffers.clear()
        self.set("model.path", m.group(2).strip(), line)
        self.votes["llama.cpp-library"] += 1
        return True

    def _step_loading_from(self, line: LogLine) -> bool:
        m = LOADING_FROM.search(line.text)
        if not m:
            return False
        self._stage("load")
        self.set("model.path", m.group(1).strip("'\""), line)
        self.votes["llama.cpp-library"] += 1
        return True

    def _step_metal(self, line: LogLine) -> bool:
        """Metal's working-set check: past recommendedMaxWorkingSetSize the GPU pages and then fails."""
        t = line.text
        s = self.s
        m = METAL_SET_SIZE.search(t)
        if m:
            self.votes["llama.cpp-library"] += 1
            s.metal_set_mib = float(m.group(1)) * 1e6 / MIB
            s.backends.add("Metal")
            return True
        m = METAL_ALLOCATED.search(t)
        if m:
            self.votes["llama.cpp-library"] += 1
            s.metal_alloc = (float(m.group(2)), float(m.group(3)), line)
            if float(m.group(2)) > float(m.group(3)) > 0:
                self._metal_over(line)
            return True
        if METAL_OVER_SET.search(t):
            self._metal_over(line)
            return True
        return False

    def _metal_over(self, line: LogLine) -> None:
        s = self.s
        if s.metal_over:
            return
        s.metal_over = True
        data: dict[str, Any] = {"device": "Metal", "limit": "recommendedMaxWorkingSetSize", "phase_from": "message"}
        if s.metal_alloc is not None:
            data["bytes"] = int(s.metal_alloc[0] * MIB)
            data["available"] = int(s.metal_alloc[1] * MIB)
        elif s.metal_set_mib:
            data["available"] = int(s.metal_set_mib * MIB)
        self.event("oom", line, phase="weights", **data)

    def _step_settings(self, line: LogLine) -> bool:
        m = NGL_SETTING.search(line.text)
        if not m or "option will be ignored" in line.text:
            return False
        self.set("config.n_gpu_layers", int(m.group(1) or m.group(2)), line)
        return False  # the line may carry more (a command line with other flags)

    def _step_load_mode(self, line: LogLine) -> bool:
        m = LOAD_MODE.search(line.text)
        if not m:
            return False
        self._stage("load")
        self.s.model_buffers.clear()
        if m.group(1):
            self.set("config.use_mmap", m.group(1) == "true", line)
            self.set("config.load_mode", "mmap" if m.group(1) == "true" else "none", line)
        else:
            mode = m.group(2)
            self.set("config.load_mode", mode, line)
            self.set("config.use_mmap", "mmap" in mode, line)
            self.set("config.use_mlock", "mlock" in mode, line)
        return True

    def _step_offloaded(self, line: LogLine) -> bool:
        m = OFFLOADED.search(line.text)
        if not m:
            return False
        self.votes["llama.cpp-library"] += 1
        self.set("run.offloaded_layers", int(m.group(1)), line)
        self.set("run.total_layers", int(m.group(2)), line)
        self.set("engine.gpu_offload_supported", True, line)
        return True

    def _step_buffer(self, line: LogLine) -> bool:
        m = BUFFER.search(line.text)
        if m and "buffer size is" not in line.text:
            self._buffer(line, m)
            return True
        return False

    def _step_fit_projected(self, line: LogLine) -> bool:
        m = FIT_PROJECTED.search(line.text)
        if not m:
            return False
        self.set("run.fit_projected_bytes", int(m.group(1)) * MIB, line)
        self.set("run.fit_free_bytes", int(m.group(2)) * MIB, line)
        return True

    def _old_buffers(self, line: LogLine) -> bool:
        """2023 builds: "VRAM used: N MB", "mem required = N MB" (MB meant MiB then)."""
        m = VRAM_USED_2023.search(line.text)
        if m:
            self.s.model_buffers["CUDA0"] = float(m.group(1))
            self.s.buffer_line = line
            return True
        m = MEM_REQUIRED_2023.search(line.text)
        if m:
            self.s.model_buffers["CPU"] = float(m.group(1))
            self.s.buffer_line = line
            return True
        return False

    def wants_capture(self) -> bool:
        return self.s.capture

    def feed_gap(self, number: int, text: str) -> None:
        s = self.s
        if not s.capture or s.output_bytes > 64 * 1024:
            return
        if s.output_line is None:
            s.output_line = number
        s.output.append(text)
        s.output_bytes += len(text)

    # -- line kinds ---------------------------------------------------------------------------
    def _stage(self, stage: str) -> None:
        order = ["start", "load", "context", "ready", "run"]
        if stage == "load" and self.s.stage in ("ready", "run"):
            self.s.stage = "load"  # a new model load (another run in the same log)
            return
        if order.index(stage) > order.index(self.s.stage):
            self.s.stage = stage

    def _meta(self, line: LogLine) -> None:
        m = META.search(line.text)
        if not m:
            return
        self._stage("load")
        self.votes["llama.cpp-library"] += 1
        key, value = m.group(1).strip(), m.group(2).strip()
        ints = {"n_ctx_train": "model.n_ctx_train", "n_embd": "model.n_embd", "n_layer": "model.n_layer",
                "n_embd_head_k": "model.head_dim_k", "n_embd_head_v": "model.head_dim_v",
                "n_swa": "model.n_swa", "n_expert": "model.n_expert", "n_expert_used": "model.n_expert_used",
                "n_vocab": "model.n_vocab"}
        if key in ints:
            n = _int_list(value)
            if n:
                self.set(ints[key], n[0], line)
        elif key in ("n_head", "n_head_kv"):
            values = _int_list(value)
            if values:
                self.set(f"model.{key}", max(values), line)
                if len(values) > 1 and key == "n_head_kv":
                    self.set("model.n_head_kv_per_layer", values, line)
        elif key == "arch":
            self.set("model.arch", value, line)
        elif key in ("file type", "model ftype"):
            self.set("model.file_type", value.replace("(guessed)", "").strip(), line)
        elif key in ("file size", "model size"):
            m2 = re.match(r"([\d.]+)\s*(MiB|GiB|MB|GB)", value)
            if m2:
                size = float(m2.group(1)) * {"MiB": MIB, "GiB": GIB, "MB": 1e6, "GB": 1e9}[m2.group(2)]
                self.set("model.file_bytes", int(size), line)
        elif key == "model params":
            m2 = re.match(r"([\d.]+)\s*([KMBT])", value)
            if m2:
                mult = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}[m2.group(2)]
                self.set("model.n_params", int(float(m2.group(1)) * mult), line)
        elif key == "general.name":
            self.set("model.name", value, line)

    def _buffer(self, line: LogLine, m: re.Match[str]) -> None:
        s = self.s
        buf, kind, mib = m.group(1), m.group(2), float(m.group(3))
        if kind is None:
            # the ≤ Oct 2024 text for weights had no kind ("CUDA0 buffer size"); other words are kinds
            if buf.lower() in ("compute", "output", "kv", "input", "model", "rs", "lora", "scratch"):
                return
            kind = "model"
        table = {"model": s.model_buffers, "KV": s.kv_buffers, "compute": s.compute_buffers,
                 "output": s.output_buffers}.get(kind)
        if table is None:
            return
        if kind == "KV" and s.kv_size_lines and s.stage in ("ready", "run"):
            s.kv_buffers.clear()
        table[buf] = mib
        s.buffer_line = line
        if kind == "KV":
            self._stage("context")
        elif kind == "compute":
            self._stage("ready")
        if _is_gpu_buffer(buf):
            s.backends.add(_backend_of(buf))
            s.backends_line = s.backends_line or line

    def _kv_size(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        m = KV_SIZE.search(t)
        if m:
            cells, streams = int(m.group(2)), int(m.group(5) or m.group(4))
            if s.stage in ("ready", "run"):
                s.kv_size_lines.clear()
            self._stage("context")
            s.kv_size_lines.append((float(m.group(1)), cells, streams))
            s.kv_line = line
            self.set("config.type_k", m.group(6).lower(), line)
            self.set("config.type_v", m.group(8).lower(), line)
            self.set("config.n_parallel", int(m.group(4)), line)
            return True
        m = KV_SELF.search(t)
        if m:
            if s.stage in ("ready", "run"):
                s.kv_size_lines.clear()
            self._stage("context")
            s.kv_size_lines.append((float(m.group(1)), 0, 1))
            s.kv_line = line
            self.set("config.type_k", m.group(2).lower(), line)
            self.set("config.type_v", m.group(4).lower(), line)
            return True
        m = KV_SELF_2023.search(t)
        if m:
            s.kv_size_lines = [(float(m.group(1)), 0, 1)]  # "MB" in 2023 builds was MiB
            s.kv_line = line
            return True
        m = KV_TYPES_OLD.search(t)
        if m:
            self.set("config.type_k", m.group(1).lower(), line)
            self.set("config.type_v", m.group(2).lower(), line)
            return True
        return False

    def _context_params(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        if QUANT_V_NEEDS_FA.search(t):
            self.event("context_failed", line, reason="v_quant_needs_fa")
            return True
        m = CTX_TRAIN_OVER.search(t)
        if m:
            self.event("ctx_over_train", line, n_ctx=int(m.group(1)), n_ctx_train=int(m.group(2)))
            return True
        m = CTX_TRAIN_WARN.search(t)
        if m:
            self.event("ctx_over_train", line, n_ctx=int(m.group(2)), n_ctx_train=int(m.group(1)))
            return True
        m = FA_DECISION.search(t)
        if m:
            self.set("config.flash_attn", m.group(1) or m.group(2) or m.group(3), line)
            return True
        m = GENERATE.search(t)
        if m:
            self._stage("run")
            n_predict = int(m.group(3))
            if n_predict >= 0:
                self.set("config.max_new_tokens", n_predict, line)
            s.capture = True
            s.output_line = None
            return True
        m = SLOT_INIT.search(t)
        if m:
            s.n_slots = int(m.group(1))
            self.set("config.n_parallel", s.n_slots, line)
            if m.group(2):
                self.set("config.n_ctx_seq", int(m.group(2)), line)
            unified = re.search(r"kv_unified = '(true|false)'", t)
            if unified:
                self.set("config.kv_unified", unified.group(1) == "true", line)
            return True
        m = NEW_SLOT.search(t)
        if m and "new prompt" not in t:
            self.set("config.n_ctx_seq", int(m.group(1)), line)
            return True
        m = NEW_PROMPT.search(t)
        if m:
            self._stage("run")
            self.set("config.n_ctx_seq", int(m.group(1)), line)
            n_prompt = int(m.group(3))
            self.set("run.prompt_tokens", n_prompt, line)
            if n_prompt > s.prompt_tokens_max:
                s.prompt_tokens_max, s.prompt_line = n_prompt, line
            return True
        found = False
        if any(k in t for k in _CTX_KV_KEYS):
            for key, value in CTX_KV.findall(t):
                found = True
                if key == "n_ctx" and ("generate:" in t or "slot" in t or "n_ctx_train" in t):
                    continue
                if key in ("n_ctx", "n_ctx_seq", "n_ctx_per_seq", "n_seq_max", "n_batch", "n_ubatch"):
                    if not value.isdigit():
                        continue
                    target = {"n_ctx": "config.n_ctx", "n_ctx_seq": "config.n_ctx_seq",
                              "n_ctx_per_seq": "config.n_ctx_seq", "n_seq_max": "config.n_parallel",
                              "n_batch": "config.n_batch", "n_ubatch": "config.n_ubatch"}[key]
                    if key == "n_ctx":
                        self._stage("context")
                        if s.stage in ("ready", "run"):
                            s.stage = "context"
                        s.kv_buffers.clear()
                        s.compute_buffers.clear()
                        s.kv_size_lines.clear()
                    self.set(target, int(value), line)
                elif key == "flash_attn":
                    v = value.lower()
                    self.set("config.flash_attn", {"0": "disabled", "1": "enabled", "false": "disabled",
                                                   "true": "enabled"}.get(v, v), line)
                elif key == "kv_unified":
                    self.set("config.kv_unified", value.lower() in ("true", "1"), line)
        return found

    def _hardware(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        m = SYSINFO_THREADS.search(t) or SERVER_THREADS.search(t)
        if m:
            self.set("config.n_threads", int(m.group(1)), line)
            if m.group(2):
                self.set("config.n_threads_batch", int(m.group(2)), line)
            self.set("host.cpu.logical_cores", int(m.group(3)), line)
            self.votes["llama.cpp"] += 1
        if " = 1" in t and ("AVX" in t or "NEON" in t or "SSE3" in t):
            found = set(FEATURE.findall(t))
            self.set("engine.cpu_features", sorted(found - {"LLAMAFILE", "OPENMP", "REPACK", "USE_GRAPHS"}), line)
            self.set("engine.cpu_repack", "REPACK" in found, line)
            sections = {sec for sec in SECTION.findall(t) if sec not in ("system_info",)}
            if sections:
                gpu = sorted(sec for sec in sections if sec.upper() in {b.upper() for b in GPU_BACKENDS})
                self.set("engine.backends", sorted(sections), line)
                self.set("engine.gpu_offload_supported", bool(gpu), line)
                for b in gpu:
                    s.backends.add(b)
            return True
        if m:
            return True
        m = CUDA_FOUND.search(t)
        if m:
            self.votes["llama.cpp-library"] += 1
            s.backends.add(m.group(2))
            s.backends_line = s.backends_line or line
            self.set("host.gpu.count", int(m.group(1)), line)
            self.set("engine.gpu_offload_supported", True, line)
            return True
        m = CUDA_DEVICE.search(t)
        if m:
            idx = int(m.group(1))
            s.gpu_names[idx] = m.group(2).strip()
            if m.group(3):
                s.gpu_vram[idx] = int(m.group(3)) * MIB
            self.set(f"host.gpu[{idx}].name", m.group(2).strip(), line)
            if m.group(3):
                self.set(f"host.gpu[{idx}].vram_total", int(m.group(3)) * MIB, line)
            return True
        m = USING_DEVICE.search(t)
        if m:
            s.gpu_free[m.group(1)] = int(m.group(3)) * MIB
            s.gpu_line = line
            s.backends.add(_backend_of(m.group(1)))
            return True
        m = BACKEND_LOADED.search(t)
        if m:
            s.backends.add(m.group(1))
            s.backends_line = s.backends_line or line
            if m.group(1).upper() != "CPU":
                self.set("engine.gpu_offload_supported", True, line)
            return True
        m = VULKAN_FOUND.search(t)
        if m:
            s.backends.add("Vulkan")
            self.set("host.gpu.count", int(m.group(1)), line)
            return True
        m = METAL_DEVICE.search(t)
        if m:
            s.backends.add("Metal")
            self.set("host.gpu[0].name", m.group(1).strip(), line)
            return True
        if NO_GPU.search(t):
            self.event("no_gpu", line)
            self.set("engine.gpu_offload_supported", False, line)
            return True
        m = GPU_INIT_FAILED.search(t) or GPU_RUNTIME_FAILED.search(t)
        if m:
            reason = m.group(2).strip()[:200]
            cause, code = gpu_failure_cause(t)
            self.event("gpu_init_failed", line, backend=m.group(1), reason=reason, cause=cause,
                       **({"code": code} if code else {}))
            return True
        m = BACKEND_NOT_LOADED.search(t)
        if m:
            self.event("gpu_init_failed", line, backend=(m.group(2) or m.group(1)).rsplit("/", 1)[-1][:80],
                       reason="the backend library did not load", cause="not_loaded")
            return True
        m = BUILD.search(t)
        if m and ("build" in t[:40] or "llama" in t):
            self.set("engine.build", int(m.group(1)), line)
            self.set("engine.version", f"b{m.group(1)} ({m.group(2)})", line)
            return True
        return False

    def _sampling(self, line: LogLine) -> bool:
        t = line.text
        if any(k in t for k in _SAMPLER_KEYS):
            found = False
            for key, value in SAMPLER_KV.findall(t):
                target = {"temp": "temperature"}.get(key, key)
                number = float(value)
                is_int = key in ("top_k", "repeat_last_n", "mirostat")
                self.set(f"sampling.{target}", int(number) if is_int else number, line)
                found = True
            if found:
                return True
        m = SEED.search(t)
        if m and ("sampler" in t or "seed =" in t):
            self.set("sampling.seed", int(m.group(1) or m.group(2)), line)
            return True
        return False

    def _lcp_output(self, line: LogLine) -> bool:
        """llama-cpp-python's completion dicts: the text the model wrote and why it stopped."""
        t = line.text
        s = self.s
        m = LCP_TEXT.search(t)
        if m:
            text = _unescape(m.group(2))
            if text and s.output_bytes < 64 * 1024:
                s.output.append(text)
                s.output_bytes += len(text)
                s.output_line = s.output_line or line.number
        m = LCP_FINISH.search(t)
        if m:
            s.finish_reason = m.group(1)
            s.finish_line = line
        return False

    # -- timings -----------------------------------------------------------------------------
    def _timings(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        m = SERVER_TG.search(t)
        if m:
            s.decode_rates.add(float(m.group(2)), self.src(line))
            self._stage("run")
            return True
        if " time" not in t:
            return False
        m = TIMING.search(t)
        if not m:
            return False
        what, ms, count, tps = m.group(1), _num(m.group(2)), m.group(3), m.group(6)
        if what in ("sample", "sampling", "samplers"):
            return True
        self._stage("run")
        s.capture = False
        cur = s.current
        busy = cur is not None and (cur.prompt_ms is not None or cur.eval_ms is not None)
        starts_new = what == "prompt eval" and busy
        if what == "load" or cur is None or starts_new:
            if cur is not None:
                self._close_timing()
            cur = s.current = _Timing(line=line.number)
        if what == "load":
            cur.load_ms = ms
            if ms is not None:
                self.set("run.load_ms", ms, line)
        elif what == "prompt eval":
            cur.prompt_ms = ms
            cur.prompt_tokens = int(count) if count else None
            cur.prompt_tps = _num(tps)
            if ms is not None:
                self.set("run.prefill_ms", ms, line)
            if count:
                cur.used_line = line
                self.set("run.prompt_tokens", int(count), line)
                if int(count) > s.prompt_tokens_max:
                    s.prompt_tokens_max, s.prompt_line = int(count), line
            if cur.prompt_tps is not None:
                self.set("run.prefill_tps", cur.prompt_tps, line)
        elif what in ("eval", "generation eval"):
            cur.eval_ms = ms
            cur.eval_tokens = int(count) if count else None
            cur.eval_tps = _num(tps)
            if ms is not None:
                self.set("run.decode_ms_total", ms, line)
            if count:
                cur.used_line = line
                self.set("run.decode_tokens", int(count), line)
            if cur.eval_tps is not None:
                self.set("run.decode_tps", cur.eval_tps, line)
                if cur.eval_tokens and cur.eval_tokens > 1:
                    s.decode_rates.add(cur.eval_tps, self.src(line))
        elif what == "total":
            if ms is not None:
                self.set("run.total_ms", ms, line)
            if count:
                cur.total_tokens = int(count)
                cur.used_line = line
            self._close_timing()
        return True

    def _close_timing(self) -> None:
        s = self.s
        cur = s.current
        if cur is None:
            return
        s.current = None
        if cur.prompt_ms is None and cur.eval_ms is None:
            return
        s.timings.append(cur)
        used = cur.total_tokens
        if used is None and (cur.prompt_tokens is not None or cur.eval_tokens is not None):
            used = (cur.prompt_tokens or 0) + (cur.eval_tokens or 0)
        if used is not None and used > s.used_max:
            s.used_max = used
            s.used_line = cur.used_line or LogLine(cur.line or 0, "", "")
        if len(s.timings) > 1000:
            del s.timings[:500]

    # -- context overflow ----------------------------------------------------------------------
    def _context_overflow(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        for pattern in (REQUESTED_TOKENS, PROMPT_TOO_LONG, REQUEST_EXCEEDS, INPUT_LARGER):
            m = pattern.search(t)
            if m:
                n_tokens, n_ctx = int(m.group(1)), int(m.group(2))
                self.event("prompt_too_long", line, n_tokens=n_tokens, n_ctx=n_ctx)
                if n_tokens > s.prompt_tokens_max:
                    s.prompt_tokens_max, s.prompt_line = n_tokens, line
                if pattern is REQUESTED_TOKENS:
                    self.votes["llama-cpp-python"] += 2
                    self.set("config.n_ctx", n_ctx, line)
                return True
        m = TOO_BIG_MSGS.search(t)
        if m:
            data: dict[str, Any] = {"n_ctx": int(m.group(1))} if m.group(1) else {}
            self.event("prompt_too_long", line, **data)
            return True
        m = TRUNCATED.search(t)
        if m:
            _remember_task(s.cut_tasks, t)
            self.event("truncation", line, n_ctx=int(m.group(1)), n_keep=int(m.group(2)),
                       n_tokens=int(m.group(4)))
            if int(m.group(4)) > s.prompt_tokens_max:
                s.prompt_tokens_max, s.prompt_line = int(m.group(4)), line
            return True
        m = STOP_TRUNCATED.search(t)
        if m:
            n_past = int(m.group(1))
            if n_past > s.used_max:
                s.used_max, s.used_line = n_past, line
            if m.group(2) != "0":
                task = _task_key(t)
                cut = task in s.cut_tasks if task is not None else bool(s.cut_tasks)
                shifted = task in s.shifted_tasks if task is not None else bool(s.shifted_tasks)
                if cut:
                    self.event("truncation", line, n_past=n_past)
                elif not shifted:
                    self.event("ctx_full", line, n_past=n_past)  # generation ran into the end of the slot
            return True
        if CTX_FULL_STOP.search(t):
            self.event("ctx_full", line)
            return True
        m = CTX_SHIFT.search(t)
        if m:
            _remember_task(s.shifted_tasks, t)
            data = {}
            if m.group(1):
                data = {"n_keep": int(m.group(1)), "n_left": int(m.group(2)), "n_discard": int(m.group(3))}
            elif m.group(4):
                data = {"n_past": int(m.group(4)), "n_ctx": int(m.group(6)), "n_discard": int(m.group(8))}
            self.event("context_shift", line, **data)
            return True
        m = MEMORY_SLOT.search(t)
        if m:
            self.event("ctx_full", line, n_batch=int(m.group(1)))
            return True
        if KV_FULL.search(t):
            self.event("ctx_full", line)
            return True
        if CTX_SHIFT_DISABLED.search(t):
            self.event("prompt_too_long", line)
            return True
        m = DECODE_FAILED.search(t)
        if m:
            ret = m.group(1) or m.group(2)
            data = {"ret": int(ret)} if ret else {}
            self.event("decode_failed", line, **data)
            if m.group(2):
                self.votes["llama-cpp-python"] += 1
            return True
        return False

    # -- memory -------------------------------------------------------------------------------
    def _memory(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        m = CUDA_MALLOC.search(t)
        if m:
            if "out of memory" in m.group(3):
                data: dict[str, Any] = {"bytes": int(float(m.group(1)) * MIB), "device": int(m.group(2))}
                s.pending.append(_PendingOom(line, data, s.stage))
            else:
                self.event("alloc_failed", line, phase=self._stage_phase(), reason=m.group(3)[:120])
            return True
        m = ALLOC_RANGE.search(t)
        if m:
            buf = m.group(1)
            phase: str | None = "kv_cache" if s.stage in ("context",) else "weights"
            device = buf if _is_gpu_buffer(buf) else "host"
            s.pending.append(_PendingOom(line, {"bytes": int(m.group(2)), "buffer": buf, "device": device},
                                         s.stage, phase))
            return True
        m = GALLOCR.search(t)
        if m:
            buf = m.group(1)
            device = buf if _is_gpu_buffer(buf) else "host"
            s.pending.append(_PendingOom(line, {"bytes": int(m.group(2)), "buffer": buf, "device": device},
                                         s.stage, "compute"))
            return True
        m = CPU_ALLOC.search(t)
        if m:
            s.pending.append(_PendingOom(line, {"bytes": int(m.group(1)), "device": "host"}, s.stage))
            return True
        if PHASE_KV.search(t):
            self._flush_oom("kv_cache", line)
            return True
        if PHASE_COMPUTE.search(t):
            self._flush_oom("compute", line)
            return True
        m = PHASE_WEIGHTS.search(t)
        if m:
            self._flush_oom("weights", line)
            self.event("load_failed", line, reason="allocation")
            return True
        m = BACKEND_OOM.search(t)
        if m:
            phase = {"run": "runtime", "ready": "compute"}.get(s.stage)
            data = {}
            if m.group(2):
                data["bytes"] = int(m.group(2))
            s.pending.append(_PendingOom(line, data, s.stage, phase))
            return True
        if CUDA_MALLOC_BARE.search(t):
            recent = self.facts.events("oom")[-4:]
            if not s.pending and any(0 < line.number - (e.line or 0) <= 200 for e in recent):
                return True  # a wrapper restating the OOM just reported (Ollama: "llama runner process has terminated")
            s.pending.append(_PendingOom(line, {}, s.stage))
            return True
        m = CORRUPT.search(t)
        if m:
            self.event("load_failed", line, reason="corrupt", **({"arch": m.group(1)} if m.group(1) else {}))
            return True
        m = LOAD_FAILED.search(t)
        if m:
            reason = next((g for g in m.groups() if g), "")
            if s.pending:
                self._flush_oom("weights", None)
            self.event("load_failed", line, reason=("missing" if "does not exist" in t else "other"),
                       detail=reason.strip()[:200])
            return True
        m = CONTEXT_FAILED.search(t)
        if m:
            if s.pending:
                self._flush_oom(None, None)
            self.event("context_failed", line, **({"detail": m.group(1)[:200]} if m.group(1) else {}))
            return True
        if CRASH.search(t) and not t.lstrip().startswith(("#", "//")):
            if s.pending:
                self._flush_oom(None, None)
            self.event("crash", line)
            return True
        return False

    def _stage_phase(self) -> str:
        return {"start": "weights", "load": "weights", "context": "kv_cache", "ready": "compute",
                "run": "runtime"}[self.s.stage]

    def _flush_oom(self, phase: str | None, explicit_line: LogLine | None = None) -> None:
        s = self.s
        pending, s.pending = s.pending, []
        resolved = phase
        if resolved is None:
            explicit = [p.explicit for p in pending if p.explicit]
            resolved = explicit[-1] if explicit else None
        for p in pending:
            ph = resolved or p.explicit
            source = "message" if ph else "stage"
            ph = ph or {"start": "weights", "load": "weights", "context": "kv_cache",
                        "ready": "compute", "run": "runtime"}[p.stage]
            self.event("oom", p.line, phase=ph, phase_from=source, **p.data)
        if explicit_line is not None:
            self.event("oom", explicit_line, phase=phase, phase_from="message")

    # -- summary ----------------------------------------------------------------------------
    def summarize(self, facts: Facts) -> None:
        s = self.s
        if s.pending:
            saved = self.facts
            self.facts = facts
            pend = list(s.pending)
            self._flush_oom(None)
            s.pending = pend  # keep them pending: more lines may come
            self.facts = saved
        if s.current is not None and (s.current.prompt_ms is not None or s.current.eval_ms is not None):
            cur = s.current
            used = cur.total_tokens or ((cur.prompt_tokens or 0) + (cur.eval_tokens or 0))
            if used > s.used_max:
                facts.set("run.tokens_used_max", used, Source("log", self.name, cur.line))
        if s.timings:
            facts.set("run.requests", len(s.timings), Source("log", self.name, s.timings[-1].line))
        s.decode_rates.emit(facts, "run.decode_tps_min", "run.decode_tps_max", at_least=2)
        if s.used_max and s.used_line is not None:
            facts.set("run.tokens_used_max", s.used_max, Source("log", self.name, s.used_line.number or None,
                                                                 s.used_line.raw[:300] or None))
        if s.prompt_tokens_max and s.prompt_line is not None:
            facts.set("run.prompt_tokens_max", s.prompt_tokens_max, self.src(s.prompt_line))
        self._summarize_buffers(facts)
        if s.gpu_free and s.gpu_line is not None:
            facts.set("run.gpu_free_at_load", sum(s.gpu_free.values()), self.src(s.gpu_line))
        if s.backends:
            line = s.backends_line or s.buffer_line
            src = self.src(line) if line is not None else Source("log", self.name)
            existing = facts.value("engine.backends")
            merged = sorted(set(existing or []) | s.backends | ({"CPU"} if existing is None else set()))
            facts.set("engine.backends", merged, src)
            if any(b.upper() in {g.upper() for g in GPU_BACKENDS} for b in s.backends):
                facts.set("engine.gpu_offload_supported", True, src)
        self._summarize_cpu_only(facts)
        if s.finish_reason and s.finish_line is not None:
            facts.set("run.finish_reason", s.finish_reason, self.src(s.finish_line))
        if s.output:
            facts.set("run.output_text", "".join(s.output)[-8192:],
                      Source("log", self.name, s.output_line, "generated output"))

    def _summarize_cpu_only(self, facts: Facts) -> None:
        """A GPU build of llama.cpp prints "offloaded N/M layers to GPU" (0/M too) before the model buffers;
        a CPU-only build prints no such line. Model buffers on the host, no offload line and no GPU backend
        anywhere in the input: the engine has no GPU backend (llama-cpp-python's default pip wheel)."""
        s = self.s
        if (facts.has("engine.gpu_offload_supported") or not s.model_buffers or s.buffer_line is None
                or any(_is_gpu_buffer(b) for b in s.model_buffers) or facts.has("run.offloaded_layers")
                or any(b.upper() in {g.upper() for g in GPU_BACKENDS} for b in s.backends)
                or facts.events("gpu_init_failed") or facts.has("host.gpu.count")):
            return
        line = s.buffer_line
        facts.set("engine.gpu_offload_supported", False,
                  Source("log", self.name, line.number, line.raw[:300]))
        if not facts.has("engine.backends"):
            facts.set("engine.backends", ["CPU"], Source("log", self.name, line.number, line.raw[:300]))

    def _summarize_buffers(self, facts: Facts) -> None:
        s = self.s
        if s.buffer_line is None and s.kv_line is None:
            return
        src = self.src(s.buffer_line) if s.buffer_line is not None else self.src(s.kv_line)  # type: ignore[arg-type]

        def split(table: dict[str, float]) -> tuple[int, int]:
            gpu = sum(v for k, v in table.items() if _is_gpu_buffer(k))
            host = sum(v for k, v in table.items() if not _is_gpu_buffer(k))
            return int(gpu * MIB), int(host * MIB)

        if s.model_buffers:
            gpu, host = split(s.model_buffers)
            facts.set("run.weights_gpu_bytes", gpu, src)
            facts.set("run.weights_host_bytes", host, src)
            repack = sum(v for k, v in s.model_buffers.items() if _is_repack_buffer(k))
            if repack:
                facts.set("run.weights_repack_bytes", int(repack * MIB), src)
        if s.kv_buffers:
            gpu, host = split(s.kv_buffers)
            facts.set("run.kv_gpu_bytes", gpu, src)
            facts.set("run.kv_host_bytes", host, src)
            facts.set("run.kv_bytes", gpu + host, src)
        if s.kv_size_lines:
            kv_src = self.src(s.kv_line) if s.kv_line is not None else src
            if not s.kv_buffers:
                facts.set("run.kv_bytes", int(sum(x[0] for x in s.kv_size_lines) * MIB), kv_src)
            cells = sum(c * n for _, c, n in s.kv_size_lines)
            if cells:
                facts.set("run.kv_cells", cells, kv_src)
        if s.compute_buffers:
            gpu, host = split(s.compute_buffers)
            facts.set("run.compute_bytes", gpu + host, src)
            facts.set("run.compute_gpu_bytes", gpu, src)
        if s.output_buffers:
            facts.set("run.output_bytes", int(sum(s.output_buffers.values()) * MIB), src)


_LINE_START = re.compile(r"^\s*(?:[\w.~\[\]-]+\s*:\s|\d+\.\d+\.\d+\.\d+ [IWED] |\[?\d{4}-\d\d-\d\d|time=|level=|\{|"
                    r"(?:INFO|WARN|WARNING|ERROR|DEBUG)\b|[A-Z][a-z]{2} [ \d]\d \d\d:|slot |srv |que )")


def _starts_a_line(text: str) -> bool:
    """The next physical line is a log line of its own, not the rest of this one."""
    return bool(_LINE_START.match(text))


def _looks_cut(text: str) -> bool:
    """A line that probably continues on the next physical line (wrapped at a terminal width)."""
    tail = text.rstrip()
    return bool(tail) and (tail[-1].isalnum() or tail[-1] in "(,=/:-") and len(tail) >= 20


def _is_gpu_buffer(name: str) -> bool:
    upper = name.upper()
    # AMX and *-REPACK are the CPU backend's extra buffer types (repacked weights in RAM)
    return not (upper.startswith(("CPU", "AMX")) or upper.endswith(("_HOST", "REPACK")))


def _is_repack_buffer(name: str) -> bool:
    """The CPU backend's extra buffer types: weights repacked for AMX / CPU_REPACK (/ KleidiAI) kernels."""
    upper = name.upper()
    return upper.startswith("AMX") or upper.endswith("REPACK") or upper.startswith("KLEIDIAI")


def _backend_of(buf: str) -> str:
    for b in GPU_BACKENDS:
        if buf.upper().startswith(b.upper()):
            return b
    if buf.upper().startswith("MTL"):
        return "Metal"
    return re.sub(r"\d+.*$", "", buf) or buf


_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.)")
_SIMPLE = {"n": "\n", "t": "\t", "r": "", "\\": "\\", "'": "'", '"': '"'}


def _unescape(text: str) -> str:
    """Undo the escapes of a Python repr or JSON string (\\n, \\t, \\', \\uXXXX)."""
    if "\\" not in text:
        return text

    def repl(m: re.Match[str]) -> str:
        esc = m.group(1)
        if esc[0] in "ux" and len(esc) > 1:
            return chr(int(esc[1:], 16))
        return _SIMPLE.get(esc, esc)

    return _ESCAPE.sub(repl, text)


def _task_key(text: str) -> str | None:
    """`slot:task` of a server slot line (`id  0 | task 12 | ...`), None for other lines."""
    m = SLOT_TASK.search(text)
    return f"{m.group(1)}:{m.group(2)}" if m else None


def _remember_task(tasks: set[str], text: str) -> None:
    key = _task_key(text) or "?"  # a line without slot and task still counts for lines without them
    if len(tasks) < 10000:
        tasks.add(key)
