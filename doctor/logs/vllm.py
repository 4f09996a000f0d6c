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
- PyTorch out-of-memory errors in both wordings, placed in the start-up step they hit (loading
  weights, profiling, KV allocation, CUDA-graph capture, sampler warm-up, serving); an OOM read before
  any start-up line (the error pasted above its log, a viewer listing the newest line first) is placed
  at the furthest step the log shows.
- a message wrapped over two lines is read joined with the next.

Messages are matched by their text, so process prefixes (`(EngineCore_DP0 pid=…)`, `(VllmWorker
rank=0 pid=…)`, `(APIServer pid=…)`), another tool's logger, journald or docker framing do not
matter; the vLLM header (`INFO 05-22 02:20:59 [file.py:229]`) and the process prefixes are what the
engine detection counts.

PyTorch OOMs are shared with the TGI parser (both engines run on PyTorch): each parser records the
OOM lines it sees with the step its engine was in on a `TorchOomBoard` attached to the snapshot,
and the board emits each OOM once, for the engine the log belongs to.

Pure.
"""

from __future__ import annotations

import contextlib
import re
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from doctor.facts import Event, Facts, Source
from doctor.logs.base import LogParser
from doctor.logs.line import LogLine
from doctor.logs.matcher import gated

KIB, MIB, GIB, TIB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
_UNITS = {"B": 1, "KIB": KIB, "MIB": MIB, "GIB": GIB, "TIB": TIB, "KB": 1000, "MB": 1000**2, "GB": 1000**3,
          "TB": 1000**4}

# -- sizes ---------------------------------------------------------------------------------------
SIZE = r"(-?[\d.]+)\s*([KMGT]i?B|B)"


def parse_size(number: str, unit: str) -> int | None:
    """'14.99', 'GiB' -> bytes. PyTorch and vLLM print GiB/MiB; Ollama and TGI too."""
    try:
        value = float(number)
    except ValueError:
        return None
    scale = _UNITS.get(unit.upper())
    return None if scale is None else int(value * scale)


def size_text(text: str) -> int | None:
    m = re.search(SIZE, text)
    return parse_size(m.group(1), m.group(2)) if m else None


# -- PyTorch out of memory (shared with the TGI parser) ---------------------------------------------
# c10/cuda/CUDACachingAllocator.cpp, current wording (PyTorch 2.1 printed "capacty"):
#   CUDA out of memory. Tried to allocate X. GPU N has a total capacity of X of which X is free. ...
# older wording: CUDA out of memory. Tried to allocate X (GPU N; X total capacity; X already allocated;
#   X free; X reserved in total by PyTorch)
TORCH_OOM_NEW = gated(r"(?:CUDA|HIP) out of memory\. Tried to allocate " + SIZE
                      + r"\. GPU (\d+) has a total capac\w* of " + SIZE + r" of which " + SIZE + r" is free")
TORCH_OOM_OLD = gated(r"(?:CUDA|HIP) out of memory\. Tried to allocate " + SIZE + r" \(GPU (\d+); " + SIZE
                      + r" total capacity; " + SIZE + r" already allocated; " + SIZE + r" free")
TORCH_OOM_BARE = gated(r"(?:CUDA|HIP) out of memory\. Tried to allocate " + SIZE
                       + r"|OutOfMemoryError: (?:CUDA|HIP) out of memory")
SAMPLER_WARMUP_OOM = gated(r"CUDA out of memory occurred when warming up (sampler|pooler) with (\d+) "
                           r"dummy requests")
TRACEBACK = gated(r"Traceback \(most recent call last\)")
FRAME = gated(r'File "[^"]*", line \d+, in (\w+)')

# the start-up step a traceback frame belongs to: (phase, step)
FRAME_STEPS: dict[str, tuple[str, str]] = {
    "load_model": ("weights", "load_model"), "load_weights": ("weights", "load_model"),
    "get_model": ("weights", "load_model"), "_initialize_model": ("weights", "load_model"),
    "initialize_model": ("weights", "load_model"),
    "profile_run": ("compute", "profile_run"),
    "determine_num_available_blocks": ("compute", "profile_run"),
    "determine_available_memory": ("compute", "profile_run"),
    "_dummy_sampler_run": ("compute", "sampler_warmup"), "_dummy_pooler_run": ("compute", "sampler_warmup"),
    "capture_model": ("compute", "cuda_graphs"), "_capture_cudagraphs": ("compute", "cuda_graphs"),
    "compile_or_warm_up_model": ("compute", "warmup"),
    "initialize_cache": ("kv_cache", "kv_cache_alloc"), "_init_cache_engine": ("kv_cache", "kv_cache_alloc"),
    "_allocate_kv_cache": ("kv_cache", "kv_cache_alloc"), "initialize_kv_cache": ("kv_cache", "kv_cache_alloc"),
    "initialize_from_config": ("kv_cache", "kv_cache_alloc"),
    "_allocate_kv_cache_tensors": ("kv_cache", "kv_cache_alloc"), "init_kv_cache": ("kv_cache", "kv_cache_alloc"),
    "warmup": ("compute", "warmup"), "Warmup": ("compute", "warmup"),
}
# PyTorch OOMs and the traceback frames that place them (the TGI parser reads them too)
TORCH_TRIGGERS: tuple[str, ...] = (
    r"(?:CUDA|HIP) out of memory", r"OutOfMemoryError", r"Traceback \(most recent call last\)",
    r", in (?:" + "|".join(sorted(FRAME_STEPS)) + r")\b",
)
FRAME_WINDOW = 120  # lines: a frame further back than this belongs to another traceback
DEDUPE_WINDOW = 400  # lines: the same OOM message repeated by a wrapper is one OOM


def torch_oom(text: str) -> dict[str, Any] | None:
    """The numbers of a PyTorch OOM message, or None when the line is not one."""
    m = TORCH_OOM_NEW.search(text)
    if m:
        return {"bytes": parse_size(m.group(1), m.group(2)), "device": int(m.group(3)),
                "total": parse_size(m.group(4), m.group(5)), "free": parse_size(m.group(6), m.group(7))}
    m = TORCH_OOM_OLD.search(text)
    if m:
        return {"bytes": parse_size(m.group(1), m.group(2)), "device": int(m.group(3)),
                "total": parse_size(m.group(4), m.group(5)), "allocated": parse_size(m.group(6), m.group(7)),
                "free": parse_size(m.group(8), m.group(9))}
    m = SAMPLER_WARMUP_OOM.search(text)
    if m:
        return {"step": "sampler_warmup", "dummy_requests": int(m.group(2))}
    m = TORCH_OOM_BARE.search(text)
    if m:
        data: dict[str, Any] = {}
        if m.group(1):
            data["bytes"] = parse_size(m.group(1), m.group(2))
        return data
    return None


class Frames:
    """The start-up step named by the frames of the traceback being read."""

    def __init__(self) -> None:
        self.step: tuple[str, str] | None = None
        self.line = 0

    def feed(self, line: LogLine) -> bool:
        t = line.text
        if TRACEBACK.search(t):
            self.step, self.line = None, line.number
            return True
        m = FRAME.search(t)
        if m:
            step = FRAME_STEPS.get(m.group(1))
            if step is not None:
                self.step, self.line = step, line.number  # the innermost step-specific frame wins
            return True
        return False

    def current(self, number: int) -> tuple[str, str] | None:
        if self.step is None or number - self.line > FRAME_WINDOW:
            return None
        return self.step


@dataclass(slots=True)
class _TorchOom:
    line: LogLine
    data: dict[str, Any]
    guesses: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    frame: tuple[str, str] | None = None
    owner: str | None = None
    handled: bool = False


class TorchOomBoard:
    """PyTorch OOMs seen by the vLLM and TGI parsers of one analysis, emitted once each."""

    LIMIT = 200

    def __init__(self) -> None:
        self.ooms: dict[int, _TorchOom] = {}
        self.votes: Counter[str] = Counter()
        self._emitted: weakref.ref[Facts] | None = None

    def record(self, engine: str, line: LogLine, data: dict[str, Any], guess: tuple[str | None, str | None],
               frame: tuple[str, str] | None, owner: str | None, handled: bool = False) -> None:
        oom = self.ooms.get(line.number)
        if oom is None:
            twin = self._twin(line.number, data)
            if twin is not None:  # the same OOM printed again by a wrapper or a re-raise
                oom = twin
            elif len(self.ooms) >= self.LIMIT:
                return
            else:
                oom = self.ooms[line.number] = _TorchOom(line, dict(data))
        oom.guesses.setdefault(engine, guess)
        if frame is not None and oom.frame is None:
            oom.frame = frame
        if owner is not None and oom.owner is None:
            oom.owner = owner
        oom.handled = oom.handled or handled
        for key, value in data.items():
            oom.data.setdefault(key, value)

    def _twin(self, number: int, data: dict[str, Any]) -> _TorchOom | None:
        if "bytes" not in data:
            # a message without numbers repeats the nearest OOM before it
            near = [o for n, o in self.ooms.items() if 0 < number - n <= 40]
            return near[-1] if near else None
        for n, oom in self.ooms.items():
            if (0 < number - n <= DEDUPE_WINDOW and oom.data.get("bytes") == data.get("bytes")
                    and oom.data.get("free") == data.get("free")):
                return oom
        return None

    def summarize(self, engine: str, votes: Counter[str], facts: Facts) -> None:
        """A parser's summary: its votes (which engine the OOMs belong to), then the OOMs."""
        self.votes[engine] = sum(votes.values())
        self.emit(facts)

    def emit(self, facts: Facts) -> None:
        """Write each OOM into `facts` once per snapshot, whichever parser summarises first."""
        if self._emitted is not None and self._emitted() is facts:
            return
        self._emitted = weakref.ref(facts)
        for number in sorted(self.ooms):
            oom = self.ooms[number]
            if oom.handled:
                continue
            engine = oom.owner or self._leader(oom)
            phase, step = oom.frame or oom.guesses.get(engine or "", (None, None))
            data = {k: v for k, v in oom.data.items() if isinstance(v, int | float | str | bool)}
            if phase is not None:
                # placed by the traceback or the engine's own message, or only by how far start-up had got
                data["phase_from"] = "message" if oom.frame is not None else "stage"
            if step and "step" not in data:
                data["step"] = step
            if engine:
                data["engine"] = engine
            facts.add_event(Event(kind="oom", line=oom.line.number, text=oom.line.raw[:400],
                                  source=engine or "pytorch", phase=phase or "unknown", data=data))

    def _leader(self, oom: _TorchOom) -> str | None:
        ranked = [e for e, n in self.votes.most_common() if n > 0]
        if ranked:
            return ranked[0]
        known = [e for e, g in oom.guesses.items() if g[0] is not None]
        return known[0] if len(known) == 1 else None


