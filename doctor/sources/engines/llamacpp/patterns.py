"""llama.cpp's log lines: the patterns of every era of its output and the table of line kinds.

Every era is read (see ../shared/reference/engine_log_signatures.md): `print_info` and
`llm_load_print_meta` metadata, offload lines, model / KV / compute / output buffer sizes under every
prefix (the last value per buffer wins: `--fit` prints them twice), `llama_print_timings` /
`llama_perf_context_print` / server `print_timings` in its three styles, context shift and
truncation in all their forms, KV-slot and decode failures, allocation failures split by the phase
they happen in (ggml's GPU out-of-memory messages: ../_ggml/oom.py), no-GPU warnings, GPU backends
that fail for a driver or runtime reason (../_ggml/gpu_failures.py), system_info and threads, and
what the input gives away: `n_gpu_layers` in pasted code, the model path. llama-cpp-python's own
lines are that engine's (../llama_cpp_python/patterns.py); its kinds have their place in this
table, since one parser reads both. Patterns match message text and `key = value`, never function
prefixes or column padding. The small text helpers the handlers share (where a line starts, which
buffers are a GPU's, a server task's key) are at the end.

Pure.
"""

from __future__ import annotations

import re

from doctor.sources.engines._ggml.crash_patterns import CUDA_WHERE
from doctor.sources.engines._ggml.oom import BACKEND_OOM
from doctor.sources.engines.llama_cpp_python.patterns import OUTPUT_KIND as LCP_OUTPUT
from doctor.sources.engines.llama_cpp_python.patterns import SIGNATURE_KIND as LCP_SIGNATURE
from doctor.sources.logs.base import LineKind, LineKinds
from doctor.sources.logs.matcher import gated

MIB = 1 << 20
GIB = 1 << 30
NUM = r"(-?[\d.]+|inf|-?nan)"
GPU_BACKENDS = ("CUDA", "ROCm", "HIP", "MUSA", "Metal", "Vulkan", "SYCL", "CANN", "OpenCL", "BLAS_CUDA", "KOMPUTE")

# -- patterns ------------------------------------------------------------------------------------
META = gated(r"(?:print_info|llm_load_print_meta)\s*:\s+([A-Za-z_][\w. ]*?)\s*=\s*(.*)$")
# the GGUF header as the loader dumps it, before print_info (src/llama-model-loader.cpp:
# "%s: - kv %3d: %42s %-16s = %s", values cut to 40 characters with "..."); a paste often ends before print_info
META_KV = gated(r"llama_model_loader: - kv +\d+: +(?:([a-z][\w\-]*)\.)?([\w.]+) +(\S+) += (.*)$")
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
# ggml-vulkan.cpp: "ggml_vulkan: %zu = %s (%s) | uma: %d | fp16: %d | ..." (device index, name, driver)
VULKAN_DEVICE = gated(r"ggml_vulkan: (\d+) = (.+?) \([^()]*\) \| uma: ")
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
# llama-cpp-python's check of prompt + max_tokens against n_ctx (llama_cpp/llama.py _create_completion):
# "Requested tokens exceed context window of N" in its first releases, with the count "(M)" later
REQUESTED_TOKENS = gated(r"Requested tokens (?:\((\d+)\) )?exceed context window of (\d+)")
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
TASK_ID = re.compile(r"\btask id = (\d+), error: ")  # llama-server send_error: SRV_ERR("task id = %d, error: %s")
NEW_SLOT = gated(r"new slot,?(?: \|.*?)? n_ctx(?:_slot)?\s*=\s*(\d+)")
# memory
CUDA_MALLOC = gated(r"allocating ([\d.]+) MiB on device (\d+): cudaMalloc failed: (.+)$")
CUDA_MALLOC_BARE = gated(r"cudaMalloc failed: out of memory|hipMalloc failed")
# llama.cpp --fit (llama_params_fit, Oct 2025 on): its plan before loading (issue 16, item 5)
FIT_PROJECTED = gated(r"projected to use (\d+) MiB of device memory vs\. (\d+) MiB of free device memory")
# --fit's placement, one line per device once it had to move layers (src/llama.cpp llama_params_fit_impl b7416..,
# common/fit.cpp b9917..: "%s:   - %s: %2u layers, %6ld MiB used, %6ld MiB free", with " (%2u overflowing)" for
# layers whose experts overflow to the next device or system memory); the header of each pass resets the table
FIT_DEVICE = gated(r"(?:llama|common)_params_fit\w*: +- (\S+): +(\d+) layers(?: \( *(\d+) overflowing\))?, +"
                   r"-?\d+ MiB used, +-?\d+ MiB free")
