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
  GPU found after it, by CUDA cause (doctor/sources/logs/gpu_failures.py);
- the runner's own OOMs (`CUDA error: out of memory`, `CUDA error 2 at ...`, CUBLAS_STATUS_ALLOC_FAILED /
  NOT_INITIALIZED), placed by what Ollama's estimate covered: the 2023 estimate (`N MB VRAM available,
  loading up to N GPU layers`, `llama.go:` lines) counted only the weights, so the KV cache is what did not
  fit; a later estimate that placed the layers leaves compute headroom short (or, when its KV cache takes
  most of the free VRAM, the context); an OOM right after an image encode is the projector's;
- the per-device compute graph against the largest GPU, and the load rate from the debug
  `model load progress` lines with their timestamps.

The llama.cpp runner's own output in the same file is read by the llama.cpp parser, which sees every
candidate line; nothing here repeats its patterns.

Pure.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from doctor.core.facts import Event, Facts, Source
from doctor.sources.logs.base import Extremes, LineKind, LineKinds, LogParser
from doctor.sources.logs.gpu_failures import gpu_failure_cause
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.matcher import gated
from doctor.sources.logs.pytorch import size_text

SLOG = gated(r"\blevel=(?:DEBUG|INFO|WARN|ERROR|TRACE)\b.*?\bmsg=")
SOURCE = gated(r"\bsource=[\w./\-]+\.go:\d+")
PAIR = gated(r'(?<!\S)("(?:[^"\\]|\\.)*"|[^\s="]+)=("(?:[^"\\]|\\.)*"|\S*)')  # (?<!\S): linear
JOURNALD = gated(r"\bollama\[\d+\]: ")
OLD_GO_LOG = gated(r"\b(?:llama|routes|server|images|download)\.go:\d+: ")
GIN = gated(r"\[GIN\] [\d/]+ - [\d:]+ \|\s*(\d{3})\s*\|\s*([\d.]+)(µs|μs|us|ms|s|m)\s*\|")
CLI_STAT = gated(r"^\s*(total duration|load duration|prompt eval count|prompt eval duration|prompt eval rate"
                 r"|eval count|eval duration|eval rate):\s+(.+?)\s*$")
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
# the runner aborting on a failed CUDA/ROCm call that ran out of memory: a pool or cuBLAS allocation at
# compute time, or (2023 builds, "CUDA error 2 at file:line") any allocation; not a buffer that llama.cpp
# names (cudaMalloc failed / unable to allocate ... buffer), which the llama.cpp parser places itself
RUNNER_OOM = gated(r"\b(?:CUDA|ROCm|HIP) error(?: 2 at \S+)?: out of memory|\b2 at \S+ggml-cuda\.cu:\d+: out of memory"
                   r"|(?:CU|HIP)BLAS_STATUS_(?:ALLOC_FAILED|NOT_INITIALIZED)|cuBLAS error [13] "
                   r"|(?:CUDA|ROCm) error: the (?:resource allocation failed|library was not initialized)")
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


def _wrapped(line: LogLine) -> bool:
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


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _sizes(value: str | None) -> int | None:
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


@dataclass(slots=True)
class _Offload:
    line: LogLine
    library: str | None = None
    requested: int | None = None
    model: int | None = None
    offload: int | None = None


@dataclass(slots=True)
class _Cli:
    load_ms: float | None = None
    prompt_tokens: int | None = None
    prompt_ms: float | None = None
    prompt_tps: float | None = None
    eval_tokens: int | None = None
    eval_ms: float | None = None
    eval_tps: float | None = None
    total_ms: float | None = None
    line: LogLine | None = None
    prompt_line: LogLine | None = None  # the "prompt eval count" line
    rate_line: LogLine | None = None  # the "eval rate" line


@dataclass(slots=True)
class _State:
    offload: _Offload | None = None
    gpus: list[tuple[str, int | None, int | None]] = field(default_factory=list)  # name, total, free
    gpu_block_line: int = -10
    gpu_line: LogLine | None = None
    no_gpu_line: LogLine | None = None
    requests: int = 0
    errors_5xx: int = 0
    gin_line: LogLine | None = None
    cli: list[_Cli] = field(default_factory=list)
    cli_current: _Cli | None = None
    memory: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> device -> bytes
    memory_line: LogLine | None = None
    env: dict[str, str] = field(default_factory=dict)
    env_line: LogLine | None = None
    ctx_size: int | None = None
    parallel: int | None = None
    runner_line: LogLine | None = None
    start_s: float | None = None
    start_line: LogLine | None = None
    crashed_texts: set[str] = field(default_factory=set)
    gpu_failures: list[tuple[str, LogLine, str | None, str]] = field(default_factory=list)  # cause, line, code, text
    old_estimate_line: LogLine | None = None
    old_go_log: bool = False  # "llama.go:N:" lines: Ollama before v0.1.33
    served: int = 0  # inference requests answered since the last runner start
    # line, kind (cuda | cublas), requests served before it, an image being encoded just before it
    runner_ooms: list[tuple[LogLine, str, int, bool]] = field(default_factory=list)
    image_line: int = -1000
    progress: list[tuple[float, float, LogLine]] = field(default_factory=list)  # (seconds, fraction, line)


# The messages an Ollama server (any era) writes, by kind. Phases: "access" reads the [GIN] access log
# and the CLI statistics, "read" the server's messages. Those handlers read the slog message and its
# key=value pairs (a record wrapped over two lines is read joined), not the line's own text: they
# name no patterns, so each is tried on every line the gate lets in.
KINDS = LineKinds(
    LineKind("gin", "_gin", ("[GIN]",), (r"\[GIN\] ",), phase="access"),
    LineKind("cli", "_cli", (CLI_STAT,),
             (r"(?:total|load) duration: |prompt eval (?:count|duration|rate): |eval (?:count|duration|rate): ",),
             keys=("duration:", "eval ", "rate:"), phase="access"),
    # a warning or error wrapped before its message: read with its tail
    LineKind("wrapped", None, (), (r"level=(?:WARN|ERROR) ",)),
    LineKind("offload", "_offload", (),
             (r"offload to |msg=offload ", r"msg=\"loading model\"",
              r"msg=\"(?:model weights|kv cache|compute graph|total memory)\"")),
    LineKind("gpus", "_gpus", (),
             (r"inference compute", r"no compatible GPUs", r"vector extensions|does not have AVX")),
    LineKind("context", "_context", (), (r"truncating input prompt", r"context size too large")),
    LineKind("runner", "_runner", (),
             (r"runner started in|llama-server started in", r"starting llama server|starting runner|msg=load request=",
              r"server config", r"Listening on ", r"process has terminated|process no longer running",
              r"llama runner terminated")),
    LineKind("memory", "_memory", (), (r"request too large for system|more system memory",)),
    LineKind("warnings", "_warnings", (),
             (r"flash attention (?:enabled but|requested)|enabling flash attention|kv cache type not supported",
              r"quantized kv cache requested",
              r"memory layout cannot be allocated|did not fit, applying backoff|VRAM usage didn't recover")),
    # GPU discovery failing (driver / runtime), the 2023 layer estimate, the runner's own OOMs, load progress
    LineKind("failures", "_failures", (),
             (r"init failure: |cudaSetDevice err|cuInit err|Unable to load cudart|unknown error initializing cuda"
              r"|version mismatch between driver",
              r"MB VRAM available, loading up to",
              r"out of memory|CUBLAS_STATUS_(?:ALLOC_FAILED|NOT_INITIALIZED)|cuBLAS error [13] ",
              r"clip_model_load|encode_image|image embedding|mtmd_|projector", r"model load progress")),
    phases=("access", "read"),
)
TRIGGERS = KINDS.triggers
_ACCESS, _READ = (KINDS.phase(p) for p in KINDS.phases)


class OllamaParser(LogParser):
    name = "ollama"
    kinds = KINDS

    def __init__(self) -> None:
        super().__init__()
        self.s = _State()

    def feed(self, line: LogLine) -> None:
        t = line.text
        if not self.passes_gate(t):
            return
        plan = KINDS.plan(KINDS.bits(t))  # the kinds this line can be, by phase
        if self.run(plan[_ACCESS], line):
            return
        is_slog = bool(SLOG.search(t))
        if not is_slog and "level=" in t and line.next_text and "msg=" in line.next_text:
            t = unwrap(line)  # wrapped before its message (a terminal, a web page)
            is_slog = bool(SLOG.search(t))
        old_go = OLD_GO_LOG.search(t)
        if old_go:
            self.s.old_go_log = True
        if (is_slog and SOURCE.search(t)) or JOURNALD.search(t) or old_go:
            self.votes["ollama"] += 1
        if is_slog and _wrapped(line):
            t = unwrap(line)
        pairs = slog_pairs(t) if is_slog else {}
        msg = pairs.get("msg", t)
        self.run(plan[_READ], line, msg, pairs)

    # -- memory estimate and offload ------------------------------------------------------------------
    def _offload(self, line: LogLine, msg: str, p: dict[str, str]) -> bool:
        if msg.startswith("offload to ") or msg == "offload":
            library = p.get("library") or msg.removeprefix("offload to ").strip() or None
            off = _Offload(line, library=library.lower() if library else None)
            if "layers.model" in p:  # v0.1.45 → v0.12
                off.model, off.offload = _int(p.get("layers.model")), _int(p.get("layers.offload"))
                off.requested = _int(p.get("layers.requested"))
            elif "layers.real" in p:  # v0.1.33 → v0.1.44: requested and the estimate, no model count
                off.offload, off.requested = _int(p.get("layers.real")), _int(p.get("layers.requested"))
            elif "reallayers" in p:  # v0.1.32
                off.offload, off.model = _int(p.get("reallayers")), _int(p.get("layers"))
            self.s.offload = off
            if off.library:
                self.set("server.ollama.library", off.library, line)
            for name, value in (("server.ollama.layers_model", off.model),
                                ("server.ollama.layers_offload", off.offload),
                                ("server.ollama.layers_requested", off.requested)):
                if value is not None:
                    self.set(name, value, line)
            if off.requested is not None and off.requested >= 0:
                self.set("config.n_gpu_layers", off.requested, line)
            sizes = {"server.ollama.memory_available": p.get("memory.available") or p.get("available"),
                     "server.ollama.memory_required_full": p.get("memory.required.full") or p.get("required"),
                     "server.ollama.memory_required_partial": p.get("memory.required.partial") or p.get("used"),
                     "server.ollama.memory_required_kv": p.get("memory.required.kv") or p.get("kv"),
                     "server.ollama.memory_weights": p.get("memory.weights.total")}
            for name, raw in sizes.items():
                value = _sizes(raw)
                if value is not None:
                    self.set(name, value, line)
            return True
        if msg == "loading model" and "model layers" in p:  # v0.11+ scheduler
            model, requested = _int(p.get("model layers")), _int(p.get("requested"))
            if model is not None:
                self.set("server.ollama.layers_model", model, line)
            if requested is not None:
                self.set("server.ollama.layers_requested", requested, line)
                if requested >= 0:
                    self.set("config.n_gpu_layers", requested, line)
            return True
        if msg in ("model weights", "kv cache", "compute graph") and "size" in p:  # Ollama engine, per device
            size = _sizes(p.get("size"))
            if size is not None:
                device = p.get("device", "CPU")
                self.s.memory.setdefault(msg, {})[device] = size
                self.s.memory_line = line
            return True
        return False

    # -- GPUs and the AVX gate -------------------------------------------------------------------------------
    def _gpus(self, line: LogLine, msg: str, p: dict[str, str]) -> bool:
        s = self.s
        if msg == "inference compute":
            if line.number - s.gpu_block_line > 3:
                s.gpus = []  # a new discovery block
            s.gpu_block_line = line.number
            library = (p.get("library") or "").lower()
            if library == "cpu":
                s.no_gpu_line = line
                return True
            # v0.12+ logs the backend device as name= (CUDA0) and the card as description=
            name = p.get("description") or p.get("name", "")
            s.gpus.append((name, _sizes(p.get("total")), _sizes(p.get("available"))))
            s.gpu_line = line
            self.set("server.ollama.library", library, line)
            return True
        if "no compatible GPUs were discovered" in msg:
            s.no_gpu_line = line
            return True
        if AVX_GATE.search(line.text):
            self.set("server.ollama.gpu_gated_avx", True, line)
            self.event("warning", line, what="gpu_disabled_no_avx")
            return True
        return False

    # -- context ---------------------------------------------------------------------------------------------
    def _context(self, line: LogLine, msg: str, p: dict[str, str]) -> bool:
        if msg == "truncating input prompt":
            limit, prompt = _int(p.get("limit")), _int(p.get("prompt"))
            keep = _int(p.get("keep") or p.get("numKeep"))
            data: dict[str, Any] = {"engine": "ollama", "limit": "num_ctx"}
            if limit is not None:
                data["n_ctx"] = limit
                self.set("config.num_ctx", limit, line)
                self.set("server.ollama.num_ctx", limit, line)
            if prompt is not None:
                data["n_tokens"] = prompt
            if keep is not None:
                data["n_keep"] = keep
            new = _int(p.get("new"))
            if new is not None:
                data["kept_tokens"] = new
            self.event("truncation", line, **data)
            return True
        if msg == "requested context size too large for model":
            # Ollama does not run past the trained context: it caps num_ctx to n_ctx_train and goes on
            n_ctx, train = _int(p.get("num_ctx")), _int(p.get("n_ctx_train"))
            parallel = _int(p.get("num_parallel")) or 1  # v0.9 logged num_ctx for all slots together
            data = {"what": "num_ctx_capped", "engine": "ollama"}
            if n_ctx is not None:
                data["asked"] = n_ctx // parallel
            if train is not None:
                data["n_ctx_train"] = train
                self.set("model.n_ctx_train", train, line)
                self.set("config.num_ctx", train, line)
            self.event("warning", line, **data)
            return True
        return False

    # -- runner start, configuration and death -----------------------------------------------------------
    def _runner(self, line: LogLine, msg: str, p: dict[str, str]) -> bool:
        t = line.text
        s = self.s
        if msg in ("starting llama server", "starting runner", "starting llama-server") and "cmd" in p:
            s.served = 0
            self._command(line, p["cmd"])
            return True
        if msg == "load" and "request" in p:
            self._load_request(line, p["request"])
            return True
        m = re.search(r"(?:llama runner|llama-server) started in ([\d.]+) seconds", t)
        if m:
            s.start_s, s.start_line = float(m.group(1)), line
            self.set("server.ollama.runner_start_s", float(m.group(1)), line)
            return True
        if msg == "server config" and "env" in p:
            s.env = dict(ENV_PAIR.findall(p["env"]))
            s.env_line = line
            for key in KV_ENV:
                value = s.env.get(key)
                if value:
                    self._env_fact(key, value, line)
            return True
        m = LISTENING.search(t)
        if m:
            self.set("engine.version", m.group(1), line)
            return True
        m = TERMINATED.search(t)
        if m:
            detail = (m.group(1) or p.get("error", "")).strip()
            key = detail[:120]
            self._runner_oom(line, detail)
            if key not in s.crashed_texts:
                s.crashed_texts.add(key)
                data: dict[str, Any] = {"engine": "ollama"}
                e = EXIT.search(detail)
                if e and e.group(1):
                    code = e.group(1)  # Windows reports NTSTATUS codes in hex (0xc0000409)
                    data["exit_status"] = code
                    self.set("run.exit_status", int(code, 16) if code.startswith("0x") else int(code), line)
                elif e and e.group(2):
                    data["signal"] = e.group(2).strip()
                self.event("crash", line, **data)
                self.set("run.crashed", True, line)
            return True
        return msg == "llama runner terminated"

    def _command(self, line: LogLine, cmd: str) -> None:
        flags = {k: v for k, v in CMD_FLAG.findall(cmd)}
        s = self.s
        s.runner_line = line
        if flags.get("model"):
            self.set("model.path", flags["model"], line)
        ctx, parallel = _int(flags.get("ctx-size")), _int(flags.get("parallel"))
        if ctx:
            s.ctx_size = ctx
        if parallel:
            s.parallel = parallel
            self.set("config.n_parallel", parallel, line)
        layers = _int(flags.get("n-gpu-layers"))
        if layers is not None:
            self.set("config.n_gpu_layers", layers, line)
        threads = _int(flags.get("threads"))
        if threads:
            self.set("config.n_threads", threads, line)
        if "no-mmap" in flags:
            self.set("config.use_mmap", False, line)
        if "flash-attn" in flags:
            self.set("config.flash_attn", "enabled", line)
        kv_type = flags.get("kv-cache-type")
        if kv_type:
            self.set("config.type_k", kv_type.lower(), line)
            self.set("config.type_v", kv_type.lower(), line)

    def _load_request(self, line: LogLine, request: str) -> None:
        fields = dict(LOAD_REQUEST.findall(request))
        s = self.s
        s.runner_line = line
        kv, parallel = _int(fields.get("KvSize")), _int(fields.get("Parallel"))
        if kv:
            s.ctx_size = kv
        if parallel:
            s.parallel = parallel
            self.set("config.n_parallel", parallel, line)
        threads = _int(fields.get("NumThreads"))
        if threads:
            self.set("config.n_threads", threads, line)
        if fields.get("FlashAttention") in ("true", "false"):
            self.set("config.flash_attn", "enabled" if fields["FlashAttention"] == "true" else "disabled", line)
        if fields.get("KvCacheType"):
            self.set("config.type_k", fields["KvCacheType"].lower(), line)
            self.set("config.type_v", fields["KvCacheType"].lower(), line)
        layers = re.match(r"\d+", fields.get("GPULayers", ""))
        if layers:
            self.set("server.ollama.layers_offload", int(layers.group(0)), line)

    def _env_fact(self, key: str, value: str, line: LogLine) -> None:
        if key == "OLLAMA_CONTEXT_LENGTH":
            n = _int(value)
            if n:
                self.set("server.ollama.context_length_env", n, line)
        elif key == "OLLAMA_NUM_PARALLEL":
            n = _int(value)
            if n is not None:
                self.set("server.ollama.num_parallel_env", n, line)
        elif key == "OLLAMA_MAX_LOADED_MODELS":
            n = _int(value)
            if n is not None:
                self.set("server.ollama.max_loaded_models", n, line)
        elif key == "OLLAMA_FLASH_ATTENTION":
            self.set("server.ollama.flash_attention_env", value.lower() in ("true", "1"), line)
        elif key == "OLLAMA_KV_CACHE_TYPE":
            self.set("server.ollama.kv_cache_type_env", value.lower(), line)

    # -- memory failures ----------------------------------------------------------------------------------
    def _memory(self, line: LogLine, msg: str, p: dict[str, str]) -> bool:
        if msg == "model request too large for system":
            required, available = _sizes(p.get("requested")), _sizes(p.get("available"))
            self._system_memory(line, required, available)
            return True
        m = SYSTEM_MEMORY.search(line.text)
        if m:
            self._system_memory(line, _sizes(m.group(1)), _sizes(m.group(2)))
            return True
        return False

    def _system_memory(self, line: LogLine, required: int | None, available: int | None) -> None:
        data: dict[str, Any] = {"device": "host", "engine": "ollama", "limit": "system_memory", "phase_from": "message"}
        if required is not None:
            data["bytes"] = required
            self.set("server.ollama.system_memory_required", required, line)
        if available is not None:
            data["available"] = available
            self.set("server.ollama.system_memory_available", available, line)
        self.event("oom", line, phase="weights", **data)

    # -- GPU discovery failures, the runner's own OOMs, load progress ------------------------------------------
    def _failures(self, line: LogLine, msg: str, p: dict[str, str]) -> bool:
        t = line.text
        s = self.s
        if GPU_DISCOVERY_FAILED.search(t):
            cause, code = gpu_failure_cause(t)
            if len(s.gpu_failures) < 8:
                s.gpu_failures.append((cause, line, code, (p.get("error") or msg or t)[:200]))
            return True
        m = OLD_ESTIMATE.search(t)
        if m:
            # before v0.1.33 the layer count came from the file size per layer alone: no KV cache, no graph
            s.old_estimate_line = line
            self.votes["ollama"] += 1
            self.set("server.ollama.memory_available", int(m.group(1)) * (1 << 20), line)
            return True
        if self._runner_oom(line):
            return True
        if IMAGE_STEP.search(t):
            s.image_line = line.number
            return False
        m = LOAD_PROGRESS.search(t)
        if m:
            when = TIME_FIELD.search(t)
            if when:
                with contextlib.suppress(ValueError):
                    seconds = datetime.fromisoformat(when.group(1)).timestamp()
                    if len(s.progress) < 2:
                        s.progress.append((seconds, float(m.group(1)), line))
                    else:
                        s.progress[1] = (seconds, float(m.group(1)), line)
            return True
        return False

    def _runner_oom(self, line: LogLine, text: str | None = None) -> bool:
        t = text if text is not None else line.text
        m = RUNNER_OOM.search(t)
        if not m:
            return False
        s = self.s
        kind = "cuda" if "out of memory" in m.group(0) else "cublas"
        near = [o for o in s.runner_ooms if 0 <= line.number - o[0].number <= 6 and o[1] == kind]
        if not near and len(s.runner_ooms) < 50:  # the runner's line and Ollama's relay of it are one OOM
            s.runner_ooms.append((line, kind, s.served, 0 <= line.number - s.image_line <= 40))
        return True

    # -- warnings worth showing ---------------------------------------------------------------------------
    def _warnings(self, line: LogLine, msg: str, p: dict[str, str]) -> bool:
        what = {
            "quantized kv cache requested but flash attention disabled": "kv_quant_without_fa",
            "kv cache type not supported by model": "kv_type_unsupported",
            "flash attention enabled but not supported by gpu": "fa_unsupported_gpu",
            "flash attention enabled but not supported by model": "fa_unsupported_model",
            "memory layout cannot be allocated": "layout_not_allocated",
            "gpu VRAM usage didn't recover within timeout": "vram_not_recovered",
        }.get(msg)
        if what is None:
            if msg == "enabling flash attention":
                self.set("config.flash_attn", "enabled", line)
                return True
            return False
        data: dict[str, Any] = {"what": what, "engine": "ollama"}
        if p.get("type"):
            data["type"] = p["type"]
        self.event("warning", line, **data)
        return True

    # -- access log and the CLI statistics ------------------------------------------------------------------
    def _gin(self, line: LogLine) -> bool:
        """An access-log line: taken whether or not it reads as one."""
        if "[GIN]" not in line.text:
            return False
        m = GIN.search(line.text)
        if not m:
            return True
        self.votes["ollama"] += 1
        s = self.s
        s.requests += 1
        s.gin_line = line
        if m.group(1).startswith("5"):
            s.errors_5xx += 1
        elif m.group(1) == "200" and INFERENCE_PATH.search(line.text):
            s.served += 1
        return True

    def _cli(self, line: LogLine) -> bool:
        t = line.text
        if not ("duration:" in t or "eval " in t or "rate:" in t):
            return False
        m = CLI_STAT.search(t)
        if not m:
            return False
        key, value = m.group(1), m.group(2)
        s = self.s
        if key == "total duration" or s.cli_current is None:
            s.cli_current = _Cli(line=line)
            s.cli.append(s.cli_current)
            if len(s.cli) > 1000:
                del s.cli[:500]
        cur = s.cli_current
        self.votes["ollama"] += 1
        number = re.match(r"([\d.]+)", value)
        if key.endswith("count"):
            n = _int(number.group(1)) if number else None
            if key.startswith("prompt"):
                cur.prompt_tokens, cur.prompt_line = n, line
            else:
                cur.eval_tokens = n
        elif key.endswith("rate"):
            rate = float(number.group(1)) if number else None
            if key.startswith("prompt"):
                cur.prompt_tps = rate
            else:
                cur.eval_tps, cur.rate_line = rate, line
        else:
            ms = go_duration_ms(value)
            if key == "total duration":
                cur.total_ms = ms
            elif key == "load duration":
                cur.load_ms = ms
            elif key == "prompt eval duration":
                cur.prompt_ms = ms
            else:
                cur.eval_ms = ms
        return True

    # -- summary ------------------------------------------------------------------------------------------
    def summarize(self, facts: Facts) -> None:
        s = self.s
        if not self.votes:
            return
        self._summarize_offload(facts)
        self._summarize_gpus(facts)
        self._summarize_context(facts)
        self._summarize_cli(facts)
        self._summarize_memory(facts)
        self._summarize_failures(facts)
        self._summarize_progress(facts)
        if s.requests and s.gin_line is not None:
            src = self.src(s.gin_line)
            if not facts.has("run.requests"):
                facts.set("run.requests", s.requests, src)
            facts.set("server.http_errors", s.errors_5xx, src)
        if s.start_s is not None and s.start_line is not None and not facts.has("run.load_ms"):
            facts.set("run.load_ms", round(s.start_s * 1000, 1), self.src(s.start_line))

    def _summarize_offload(self, facts: Facts) -> None:
        off = self.s.offload
        if off is None or off.library == "cpu" or off.offload is None:
            return
        src = self.src(off.line)
        total = facts.get("run.total_layers")
        if off.model is None and total is not None and total.known and not facts.has("server.ollama.layers_model"):
            # v0.1.33-44 logged no model layer count; the runner's own "offloaded N/M layers" has it
            facts.set("server.ollama.layers_model", total.value, total.source)
        if not facts.has("run.offloaded_layers"):
            facts.set("run.offloaded_layers", off.offload, src)
            if off.model is not None:
                facts.set("run.total_layers", off.model, src)
        if not facts.has("engine.gpu_offload_supported"):
            facts.set("engine.gpu_offload_supported", True, src)

    def _summarize_gpus(self, facts: Facts) -> None:
        s = self.s
        if s.gpus and s.gpu_line is not None:
            src = self.src(s.gpu_line)
            facts.set("host.gpu.count", len(s.gpus), src)
            totals = [t for _, t, _ in s.gpus if t]
            if totals:
                facts.set("server.ollama.gpu_vram_max", max(totals), src)
            for i, (name, total, free) in enumerate(s.gpus):
                if name and not facts.has(f"host.gpu[{i}].name"):
                    facts.set(f"host.gpu[{i}].name", name, src)
                if total is not None:
                    facts.set(f"host.gpu[{i}].vram_total", total, src)
                if free is not None:
                    facts.set(f"host.gpu[{i}].vram_free", free, src)
        elif s.no_gpu_line is not None and not facts.has("host.gpu.count"):
            src = self.src(s.no_gpu_line)
            facts.set("host.gpu.count", 0, src)
            if facts.value("server.ollama.gpu_gated_avx") is not True:
                facts.set("host.gpu.vendor", "none", src)

    def _summarize_context(self, facts: Facts) -> None:
        s = self.s
        if s.ctx_size and s.runner_line is not None:
            src = self.src(s.runner_line)
            parallel = s.parallel or 1
            if not facts.has("config.n_ctx"):
                facts.set("config.n_ctx", s.ctx_size, src)
            if not facts.has("config.num_ctx"):
                # Ollama allocates num_ctx for each parallel slot: the runner's context is num_ctx x parallel
                facts.set("config.num_ctx", s.ctx_size // parallel, src)
            if not facts.has("config.n_ctx_seq"):
                facts.set("config.n_ctx_seq", s.ctx_size // parallel, src)
        num_ctx = facts.get("config.num_ctx")
        if num_ctx is not None and num_ctx.known:
            if not facts.has("server.ollama.num_ctx"):
                facts.set("server.ollama.num_ctx", num_ctx.value, num_ctx.source)
            if not facts.has("config.n_ctx_seq"):
                facts.set("config.n_ctx_seq", num_ctx.value, num_ctx.source)
        prompts = [e.data.get("n_tokens") for e in facts.events("truncation") if e.source == self.name]
        numbers = [n for n in prompts if isinstance(n, int)]
        if numbers:
            current = facts.value("run.prompt_tokens_max")
            if not isinstance(current, int) or max(numbers) > current:
                event = next(e for e in facts.events("truncation") if e.data.get("n_tokens") == max(numbers))
                facts.set("run.prompt_tokens_max", max(numbers), Source("log", self.name, event.line, event.text[:300]))

    def _summarize_cli(self, facts: Facts) -> None:
        blocks = [b for b in self.s.cli if b.line is not None]
        if not blocks:
            return
        last = blocks[-1]
        src = self.src(last.line) if last.line is not None else Source("log", self.name)
        for name, value in (("run.load_ms", last.load_ms),
                           ("run.prompt_tokens", last.prompt_tokens),
                           ("run.prefill_ms", last.prompt_ms),
                           ("run.prefill_tps", last.prompt_tps),
                           ("run.decode_tokens", last.eval_tokens),
                           ("run.decode_ms_total", last.eval_ms),
                           ("run.decode_tps", last.eval_tps),
                           ("run.total_ms", last.total_ms)):
            if value is not None:
                facts.set(name, value, src)
        # each extreme cites the line of its own block that holds it, not the last block
        prompts, used, rates = Extremes(), Extremes(), Extremes()
        for b in blocks:
            b_src = self.src(b.line) if b.line is not None else src
            prompts.add(b.prompt_tokens, self.src(b.prompt_line) if b.prompt_line is not None else b_src)
            used.add((b.prompt_tokens or 0) + (b.eval_tokens or 0), b_src)
            if b.eval_tps is not None and (b.eval_tokens or 0) > 1:
                rates.add(b.eval_tps, self.src(b.rate_line) if b.rate_line is not None else b_src)
        if prompts.high is not None and prompts.high > (facts.value("run.prompt_tokens_max") or 0):
            prompts.emit(facts, None, "run.prompt_tokens_max")
        if used.high is not None and used.high > (facts.value("run.tokens_used_max") or 0):
            used.emit(facts, None, "run.tokens_used_max")
        rates.emit(facts, "run.decode_tps_min", "run.decode_tps_max", at_least=2)
        facts.set("run.requests", len(blocks), src)

    def _summarize_memory(self, facts: Facts) -> None:
        s = self.s
        if not s.memory or s.memory_line is None:
            return
        src = self.src(s.memory_line)

        def split(kind: str) -> tuple[int, int] | None:
            table = s.memory.get(kind)
            if not table:
                return None
            host = sum(v for d, v in table.items() if d.upper().startswith("CPU"))
            return sum(table.values()) - host, host

        for kind, gpu_name, host_name in (("model weights", "run.weights_gpu_bytes", "run.weights_host_bytes"),
                                          ("kv cache", "run.kv_gpu_bytes", "run.kv_host_bytes")):
            pair = split(kind)
            if pair is not None and not facts.has(gpu_name):
                facts.set(gpu_name, pair[0], src)
                facts.set(host_name, pair[1], src)
        kv = split("kv cache")
        if kv is not None and not facts.has("run.kv_bytes"):
            facts.set("run.kv_bytes", kv[0] + kv[1], src)
        graph_table = s.memory.get("compute graph") or {}
        gpu_graphs = {d: v for d, v in graph_table.items() if not d.upper().startswith("CPU")}
        if gpu_graphs:
            device = max(gpu_graphs, key=lambda d: gpu_graphs[d])
            facts.set("server.ollama.graph_gpu_max_bytes", gpu_graphs[device], src)
            facts.set("server.ollama.graph_gpu_device", device, src)
        graph = split("compute graph")
        if graph is not None and not facts.has("run.compute_bytes"):
            facts.set("run.compute_bytes", graph[0] + graph[1], src)
            facts.set("run.compute_gpu_bytes", graph[0], src)

    def _summarize_failures(self, facts: Facts) -> None:
        """GPU discovery that failed with no GPU found after it; runner OOMs placed by what Ollama's own
        estimate covered."""
        s = self.s
        found_gpu = bool(s.gpus) or (s.offload is not None and s.offload.library not in (None, "cpu")
                                     and (s.offload.offload or 0) > 0)
        if s.gpu_failures and not found_gpu:
            for cause, line, code, text in s.gpu_failures:
                data: dict[str, Any] = {"backend": "CUDA", "reason": text, "cause": cause, "engine": "ollama"}
                if code:
                    data["code"] = code
                facts.add_event(Event("gpu_init_failed", line.number, line.raw[:400], self.name, None, data))
        if not s.runner_ooms or any(NAMED_ALLOCATION.search(e.text) for e in facts.events("oom")):
            return  # no runner OOM, or llama.cpp said which buffer it could not allocate: its phase stands
        placed = facts.value("run.offloaded_layers")
        estimate = s.offload is not None or bool(s.memory) or isinstance(placed, int)
        old_era = s.old_estimate_line is not None or s.old_go_log
        kv, available = facts.value("server.ollama.memory_required_kv"), facts.value("server.ollama.memory_available")
        kv_dominates = isinstance(kv, int) and isinstance(available, int) and available > 0 and kv * 2 >= available
        for line, kind, served, image in s.runner_ooms:
            data = {"engine": "ollama", "failure": kind, "phase_from": "engine"}
            if image:
                data["step"] = "image_encode"
                phase = "runtime"
            elif estimate and kv_dominates:
                # the KV cache of num_ctx x parallel alone takes most of the GPU: the context is what to cut
                data.update(estimate="full", cause="num_ctx", kv=kv, available=available)
                phase = "kv_cache"
            elif estimate:
                # Ollama's estimate counted weights, KV cache and graph, and placed the layers by it: an
                # allocation that still fails is the compute headroom the estimate did not leave
                data["estimate"] = "full"
                phase = "runtime" if served else "compute"
                layers = placed if isinstance(placed, int) else (s.offload.offload if s.offload else None)
                if isinstance(layers, int) and layers > 0:
                    data["offloaded"] = layers
                    data["suggest_num_gpu"] = max(0, layers - max(2, layers // 8))
            elif old_era:
                # before v0.1.33 (the "llama.go:" log) the layer count came from the file size per layer
                # alone: the KV cache of num_ctx was left out, and it is what did not fit
                data["estimate"] = "weights_only"
                phase = "kv_cache"
            else:
                continue
            facts.add_event(Event("oom", line.number, line.raw[:400], self.name, phase, data))

    def _summarize_progress(self, facts: Facts) -> None:
        """`model load progress` (debug) timestamps and the size being loaded give the load rate."""
        s = self.s
        if len(s.progress) < 2:
            return
        (t0, p0, first), (t1, p1, last) = s.progress
        size = facts.value("model.file_bytes")
        if not isinstance(size, int):
            weights = s.memory.get("model weights")
            size = sum(weights.values()) if weights else facts.value("server.ollama.memory_weights")
        if not isinstance(size, int) or size <= 0 or t1 <= t0 or p1 <= p0:
            return
        rate = (p1 - p0) * size / (t1 - t0)
        src = Source("log", self.name, last.number,
                     f"model load progress {p0:.2f} (line {first.number}) to {p1:.2f} (line {last.number}) in "
                     f"{t1 - t0:.1f} s, of {size / (1 << 30):.1f} GiB")
        if not facts.has("model.file_bytes"):
            facts.set("model.file_bytes", size, src)
        facts.set("run.load_ms", round(size / rate * 1000, 1), src)
        facts.set("run.load_mb_s", round(rate / 1e6, 1), src)
