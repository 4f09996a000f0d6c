"""Ollama server.log in every era, and the `ollama run --verbose` statistics block.

What is read (format strings from Ollama's source by version, see fixtures/logs/ollama/README.md):
- slog lines `time=… level=… source=file.go:N msg=… key=value …`, bare or behind a journald prefix
  (`Mon DD hh:mm:ss host ollama[pid]:`); values are parsed as Go's slog writes them (quoted when
  they hold spaces, groups flattened to `group.key=`);
- the memory estimate in its three eras: `offload to gpu` (layers.requested / layers.real, or
  reallayers / layers), `offload to cuda|rocm|metal|cpu` and `msg=offload library=…` (layers.model,
  layers.offload, memory.available, memory.required.full|partial|kv), and the Ollama engine's
  `loading model "model layers"=N requested=M` plus its per-device memory lines;
- GPU discovery (`inference compute`, `no compatible GPUs were discovered`) and the AVX gate that
  turns GPUs off on CPUs without AVX (three wordings);
- the server configuration (`server config env=map[…]`), the runner command line or load request
  (context size, parallel slots, GPU layers, threads, flash attention, KV cache type);
- context: `truncating input prompt` (limit, prompt, keep, new), `requested context size too large
  for model`; memory: `model request too large for system`, `model requires more system memory`;
- runner start time and death (`llama runner process has terminated`, `no longer running`, the
  llama-server wording of v0.30+), `[GIN]` access lines, flash-attention / KV-type warnings;
- GPU discovery that failed (`cudart init failure: N`, `cudaSetDevice err: N`, `unknown error
  initializing cuda driver library`, `version mismatch between driver and cuda driver library`) with no
  GPU found after it, by CUDA cause (../_ggml/gpu_failures.py);
- the runner's own OOMs (`CUDA error: out of memory`, `CUDA error 2 at ...`, CUBLAS_STATUS_ALLOC_FAILED /
  NOT_INITIALIZED), placed by what Ollama's estimate covered: the 2023 estimate (`N MB VRAM available,
  loading up to N GPU layers`, `llama.go:` lines) counted only the weights, so the KV cache is what did not
  fit; a later estimate that placed the layers leaves compute headroom short (or, when its KV cache takes
  most of the free VRAM, the context); an OOM right after an image encode is the projector's;
- the per-device compute graph against the largest GPU, and the load rate from the debug
  `model load progress` lines with their timestamps.

The llama.cpp runner's own output in the same file is read by the llama.cpp parser, which sees every
candidate line; nothing here repeats its patterns (the runner's OOM messages: ../_ggml/oom.py).
This module holds the patterns, the slog helpers and the table of line kinds; the handlers are in
parser.py, the whole-input summary in summary.py.

Pure.
"""

from __future__ import annotations

import re

from doctor.sources.engines._ggml.oom import RUNNER_OOM_LINES
from doctor.sources.engines._torch.pytorch import size_text
from doctor.sources.logs.base import LineKind, LineKinds
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.matcher import gated

SLOG = gated(r"\blevel=(?:DEBUG|INFO|WARN|ERROR|TRACE)\b.*?\bmsg=")
SOURCE = gated(r"\bsource=[\w./\-]+\.go:\d+")
PAIR = gated(r'(?<!\S)("(?:[^"\\]|\\.)*"|[^\s="]+)=("(?:[^"\\]|\\.)*"|\S*)')  # (?<!\S): linear
JOURNALD = gated(r"\bollama\[\d+\]: ")
OLD_GO_LOG = gated(r"\b(?:llama|routes|server|images|download)\.go:\d+: ")
GIN = gated(r"\[GIN\] [\d/]+ - [\d:]+ \|\s*(\d{3})\s*\|\s*([\d.]+)(µs|μs|us|ms|s|m)\s*\|")
CLI_STAT = gated(r"^\s*(total duration|load duration|prompt eval count|prompt eval duration|prompt eval rate"
                 r"|eval count|eval duration|eval rate):\s+(.+?)\s*$")
# `ollama run`: a parameter changed between two generations - the command typed at the prompt and the
# CLI's answer (cmd/interactive.go: fmt.Printf("Set parameter '%s' to '%s'\n", ...), every era)
SET_PARAM = gated(r"/set parameter (\w+) (\S+)|Set parameter '(\w+)' to '([^']*)'")
# Ollama's own install in the paths llama.cpp prints (load_backend, the runner binary): /usr/lib/ollama,
# /usr/local/lib/ollama, %LOCALAPPDATA%\Programs\Ollama\lib\ollama, /Applications/Ollama.app
INSTALL_PATH = gated(r"[/\\]lib[/\\]ollama[/\\]|[/\\]Ollama\.app[/\\]|[/\\]Programs[/\\]Ollama[/\\]")
GO_DURATION = gated(r"(?<![\d.])(\d+(?:\.\d+)?)(h|ms|µs|μs|us|ns|m|s)")  # (?<!..): linear on digit runs
AVX_GATE = gated(r"CPU does not have AVX or AVX2, disabling GPU support"
                 r"|CPU does not have minimum vector extensions, GPU inference disabled"
                 r"|GPU runner incompatible with host system, CPU does not have AVX")