FIT_PASS = gated(r"filling (?:dense|dense-only) layers back-to-front|converting dense-only layers to full layers")
ALLOC_RANGE = gated(r"alloc_tensor_range: failed to allocate (\S+) buffer of size (\d+)")
GALLOCR = gated(r"(?:ggml_gallocr_reserve_n\w*|gallocr\w*): failed to allocate (\S+) buffer of size (\d+)")
CPU_ALLOC = gated(r"ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size (\d+)")
# Metal: the buffers placed on the GPU went past what macOS lets one process keep resident
METAL_OVER_SET = gated(r"current allocated size is greater than the recommended max working set size")
METAL_ALLOCATED = gated(r"allocated buffer, size =\s*([\d.]+) MiB,\s*\(\s*([\d.]+) / ([\d.]+)\)")
METAL_SET_SIZE = gated(r"recommendedMaxWorkingSetSize\s*=\s*([\d.]+) MB")
METAL_COMMAND_BUFFER = gated(r"kIOGPUCommandBufferCallbackError")
# settings pasted beside the log: Python keyword arguments (Llama(..., n_gpu_layers=35)) or CLI flags
# a shell command starting one of llama.cpp's programs on a model (main/server until mid 2024, llama-cli /
# llama-server since): the binary's path, and whether GPU layers were asked for on it
COMMAND = gated(r"(?:^|[\s$#>])((?:[\w.~:\-]*[/\\])*(?:main|llama-cli|llama-server|server|llama-run)(?:\.exe)?)"
                r"\s+(?=(?:.*\s)?(?:-m|--model|-hf|--hf-repo|-mu|--model-url)\s)")
COMMAND_NGL = gated(r"(?:^|\s)(?:-ngl|--n-gpu-layers|--gpu-layers|-fit|--fit)(?:[ =]|$)")
OLD_BINARIES = ("main", "server", "main.exe", "server.exe")  # renamed llama-cli / llama-server in b3xxx (2024)
NGL_DEFAULT_ALL_BUILD = 6325  # llama_model_default_params offloads every layer from here (e81b8e4, Aug 2025)
NGL_SETTING = gated(r"\bn_gpu_layers\s*[=:]\s*(-?\d+)|(?:^|\s)(?:-ngl|--n-gpu-layers|--gpu-layers)[ =](-?\d+)\b")
# PyTorch's "CUDA out of memory. Tried to allocate" (vLLM, TGI) is read by ../_torch/pytorch.py through
# those engines' parsers, which know their steps
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
                r"|bad GGUF version|wrong number of tensors|unknown model architecture: '([^']*)'"
                # the file's first bytes are not GGUF's magic, as Ollama (fs/ggml/ggml.go, llm/ggml.go v0.1.33 on:
                # "invalid file magic") and a wrapper's own check say it ("File is not in GGUF format", ChatterUI's
                # cui-llama.rn, the corpus's case 1042)
                r"|invalid file magic|\bnot (?:in |a )?(?:valid )?GGUF (?:format|file)\b")
# llama-cpp-python's ValueError, llama.cpp's common_init / server ("failed to create context with model"), and a
# wrapper's own words for the same NULL from llama_init_from_model ("Failed to create context: null reference
# from llama.cpp", eullm 0.6.51, the corpus's case 1079)
CONTEXT_FAILED = gated(r"Failed to create llama_context|failed to initialize the context: (.*)$|"
                       r"failed to create context with model|[Ff]ailed to create (?:the )?context(?::|$)")
CRASH = gated(r"GGML_ASSERT\(?|GGML_ABORT|: CUDA error$|Segmentation fault|core dumped|"
              r"terminate called after throwing"
              r"|\bAborted\b|fatal error|SIGABRT|SIGSEGV")