_BOARDS: weakref.WeakKeyDictionary[Facts, TorchOomBoard] = weakref.WeakKeyDictionary()


# -- requests a serving engine refused (shared with the TGI parser) -------------------------------------
def rejection_data(*, n_tokens: int, n_ctx: int, prompt: int, limit: str, completion: int | None) -> dict[str, Any]:
    """The `prompt_too_long` event's data: whether the prompt alone was too long, or the completion
    asked for on top of a prompt that fit (and how much room that prompt left)."""
    data: dict[str, Any] = {"n_tokens": n_tokens, "n_ctx": n_ctx, "prompt": prompt, "limit": limit}
    if completion is not None:
        data["completion"] = completion
    if completion and prompt < n_ctx:
        data.update(cause="completion", room=n_ctx - prompt)
    else:
        data["cause"] = "prompt"
    return data


@dataclass(slots=True)
class LargestRequest:
    """The longest prompt and the longest whole request (prompt + completion asked) seen, with lines."""

    prompt: int = 0
    prompt_line: LogLine | None = None
    request: int = 0
    request_line: LogLine | None = None

    def saw_prompt(self, n: int, line: LogLine) -> None:
        if n > self.prompt:
            self.prompt, self.prompt_line = n, line

    def saw_request(self, n: int, line: LogLine) -> None:
        if n > self.request:
            self.request, self.request_line = n, line

    def emit(self, facts: Facts, src: Any) -> None:
        """run.prompt_tokens_max (unless another parser saw a longer one), server.request_tokens_max."""
        if self.prompt and self.prompt_line is not None:
            current = facts.value("run.prompt_tokens_max")
            if not isinstance(current, int) or self.prompt > current:
                facts.set("run.prompt_tokens_max", self.prompt, src(self.prompt_line), "tokens")
        if self.request and self.request_line is not None:
            facts.set("server.request_tokens_max", self.request, src(self.request_line), "tokens")


