"""One rule and one of its test cases, as loaded: the model the evaluator, the rule tests and the
`rules` / `explain` commands read. Built by doctor/judge/ruleparse.py from a rule file's entry.

Judge floor; pure data. The words are the rule files'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from doctor.core.vocab import Confidence, Mode, RuleOutcome, RuleStatus, Severity
from doctor.judge.changes import Candidate, Recipe
from doctor.judge.families import canon
from doctor.judge.predicates import Predicate


@dataclass(slots=True)
class RuleCase:
    name: str
    facts: dict[str, Any]
    events: list[dict[str, Any]]
    events_observed: bool
    expect: RuleOutcome
    confidence: Confidence | None
    missing: list[str] | None
    mode: Mode | None
    line: int | None


@dataclass(slots=True)
class Rule:
    id: str
    slug: str
    cls: str
    severity: Severity
    title: str
    when: Predicate
    confidence_levels: list[tuple[Confidence, Predicate]]  # (level, predicate), tried in order
    confidence_default: Confidence
    message: str
    explain: str
    fix_text: str
    fix_engines: dict[str, str]  # engine -> command template: its own `fix:` key, else `fix.change` spelled
    inhibits: list[str]
    references: list[str]
    tests: list[RuleCase]
    modes: tuple[Mode, ...]
    status: RuleStatus
    path: str
    line: int | None
    builtin: bool
    message_by_mode: dict[str, str] = field(default_factory=dict)  # wording for one mode (scan: nothing ran)
    engines: tuple[str, ...] = ()  # whose logs it reads; () = any engine's
    area: str = ""  # the heading its class shows under (families.yaml)
    fix_change: dict[str, Any] = field(default_factory=dict)  # `fix.change`: the (first) settings change, written once
    fix_candidates: tuple[Candidate, ...] = ()  # every change `fix.change` offers, in order (doctor/judge/recheck.py)
    verify: Recipe | None = None  # its own `verify:`, else its class's default (families.yaml)

    def message_for(self, mode: Mode | None) -> str:
        return self.message_by_mode.get(mode or "", self.message)

    def applies_to(self, engine: str | None) -> bool:
        """False for a rule about another engine's log (an Ollama check on a vLLM log)."""
        return not self.engines or engine is None or engine in self.engines

    def matches(self, selector: str) -> bool:
        """A selector names this rule by id, slug (prompt-exceeds-context), diagnosis class
        (context.overflow, also written context-overflow) or class family (context)."""
        if selector.upper() == self.id or selector.lower() == self.slug:
            return True
        wanted, cls = canon(selector), canon(self.cls)
        return wanted == cls or wanted == canon(self.cls.split(".")[0])