SERVER_SIGNATURE = gated(r"\bslot\s+\w+\s*: id\s+\d+ \| task|\bsrv\s+\w+: |server is listening|llama_server|"
                         r"INFO \[\s+\w+\] |all slots are idle|update_slots")
CLI_SIGNATURE = gated(r"\bmain: |system_info: n_threads|generate: n_ctx|sampler params|"
                      r"common_init_from_params|build: \d+ \(")
# the build a log or a pasted `--version` names (common/common.cpp: "build: %d (%s) with %s for %s",
# "version: %d (%s)" then "built with %s for %s")
BUILD = gated(r"(?:build(?::| =)|^\s*version:)\s*(\d+) \(([0-9a-f]+)\)")
OUTPUT_END = gated(r"llama_perf_|llama_print_timings|llama_perf_print|\bmain: |\[end of text\]|"
                   r"interrupted by user")

MEMORY_KEYS = ("alloc", "emory", "OutOf", "rror", "ailed", "GGML_A", "bort", "egmentation", "dumped",
                "terminate", "SIG", "unable", "corrupt", "magic", "GGUF", "architecture", "not exist", "load model",
                "within the file")
CONTEXT_KEYS = ("exceed", "too long", "too big", "larger than", "truncated", "context", "KV cache",
                 "memory slot", "cache slot", "decode", "returned", "failed to eval", "shifting")
CTX_KV_KEYS = ("n_ctx", "n_seq_max", "n_batch", "n_ubatch", "flash_attn", "kv_unified")
SAMPLER_KEYS = ("repeat_penalty", "top_k =", "mirostat =", "temp =")

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
SERVER_SIGNATURE_KIND = LineKind(
    "server_signature", (SERVER_SIGNATURE,),
    (r"server is listening|all slots are idle",), phase="vote")
CLI_SIGNATURE_KIND = LineKind("cli_signature", (CLI_SIGNATURE,), (r"sampler params",), phase="vote")
OUTPUT_END_KIND = LineKind("output_end", (OUTPUT_END,), (r"end of text|interrupted by user",), phase="end")
META_KIND = LineKind(
    "meta", ("print_info", "llm_load_print_meta"),
    (r"(?:print_info|llm_load_print_meta): +(?:arch|n_ctx_train|n_embd|n_layer |n_head|n_swa|n_expert"
     r"|n_vocab|model (?:type|ftype|params|size)|file (?:type|size)|general\.name)",))
MEMORY_KIND = LineKind(
    "memory",
    (CUDA_MALLOC, ALLOC_RANGE, GALLOCR, CPU_ALLOC, PHASE_KV, PHASE_COMPUTE, PHASE_WEIGHTS, BACKEND_OOM,
     CUDA_MALLOC_BARE, CORRUPT, LOAD_FAILED, CONTEXT_FAILED, CRASH),
    (r"failed|Failed|error|Error|unable to|out of memory|OutOf|Insufficient Memory",
     r"GGML_A|Segmentation fault|core dumped|terminate called|Aborted|SIGABRT|SIGSEGV",
     r"not within the file|corrupt|invalid magic|invalid file magic|bad GGUF|GGUF format|GGUF file|Model path"),
    keys=MEMORY_KEYS)
CONTEXT_KIND = LineKind(
    "context",
    (REQUESTED_TOKENS, PROMPT_TOO_LONG, REQUEST_EXCEEDS, INPUT_LARGER, TOO_BIG_MSGS, TRUNCATED,
     STOP_TRUNCATED, CTX_FULL_STOP, CTX_SHIFT, MEMORY_SLOT, KV_FULL, CTX_SHIFT_DISABLED, DECODE_FAILED),
    (r"exceed|too long|too big|larger than|truncated|context shift|context full|shifting|KV cache|returned",
     r"stop processing"),
    keys=CONTEXT_KEYS)
TIMINGS_KIND = LineKind(
    "timings", (SERVER_TG, TIMING), (r" time +=", r"(?:tg|n_gen|n_decoded) += ", r"print_timing"),
    keys=(" time", "t/s"))
