"""Run every rule's own test cases (the `tests:` list in its YAML) and report expected vs actual.

Each case builds a Facts snapshot by hand, runs the same derivation and evaluation the commands
run, and compares the outcome (and confidence / missing facts when the case states them).

Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.core.facts import Facts
from doctor.derive.estimate import derive
from doctor.judge.evaluate import evaluate_rule
from doctor.judge.rule import Rule, RuleCase
from doctor.judge.rulebase import RuleBase


@dataclass(frozen=True, slots=True)
class CaseResult:
    rule: Rule
    case: RuleCase
    passed: bool
    expected: str
    actual: str

    def describe(self) -> str:
        where = f"{self.rule.path}:{self.case.line}" if self.case.line else self.rule.path
        return (f"{self.rule.id} {self.rule.slug} — {self.case.name} ({where}): "
                f"expected {self.expected}, got {self.actual}")


def facts_for_case(case: RuleCase) -> Facts:
    facts = Facts.from_values(case.facts, case.events, events_observed=case.events_observed)
    return derive(facts)


def run_case(rule: Rule, case: RuleCase) -> CaseResult:
    facts = facts_for_case(case)
    result = evaluate_rule(rule, facts, case.mode)
    expected = case.expect
    actual = result.outcome
    ok = actual == expected
    exp_parts: list[str] = [expected]
    act_parts: list[str] = [actual]
    if case.confidence is not None and expected == "fired":
        exp_parts.append(f"confidence {case.confidence}")
        act_parts.append(f"confidence {result.confidence}")
        ok = ok and result.confidence == case.confidence
    if case.missing is not None and expected == "unknown":
        exp_parts.append(f"missing {sorted(case.missing)}")
        act_parts.append(f"missing {sorted(result.missing)}")
        ok = ok and sorted(case.missing) == sorted(result.missing)
    if actual == "unknown" and expected != "unknown":
        act_parts.append(f"missing {result.missing}")
    return CaseResult(rule, case, ok, ", ".join(exp_parts), ", ".join(act_parts))


def run_all(rulebase: RuleBase) -> list[CaseResult]:
    return [run_case(rule, case) for rule in rulebase.rules for case in rule.tests]