def board_for(facts: Facts) -> TorchOomBoard:
    """The board of the analysis whose shared snapshot is `facts` (the one the parsers are bound to)."""
    board = _BOARDS.get(facts)
    if board is None:
        board = _BOARDS[facts] = TorchOomBoard()
    return board


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
STATS = gated(r"Avg prompt throughput: ")
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
STAGE_PHASE: dict[str, tuple[str | None, str | None]] = {
    "start": (None, None), "load": ("weights", "load_model"), "profile": ("compute", "profile_run"),
    "kv": ("kv_cache", "kv_cache_alloc"), "warmup": ("compute", "cuda_graphs"), "ready": ("compute", "warmup"),
    "run": ("runtime", "serving"),
}
# the engine died while serving (a failure at start-up is reported by the error that caused it)
ENGINE_FAILED = gated(r"EngineCore encountered a fatal error|Error in model execution")

TRIGGERS: tuple[str, ...] = (
    *TORCH_TRIGGERS,
    r"vLLM API server version", r"LLM engine \(v", r"LLM engine with config", r"args: Namespace\(",
    r"non-default args: ", r"Using max model len",
    r"Chunked prefill is enabled", r"max_num_batched_tokens \(", r"User-specified max_model_len",
    r"Starting to load model", r"Loading model weights took", r"Model loading took", r"Loading weights took",
    r"Memory profiling takes", r"total_gpu_memory \(", r"model weights take", r"# \w+ blocks: \d",
    r"KV cache size: [\d,]+ tokens", r"Maximum concurrency for", r"Available KV cache memory",
    r"No available memory for the cache", r"max seq len \(", r"Input prompt \(", r"maximum context length is",
    r"maximum model length of", r"is preempted by", r"Avg prompt throughput",
    r"Capturing (?:the model|cudagraphs|CUDA graph)",
    r"Compile and warming up", r"Graph capturing finished", r"init engine \(profile", r"Starting vLLM API server",
    r"Available routes are", r"Application startup complete", r"Automatically detected platform",
    r"EngineCore (?:failed|encountered)", r"Engine core initialization failed", r"WorkerProc failed",
    r"Error in model execution",
)


