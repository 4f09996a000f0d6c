"""The crash table's model: a `Cause` (what a crash means, the messages that name it) and its `Fix` in each
engine's words (the engine table's own fix words, else the settings change in its spelling, else words).

Pure data and the functions that say a fix for an engine; the table itself is crashes.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.core import engines
from doctor.core.engines import Engine
from doctor.sources.engines.llamacpp.engine import ENGINE as GGML  # the engine ggml ships with


@dataclass(frozen=True, slots=True)
class Fix:
    """What to do, in words for every engine, and the settings change that does it (RunSettings field
    names and values, as the engine table's Spelling forms take them; "<tokens>" and the like stand for
    a value the user picks). Each engine says it in its own words where it has them (its row's
    `fixes`, by the cause's key), else an engine that runs ggml gets the change in its spelling (with
    `after`), else the words."""

    text: str
    change: tuple[tuple[str, object], ...] = ()
    after: str = ""  # words after the spelled change
    checked: str = ""  # where the fix was checked (source read, doc, public report)


@dataclass(frozen=True, slots=True)
class Cause:
    id: str  # the cause's key: the crash_cause event's `cause`, the key of an engine's own fix words
    title: str  # what happened, in a few words
    meaning: str  # one sentence: why it happens
    fix: Fix
    family: tuple[str, ...]  # the messages that name it, across engine versions (documentation and tests)

    def __post_init__(self) -> None:
        _MADE.setdefault(self.id, self)

    def __reduce__(self) -> tuple[object, tuple[str]]:
        """Pickled as its key: a parser's state moved between processes (doctor/sources/logs/parallel.py) keeps
        the table's own object, so `cause is ILLEGAL_ADDRESS` holds there as here."""
        return _made, (self.id,)


_MADE: dict[str, Cause] = {}  # every Cause made, by its key (the table's rows are made once, at import)


def _made(key: str) -> Cause:
    return _MADE[key]


def runs_ggml(engine: Engine) -> bool:
    """The engine is ggml's own (llama.cpp) or wraps it (its crashes are ggml's)."""
    seen: set[str] = set()
    current: Engine | None = engine
    while current is not None and current.name not in seen:
        if current.name == GGML.name:
            return True
        seen.add(current.name)
        current = engines.get(current.wraps) if current.wraps else None
    return False


def fix_for(cause: Cause, engine: Engine) -> str:
    """The cause's fix as this engine says it: its own words, else the change in its spelling (an
    engine that runs ggml), else the words for every engine."""
    own = engine.fixes.get(cause.id)
    if own:
        return own
    if cause.fix.change and engine.spelling is not None and runs_ggml(engine):
        spelled = engine.spelling.spell(dict(cause.fix.change))
        if spelled:
            return spelled + cause.fix.after
    return cause.fix.text


def fix_data(cause: Cause) -> dict[str, str]:
    """The crash_cause event's fix fields: `fix` (the words) and `fix_<engine key>` for every engine of
    the table (the rule of class engine.crash renders them by engine)."""
    return {"fix": cause.fix.text, **{f"fix_{e.key}": fix_for(cause, e) for e in engines.table()}}


__all__ = ["GGML", "Cause", "Fix", "fix_data", "fix_for", "runs_ggml"]
