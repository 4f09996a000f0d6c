"""The run's timeline: how far a log's run had got, and in which phase a failure fell.

Sources floor. One model for every engine: the engine parsers mark the steps they read on the timeline of
their analysis (`AnalysisState.part(Timeline)`, shared by every parser of a session): llama.cpp's model, KV
and compute buffers and its requests, vLLM's, SGLang's and TGI's start-up lines, KoboldCpp's prompt
processing. A failure is placed by the last step reached before its line: an allocation that failed after
the weights were placed and before the KV cache was allocated is the KV cache's; one in a warm-up or a
graph capture is compute; one in a request's prompt or its generation is a runtime failure (the server
was serving). What runs after a step is `PLACED`: what the step means for an out-of-memory event (its
`phase`, doctor/core/catalog EVENT_KINDS) and a finer `step` (the rules read both); an engine whose start-up
runs in another order says so in its own parser (`LogParser.startup_next`, in the engine's folder: vLLM
profiles its activation peak before it sizes the KV cache), and each mark carries the order of the parser
that made it.

A mark records a line that shows the run *reached* a step: loading begun (`load`), the weights placed
(`weights`), a profiling run done (`profile`), the KV cache allocated (`kv`), compute buffers reserved
(`compute`), a warm-up, graph capture or profiling run begun (`warmup`), ready (`serving`), a request's
prompt being processed (`prefill`), tokens being generated (`decode`). Steps only move forward (a later
request's prefill moves nothing once tokens were generated); a new model load (`load` after serving) or a
new context (`restart`) begins again. The marks are kept in line order (bounded), so a failure held back
until a later line names its phase (llama.cpp's pending OOMs) is placed where it was. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# the steps, in the order a run reaches them
STEPS = ("start", "load", "weights", "profile", "kv", "compute", "warmup", "serving", "prefill", "decode")
_ORDER = {step: n for n, step in enumerate(STEPS)}
KEPT = 256  # transitions kept (a log that reloads its model again and again keeps its latest)

# what runs after a step (an engine's own order aside: LogParser.startup_next): step -> (phase, step)
PLACED: dict[str, tuple[str, str]] = {
    "load": ("weights", "load_model"),
    "weights": ("kv_cache", "kv_cache_alloc"),
    "profile": ("kv_cache", "kv_cache_alloc"),
    "kv": ("compute", "compute_reserve"),
    "compute": ("compute", "warmup"),
    "warmup": ("compute", "warmup"),
    "serving": ("runtime", "serving"),
    "prefill": ("runtime", "prefill"),  # a request being served: the runtime's, whichever batch it was
    "decode": ("runtime", "decode"),
}
# the words a finding says a step with: what the run had done when it failed
DONE: dict[str, str] = {
    "start": "nothing had started yet",
    "load": "the model load had begun and nothing was placed yet",
    "weights": "the weights had been placed",
    "profile": "the profiling run was done",
    "kv": "the KV cache had been allocated",
    "compute": "the compute buffers had been reserved",
    "warmup": "a warm-up had begun",
    "serving": "the server was ready",
    "prefill": "a request's prompt was being processed",
    "decode": "tokens were being generated",
}
Order = Mapping[str, tuple[str, str]]  # an engine's own order: step -> (phase, step) of what runs next


@dataclass(frozen=True, slots=True)
class Mark:
    """A line that shows the run reached `step` (`what`: which warm-up, say cuda_graphs)."""

    step: str
    line: int
    text: str
    source: str
    what: str | None = None
    follows: Order = field(default_factory=dict, compare=False, hash=False)  # the marking engine's order


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a failure fell: the out-of-memory `phase`, a finer `step`, and the mark that placed it."""

    phase: str
    step: str
    after: Mark

    @property
    def note(self) -> str:
        """The placement in words: what the run had done when the failure came."""
        return f"{DONE.get(self.after.step, self.after.step)} (line {self.after.line})"

    def data(self) -> dict[str, str]:
        """The event data a placed failure carries (scalars, as Event.data holds): where it came from, its step,
        the step the run had reached (`placed_after`) and that in words (`after`, for a rule's message)."""
        return {"phase_from": "timeline", "step": self.step, "placed_after": self.after.step, "after": self.note}

    def lines(self) -> tuple[tuple[int, str], ...]:
        """The evidence: the line that placed it, with the placement in words."""
        return ((self.after.line, f"[{DONE.get(self.after.step, self.after.step)}] {self.after.text}"),)


def _placement(mark: Mark | None) -> Placement | None:
    if mark is None or mark.step == "start":
        return None
    if mark.step == "warmup" and mark.what:
        return Placement("compute", mark.what, mark)
    phase, step = mark.follows.get(mark.step) or PLACED[mark.step]
    return Placement(phase, step, mark)


class Timeline:
    """The marks of one analysis's session, in line order (see the module docstring)."""

    __slots__ = ("_marks",)

    def __init__(self) -> None:
        self._marks: list[Mark] = []

    @property
    def current(self) -> str:
        """The step the run has reached (start: none yet)."""
        return self._marks[-1].step if self._marks else "start"

    @property
    def marks(self) -> tuple[Mark, ...]:
        return tuple(self._marks)

    def reach(self, step: str, line: int, text: str, source: str, what: str | None = None,
              follows: Order | None = None) -> bool:
        """The run reached `step` at `line`: kept when it moves the run forward (a `load` after serving
        begins a new run); True when kept. The same step again only updates what it is (`what`).
        `follows`: the order of the engine whose line this is, where it differs from PLACED."""
        order = _ORDER[step]
        now = _ORDER[self.current]
        if order > now or (step == "load" and now >= _ORDER["serving"]) or (
                order == now and what is not None and self._marks and self._marks[-1].what != what):
            self._keep(Mark(step, line, text[:300], source, what, follows or {}))
            return True
        return False

    def restart(self, step: str, line: int, text: str, source: str) -> None:
        """A run begins again from `step` (a new context after serving): kept even though it goes back."""
        if self.current != step:
            self._keep(Mark(step, line, text[:300], source))

    def _keep(self, mark: Mark) -> None:
        self._marks.append(mark)
        if len(self._marks) > KEPT:
            del self._marks[: KEPT // 2]

    def at(self, line: int) -> Mark | None:
        """The last mark at or before `line` (a failure line that names its step marks it first)."""
        for mark in reversed(self._marks):
            if mark.line <= line:
                return mark
        return None

    def place(self, line: int) -> Placement | None:
        """Where a failure at `line` fell; None when no step was marked before it."""
        return _placement(self.at(line))

    def latest(self) -> Placement | None:
        """Where a failure fell that was read before any mark of the run it belongs to (an error pasted
        above its log, a viewer that lists the newest line first): the furthest step the log shows."""
        return _placement(self._marks[-1] if self._marks else None)