META_KV_KIND = LineKind(
    "meta_kv", (META_KV,),
    (r"llama_model_loader: - kv +\d+: +(?:general\.(?:architecture|name)|[a-z][\w\-]*\.(?:context_length|block_count"
     r"|embedding_length|attention\.(?:head_count|head_count_kv|key_length|value_length|sliding_window)"
     r"|expert_count|expert_used_count|vocab_size)) ",))
LOADED_META_KIND = LineKind("loaded_meta", (LOADED_META,), (r"loaded meta data",))
LOADING_FROM_KIND = LineKind("loading_from", (LOADING_FROM,), (r"loading model from ",))
METAL_KIND = LineKind(
    "metal", (METAL_SET_SIZE, METAL_ALLOCATED, METAL_OVER_SET),
    (r"recommended max working set|allocated buffer, size|recommendedMaxWorkingSetSize",))
COMMAND_KIND = LineKind(
    "command", (COMMAND,),
    (r"(?:main|llama-cli|llama-server|server|llama-run)(?:\.exe)? .*-(?:m|-model|hf|-hf-repo) ",))
SETTINGS_KIND = LineKind("settings", (NGL_SETTING,), (r"n_gpu_layers|-ngl |gpu-layers",))
LOAD_MODE_KIND = LineKind("load_mode", (LOAD_MODE,), (r"loading model tensors",))
OFFLOADED_KIND = LineKind("offloaded", (OFFLOADED,), (r"offloaded \d+/",))
BUFFER_KIND = LineKind("buffer", (BUFFER,), (r"buffer size +=",))
FIT_PROJECTED_KIND = LineKind("fit_projected", (FIT_PROJECTED,), (r"projected to use",))
FIT_DEVICE_KIND = LineKind("fit_device", (FIT_DEVICE, FIT_PASS),
                           (r"_params_fit\w*: +- \S+: +\d+ layers", r"layers back-to-front|dense-only layers to full"))
KV_SIZE_KIND = LineKind(
    "kv_size", (KV_SIZE, KV_SELF, KV_SELF_2023, KV_TYPES_OLD),
    (r"cells,", r"KV self size", r"kv self size", r"type_k = '"))
CONTEXT_PARAMS_KIND = LineKind(
    "context_params",
    (QUANT_V_NEEDS_FA, CTX_TRAIN_OVER, CTX_TRAIN_WARN, FA_DECISION, GENERATE, SLOT_INIT, NEW_SLOT, NEW_PROMPT,
     *CTX_KV_KEYS),
    (r"n_ctx(?:_seq|_per_seq)? +=", r"n_seq_max +=", r"n_u?batch +=", r"flash_attn +=", r"Flash Attention",
     r"kv_unified +=", r"n_slots", r"V cache (?:quantization )?requires|quantized V cache", r"> n_ctx_train",
     r"trained on only", r"generate: n_ctx", r"new prompt|new slot|initializing"))
HARDWARE_KIND = LineKind(
    "hardware",
    (SYSINFO_THREADS, SERVER_THREADS, " = 1", CUDA_FOUND, CUDA_DEVICE, USING_DEVICE, BACKEND_LOADED,
     VULKAN_FOUND, VULKAN_DEVICE, METAL_DEVICE, NO_GPU, GPU_INIT_FAILED, GPU_RUNTIME_FAILED, BACKEND_NOT_LOADED, BUILD),
    (r"n_threads +=", r"(?:AVX2|NEON|SSE3) = ", r"found \d+ \w+ devices", r"Device \d+: ", r"using device",
     r"backend from", r"ggml_metal\w*: (?:found device|GPU name|error)",
     r"ggml_vulkan: (?:Found|Device memory|\d+ = )", r"no usable GPU|GPU offload support|without GPU support",
     r"build(?::| =) \d+ \(|version: \d+ \([0-9a-f]+\)"))
SAMPLING_KIND = LineKind(
    "sampling", (*SAMPLER_KEYS, SEED),
    (r"repeat_penalty|top_k = |mirostat = |sampler seed|seed +=",))
OLD_BUFFERS_KIND = LineKind("old_buffers", (VRAM_USED_2023, MEM_REQUIRED_2023), (r"VRAM used", r"mem required"))

