"""Every built-in rule's own test cases, one pytest item each (what `llm-doctor rules test` runs)."""

from __future__ import annotations

import pytest

from doctor.judge.rulebase import load_rulebase
from doctor.judge.ruletest import run_case

_RB = load_rulebase([], env={})
CASES = [(rule, case) for rule in _RB.rules for case in rule.tests]


@pytest.mark.parametrize(("rule", "case"), CASES, ids=[f"{r.id}-{c.name}" for r, c in CASES])
def test_rule_case(rule, case) -> None:
    result = run_case(rule, case)
    assert result.passed, result.describe()
