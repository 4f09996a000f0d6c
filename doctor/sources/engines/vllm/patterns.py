"""vLLM logs, V0 and V1 engines (0.2 to 0.34): facts and events from the engine's own messages.

What is read (format strings from vLLM's source, see fixtures/logs/vllm/README.md):
- the configuration in force: `args: Namespace(...)`, `non-default args: {...}`, the engine's
  `Initializing ... engine (vX) with config: ...` line, `Using max model len`, chunked prefill;
- model loading size and time (`Loading model weights took`, `Model loading took`);
- KV capacity: `# GPU blocks` / `# cuda blocks`, `GPU KV cache size: N tokens`, `Maximum concurrency
  for N tokens per request`, `Available KV cache memory` (can be negative), the memory profiling
  lines, and the capacity errors (`No available memory for the cache blocks`, max seq len larger
  than the KV cache can hold, `To serve at least one request ...`);
- requests rejected for length, and which limit they hit: max_model_len, or the batched-token
  budget (V0 `Input prompt (N tokens) is too long and exceeds limit of L`, the start-up check
  `max_num_batched_tokens (X) is smaller than max_model_len (Y)`), and whether the prompt alone or
  the prompt plus max_tokens was too long;
- preemption: the V0 warning (every 50th, with the running total) and the V1 `Preemptions: N` stat;
- the periodic stats line, read as comma-separated `key: value` pairs (its fields change by version);
  an interval with `Running: 1 reqs` and `Avg prompt throughput: 0.0` gives that request's decode speed;
- PyTorch out-of-memory errors in both wordings, placed in the start-up step they hit (loading
  weights, profiling, KV allocation, CUDA-graph capture, sampler warm-up, serving); an OOM read before
  any start-up line (the error pasted above its log, a viewer listing the newest line first) is placed
  at the furthest step the log shows.
- a message wrapped over two lines is read joined with the next.

Messages are matched by their text, so process prefixes (`(EngineCore_DP0 pid=…)`, `(VllmWorker
rank=0 pid=…)`, `(APIServer pid=…)`), another tool's logger, journald or docker framing do not
matter; the vLLM header (`INFO 05-22 02:20:59 [file.py:229]`) and the process prefixes are what the
engine detection counts.

PyTorch OOMs are shared with the TGI parser (both engines run on PyTorch, ../_torch/pytorch.py):
each parser records the OOM lines it sees on a `TorchOomBoard` of the analysis, with where the run's
timeline placed them (doctor/sources/logs/timeline.py: the start-up steps below mark it), and the board
emits each OOM once, for the engine the log belongs to.

This module holds the patterns and the table of line kinds; the handlers are in parser.py.

Pure.
"""

from __future__ import annotations

import re

from doctor.sources.engines._torch.pytorch import FRAME_LINES, FRAME_PATTERNS, OOM_LINES, OOM_PATTERNS
from doctor.sources.logs.base import LineKind, LineKinds
from doctor.sources.logs.matcher import gated

# -- vLLM messages ---------------------------------------------------------------------------------
HEADER = gated(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
               r"\[?[\w./\-]+\.py:\d+\]? ")
PROCESS = gated(r"\((?:EngineCore|APIServer|VllmWorker|Worker|DPCoordinator|RayWorkerWrapper)[\w\-]*"
                r"(?: rank=\d+)? pid=\d+(?:, ip=[\d.]+)?\)")
VERSION = gated(r"vLLM API server version v?([\w.+\-]+)"
                r"|Initializing an? (V1 )?LLM engine \(v?([\w.+\-]+)\) with config")
CONFIG_LINE = gated(r"with config: |args: Namespace\(|non-default args: \{|EngineArgs\(")
CONFIG_KV = gated(r"""(?:^|[\s,({])['"]?(max_model_len|max_seq_len|gpu_memory_utilization|max_num_seqs"""
                  r"""|max_num_batched_tokens|tensor_parallel_size|pipeline_parallel_size|kv_cache_dtype"""
                  r"""|cache_dtype|block_size|enable_chunked_prefill|chunked_prefill_enabled|quantization"""
                  r"""|enforce_eager|model)['"]?\s*[=:]\s*('[^']*'|"[^"]*"|[\w.\-/]+)""")
MAX_LEN_USED = gated(r"Using max model len (\d+)")
CHUNKED = gated(r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)")
BATCHED_BELOW = gated(r"max_num_batched_tokens \((\d+)\) is smaller than max_model_len \((\d+)\)")
USER_MAX_LEN = gated(r"User-specified max_model_len \((\d+)\) is greater than the derived max_model_len "
                     r"\((\w+)=(\d+)")