# the function a CUDA error names (ggml-cuda.cu ggml_cuda_error: "  current device: %d, in function %s at %s:%d"):
# the memory pool a graph's temporaries come from (ggml_cuda_pool_leg / _vmm::alloc, ggml_cuda_pool_malloc*
# before 2024) and the ops that run a graph are used only when a graph is computed, never to place weights
COMPUTE_FUNCTION = re.compile(r"^(?:alloc|ggml_cuda_pool_\w+|ggml_cuda_op_\w+|ggml_cuda_mul_mat\w*|"
                              r"ggml_cuda_compute_forward|\w*graph_compute\w*|ggml_cuda_flash_attn\w*)$")
CUDA_WHERE_KIND = LineKind("cuda_where", (CUDA_WHERE,), (r"current device: -?\d+, in function ",))

KINDS = LineKinds(
    LCP_SIGNATURE,
    SERVER_SIGNATURE_KIND,
    CLI_SIGNATURE_KIND,
    OUTPUT_END_KIND,
    META_KIND,
    META_KV_KIND,
    MEMORY_KIND,
    CONTEXT_KIND,
    TIMINGS_KIND,
    LOADED_META_KIND,
    LOADING_FROM_KIND,
    METAL_KIND,
    COMMAND_KIND,
    SETTINGS_KIND,
    LOAD_MODE_KIND,
    OFFLOADED_KIND,
    BUFFER_KIND,
    FIT_PROJECTED_KIND,
    FIT_DEVICE_KIND,
    KV_SIZE_KIND,
    CONTEXT_PARAMS_KIND,
    HARDWARE_KIND,
    SAMPLING_KIND,
    OLD_BUFFERS_KIND,
    CUDA_WHERE_KIND,
    LCP_OUTPUT,
    phases=("vote", "end", "read", "rest"), gated=False,
)
TRIGGERS = KINDS.triggers
if KINDS.index is None:  # every llama.cpp line kind declares the literals it needs
    raise ImportError("doctor.sources.engines.llamacpp: its line kinds declare no literal")
INDEX = KINDS.index  # the literal index the routing reads (tests/logs/test_log_routing.py checks it)
VOTE, END, READ, REST = (KINDS.phase(p) for p in KINDS.phases)


LINE_START = re.compile(r"^\s*(?:[\w.~\[\]-]+\s*:\s|\d+\.\d+\.\d+\.\d+ [IWED] |\[?\d{4}-\d\d-\d\d|time=|level=|\{|"
                    r"(?:INFO|WARN|WARNING|ERROR|DEBUG)\b|[A-Z][a-z]{2} [ \d]\d \d\d:|slot |srv |que )")


def starts_a_line(text: str) -> bool:
    """The next physical line is a log line of its own, not the rest of this one."""
    return bool(LINE_START.match(text))


def looks_cut(text: str) -> bool:
    """A line that probably continues on the next physical line (wrapped at a terminal width)."""
    tail = text.rstrip()
    return bool(tail) and (tail[-1].isalnum() or tail[-1] in "(,=/:-") and len(tail) >= 20


def is_gpu_buffer(name: str) -> bool:
    upper = name.upper()
    # AMX and *-REPACK are the CPU backend's extra buffer types (repacked weights in RAM)
    return not (upper.startswith(("CPU", "AMX")) or upper.endswith(("_HOST", "REPACK")))


def is_repack_buffer(name: str) -> bool:
    """The CPU backend's extra buffer types: weights repacked for AMX / CPU_REPACK (/ KleidiAI) kernels."""
    upper = name.upper()
    return upper.startswith("AMX") or upper.endswith("REPACK") or upper.startswith("KLEIDIAI")


def backend_of(buf: str) -> str:
    for b in GPU_BACKENDS:
        if buf.upper().startswith(b.upper()):
            return b
    if buf.upper().startswith("MTL"):
        return "Metal"
    return re.sub(r"\d+.*$", "", buf) or buf


def task_key(text: str) -> str | None:
    """`slot:task` of a server slot line (`id  0 | task 12 | ...`), None for other lines."""
    m = SLOT_TASK.search(text)
    return f"{m.group(1)}:{m.group(2)}" if m else None


def remember_task(tasks: set[str], text: str) -> None:
    key = task_key(text) or "?"  # a line without slot and task still counts for lines without them
    if len(tasks) < 10000:
        tasks.add(key)
