"""Evaluation: outcomes, inhibition of symptoms by root causes, the assessment, fixes per engine."""

from __future__ import annotations

import pytest

from doctor.core.facts import Facts
from doctor.judge.evaluate import diagnose


def run(rulebase, values, events=(), engine=None, mode="analyze"):
    facts = Facts.from_values(values, events, events_observed=True)
    return diagnose(facts, rulebase, command="analyze", mode=mode, engine=engine)


def test_root_cause_hides_its_symptom_and_is_the_assessment(rulebase) -> None:
    report = run(rulebase, {"config.n_ctx": 4096, "config.n_parallel": 4, "config.n_ctx_seq": 1024,
                            "run.prompt_tokens_max": 1500},
                 [{"kind": "truncation", "line": 88, "text": "input truncated"}])
    ids = [f.id for f in report.findings]
    assert "LD203" in ids and "LD201" not in ids
    check = next(c for c in report.checks if c.id == "LD201")
    assert check.outcome == "fired" and check.inhibited_by == "LD203"
    assert report.assessment is not None and report.assessment.id == "LD203"
    assert next(f for f in report.findings if f.id == "LD203").inhibits == ["LD201"]


def test_the_two_context_failures_are_ranked_by_their_numbers(rulebase) -> None:
    """Issue 37, item 2: the same refusal event, told apart by the numbers. A prompt of 3500 in a 4096
    slot that then filled it is generation running into the end (LD202 leads, LD201 does not fire); a
    prompt of 5000 in the same slot is the prompt (LD201 leads and explains LD202)."""
    refused = [{"kind": "prompt_too_long", "line": 54, "text": "srv    send_error: task id = 0, error: ..."},
               {"kind": "ctx_full", "line": 53}]
    fitted = run(rulebase, {"config.n_ctx": 4096, "run.prompt_tokens_max": 3500, "run.tokens_used_max": 4095},
                 refused)
    assert fitted.assessment is not None and fitted.assessment.id == "LD202"
    assert next(c for c in fitted.checks if c.id == "LD201").outcome == "ok"
    too_long = run(rulebase, {"config.n_ctx": 4096, "run.prompt_tokens_max": 5000, "run.tokens_used_max": 4095},
                   refused)
    assert too_long.assessment is not None and too_long.assessment.id == "LD201"
    assert "LD202" in next(f for f in too_long.findings if f.id == "LD201").inhibits


def test_unknown_checks_list_what_is_missing(rulebase) -> None:
    report = run(rulebase, {})
    threads = next(c for c in report.checks if c.id == "LD512")
    assert threads.outcome == "unknown" and set(threads.missing) == {"config.n_threads"}
    assert report.assessment is None and not report.fails("warning")


def test_fix_uses_the_detected_or_chosen_engine(rulebase) -> None:
    values = {"config.n_ctx": 512, "run.prompt_tokens_max": 900, "engine.name": "llama-cpp-python"}
    finding = next(f for f in run(rulebase, values).findings if f.id == "LD201")
    assert finding.fix.engine == "llama-cpp-python"
    assert finding.fix.command == "Llama(model_path=..., n_ctx=1024)"
    forced = next(f for f in run(rulebase, values, engine="ollama").findings if f.id == "LD201")
    assert forced.fix.command is not None and forced.fix.command.startswith("PARAMETER num_ctx 1024")
    assert "vllm" in forced.fix.by_engine and "--max-model-len 1024" in forced.fix.by_engine["vllm"]


def test_evidence_points_at_log_lines(rulebase) -> None:
    report = run(rulebase, {"config.n_ctx": 256},
                 [{"kind": "prompt_too_long", "line": 2132,
                   "text": "ValueError: Requested tokens (401) exceed context window of 256",
                   "data": {"n_tokens": 401, "n_ctx": 256}}])
    finding = next(f for f in report.findings if f.id == "LD201")
    assert 2132 in finding.lines
    assert finding.message.startswith("The prompt of 401 tokens did not fit in the context of 256 tokens per sequence")


