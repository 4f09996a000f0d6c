"""Structured rule predicates and their three-valued evaluation.

A predicate is data parsed from YAML (never code): all / any / not over fact comparisons and event
matches. Evaluation returns True, False or None (unknown: a fact it needs is missing), the facts
that were missing, and the evidence that made it true.

Pure: reads a Facts snapshot, nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from doctor.core.facts import Event, Fact, Facts

COMPARE_OPS = ("eq", "ne", "lt", "le", "gt", "ge", "in", "not_in", "matches", "exists")
ORDER_OPS = {"lt", "le", "gt", "ge"}


@dataclass(frozen=True, slots=True)
class FactRef:
    """An operand that is another fact, optionally scaled: `{fact: X, times: 0.8, plus: 256}`."""

    name: str
    times: float = 1.0
    plus: float = 0.0


@dataclass(slots=True)
class Outcome:
    value: bool | None
    missing: set[str] = field(default_factory=set)
    facts: list[Fact] = field(default_factory=list)  # facts that made it true (evidence)
    events: list[Event] = field(default_factory=list)  # events that made it true (evidence)


class Predicate:
    def evaluate(self, facts: Facts) -> Outcome:
        raise NotImplementedError

    def fact_names(self) -> set[str]:
        return set()


@dataclass(slots=True)
class All(Predicate):
    items: list[Predicate]

    def evaluate(self, facts: Facts) -> Outcome:
        out = Outcome(True)
        for item in self.items:
            sub = item.evaluate(facts)
            if sub.value is False:
                return Outcome(False)
            if sub.value is None:
                out.value = None
                out.missing |= sub.missing
            else:
                out.facts += sub.facts
                out.events += sub.events
        if out.value is None:
            out.facts, out.events = [], []
        return out

    def fact_names(self) -> set[str]:
        return set().union(*(i.fact_names() for i in self.items)) if self.items else set()


@dataclass(slots=True)
class Any_(Predicate):
    items: list[Predicate]

    def evaluate(self, facts: Facts) -> Outcome:
        out = Outcome(False)
        for item in self.items:
            sub = item.evaluate(facts)
            if sub.value is True:
                if out.value is not True:
                    out = Outcome(True)
                out.facts += sub.facts
                out.events += sub.events
            elif sub.value is None and out.value is not True:
                out.value = None
                out.missing |= sub.missing
        return out

    def fact_names(self) -> set[str]:
        return set().union(*(i.fact_names() for i in self.items)) if self.items else set()


@dataclass(slots=True)
class Not(Predicate):
    item: Predicate

    def evaluate(self, facts: Facts) -> Outcome:
        sub = self.item.evaluate(facts)
        if sub.value is None:
            return Outcome(None, sub.missing)
        return Outcome(not sub.value)

    def fact_names(self) -> set[str]:
        return self.item.fact_names()


@dataclass(slots=True)
class Compare(Predicate):
    fact: str
    op: str
    operand: Any  # a literal, a list (in/not_in), a compiled regex (matches), a FactRef, or bool (exists)

    def evaluate(self, facts: Facts) -> Outcome:
        fact = facts.get(self.fact)
        known = fact is not None and fact.known
        if self.op == "exists":
            return Outcome(known == bool(self.operand), facts=[fact] if known and fact else [])
        if not known or fact is None:
            return Outcome(None, {self.fact})
        other = self.operand
        evidence = [fact]
        if isinstance(other, FactRef):
            ref = facts.get(other.name)
            if ref is None or not ref.known:
                return Outcome(None, {other.name})
            scaled = other.times != 1.0 or other.plus != 0.0
            value = ref.value
            if (scaled or self.op in ORDER_OPS) and not _is_number(value):
                return Outcome(None, {f"{other.name} (not a number)"})
            other = value * other.times + other.plus if scaled and _is_number(value) else value
            evidence.append(ref)
        result = _compare(fact.value, self.op, other)
        if result is None:
            return Outcome(None, {f"{self.fact} (not comparable)"})
        return Outcome(result, facts=evidence if result else [])

    def fact_names(self) -> set[str]:
        names = {self.fact}
        if isinstance(self.operand, FactRef):
            names.add(self.operand.name)
        return names


@dataclass(slots=True)
class Events(Predicate):
    kind: str
    phases: tuple[str, ...] = ()
    min_count: int = 1
    data: dict[str, Any] = field(default_factory=dict)

    def evaluate(self, facts: Facts) -> Outcome:
        matched = [e for e in facts.events(self.kind)
                   if (not self.phases or e.phase in self.phases)
                   and all(e.data.get(k) == v for k, v in self.data.items())]
        count = len(matched)
        if not self.phases and not self.data:
            count = max(count, facts.event_count(self.kind))  # events beyond the kept ones count too
        if count >= self.min_count:
            return Outcome(True, events=matched)  # an event seen is seen, whatever else was read
        if not facts.events_observed:
            return Outcome(None, {"events"})  # nothing that reports such events was read: not "none happened"
        return Outcome(False)


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _compare(value: Any, op: str, other: Any) -> bool | None:
    if op == "eq":
        return _equal(value, other)
    if op == "ne":
        return not _equal(value, other)
    if op in ("in", "not_in"):
        found = any(_equal(value, o) for o in other)
        return found if op == "in" else not found
    if op == "matches":
        return bool(other.search(str(value)))
    if op in ORDER_OPS:
        if not (_is_number(value) and _is_number(other)):
            return None
        if op == "lt":
            return value < other
        if op == "le":
            return value <= other
        if op == "gt":
            return value > other
        return value >= other
    return None


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (isinstance(a, bool) and isinstance(b, bool) and a == b)
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    return a == b


def compile_regex(pattern: str) -> Any:
    """A case-insensitive pattern for `matches`. Rule files may come from users: with RE2 (google-re2,
    a dependency) matching takes linear time, so a pattern like `(a+)+$` cannot hang on a long log
    line; patterns RE2 cannot run (look-around, backreferences) are refused as re.error. Python's
    `re` is the fallback only where RE2 is not installed."""
    try:
        import re2
    except ImportError:
        return re.compile(pattern, re.IGNORECASE)
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False
    options.max_mem = 8 << 20
    try:
        re.compile(pattern)  # the same syntax errors and messages as before
        return re2.compile(pattern, options)
    except re.error:
        raise
    except Exception as exc:
        why = exc.args[0] if exc.args else exc
        why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
        raise re.error(f"RE2 cannot run it (no look-around or backreferences): {why}") from None