CMD_FLAG = gated(r"--([\w-]+)(?:[ =]([^\s\"-][^\s\"]*))?")
LOAD_REQUEST = gated(r"\b(Parallel|BatchSize|FlashAttention|KvSize|KvCacheType|NumThreads|GPULayers)"
                     r":([^\s\[\]}]*)")
LISTENING = gated(r"Listening on \S+ \(version ([\w.\-+]+)\)")
ENV_PAIR = gated(r"\b(OLLAMA_[A-Z_]+):(\S*)")
TERMINATED = gated(r"(?:llama runner|llama-server) process (?:has terminated|no longer running)(?::\s*(.*))?")
EXIT = gated(r"exit status (0x[0-9a-fA-F]+|-?\d+)|signal: ([\w ]+)")
GPU_DISCOVERY_FAILED = gated(r"init failure: -?\d+|cudaSetDevice err: -?\d+|cuInit err: -?\d+"
                             r"|unknown error initializing cuda|version mismatch between driver and cuda driver")
OLD_ESTIMATE = gated(r"(\d+) MB VRAM available, loading up to (\d+) GPU layers")
NAMED_ALLOCATION = gated(r"cudaMalloc failed|hipMalloc failed|failed to allocate|unable to allocate|alloc_buffer")
IMAGE_STEP = gated(r"clip_model_load|encode_image|image embedding|clip_image|mtmd_|projector|mllama")
INFERENCE_PATH = gated(r"POST\s+\"/(?:api/(?:generate|chat|embed|embeddings)|v1/(?:chat/)?completions|v1/embeddings)\"")
LOAD_PROGRESS = gated(r"model load progress ([\d.]+)")
TIME_FIELD = gated(r"\btime=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)")
SYSTEM_MEMORY = gated(r"model requires more system memory \(([\d.]+ [KMGT]?i?B)\) than is available "
                      r"\(([\d.]+ [KMGT]?i?B)\)")

KV_ENV = ("OLLAMA_CONTEXT_LENGTH", "OLLAMA_NUM_PARALLEL", "OLLAMA_MAX_LOADED_MODELS", "OLLAMA_FLASH_ATTENTION",
          "OLLAMA_KV_CACHE_TYPE", "OLLAMA_MODELS", "OLLAMA_NEW_ENGINE")


def slog_pairs(text: str) -> dict[str, str]:
    """key=value pairs of a Go slog text line (quoted keys and values unquoted)."""
    start = text.find("time=")
    if start < 0:
        start = text.find("level=")
    out: dict[str, str] = {}
    for m in PAIR.finditer(text, max(start, 0)):
        key, value = m.group(1), m.group(2)
        out[_unquote(key)] = _unquote(value)
    return out


# the start of a log record: a line that begins like this is not the tail of a wrapped one
RECORD_START = gated(r"^(?:time=|\[GIN\]|[A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d |\d{4}[-/]\d\d[-/]\d\d|[\w.]+: |"
                     r"(?:INFO|WARN|WARNING|ERROR|DEBUG) |\[?\w+\]|\(|\{|Traceback|  File |>>> |\S+ \S+:\s*$)")
TERMINAL_WIDTHS = (80, 100, 120, 132, 140, 150, 160, 180, 200, 220, 240, 250)


def wrapped(line: LogLine) -> bool:
    """A long record whose next physical line carries on with it (a terminal or an issue quote wrapped it)."""
    nxt = line.next_text
    if not nxt or len(line.text) < 60 or RECORD_START.search(nxt.lstrip()):
        return False
    open_quote = (line.text.count('"') - line.text.count('\\"')) % 2 == 1
    return open_quote or "=" in nxt


def unwrap(line: LogLine) -> str:
    """The record with its wrapped tail: a terminal cuts at its width, mid-word; a quote wraps at a space."""
    nxt = (line.next_text or "").strip()
    if len(line.raw) in TERMINAL_WIDTHS or len(line.text) in TERMINAL_WIDTHS:
        return line.text + nxt
    return line.text.rstrip() + " " + nxt


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return value