LOAD_START = gated(r"Starting to load model (\S+?)(?:\.\.\.)?$")
WEIGHTS_TOOK = gated(r"Loading model weights took ([\d.]+) GB"
                     r"|Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) seconds"
                     r"|Loading weights took ([\d.]+) seconds")
PROFILE_TOTAL = gated(r"total_gpu_memory \(([\d.]+)\s*GiB\) x gpu_memory_utilization \(([\d.]+)\)")
PROFILE_SPLIT = gated(r"model weights take ([\d.]+)\s*GiB;.*?"
                      r"the rest of the memory reserved for KV Cache is (-?[\d.]+)\s*GiB")
PROFILE_V1 = gated(r"Memory profiling takes [\d.]+ seconds\. Total non KV cache memory: [\d.]+\s*GiB;.*?"
                   r"weights memory: ([\d.]+)\s*GiB")
BLOCKS = gated(r"# (GPU|cuda|CUDA|ROCm|rocm|XPU|xpu|device) blocks: (\d+)(?:, # CPU blocks: (\d+))?")
KV_TOKENS = gated(r"\b(\w+(?: \+ host)?) KV cache size: ([\d,]+) tokens")  # \b: linear on long words
CONCURRENCY = gated(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
KV_AVAILABLE = gated(r"Available KV cache memory: (-?[\d.]+) GiB")
NO_KV_MEMORY = gated(r"No available memory for the cache blocks")
MAX_SEQ_OVER_KV = gated(r"max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored "
                        r"in KV cache \((\d+)\)")
TO_SERVE = gated(r"To serve at least one request with the models?'s max seq len \((\d+)\), "
                 r"\(([\d.]+) GiB KV cache is needed, which is larger than the available KV cache memory "
                 r"\((-?[\d.]+) GiB\)")
ESTIMATED_LEN = gated(r"estimated maximum model length is (\d+)")
LOOKAHEAD = gated(r"Input prompt \((\d+) tokens\) \+ lookahead slots \((\d+)\) is too long "
                  r"and exceeds the capacity of block_manager")
INPUT_TOO_LONG = gated(r"Input prompt \((\d+) tokens\) is too long and exceeds limit of (\d+)")
CTX_REQUESTED = gated(r"maximum context length is (\d+) tokens\. However, you requested (\d+) tokens "
                      r"\((\d+) in the messages, (\d+) in the completion\)")
CTX_REQUESTED_INPUT = gated(r"maximum context length is (\d+) tokens\. However, you requested (\d+) tokens "
                            r"in the (?:messages|input)")
CTX_REQUEST_HAS = gated(r"maximum context length is (\d+) tokens\. However, your "
                        r"(?:request has|prompt contains (?:at least )?)(\d+) input tokens")
CTX_MAX_TOKENS = gated(r"'max_tokens' or 'max_completion_tokens' is too large: (\d+)\. This model's maximum "
                       r"context length is (\d+) tokens and your request has (\d+) input tokens")
PROMPT_LONGER = gated(r"The (?:decoder|encoder) prompt \(length (\d+)\)"
                      r"(?: plus the number of requested output tokens)?.{0,30}? is longer than the maximum "
                      r"model length of (\d+)")
PREEMPTED = gated(r"Sequence group (\S+) is preempted by (?:PreemptionMode\.)?(\w+) mode because there is not "
                  r"enough KV cache space")
PREEMPT_TOTAL = gated(r"total_num_cumulative_preemption=(\d+)")
# the periodic stats line (V0 metrics.py, V1 loggers.py); its request counts also stand quoted alone
# ("Waiting: 1 reqs, Running: 0 reqs")
STATS = gated(r"Avg prompt throughput: |\b(?:Running|Waiting|Pending): \d+ reqs")
STATS_NUMBER = gated(r"(-?[\d.]+)")
STAGE_MARKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (gated(r"Starting to load model|Loading safetensors checkpoint|Loading pt checkpoint"), "load"),
    (gated(r"Loading model weights took|Model loading took"), "profile"),
    (gated(r"Memory profiling takes|# \w+ blocks: |KV cache size: |Available KV cache memory"), "kv"),
    (gated(r"Capturing (?:the model for CUDA graphs|cudagraphs|CUDA graph)|Compile and warming up model"),
     "warmup"),
    (gated(r"Graph capturing finished|init engine \(profile"), "ready"),
    (gated(r"Starting vLLM API server|Available routes are|Application startup complete|Uvicorn running"
           r"|Avg prompt throughput"), "run"),
)
STAGE_ORDER = ("start", "load", "profile", "kv", "warmup", "ready", "run")
# each start-up step as a step of the run's timeline (doctor/sources/logs/timeline.py, which places an OOM
# by the last one reached: after the weights a vLLM run profiles, after the profile it allocates the KV cache)
TIMELINE_STEPS: dict[str, tuple[str, str | None]] = {
    "load": ("load", None), "profile": ("weights", None), "kv": ("profile", None),
    "warmup": ("warmup", "cuda_graphs"), "ready": ("warmup", "warmup"), "run": ("serving", None),
}
# the engine died while serving (a failure at start-up is reported by the error that caused it)
ENGINE_FAILED = gated(r"EngineCore encountered a fatal error|Error in model execution")

