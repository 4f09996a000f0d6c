"""Evaluate the rule base over a Facts snapshot and build the Report.

Outcomes: fired, ok, unknown (with the facts that were missing). A fired root cause inhibits the
symptoms it lists, which stay in `checks` (marked inhibited) but leave `findings`. The assessment
names the likely root cause: the worst visible finding, then the most confident, then the one that
explains (inhibits) the most.

Pure: facts in, report out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.estimate import derive
from doctor.facts import Event, Fact, Facts
from doctor.predicates import Outcome
from doctor.report import (
    CONFIDENCE_RANK,
    SEVERITY_RANK,
    Assessment,
    Check,
    Evidence,
    Finding,
    Fix,
    Report,
)
from doctor.rulebase import Rule, RuleBase
from doctor.templates import format_value, render

MAX_EVENT_EVIDENCE = 8
MAX_FACT_EVIDENCE = 10


@dataclass(slots=True)
class RuleResult:
    outcome: str  # fired | ok | unknown | skipped
    confidence: str | None = None
    missing: list[str] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


def evaluate_rule(rule: Rule, facts: Facts, mode: str | None = None) -> RuleResult:
    if mode is not None and mode not in rule.modes:
        return RuleResult("skipped")
    out: Outcome = rule.when.evaluate(facts)
    if out.value is None:
        return RuleResult("unknown", missing=sorted(out.missing))
    if out.value is False:
        return RuleResult("ok")
    confidence = rule.confidence_default
    evidence_facts, evidence_events = list(out.facts), list(out.events)
    for level, predicate in rule.confidence_levels:
        sub = predicate.evaluate(facts)
        if sub.value is True:
            confidence = level
            # what raised the confidence is evidence too (a truncation line behind a slot-size finding)
            evidence_facts += sub.facts
            evidence_events += sub.events
            break
    return RuleResult("fired", confidence, facts=evidence_facts, events=evidence_events)


def resolve_engine(facts: Facts, engine: str | None = None) -> str | None:
    for candidate in (engine, facts.value("config.engine"), facts.value("engine.name")):
        if isinstance(candidate, str) and candidate:
            return candidate
    return None


def diagnose(facts: Facts, rulebase: RuleBase, *, command: str, mode: str, engine: str | None = None,
             errors: list[str] | None = None) -> Report:
    """The whole brain: derived facts, then rules, then the report."""
    derive(facts)
    return build_report(rulebase, facts, command=command, mode=mode, engine=engine, errors=errors)


def build_report(rulebase: RuleBase, facts: Facts, *, command: str, mode: str, engine: str | None = None,
                 errors: list[str] | None = None) -> Report:
    chosen_engine = resolve_engine(facts, engine)
    report = Report(command=command, engine=chosen_engine, facts=facts, errors=list(errors or []),
                    notes=list(rulebase.notes))
    results: dict[str, tuple[Rule, RuleResult]] = {}
    for rule in rulebase.rules:
        result = evaluate_rule(rule, facts, mode)
        if result.outcome != "skipped":
            results[rule.id] = (rule, result)

    fired = {rid for rid, (_, res) in results.items() if res.outcome == "fired"}
    inhibited_by: dict[str, str] = {}
    # strongest inhibitors first so the reported inhibitor is the root cause
    for rid in sorted(fired, key=lambda r: _rank(results[r][0], results[r][1]), reverse=True):
        if rid in inhibited_by:
            continue
        for target in results[rid][0].inhibits:
            if target in fired and target not in inhibited_by:
                inhibited_by[target] = rid

    for rid, (rule, result) in results.items():
        report.checks.append(Check(rule.id, rule.slug, rule.cls, rule.area, rule.severity, rule.title,
                                   result.outcome, result.missing, inhibited_by.get(rid)))
        if result.outcome == "fired" and rid not in inhibited_by:
            finding = _finding(rule, result, facts, chosen_engine)
            finding.inhibits = sorted(t for t, by in inhibited_by.items() if by == rid)
            report.findings.append(finding)

    report.findings.sort(key=lambda f: (-SEVERITY_RANK[f.severity], -CONFIDENCE_RANK[f.confidence], f.id))
    report.checks.sort(key=lambda c: (c.area, c.id))
    report.assessment = _assess(report.findings)
    return report


def _rank(rule: Rule, result: RuleResult) -> tuple[int, int, int]:
    return (SEVERITY_RANK[rule.severity], CONFIDENCE_RANK.get(result.confidence or "low", 1), len(rule.inhibits))


def _finding(rule: Rule, result: RuleResult, facts: Facts, engine: str | None) -> Finding:
    first_event = min(result.events, key=lambda e: e.line or 0) if result.events else None
    message = render(rule.message, facts, first_event)
    explain = render(rule.explain, facts, first_event) if rule.explain else ""
    by_engine = {name: render(cmd, facts, first_event) for name, cmd in rule.fix_engines.items()}
    fix = Fix(text=render(rule.fix_text, facts, first_event), engine=engine,
              command=by_engine.get(engine) if engine else None, by_engine=by_engine)
    return Finding(
        id=rule.id, slug=rule.slug, cls=rule.cls, area=rule.area, severity=rule.severity,
        confidence=result.confidence or rule.confidence_default, title=rule.title, message=message,
        explain=explain, evidence=_evidence(result), fix=fix, references=list(rule.references),
    )


def _evidence(result: RuleResult) -> list[Evidence]:
    out: list[Evidence] = []
    seen_lines: set[int] = set()
    events = sorted({id(e): e for e in result.events}.values(), key=lambda e: e.line or 0)
    for event in events[:MAX_EVENT_EVIDENCE]:
        if event.line is not None:
            if event.line in seen_lines:
                continue
            seen_lines.add(event.line)
        out.append(Evidence("log", event.text, event.line, source=event.source))
    if len(events) > MAX_EVENT_EVIDENCE:
        out.append(Evidence("log", f"… and {len(events) - MAX_EVENT_EVIDENCE} more such lines"))
    seen_facts: set[str] = set()
    for fact in result.facts:
        if fact.name in seen_facts or len(seen_facts) >= MAX_FACT_EVIDENCE:
            continue
        seen_facts.add(fact.name)
        src = fact.source
        where = src.describe()
        if src.kind == "estimate" and src.text:
            where = f"estimate: {src.text}"
        elif src.kind == "probe" and src.name in ("metrics", "prometheus", "llama-server.props") and src.text:
            where = src.text  # the metric and URL, the PromQL and its value, or the /props field
        text = f"{fact.name} = {format_value(fact.value, fact.unit)} ({where})"
        line = src.line if src.kind == "log" else None
        out.append(Evidence("fact", text, line, fact.name, fact.value, fact.unit, where))
    return out


def _assess(findings: list[Finding]) -> Assessment | None:
    candidates = [f for f in findings if f.severity in ("error", "warning")]
    if not candidates:
        return None
    best = max(candidates, key=lambda f: (SEVERITY_RANK[f.severity], CONFIDENCE_RANK[f.confidence],
                                          len(f.inhibits), -findings.index(f)))
    return Assessment(best.id, best.cls, best.severity, best.confidence, best.title, best.message)