def _clean(value: str) -> str:
    return value.strip().strip("'\"")


def _int(value: str) -> int | None:
    try:
        return int(value.replace(",", ""))
    except ValueError:
        return None


@dataclass(slots=True)
class _State:
    stage: str = "start"
    furthest: str = "start"  # the furthest start-up step any line shows, wherever it stands in the input
    block_size: int = 16
    blocks_gpu: int | None = None
    blocks_line: LogLine | None = None
    preempt_total: int = 0  # V0 running total from the warning
    preempt_sum: int = 0  # V1 sum of the per-interval stat
    preempt_line: LogLine | None = None
    kv_usage_max: float | None = None
    kv_usage_line: LogLine | None = None
    running_max: int | None = None
    running_line: LogLine | None = None
    waiting_max: int | None = None
    waiting_line: LogLine | None = None
    swapped_max: int | None = None
    swapped_line: LogLine | None = None
    stats_lines: int = 0
    largest: LargestRequest = field(default_factory=LargestRequest)
    crashed: bool = False
    capacity_seen: set[tuple[str, int]] = field(default_factory=set)


class VllmParser(LogParser):
    name = "vllm"
    triggers = TRIGGERS
    gate = TRIGGERS

    def __init__(self) -> None:
        super().__init__()
        self.s = _State()
        self.frames = Frames()

    # -- entry -------------------------------------------------------------------------------
    def feed(self, line: LogLine) -> None:
        t = line.text
        if not self.passes_gate(t):
            return
        framed = bool(HEADER.search(t) or PROCESS.search(t))
        if framed:
            self._vote()
        self._stage_marks(t)
        if self.frames.feed(line):
            return
        if self._oom(line, framed):
            return
        for candidate in (line, *line.continuations()):  # a message wrapped over two lines is read joined
            if candidate is not line and self._oom(candidate, framed):
                return
            for handler in (self._config, self._capacity, self._context, self._preemption, self._stats,
                            self._failure):
                if handler(candidate):
                    if not framed:
                        self._vote()  # a vLLM message under another tool's logger
                    return

    def _vote(self) -> None:
        self.votes["vllm"] += 1
        board_for(self.facts).votes["vllm"] = sum(self.votes.values())

    def _stage_marks(self, t: str) -> None:
        for pattern, stage in STAGE_MARKS:
            if pattern.search(t):
                if stage == "load" and self.s.stage in ("ready", "run"):
                    self.s.stage = "load"  # the engine was started again in the same log
                    self.s.capacity_seen.clear()
                elif STAGE_ORDER.index(stage) > STAGE_ORDER.index(self.s.stage):
                    self.s.stage = stage
                if STAGE_ORDER.index(stage) > STAGE_ORDER.index(self.s.furthest):
                    self.s.furthest = stage
                return

    # -- PyTorch OOM -------------------------------------------------------------------------
    def _oom(self, line: LogLine, framed: bool) -> bool:
        data = torch_oom(line.text)
        if data is None:
            return False
        guess = STAGE_PHASE[self.s.stage]
        step = data.get("step")
        frame = ("compute", str(step)) if step else self.frames.current(line.number)
        owner = "vllm" if framed else None
        board_for(self.facts).record("vllm", line, data, guess, frame, owner)
        return True

    # -- configuration -----------------------------------------------------------------------
    def _config(self, line: LogLine) -> bool:
        t = line.text
        m = VERSION.search(t)
        if m:
            version = m.group(1) or m.group(3)
            self.set("engine.version", version, line)
            if m.group(2):
                self.set("server.vllm.v1", True, line)
        if m or CONFIG_LINE.search(t):
            self._config_pairs(line)
            return True
        m = MAX_LEN_USED.search(t)
        if m:
            self.set("config.max_model_len", int(m.group(1)), line, "tokens")
            return True
        m = CHUNKED.search(t)
        if m:
            self.set("server.chunked_prefill", True, line)
            self.set("config.max_num_batched_tokens", int(m.group(1)), line, "tokens")
            return True
        m = BATCHED_BELOW.search(t)
        if m:
            self.set("config.max_num_batched_tokens", int(m.group(1)), line, "tokens")
            self.set("config.max_model_len", int(m.group(2)), line, "tokens")
            self.set("server.chunked_prefill", False, line)
            return True
        m = USER_MAX_LEN.search(t)
        if m:
            asked, trained = int(m.group(1)), int(m.group(3))
            self.set("config.max_model_len", asked, line, "tokens")
            self.set("model.n_ctx_train", trained, line, "tokens")
            self.event("ctx_over_train", line, n_ctx=asked, n_ctx_train=trained, key=m.group(2))
            return True
        m = LOAD_START.search(t)
        if m:
            self.set("model.name", _clean(m.group(1)), line)
            return True
        m = WEIGHTS_TOOK.search(t)
        if m:
            if m.group(1) or m.group(2):
                # 0.6.x prints GiB under the name "GB" (model_memory_usage / 2**30)
                self.set("server.weights_bytes", int(float(m.group(1) or m.group(2)) * GIB), line, "bytes")
            seconds = m.group(3) or m.group(4)
            if seconds:
                self.set("run.load_ms", round(float(seconds) * 1000, 1), line, "ms")
            return True
        return False

    def _config_pairs(self, line: LogLine) -> None:
        text = line.text if len(line.text) > 40 or not line.next_text else line.joined()
        for key, raw in CONFIG_KV.findall(text):
            value = _clean(raw)
            if value in ("None", ""):
                continue
            if key in ("max_model_len", "max_seq_len"):
                n = _int(value)
                if n:
                    self.set("config.max_model_len", n, line, "tokens")
            elif key in ("max_num_seqs", "max_num_batched_tokens", "tensor_parallel_size"):
                n = _int(value)
                if n:
                    unit = {"max_num_seqs": "sequences", "max_num_batched_tokens": "tokens"}.get(key)
                    self.set(f"config.{key}", n, line, unit)
            elif key == "pipeline_parallel_size":
                n = _int(value)
                if n:
                    self.set("server.vllm.pipeline_parallel_size", n, line)
            elif key == "gpu_memory_utilization":
                with contextlib.suppress(ValueError):
                    self.set("config.gpu_memory_utilization", float(value), line)
            elif key in ("kv_cache_dtype", "cache_dtype"):
                self.set("config.kv_cache_dtype", value, line)
            elif key == "block_size":
                n = _int(value)
                if n:
                    self.s.block_size = n
            elif key in ("enable_chunked_prefill", "chunked_prefill_enabled"):
                if value in ("True", "true", "False", "false"):
                    self.set("server.chunked_prefill", value.lower() == "true", line)
            elif key == "quantization":
                self.set("server.vllm.quantization", value, line)
            elif key == "enforce_eager":
                if value in ("True", "False"):
                    self.set("server.vllm.enforce_eager", value == "True", line)
            elif key == "model" and ("/" in value or not self.facts.has("model.name")):
                self.set("model.name", value, line)

    # -- KV capacity ---------------------------------------------------------------------------
    def _capacity(self, line: LogLine) -> bool:
        t = line.text
        s = self.s
        m = BLOCKS.search(t)
        if m:
            blocks = int(m.group(2))
            s.blocks_gpu, s.blocks_line = blocks, line
            self.set("server.kv_blocks_gpu", blocks, line, "blocks")
            if m.group(3):
                self.set("server.kv_blocks_cpu", int(m.group(3)), line, "blocks")
            self.set("server.kv_tokens", blocks * s.block_size, line, "tokens")
            self.set("server.vllm.block_size", s.block_size, line, "tokens")
            if blocks <= 0:
                self._capacity_event(line, "no_memory", blocks=blocks)
            return True
        found = False
        m = KV_TOKENS.search(t)
        if m:
            tokens = _int(m.group(2))
            if tokens is not None:
                self.set("server.kv_tokens", tokens, line, "tokens")
            found = True
        m = CONCURRENCY.search(t)
        if m:
            max_len = _int(m.group(1))
            if max_len:
                self.set("config.max_model_len", max_len, line, "tokens")
            self.set("server.max_concurrency", float(m.group(2)), line)
            return True
        if found:
            return True
        m = KV_AVAILABLE.search(t)
        if m:
            self.set("server.kv_available_bytes", int(float(m.group(1)) * GIB), line, "bytes")
            return True
        m = PROFILE_TOTAL.search(t)
        if m:
            self.set("server.gpu_total_bytes", int(float(m.group(1)) * GIB), line, "bytes")
            self.set("config.gpu_memory_utilization", float(m.group(2)), line)
            return True
        m = PROFILE_SPLIT.search(t)
        if m:
            self.set("server.weights_bytes", int(float(m.group(1)) * GIB), line, "bytes")
            self.set("server.kv_available_bytes", int(float(m.group(2)) * GIB), line, "bytes")
            return True
        m = PROFILE_V1.search(t)
        if m:
            self.set("server.weights_bytes", int(float(m.group(1)) * GIB), line, "bytes")
            return True
        if NO_KV_MEMORY.search(t):
            self._capacity_event(line, "no_memory")
            return True
        m = MAX_SEQ_OVER_KV.search(t)
        if m:
            max_len, kv = int(m.group(1)), int(m.group(2))
            self.set("config.max_model_len", max_len, line, "tokens")
            self.set("server.kv_tokens", kv, line, "tokens")
            self.set("server.max_len_fit", kv, line, "tokens")
            self._capacity_event(line, "max_len", max_len, max_model_len=max_len, kv_tokens=kv)
            return True
        m = TO_SERVE.search(t)
        if m:
            max_len, needed, available = int(m.group(1)), float(m.group(2)), float(m.group(3))
            self.set("config.max_model_len", max_len, line, "tokens")
            self.set("server.kv_needed_bytes", int(needed * GIB), line, "bytes")
            self.set("server.kv_available_bytes", int(available * GIB), line, "bytes")
            est = ESTIMATED_LEN.search(line.joined())
            if est:
                self.set("server.max_len_fit", int(est.group(1)), line, "tokens")
            elif needed > 0 and available > 0:
                self.set("server.max_len_fit", int(max_len * available / needed) // 256 * 256, line, "tokens")
            self._capacity_event(line, "max_len", max_len, max_model_len=max_len, needed=int(needed * GIB),
                                 available=int(available * GIB))
            return True
        m = LOOKAHEAD.search(t)
        if m:
            self._capacity_event(line, "prompt", int(m.group(1)), n_tokens=int(m.group(1)))
            self.s.largest.saw_prompt(int(m.group(1)), line)
            return True
        return False

    # -- requests rejected for length ------------------------------------------------------------
    def _context(self, line: LogLine) -> bool:
        t = line.text
        m = INPUT_TOO_LONG.search(t)
        if m:
            n, limit = int(m.group(1)), int(m.group(2))
            self._rejected(line, n_tokens=n, n_ctx=limit, prompt=n, limit=self._which_limit(limit))
            return True
        m = CTX_REQUESTED.search(t)
        if m:
            limit, total, prompt, completion = (int(g) for g in m.groups())
            self._rejected(line, n_tokens=total, n_ctx=limit, prompt=prompt, completion=completion)
            return True
        m = CTX_MAX_TOKENS.search(t)
        if m:
            completion, limit, prompt = int(m.group(1)), int(m.group(2)), int(m.group(3))
            self._rejected(line, n_tokens=prompt + completion, n_ctx=limit, prompt=prompt, completion=completion)
            return True
        m = CTX_REQUESTED_INPUT.search(t) or CTX_REQUEST_HAS.search(t)
        if m:
            limit, n = int(m.group(1)), int(m.group(2))
            self._rejected(line, n_tokens=n, n_ctx=limit, prompt=n)
            return True
        m = PROMPT_LONGER.search(t) or PROMPT_LONGER.search(line.joined())
        if m:
            n, limit = int(m.group(1)), int(m.group(2))
            self._rejected(line, n_tokens=n, n_ctx=limit, prompt=n)
            return True
        return False

    def _which_limit(self, limit: int) -> str:
        """V0 rejects a prompt above min(max_model_len, max_num_batched_tokens) without chunked prefill."""
        batched = self.facts.value("config.max_num_batched_tokens")
        max_len = self.facts.value("config.max_model_len")
        if isinstance(batched, int) and limit == batched and (not isinstance(max_len, int) or batched < max_len):
            return "max_num_batched_tokens"
        if isinstance(max_len, int) and limit == max_len:
            return "max_model_len"
        return "prompt_limit"

    def _rejected(self, line: LogLine, *, n_tokens: int, n_ctx: int, prompt: int, completion: int | None = None,
                  limit: str = "max_model_len") -> None:
        self.event("prompt_too_long", line, **rejection_data(n_tokens=n_tokens, n_ctx=n_ctx, prompt=prompt,
                                                             limit=limit, completion=completion))
        self.s.largest.saw_prompt(prompt, line)
        self.s.largest.saw_request(n_tokens, line)
        self.set("server.limit_tokens", n_ctx, line, "tokens")
        self.set("server.limit_name", limit, line)
        if limit == "max_model_len":
            self.set("config.max_model_len", n_ctx, line, "tokens")

    # -- preemption and the periodic stats ---------------------------------------------------------
    def _capacity_event(self, line: LogLine, reason: str, size: int = 0, **data: Any) -> None:
        """One event per capacity error: multiprocessing prints the same exception again."""
        key = (reason, size)
        if key in self.s.capacity_seen:
            return
        self.s.capacity_seen.add(key)
        self.event("kv_capacity", line, reason=reason, **data)

    def _preemption(self, line: LogLine) -> bool:
        t = line.text
        m = PREEMPTED.search(t)
        if not m:
            return False
        total = PREEMPT_TOTAL.search(t) or PREEMPT_TOTAL.search(line.joined())
        data: dict[str, Any] = {"mode": m.group(2).lower(), "request": m.group(1)[:80]}
        if total:
            n = int(total.group(1))
            data["total"] = n
            if n > self.s.preempt_total:
                self.s.preempt_total = n
        self.s.preempt_line = line
        self.event("preempted", line, **data)
        return True

    def _stats(self, line: LogLine) -> bool:
        t = line.text
        m = STATS.search(t)
        if not m:
            return False
        s = self.s
        s.stats_lines += 1
        pairs: dict[str, float] = {}
        for part in t[m.start():].rstrip(". ").split(", "):
            key, sep, value = part.partition(": ")
            if not sep:
                continue
            num = STATS_NUMBER.match(value.strip())
            if num:
                try:
                    pairs[key.strip()] = float(num.group(1))
                except ValueError:
                    continue
        usage = next((v for k, v in pairs.items() if k.endswith("KV cache usage") and not k.startswith("CPU")), None)
        if usage is not None and (s.kv_usage_max is None or usage > s.kv_usage_max):
            s.kv_usage_max, s.kv_usage_line = usage, line
        running = pairs.get("Running")
        if running is not None and (s.running_max is None or running > s.running_max):
            s.running_max, s.running_line = int(running), line
        waiting = pairs.get("Waiting", pairs.get("Pending"))
        if waiting is not None and (s.waiting_max is None or waiting > s.waiting_max):
            s.waiting_max, s.waiting_line = int(waiting), line
        swapped = pairs.get("Swapped")
        if swapped is not None and (s.swapped_max is None or swapped > s.swapped_max):
            s.swapped_max, s.swapped_line = int(swapped), line
        preempted = pairs.get("Preemptions")
        if preempted:
            s.preempt_sum += int(preempted)
            s.preempt_line = line
            self.event("preempted", line, n=int(preempted))
        return True

    def _failure(self, line: LogLine) -> bool:
        if ENGINE_FAILED.search(line.text):
            if not self.s.crashed:
                self.s.crashed = True
                self.event("crash", line, engine="vllm")
            return True
        return False

    # -- summary -------------------------------------------------------------------------------------
    def summarize(self, facts: Facts) -> None:
        s = self.s
        board = board_for(self.facts)
        if s.furthest != "start":
            # an OOM read before any start-up step: the error pasted above its log, or a log viewer that
            # lists the newest line first (RunPod, some dashboards). It happened at the furthest step the
            # log reached
            for oom in board.ooms.values():
                if oom.guesses.get("vllm") == (None, None) and oom.frame is None:
                    oom.guesses["vllm"] = STAGE_PHASE[s.furthest]
        board.summarize("vllm", self.votes, facts)
        if s.preempt_total or s.preempt_sum:
            src = self._src(s.preempt_line)
            facts.set("server.preemptions", max(s.preempt_total, s.preempt_sum), src, "count")
        if s.kv_usage_max is not None:
            facts.set("server.kv_usage_max", s.kv_usage_max, self._src(s.kv_usage_line), "%")
        if s.running_max is not None:
            facts.set("server.running_max", s.running_max, self._src(s.running_line), "requests")
            facts.set("server.max_num_seqs_suggested", max(1, s.running_max // 2), self._src(s.running_line),
                      "sequences")
        if s.waiting_max is not None:
            facts.set("server.waiting_max", s.waiting_max, self._src(s.waiting_line), "requests")
        if s.swapped_max is not None:
            facts.set("server.swapped_max", s.swapped_max, self._src(s.swapped_line), "requests")
        s.largest.emit(facts, self.src)
        max_len = facts.get("config.max_model_len")
        if max_len is not None and max_len.known and not facts.has("config.n_ctx_seq") and self.votes:
            # max_model_len is the context one sequence gets
            facts.set("config.n_ctx_seq", max_len.value, max_len.source, "tokens")
        kv = facts.value("server.kv_tokens")
        if isinstance(kv, int) and not facts.has("server.max_len_fit") and self.votes:
            facts.set("server.max_len_fit", kv // 256 * 256 if kv >= 256 else kv,
                      Source("log", self.name, text=f"KV pool of {kv} tokens"), "tokens")

    def _src(self, line: LogLine | None) -> Source:
        return self.src(line) if line is not None else Source("log", self.name)