def to_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def size_sum(value: str | None) -> int | None:
    """'[11.6 GiB 11.6 GiB]', '23.3 GiB' or a raw byte count -> total bytes."""
    if not value:
        return None
    if value.isdigit():
        return int(value)
    total, found = 0, False
    for m in re.finditer(r"(?<![\d.])(-?[\d.]+)\s*([KMGT]i?B|B)\b", value):  # (?<!..): linear on digit runs
        size = size_text(m.group(0))
        if size is not None:
            total += size
            found = True
    return total if found else None


def go_duration_ms(text: str) -> float | None:
    """Go's time.Duration String ('1m2.5s', '812.3ms', '45.2µs') in milliseconds."""
    scale = {"h": 3_600_000.0, "m": 60_000.0, "s": 1000.0, "ms": 1.0, "µs": 0.001, "μs": 0.001, "us": 0.001,
             "ns": 0.000001}
    parts = GO_DURATION.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        return None
    return round(sum(float(n) * scale[u] for n, u in parts), 6)


# The messages an Ollama server (any era) writes, by kind. Phases: "access" reads the [GIN] access log
# and the CLI statistics, "read" the server's messages. Those handlers read the slog message and its
# key=value pairs (a record wrapped over two lines is read joined), not the line's own text: they
# name no patterns, so each is tried on every line the gate lets in.
GIN_KIND = LineKind("gin", ("[GIN]",), (r"\[GIN\] ",), phase="access")
SET_PARAM_KIND = LineKind("set_param", (SET_PARAM,), (r"/set parameter \w+ ", r"Set parameter '\w+' to '"),
                          phase="access")
INSTALL_KIND = LineKind(
    "install", (INSTALL_PATH,),
    (r"[/\\]lib[/\\]ollama[/\\]|[/\\]Ollama\.app[/\\]|[/\\]Programs[/\\]Ollama[/\\]",), phase="access")
CLI_KIND = LineKind(
    "cli", (CLI_STAT,),
    (r"(?:total|load) duration: |prompt eval (?:count|duration|rate): |eval (?:count|duration|rate): ",),
    keys=("duration:", "eval ", "rate:"), phase="access")
# a warning or error wrapped before its message: read with its tail
WRAPPED_KIND = LineKind("wrapped", (), (r"level=(?:WARN|ERROR) ",), handled=False)
OFFLOAD_KIND = LineKind(
    "offload", (),
    (r"offload to |msg=offload ", r"msg=\"loading model\"",
     r"msg=\"(?:model weights|kv cache|compute graph|total memory)\""))
GPUS_KIND = LineKind(
    "gpus", (),
    (r"inference compute", r"no compatible GPUs", r"vector extensions|does not have AVX"))
CONTEXT_KIND = LineKind("context", (), (r"truncating input prompt", r"context size too large"))
RUNNER_KIND = LineKind(
    "runner", (),
    (r"runner started in|llama-server started in", r"starting llama server|starting runner|msg=load request=",
     r"server config", r"Listening on ", r"process has terminated|process no longer running",
     r"llama runner terminated"))
MEMORY_KIND = LineKind("memory", (), (r"request too large for system|more system memory",))
WARNINGS_KIND = LineKind(
    "warnings", (),
    (r"flash attention (?:enabled but|requested)|enabling flash attention|kv cache type not supported",
     r"quantized kv cache requested",
     r"memory layout cannot be allocated|did not fit, applying backoff|VRAM usage didn't recover"))
# GPU discovery failing (driver / runtime), the 2023 layer estimate, the runner's own OOMs, load progress
FAILURES_KIND = LineKind(
    "failures", (),
    (r"init failure: |cudaSetDevice err|cuInit err|Unable to load cudart|unknown error initializing cuda"
     r"|version mismatch between driver",
     r"MB VRAM available, loading up to",
     RUNNER_OOM_LINES,
     r"clip_model_load|encode_image|image embedding|mtmd_|projector", r"model load progress"))
# the scheduler found the model loaded and asked whether the request can use it (server/sched.go needsReload:
# "evaluating already loaded", v0.1.33 on); the runner it then resets "to expire immediately to make room" is that
# same model, reloaded because the request's load options (num_ctx, num_gpu, num_batch, adapters, projector,
# context shift) differ from the runner's, or the runner stopped answering its ping
SCHED_KIND = LineKind("sched", (), (r"evaluating already loaded", r"expire immediately to make room"))

KINDS = LineKinds(
    GIN_KIND,
    CLI_KIND,
    SET_PARAM_KIND,
    INSTALL_KIND,
    WRAPPED_KIND,
    OFFLOAD_KIND,
    GPUS_KIND,
    CONTEXT_KIND,
    RUNNER_KIND,
    MEMORY_KIND,
    WARNINGS_KIND,
    FAILURES_KIND,
    SCHED_KIND,
    phases=("access", "read"),
)
TRIGGERS = KINDS.triggers
ACCESS, READ = (KINDS.phase(p) for p in KINDS.phases)
