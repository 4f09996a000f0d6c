"""The llama.cpp parser's state and its base: what one reading of a log keeps between lines (the
stage of start-up, buffers, timings, OOMs waiting for their phase), and the steps every part of the
parser shares (moving the stage on, placing the pending OOMs). The parser's handlers are split by
what they read: parser.py (its entry, metadata, buffers, timings), context.py, memory.py,
hardware.py and summary.py, each a part of the one parser class.

Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from doctor.sources.engines.llamacpp.engine import ENGINE
from doctor.sources.logs.base import Extremes, LogParser
from doctor.sources.logs.line import LogLine


def num(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


_INT = re.compile(r"-?\d+")


def int_list(text: str) -> list[int] | None:
    values = _INT.findall(text)
    return [int(v) for v in values] if values else None


@dataclass(slots=True)
class Timing:
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


_PLACEHOLDER = Timing()


TIMINGS_KEPT = 1000  # past this many closed requests, the oldest 500 are dropped


def keep_timings(timings: list[Timing], added: int, last: Timing) -> None:
    """`added` closed requests, the last one `last`, kept as that many appends each followed by the
    bound would keep them (parser.py `_close_timing`). Only the count and the last are read (summary.py):
    the ones before `last` are left as a placeholder."""
    n = len(timings)
    if n + added <= TIMINGS_KEPT:
        timings.extend([_PLACEHOLDER] * (added - 1))
        timings.append(last)
        return
    after_first_drop = added - (TIMINGS_KEPT + 1 - n)
    final = TIMINGS_KEPT // 2 + 1 + after_first_drop % (TIMINGS_KEPT // 2)
    timings[:] = [*([_PLACEHOLDER] * (final - 1)), last]


@dataclass(slots=True)
class PendingOom:
    line: LogLine
    data: dict[str, Any]
    stage: str
    explicit: str | None = None
    computing: LogLine | None = None  # the line naming a function that runs only when a graph is computed


@dataclass(slots=True)
class State:
    stage: str = "start"  # start → load → context → ready → run
    model_buffers: dict[str, float] = field(default_factory=dict)
    kv_buffers: dict[str, float] = field(default_factory=dict)
    compute_buffers: dict[str, float] = field(default_factory=dict)
    output_buffers: dict[str, float] = field(default_factory=dict)
    kv_size_lines: list[tuple[float, int, int]] = field(default_factory=list)  # (MiB, cells, streams)
    buffer_line: LogLine | None = None
    kv_line: LogLine | None = None
    timings: list[Timing] = field(default_factory=list)
    current: Timing | None = None
    decode_rates: Extremes = field(default_factory=Extremes)  # per request and in-progress (tg =), each with its line
    pending: list[PendingOom] = field(default_factory=list)
    prompt_tokens_max: int = 0
    prompt_line: LogLine | None = None
    used_max: int = 0
    used_line: LogLine | None = None
    command: tuple[str, bool, LogLine] | None = None  # the binary a command line started, GPU layers asked for
    fit_devices: dict[str, tuple[int, int, LogLine]] = field(default_factory=dict)  # --fit: device -> layers, overflow
    n_slots: int | None = None
    # server tasks whose prompt was cut ("input truncated") or whose context shifted: a later
    # "stop processing: ..., truncated = 1" for them says nothing new; for any other task it means
    # generation stopped at the end of the slot (context shift off, llama-server since late 2025)
    cut_tasks: set[str] = field(default_factory=set)
    shifted_tasks: set[str] = field(default_factory=set)
    # server task id -> (its prompt's tokens, its slot's context), from its `new prompt` line: whether a
    # later "context shift is disabled" for it is a prompt too long or generation into the end of the slot
    task_prompts: dict[str, tuple[int, int]] = field(default_factory=dict)
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



_STAGES = {stage: n for n, stage in enumerate(("start", "load", "context", "ready", "run"))}  # State.stage's order


class LlamaCppBase(LogParser):
    """The parser's name, state and shared steps; the parts of the parser build on it."""

    name = ENGINE.name

    def __init__(self) -> None:
        super().__init__()
        self.s = State()

    @property
    def completion(self) -> State:
        """The state llama-cpp-python's handlers write the generated text into (../llama_cpp_python/parser.py)."""
        return self.s

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

    def _stage(self, stage: str) -> None:
        if stage == "load" and self.s.stage in ("ready", "run"):
            self.s.stage = "load"  # a new model load (another run in the same log)
            return
        if _STAGES[stage] > _STAGES[self.s.stage]:
            self.s.stage = stage

    def _stage_phase(self, line: LogLine) -> str:
        """The phase a failure on `line` fell in: the run's timeline, else how far start-up had got."""
        placed = self.placed(line)
        return placed.phase if placed is not None else _STAGE_PHASE[self.s.stage]

    def _flush_oom(self, phase: str | None, explicit_line: LogLine | None = None) -> None:
        """Emit the pending OOMs: in `phase` when a line named it (else the phase one of them named), or
        where the run's timeline places each (doctor/sources/logs/timeline.py), or by the start-up stage."""
        s = self.s
        pending, s.pending = s.pending, []
        resolved = phase
        if resolved is None:
            explicit = [p.explicit for p in pending if p.explicit]
            resolved = explicit[-1] if explicit else None
        for p in pending:
            ph = resolved or p.explicit
            if ph:
                self.event("oom", p.line, phase=ph, phase_from="message", **p.data)
                continue
            placed = self.placed(p.line)
            if p.computing is not None and (placed is None or placed.phase in ("weights", "kv_cache")):
                # the failing call runs a graph: no start-up allocation, whatever the start-up lines say
                self.event("oom", p.line, phase="compute", phase_from="message", step="compute_graph", **p.data)
            elif placed is not None:
                self.placed_event("oom", p.line, placed, **p.data)
            else:
                self.event("oom", p.line, phase=_STAGE_PHASE[p.stage], phase_from="stage", **p.data)
        if explicit_line is not None:
            self.event("oom", explicit_line, phase=phase, phase_from="message")


_STAGE_PHASE = {"start": "weights", "load": "weights", "context": "kv_cache", "ready": "compute", "run": "runtime"}
