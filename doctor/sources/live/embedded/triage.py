"""Crash triage, the decisions: which short re-run comes next, and what the runs showed.

When the embedded engine dies (a signal, an abort, a native exception) the runner
(doctor/sources/live/embedded/runner.py) re-runs a short job — the same prompt and seed, a few tokens — in fresh
child processes, and this module decides what each run changes and when to stop:

1. the original settings again, to confirm the crash reproduces (the first run counts as one);
2. one change at a time, cheapest and most likely first: weight repacking off (llama.cpp's extra
   buffer types: the AMX and CPU_REPACK kernels), flash attention off, mmap off, one thread, a
   smaller batch, no GPU layers, an f16 KV cache — each only where it changes something;
3. all of them together, as a last resort that finds a working setting but no single cause.

It stops at the first run that completes, or when the time budget is spent. The result names the
cause with its evidence ("crashed 2/2 with the original settings; completed with weight repacking
off: prefill 41 ms, decode 14 ms/token") and gives the settings to carry on with.

Pure: no processes, no clock (elapsed time is passed in).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from doctor.sources.live.embedded import TRIAGE_BUDGET_S

TRIAGE_MIN_TOKENS = 4  # a short job: the prefill and three decode steps...
TRIAGE_MAX_TOKENS = 64  # ...or one step past where the crash came, up to this many
MIN_RUN_S = 5.0  # no run is started with less of the budget left
SMALL_BATCH = 32
SIGKILL = 9


@dataclass(frozen=True, slots=True)
class Change:
    """One setting triage varies: `fields` are the RunSettings values it sets."""

    key: str  # stable name: the fact run.triage_change carries it
    label: str  # for people: "completed with {label}"
    fields: tuple[tuple[str, Any], ...]

    def applies_to(self, settings: Any) -> bool:
        """True when the change would change something in these settings."""
        return any(getattr(settings, name) != value for name, value in self.fields)

    def apply(self, settings: Any) -> Any:
        return dataclasses.replace(settings, **dict(self.fields))


# cheapest and most likely first
CHANGES: tuple[Change, ...] = (
    Change("repack_off", "weight repacking off (no extra buffer types: AMX / CPU_REPACK kernels)",
           (("use_extra_bufts", False),)),
    Change("flash_attn_off", "flash attention off", (("flash_attn", False),)),
    Change("mmap_off", "mmap off (the model read into memory)", (("use_mmap", False),)),
    Change("one_thread", "one thread", (("n_threads", 1), ("n_threads_batch", 1))),
    Change("small_batch", f"a batch of {SMALL_BATCH} (n_batch = n_ubatch = {SMALL_BATCH})",
           (("n_batch", SMALL_BATCH), ("n_ubatch", SMALL_BATCH))),
    Change("no_gpu", "no GPU layers (n_gpu_layers = 0)", (("n_gpu_layers", 0),)),
    Change("kv_f16", "an f16 KV cache", (("type_k", "f16"), ("type_v", "f16"))),
)
COMBINED_KEY = "all_together"


def applicable(settings: Any) -> list[Change]:
    """The changes that change something in these settings, in triage order. A smaller batch only
    where the batch is larger than SMALL_BATCH."""
    out = []
    for change in CHANGES:
        if change.key == "small_batch" and settings.n_batch <= SMALL_BATCH and settings.n_ubatch <= SMALL_BATCH:
            continue
        if change.applies_to(settings):
            out.append(change)
    return out


def combined(changes: list[Change]) -> Change:
    fields_: dict[str, Any] = {}
    for change in changes:
        fields_.update(dict(change.fields))
    label = "all of them together (" + ", ".join(c.label.split(" (")[0] for c in changes) + ")"
    return Change(COMBINED_KEY, label, tuple(fields_.items()))


@dataclass(slots=True)
class Attempt:
    """One run: what it changed and how it went."""

    change: str | None  # a Change key; None = the original settings
    label: str
    outcome: str  # completed | crashed | failed | timeout
    detail: str = ""  # "killed by SIGSEGV in the warm-up", "exit status 1", ...
    phase: str | None = None  # how far it got: load | warm-up | prefill | decode
    steps: int = 0  # decode steps done
    prefill_ms: float | None = None
    decode_ms_per_token: float | None = None
    seconds: float = 0.0
    short: bool = True  # False for the first, full run

    @property
    def completed(self) -> bool:
        return self.outcome == "completed"

    def outcome_text(self) -> str:
        if self.completed:
            figures = self.figures()
            return "completed" + (f" ({figures})" if figures else "")
        return f"crashed ({self.detail})" if self.outcome == "crashed" else self.detail

    def figures(self) -> str:
        bits = []
        if self.prefill_ms is not None:
            bits.append(f"prefill {self.prefill_ms:.0f} ms")
        if self.decode_ms_per_token is not None:
            bits.append(f"decode {self.decode_ms_per_token:.1f} ms/token")
        return ", ".join(bits)


def eligible(reason: str, exit_status: int | None, *, exception_type: str | None = None,
             model_changed: bool = False) -> bool:
    """Is this end of a run a crash that triage should look into?

    Yes for a process killed by a signal (segfault, abort, illegal instruction, bus error) or
    that exited before the run ended, and for a native exception surfacing as OSError (ctypes:
    "exception: access violation" on Windows). No for SIGKILL (the OOM killer or kill -9: the
    memory rules explain it, and a re-run would press the machine again), for a model file that
    changed under the engine, and for Python-level errors (a refused prompt, a bad model file).
    """
    if model_changed:
        return False
    if reason == "crashed":
        return exit_status is None or exit_status != -SIGKILL
    if reason == "exited":
        return True
    return reason == "error" and exception_type == "OSError"


@dataclass(slots=True)
class TriageResult:
    status: str  # fixed | combined | not_reproduced | no_fix | budget | stopped
    attempts: list[Attempt]
    change: Change | None
    budget_s: float
    seconds: float
    settings: Any = None  # the settings to carry on with (fixed / combined)

    @property
    def runs(self) -> int:
        """Re-runs made (the first, full run not counted)."""
        return sum(1 for a in self.attempts if a.short)

    def tried(self) -> list[str]:
        return [a.label for a in self.attempts if a.change is not None]

    def summary(self) -> str:
        """The evidence in one sentence."""
        original = [a for a in self.attempts if a.change is None]
        crashed = sum(1 for a in original if not a.completed)
        first = self.attempts[0] if self.attempts else None
        how = f" ({first.detail})" if first is not None and first.outcome == "crashed" and first.detail else ""
        head = f"crashed {crashed}/{len(original)} with the original settings{how}"
        if self.status in ("fixed", "combined"):
            last = self.attempts[-1]
            figures = last.figures()
            failed = [a.label for a in self.attempts if a.change is not None and not a.completed]
            before = f"; still crashed with {', '.join(failed)}" if failed else ""
            return f"{head}{before}; completed with {last.label}" + (f": {figures}" if figures else "")
        if self.status == "not_reproduced":
            done = original[-1] if original else None
            return ("crashed once, then completed with the original settings in a short run"
                    + (f" ({done.figures()})" if done is not None and done.figures() else "")
                    + ": the crash did not reproduce (it may need a longer run, or be intermittent)")
        tried = self.tried()
        tail = f"; still crashed with {', '.join(tried)}" if tried else ""
        if self.status == "budget":
            return f"{head}{tail}; the triage budget of {self.budget_s:.0f} s ran out after {self.runs} re-runs"
        if self.status == "stopped":
            return f"{head}{tail}; triage was stopped after {self.runs} re-runs"
        return f"{head}{tail}: no single change, nor all of them together, made it complete" if tried else \
            f"{head}: there was no setting left to change"

    def data(self) -> dict[str, Any]:
        """The result as scalars (the triage IncidentEvent's data; doctor/sources/live/trace.py makes them facts)."""
        first = self.attempts[0] if self.attempts else None
        return {
            "final": True, "status": self.status, "change": self.change.key if self.change else "",
            "setting": self.change.label if self.change else "", "summary": self.summary(),
            "runs": self.runs, "seconds": round(self.seconds, 1), "budget_s": round(self.budget_s, 1),
            "tried": "; ".join(self.tried()), "crash": first.detail if first is not None else "",
            "crash_phase": (first.phase or "") if first is not None else "",
        }


@dataclass
class TriagePlan:
    """The triage as a state machine: `next()` gives the next run, `record()` takes its result."""

    settings: Any  # the RunSettings that crashed
    first: Attempt  # the crashed run
    budget_s: float = TRIAGE_BUDGET_S
    attempts: list[Attempt] = field(default_factory=list)
    _queue: list[tuple[Change | None, str]] = field(default_factory=list)
    _done: TriageResult | None = None
    _elapsed: float = 0.0

    def __post_init__(self) -> None:
        self.attempts = [self.first]
        changes = applicable(self.settings)
        self._queue = [(None, "the original settings")] + [(c, c.label) for c in changes]
        if len(changes) > 1:
            both = combined(changes)
            self._queue.append((both, both.label))

    def short_job(self, settings: Any) -> Any:
        """The short job: same prompt and seed, a few tokens (one past where the crash came)."""
        tokens = max(TRIAGE_MIN_TOKENS, min(self.first.steps + 2, TRIAGE_MAX_TOKENS))
        if settings.max_tokens > 0:
            tokens = min(tokens, settings.max_tokens)
        return dataclasses.replace(settings, max_tokens=tokens)

    def next(self, elapsed_s: float) -> tuple[Change | None, str, Any, float] | None:
        """(change, label, settings, time limit) of the next run, or None when the triage is over."""
        self._elapsed = elapsed_s
        if self._done is not None:
            return None
        if not self._queue:
            self._finish("no_fix", None)
            return None
        left = self.budget_s - elapsed_s
        if left < MIN_RUN_S:
            self._finish("budget", None)
            return None
        change, label = self._queue[0]
        settings = change.apply(self.settings) if change is not None else self.settings
        return change, label, self.short_job(settings), left

    def record(self, attempt: Attempt, elapsed_s: float) -> None:
        self._elapsed = elapsed_s
        change, _ = self._queue.pop(0)
        self.attempts.append(attempt)
        if change is None:
            if attempt.completed:
                self._finish("not_reproduced", None)
            return
        if attempt.completed:
            self._finish("combined" if change.key == COMBINED_KEY else "fixed", change)

    def abandon(self, status: str = "stopped") -> None:
        """End the triage early (the user stopped the run)."""
        if self._done is None:
            self._finish(status, None)

    def _finish(self, status: str, change: Change | None) -> None:
        settings = change.apply(self.settings) if change is not None else None
        self._done = TriageResult(status, list(self.attempts), change, self.budget_s, self._elapsed, settings)

    @property
    def runs(self) -> int:
        """Re-runs recorded so far."""
        return sum(1 for a in self.attempts if a.short)

    @property
    def over(self) -> bool:
        return self._done is not None

    def result(self) -> TriageResult:
        if self._done is None:
            self._finish("budget" if self._queue else "no_fix", None)
        assert self._done is not None
        return self._done