def clean(value: str) -> str:
    return value.strip().strip("'\"")


def to_int(value: str) -> int | None:
    try:
        return int(value.replace(",", ""))
    except ValueError:
        return None


# The lines read, by kind. Phases: "stage" marks the start-up step (never takes a line), "frame" reads
# traceback frames, "oom" PyTorch's OOM messages, "read" vLLM's own; a message wrapped over two lines
# is read joined with the next ("oom" and "read" again). A kind without a handler names lines read only for the
# engine's own header (its vote).
HEADER_KIND = LineKind("header", (), (r"Automatically detected platform",), handled=False)
STAGE_KIND = LineKind(
    "stage", tuple(pattern for pattern, _ in STAGE_MARKS),
    (r"Capturing (?:the model|cudagraphs|CUDA graph)", r"Compile and warming up", r"Graph capturing finished",
     r"init engine \(profile", r"Starting vLLM API server", r"Available routes are",
     r"Application startup complete"), phase="stage")
FRAME_KIND = LineKind("frame", FRAME_PATTERNS, FRAME_LINES, phase="frame")
OOM_KIND = LineKind("oom", OOM_PATTERNS, OOM_LINES, phase="oom")
CONFIG_KIND = LineKind(
    "config",
    (VERSION, CONFIG_LINE, MAX_LEN_USED, CHUNKED, BATCHED_BELOW, USER_MAX_LEN, LOAD_START, WEIGHTS_TOOK),
    (r"vLLM API server version", r"LLM engine \(v", r"LLM engine with config", r"args: Namespace\(",
     r"non-default args: ", r"Using max model len", r"Chunked prefill is enabled",
     r"max_num_batched_tokens \(", r"User-specified max_model_len", r"Starting to load model",
     r"Loading model weights took", r"Model loading took", r"Loading weights took"))
CAPACITY_KIND = LineKind(
    "capacity",
    (BLOCKS, KV_TOKENS, CONCURRENCY, KV_AVAILABLE, PROFILE_TOTAL, PROFILE_SPLIT, PROFILE_V1, NO_KV_MEMORY,
     MAX_SEQ_OVER_KV, TO_SERVE, LOOKAHEAD),
    (r"Memory profiling takes", r"total_gpu_memory \(", r"model weights take", r"# \w+ blocks: \d",
     r"KV cache size: [\d,]+ tokens", r"Maximum concurrency for", r"Available KV cache memory",
     r"No available memory for the cache", r"max seq len \(", r"Input prompt \("))
# no patterns: PROMPT_LONGER is also read on the line joined with the next, so it is tried on every line
CONTEXT_KIND = LineKind("context", (), (r"maximum context length is", r"maximum model length of"))
PREEMPTION_KIND = LineKind("preemption", (PREEMPTED,), (r"is preempted by",))
STATS_KIND = LineKind("stats", (STATS,), (r"Avg prompt throughput", r"(?:Running|Waiting|Pending): \d+ reqs"))
# a failed start is reported by the error that caused it: those lines are read for the vote
FAILURE_KIND = LineKind(
    "failure", (ENGINE_FAILED,),
    (r"EngineCore (?:failed|encountered)", r"Engine core initialization failed", r"WorkerProc failed",
     r"Error in model execution"))

KINDS = LineKinds(
    HEADER_KIND,
    STAGE_KIND,
    FRAME_KIND,
    OOM_KIND,
    CONFIG_KIND,
    CAPACITY_KIND,
    CONTEXT_KIND,
    PREEMPTION_KIND,
    STATS_KIND,
    FAILURE_KIND,
    phases=("stage", "frame", "oom", "read"),
)
TRIGGERS = KINDS.triggers
STAGE, FRAME_PHASE, OOM, READ = (KINDS.phase(p) for p in KINDS.phases)