def test_fail_on_thresholds(rulebase) -> None:
    report = run(rulebase, {"config.type_k": "f32", "config.type_v": "f32"})
    assert report.worst() == "warning"
    assert report.fails("warning") and not report.fails("error") and not report.fails("none")


def test_rules_outside_their_mode_are_skipped(rulebase) -> None:
    report = run(rulebase, {}, mode="scan")
    ids = {c.id for c in report.checks}
    expected = {r.id for r in rulebase.rules if "scan" in r.modes}
    assert ids == expected


CHAIN = """
- id: LD991
  slug: cause
  class: context.oversized
  severity: warning
  title: the cause
  when: {fact: config.n_ctx, ge: 100}
  fix: shrink it
  inhibits: [LD992]
- id: LD992
  slug: middle
  class: oom.compute
  severity: error
  title: what the cause brings
  when: {fact: config.n_ctx, ge: 100}
  confidence: high
  fix: something narrower
  inhibits: [LD993]
- id: LD993
  slug: symptom
  class: oom.runtime
  severity: warning
  title: what is seen
  when: {fact: config.n_ctx, ge: 100}
  confidence: high
  fix: something narrower still
"""


@pytest.mark.parametrize("order", [[0, 1, 2], [2, 1, 0], [1, 0, 2], [2, 0, 1]])
def test_a_root_cause_leads_whatever_the_order_and_takes_the_severity_it_explains(order: list[int]) -> None:
    from doctor.judge.evaluate import build_report
    from doctor.judge.rulebase import RuleBase, parse_rules

    rules = parse_rules(CHAIN, "chain.yaml")
    base = RuleBase(rules=[rules[i] for i in order])
    facts = Facts.from_values({"config.n_ctx": 4096}, [], events_observed=True)
    report = build_report(base, facts, command="scan", mode="scan")
    assert [f.id for f in report.findings] == ["LD991"]  # the middle rule hides nothing once it is hidden itself
    lead = report.findings[0]
    assert lead.severity == "error" and lead.inhibits == ["LD992", "LD993"]  # as serious as what it explains
    assert {c.id: c.inhibited_by for c in report.checks} == {"LD991": None, "LD992": "LD991", "LD993": "LD991"}
    assert report.assessment is not None and report.assessment.id == "LD991" and report.fails("error")


TWO_CAUSES = """
- id: LD994
  slug: second-cause
  class: context.oversized
  severity: warning
  title: one cause
  when: {fact: config.n_ctx, ge: 100}
  fix: shrink it
  inhibits: [LD996]
- id: LD995
  slug: first-cause
  class: context.oversized
  severity: warning
  title: an equal cause
  when: {fact: config.n_ctx, ge: 100}
  fix: shrink it too
  inhibits: [LD996]
- id: LD996
  slug: shared-symptom
  class: oom.runtime
  severity: warning
  title: what both explain
  when: {fact: config.n_ctx, ge: 100}
  fix: something narrower
"""

CREDIT = """
import json, sys
from doctor.core.facts import Facts
from doctor.judge.evaluate import build_report
from doctor.judge.rulebase import RuleBase, parse_rules
rules = parse_rules(sys.argv[1], "two.yaml")
report = build_report(RuleBase(rules=rules[::-1]), Facts.from_values({"config.n_ctx": 4096}, [], events_observed=True),
                      command="scan", mode="scan")
print(json.dumps([[f.id, f.inhibits] for f in report.findings]))
"""


def test_equal_causes_credit_a_symptom_to_the_same_rule_whatever_the_hash_seed() -> None:
    """Two causes of equal rank explain one symptom: the credit (and so the findings' order) must not
    follow the iteration order of a set of ids, which changes with PYTHONHASHSEED."""
    import json
    import os
    import subprocess
    import sys

    seen = set()
    for seed in ("1", "2", "3", "4", "5", "6"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", CREDIT, TWO_CAUSES], env=env, capture_output=True, text=True,
                             check=True).stdout
        seen.add(out)
    assert len(seen) == 1
    findings = json.loads(seen.pop())
    assert dict((rid, inh) for rid, inh in findings) == {"LD994": ["LD996"], "LD995": []}
