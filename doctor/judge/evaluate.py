"""Evaluate the rule base over a Facts snapshot and build the Report.

Outcomes (doctor/core/vocab.py): fired, ok, unknown (with the facts that were missing). A fired root cause inhibits the
symptoms it lists, which stay in `checks` (marked inhibited) but leave `findings`. The assessment
names the likely root cause: the worst visible finding, then the most confident, then the one that
explains (inhibits) the most.

Pure: facts in, report out.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from doctor.core.facts import Event, Fact, Facts
from doctor.core.format import format_value, render, render_complete
from doctor.core.report import (
    CONFIDENCE_RANK,
    SEVERITY_RANK,
    Assessment,
    Check,
    Evidence,
    Finding,
    Fix,
    Report,
    SessionFindings,
)
from doctor.core.vocab import Confidence, Mode, RuleOutcome
from doctor.derive import derive
from doctor.judge.predicates import All, Any_, Events, Not, Outcome, Predicate
from doctor.judge.recheck import recheck
from doctor.judge.rulebase import Rule, RuleBase

MAX_EVENT_EVIDENCE = 8
MAX_FACT_EVIDENCE = 10


@dataclass(slots=True)
class RuleResult:
    outcome: RuleOutcome
    confidence: Confidence | None = None
    missing: list[str] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


def evaluate_rule(rule: Rule, facts: Facts, mode: Mode | None = None) -> RuleResult:
    if mode is not None and mode not in rule.modes:
        return RuleResult("skipped")
    out: Outcome = rule.when.evaluate(facts)
    if out.value is None:
        return RuleResult("unknown", missing=sorted(out.missing))
    if out.value is False:
        if not _judged_on_input(rule.when, facts):
            # false only because what it reads is absent (an `exists` test, a `not` over nothing): that is
            # not a check that passed, and must not count as one
            return RuleResult("unknown", missing=sorted(rule.when.fact_names()) or ["events"])
        return RuleResult("ok")
    confidence: Confidence = rule.confidence_default
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


def _judged_on_input(predicate: Predicate, facts: Facts) -> bool:
    """Whether the input said anything this predicate reads: a known fact it names, or (where events
    were observed) an event test."""
    if any(facts.has(name) for name in predicate.fact_names()):
        return True
    return facts.events_observed and _tests_events(predicate)


def _tests_events(predicate: Predicate) -> bool:
    if isinstance(predicate, Events):
        return True
    if isinstance(predicate, All | Any_):
        return any(_tests_events(item) for item in predicate.items)
    if isinstance(predicate, Not):
        return _tests_events(predicate.item)
    return False


def resolve_engine(facts: Facts, engine: str | None = None) -> str | None:
    for candidate in (engine, facts.value("config.engine"), facts.value("engine.name")):
        if isinstance(candidate, str) and candidate:
            return candidate
    return None


@dataclass(slots=True)
class SessionMemo:
    """Earlier sessions already judged, owned by a caller that judges one growing input again and again
    (doctor/judge/live_judge.py): a closed session never changes, so watch judges it once, not at every
    evaluation. Keyed by the session's kept Facts snapshot (weakly: a dropped session leaves with it) and
    checked against the rule base and options it was judged with. Without one, every call judges afresh."""

    judged: weakref.WeakKeyDictionary[Facts, tuple[tuple[object, ...], list[Finding]]] = field(
        default_factory=weakref.WeakKeyDictionary)

    def get(self, facts: Facts, key: tuple[object, ...]) -> list[Finding] | None:
        cached = self.judged.get(facts)
        return cached[1] if cached is not None and cached[0] == key else None

    def put(self, facts: Facts, key: tuple[object, ...], findings: list[Finding]) -> None:
        self.judged[facts] = (key, findings)


def diagnose(facts: Facts, rulebase: RuleBase, *, command: str, mode: Mode, engine: str | None = None,
             errors: list[str] | None = None, memo: SessionMemo | None = None) -> Report:
    """The whole brain: derived facts, then rules, then the report."""
    derive(facts)
    return build_report(rulebase, facts, command=command, mode=mode, engine=engine, errors=errors, memo=memo)


def build_report(rulebase: RuleBase, facts: Facts, *, command: str, mode: Mode, engine: str | None = None,
                 errors: list[str] | None = None, memo: SessionMemo | None = None,
                 check_fixes: bool = True) -> Report:
    chosen_engine = resolve_engine(facts, engine)
    report = Report(command=command, engine=chosen_engine, facts=facts, errors=list(errors or []),
                    notes=list(rulebase.notes), mode=mode)
    results: dict[str, tuple[Rule, RuleResult]] = {}
    for rule in rulebase.rules:
        result = evaluate_rule(rule, facts, mode)
        if result.outcome == "fired" or (result.outcome != "skipped" and rule.applies_to(chosen_engine)):
            # another engine's check is left out (it could only be unknown, or ok on nothing), unless
            # it fired: a log holding that engine's lines too
            results[rule.id] = (rule, result)

    fired = [rid for rid, (_, res) in results.items() if res.outcome == "fired"]  # in rule order, not a set's
    inhibited_by = root_causes({rid: results[rid][0] for rid in fired},
                               lambda rid: _rank(results[rid][0], results[rid][1]))

    for rid, (rule, result) in results.items():
        outcome = result.outcome
        if outcome == "skipped":  # never kept above
            continue
        report.checks.append(Check(rule.id, rule.slug, rule.cls, rule.area, rule.severity, rule.title,
                                   outcome, result.missing, inhibited_by.get(rid)))
        if result.outcome == "fired" and rid not in inhibited_by:
            finding = _finding(rule, result, facts, chosen_engine, mode)
            finding.inhibits = sorted(t for t, by in inhibited_by.items() if by == rid)
            # a root cause is as serious as the worst symptom it explains (an oversized context that
            # runs the machine out of memory is an error, though an oversized context alone is a warning)
            worst = max([rule.severity, *(results[t][0].severity for t in finding.inhibits)],
                        key=lambda s: SEVERITY_RANK[s])
            finding.severity = worst
            report.findings.append(finding)

    _thin_input(report.findings, facts)
    if check_fixes:  # every fix checked in the engine's own terms before it is shown (doctor/judge/recheck.py)
        fired_rules = {rid: (results[rid][0].severity, results[rid][0].title, results[rid][0].cls) for rid in fired}

        def judge(changed: Facts) -> dict[str, tuple[str, str, str]]:
            return {r.id: (r.severity, r.title, r.cls) for r in rulebase.rules
                    if (not r.engines or r.applies_to(chosen_engine) or r.id in fired_rules)
                    and evaluate_rule(r, changed, mode).outcome == "fired"}

        for finding in report.findings:
            rule = results[finding.id][0]
            recheck(finding, rule, facts, chosen_engine, judge, fired_rules, report.findings)
    report.findings.sort(key=lambda f: (-SEVERITY_RANK[f.severity], -CONFIDENCE_RANK[f.confidence],
                                        -len(f.inhibits), f.id))
    report.checks.sort(key=lambda c: (c.area, c.id))
    report.assessment = assess(report.findings)
    _judge_sessions(report, rulebase, facts, command=command, mode=mode, engine=engine, memo=memo)
    return report


def _thin_input(findings: list[Finding], facts: Facts) -> None:
    """A pasted input that held only a launch command or the system-info line (doctor/derive/thin.py): findings
    from a command are inferences from settings (confidence at most low), from the system-info line from one
    line of the run (at most medium), and each says what would confirm it. One line alone: the rules' own
    confidence stands; below high, the finding says what is missing."""
    thin, missing = facts.value("derived.input_thin"), facts.value("derived.input_missing")
    if not isinstance(thin, str) or not isinstance(missing, str):
        return
    caps: dict[str, Confidence] = {"a launch command": "low", "llama.cpp's system-info line": "medium"}
    cap = caps.get(thin)
    for finding in findings:
        if cap is None and finding.confidence == "high":
            continue
        if cap is not None and CONFIDENCE_RANK[finding.confidence] > CONFIDENCE_RANK[cap]:
            finding.confidence = cap
        finding.message = f"{finding.message.rstrip()} (Only {thin} was pasted; {missing}.)"


def root_causes(fired: dict[str, Rule], rank: Callable[[str], tuple[int, ...]]) -> dict[str, str]:
    """{hidden rule id: the visible root cause that explains it}.

    A fired rule is hidden when any fired rule inhibits it, whatever the order they are met in, and
    whatever hides its inhibitor: inhibition is transitive (A explains B, B explains C: A explains C).
    Each hidden rule is credited to the strongest visible rule above it, the lowest id among equals (so
    the credit never depends on the order the rules were met in). The rule base has no cycles
    (rulebase._check_inhibits)."""
    parents: dict[str, list[str]] = {}
    for rid, rule in fired.items():
        for target in rule.inhibits:
            if target in fired and target != rid:
                parents.setdefault(target, []).append(rid)
    memo: dict[str, str] = {}

    def root(rid: str, depth: int = 0) -> str:
        if rid not in parents or depth > len(fired):
            return rid
        if rid not in memo:
            memo[rid] = max(sorted(root(p, depth + 1) for p in parents[rid]), key=rank)  # first of equals
        return memo[rid]

    return {rid: root(rid) for rid in parents}


def _judge_sessions(report: Report, rulebase: RuleBase, facts: Facts, *, command: str, mode: Mode,
                    engine: str | None, memo: SessionMemo | None) -> None:
    """Several engine sessions in one input: each earlier one is judged on its own facts (never mixed
    with the latest's), and every finding says which session it belongs to."""
    if not facts.sessions:
        return
    for session in facts.sessions[:-1]:
        if session.facts is None:
            continue
        # a closed session never changes: with the caller's memo (watch) it is judged once
        key = (id(rulebase), command, mode, engine)
        cached = memo.get(session.facts, key) if memo is not None else None
        if cached is not None:
            report.sessions.append(SessionFindings(session, cached))
            continue
        own = Facts()
        own.merge(session.facts)  # a copy: deriving must not change the kept snapshot
        derive(own)
        sub = build_report(rulebase, own, command=command, mode=mode, engine=engine or session.engine)
        for finding in sub.findings:
            finding.session = session.number
        if memo is not None:
            memo.put(session.facts, key, sub.findings)
        report.sessions.append(SessionFindings(session, sub.findings))
    latest = facts.sessions[-1]
    for finding in report.findings:
        finding.session = latest.number
    report.sessions.append(SessionFindings(latest, report.findings))
    if report.assessment is None and not latest.ran:
        report.assessment = _earlier_assessment(report.earlier)


def _earlier_assessment(earlier: list[SessionFindings]) -> Assessment | None:
    """The latest session is a restart that did not get past starting (its start-up lines end the input): it
    shows nothing of its own, so it does not clear the failure the run before it ended with. The assessment is
    then the last earlier session's, said as such."""
    for past in reversed(earlier):
        found = assess(past.findings)
        if found is not None:
            found.session = past.session.number
            found.message = (f"Session {past.session.number} (the run before the restart this input ends with, "
                             f"which did not get past starting): {found.message}")
            return found
    return None


def _rank(rule: Rule, result: RuleResult) -> tuple[int, int, int]:
    return (SEVERITY_RANK[rule.severity], CONFIDENCE_RANK.get(result.confidence or "low", 1), len(rule.inhibits))


def _finding(rule: Rule, result: RuleResult, facts: Facts, engine: str | None, mode: Mode | None = None) -> Finding:
    first_event = min(result.events, key=lambda e: e.line or 0) if result.events else None
    # every clause of the message may have gone with its unknown value (doctor/core/clauses.py): the title says it then
    message = render(rule.message_for(mode), facts, first_event) or rule.title
    explain = render(rule.explain, facts, first_event) if rule.explain else ""
    # a command with an unknown number in it is left out (the fix text still says what to do)
    rendered = {name: render_complete(cmd, facts, first_event) for name, cmd in rule.fix_engines.items()}
    by_engine = {name: cmd for name, cmd in rendered.items() if cmd is not None}
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
        for number, text in event.placed_by:  # the lines that placed it in the run (its phase's evidence)
            if number not in seen_lines:
                seen_lines.add(number)
                out.append(Evidence("log", text, number, source="timeline"))
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
        elif src.kind == "probe" and src.name == "metrics" and src.text:
            where = f"metrics: {src.text}"  # which metric, read how (counter, gauge, histogram), at which URL
        elif src.kind == "probe" and src.name in ("prometheus", "llama-server.props") and src.text:
            where = src.text  # the PromQL and its value, or the /props field
        text = f"{fact.name} = {format_value(fact.value, fact.unit)} ({where})"
        line = src.line if src.kind == "log" else None
        out.append(Evidence("fact", text, line, fact.name, fact.value, fact.unit, where))
    return out


def assess(findings: list[Finding], exclude: frozenset[str] = frozenset()) -> Assessment | None:
    """The likely root cause among the findings (ids in `exclude` left out: --verify measured them wrong)."""
    candidates = [f for f in findings if f.severity in ("error", "warning") and f.id not in exclude]
    if not candidates:
        return None
    best = max(candidates, key=lambda f: (SEVERITY_RANK[f.severity], CONFIDENCE_RANK[f.confidence],
                                          len(f.inhibits), -findings.index(f)))
    return Assessment(best.id, best.cls, best.severity, best.confidence, best.title, best.message)
