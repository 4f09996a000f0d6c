"""PyTorch and the serving engines built on it (vLLM, TGI; sizes also Ollama): what their logs share.

- sizes as PyTorch, vLLM, TGI and Ollama print them (`14.99 GiB`);
- PyTorch's CUDA/HIP out-of-memory messages in both wordings (`torch_oom`), the traceback frames
  that place one in an engine's start-up step (`Frames`), and `TorchOomBoard`, on which the vLLM and
  TGI parsers of one analysis record the OOMs they see so that each is emitted once, for the engine
  the log belongs to;
- requests a serving engine refused for length (`rejection_data`) and the largest request seen
  (`LargestRequest`).

Pure.
"""

from __future__ import annotations

import re
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from doctor.core.facts import Event, Facts
from doctor.sources.logs.base import LogParser
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.matcher import gated
from doctor.sources.logs.timeline import Placement

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
# a traceback's source line (under its `File ..., in FUNC`) that allocates the KV cache's tensors: LightLLM's
# mem_manager.py (`self.key_buffer = [torch.empty(...) ...]`, `self.value_buffer`, from 2024 `self.kv_buffer =
# torch.empty(...)`), ExLlamaV2's cache.py (`p_key_states = torch.zeros(...)`, `p_value_states`), any one-line
# `k_buffer` / `kv_cache = torch.empty(...)`: an OOM raised there is the KV cache's, whatever the engine
KV_ALLOC = gated(r"(?:\b|_)(?:key|value|kv|k|v)_(?:buffer|cache|states)s?\s*=\s*\[?\s*torch\.(?:empty|zeros)\(")
KV_ALLOC_STEP = ("kv_cache", "kv_cache_alloc")

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
# the lines of PyTorch OOMs and of the traceback frames that place them (LineKind lines of the vLLM and
# TGI parsers, doctor/sources/logs/base.py)
OOM_LINES: tuple[str, ...] = (r"(?:CUDA|HIP) out of memory", r"OutOfMemoryError")
OOM_PATTERNS = (TORCH_OOM_NEW, TORCH_OOM_OLD, SAMPLER_WARMUP_OOM, TORCH_OOM_BARE)  # what torch_oom reads
FRAME_LINES: tuple[str, ...] = (r"Traceback \(most recent call last\)",
                                r", in (?:" + "|".join(sorted(FRAME_STEPS)) + r")\b",
                                r"_(?:buffer|cache|states)s? *= *\[? *torch\.(?:empty|zeros)\(")
FRAME_PATTERNS = (TRACEBACK, FRAME, KV_ALLOC)  # what Frames.feed reads (the vLLM and TGI parsers' frame kinds)
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
        if KV_ALLOC.search(t):  # the innermost frame's source line allocates the KV cache
            self.step, self.line = KV_ALLOC_STEP, line.number
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
    placed: dict[str, Placement] = field(default_factory=dict)  # engine -> where its timeline placed it
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

    def __getstate__(self) -> dict[str, Any]:
        """The board moves between processes (doctor/sources/logs/parallel.py) with no snapshot emitted into: the
        one it points to stays behind."""
        return {**self.__dict__, "_emitted": None}

    def record(self, engine: str, line: LogLine, data: dict[str, Any], placed: Placement | None,
               frame: tuple[str, str] | None, owner: str | None, handled: bool = False) -> None:
        """An OOM `engine`'s parser read: where the run's timeline places it (doctor/sources/logs/timeline.py),
        the traceback frame that names its step, the engine that owns it (its own traceback)."""
        guess = (placed.phase, placed.step) if placed is not None else (None, None)
        oom = self.ooms.get(line.number)
        if oom is None:
            twin = self._twin(line.number, data)
            if twin is not None:  # the same OOM printed again by a wrapper or a re-raise
                oom = twin
            elif len(self.ooms) >= self.LIMIT:
                return
            else:
                oom = self.ooms[line.number] = _TorchOom(line, dict(data))
        if engine not in oom.guesses:
            oom.guesses[engine] = guess
            if placed is not None:
                oom.placed[engine] = placed
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
            placed = None
            if oom.frame is None:
                # the engine's own guess; else where the run's timeline (one for every parser) placed it
                placed = oom.placed.get(engine or "") or next(iter(oom.placed.values()), None)
            phase, step = oom.frame or ((placed.phase, placed.step) if placed is not None
                                        else oom.guesses.get(engine or "", (None, None)))
            data = {k: v for k, v in oom.data.items() if isinstance(v, int | float | str | bool)}
            if phase is not None:
                # placed by the traceback or the engine's own message, or by where the run had got to
                data["phase_from"] = "message" if oom.frame is not None else "timeline"
            if placed is not None:
                data["placed_after"] = placed.after.step
            if step and "step" not in data:
                data["step"] = step
            if engine:
                data["engine"] = engine
            facts.add_event(Event(kind="oom", line=oom.line.number, text=oom.line.raw[:400],
                                  source=engine or "pytorch", phase=phase or "unknown", data=data,
                                  placed_by=placed.lines() if placed is not None else ()))

    def _leader(self, oom: _TorchOom) -> str | None:
        ranked = [e for e, n in self.votes.most_common() if n > 0]
        if ranked:
            return ranked[0]
        known = [e for e, g in oom.guesses.items() if g[0] is not None]
        return known[0] if len(known) == 1 else None


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


def record_rejection(parser: LogParser, largest: LargestRequest, line: LogLine, *, n_tokens: int, n_ctx: int,
                     prompt: int, limit: str, completion: int | None) -> None:
    """A request the server refused: the `prompt_too_long` event, the largest prompt and request, and the
    limit that refused it (`server.limit_tokens`, `server.limit_name`)."""
    data = rejection_data(n_tokens=n_tokens, n_ctx=n_ctx, prompt=prompt, limit=limit, completion=completion)
    parser.event("prompt_too_long", line, **data)
    largest.saw_prompt(prompt, line)
    largest.saw_request(n_tokens, line)
    parser.set("server.limit_tokens", n_ctx, line)
    parser.set("server.limit_name", limit, line)


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
                facts.set("run.prompt_tokens_max", self.prompt, src(self.prompt_line))
        if self.request and self.request_line is not None:
            facts.set("server.request_tokens_max", self.request, src(self.request_line))
