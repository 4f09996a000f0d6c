"""Rebuild Report objects from their JSON (`Report.to_json()`), as `watch` sends them in its
FindingEvent and EndEvent, so the watch screen can show them with the same widgets as analyze.

Lenient on purpose: a field that is missing or of the wrong type becomes empty rather than an
error, because this JSON may come from another version of llm-doctor. Pure.
"""

from __future__ import annotations

from typing import Any

from doctor.facts import MAX_SESSIONS, Facts, Session
from doctor.report import (
    Assessment,
    Check,
    Evidence,
    Finding,
    Fix,
    Report,
    SessionFindings,
    Sweep,
    Verification,
    Verified,
)
from doctor.vocab import (
    CheckOutcome,
    Confidence,
    Mode,
    Severity,
    is_check_outcome,
    is_confidence,
    is_mode,
    is_severity,
    is_verify_outcome,
)


def _s(data: dict[str, Any], key: str, default: str = "") -> str:
    value = data.get(key)
    return value if isinstance(value, str) else default


def _opt_s(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def _opt_i(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _severity(data: dict[str, Any], default: Severity) -> Severity:
    value = data.get("severity")
    return value if is_severity(value) else default


def _confidence(data: dict[str, Any]) -> Confidence:
    value = data.get("confidence")
    return value if is_confidence(value) else "low"


def _outcome(data: dict[str, Any]) -> CheckOutcome:
    value = data.get("outcome")
    return value if is_check_outcome(value) else "unknown"


def _mode(data: dict[str, Any]) -> Mode | None:
    value = data.get("mode")
    return value if is_mode(value) else None


def _str_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def evidence_from_json(data: dict[str, Any]) -> Evidence:
    return Evidence(kind=_s(data, "kind", "fact"), text=_s(data, "text"), line=_opt_i(data, "line"),
                    fact=_opt_s(data, "fact"), value=data.get("value"), unit=_opt_s(data, "unit"),
                    source=_opt_s(data, "source"))


def fix_from_json(data: Any) -> Fix:
    if not isinstance(data, dict):
        return Fix(text="", engine=None, command=None)
    by_engine = data.get("by_engine")
    return Fix(text=_s(data, "text"), engine=_opt_s(data, "engine"), command=_opt_s(data, "command"),
               by_engine={str(k): str(v) for k, v in by_engine.items()} if isinstance(by_engine, dict) else {},
               verified=verified_from_json(data.get("verified")))


def verified_from_json(data: Any) -> Verified | None:
    outcome = data.get("outcome") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not is_verify_outcome(outcome):
        return None

    def d(key: str) -> dict[str, Any]:
        value = data.get(key)
        return dict(value) if isinstance(value, dict) else {}

    return Verified(outcome=outcome, line=_s(data, "line"), applied=d("applied"),
                    flags={str(k): str(v) for k, v in d("flags").items()}, before=d("before"), after=d("after"),
                    fired_after=_str_list(data.get("fired_after")), reason=_s(data, "reason"))


def verification_from_json(data: Any) -> Verification | None:
    if not isinstance(data, dict):
        return None
    sweeps = []
    for raw in data.get("sweeps") or []:
        if not isinstance(raw, dict):
            continue
        rows = [(r.get("value"), r.get("figure") if isinstance(r.get("figure"), (int, float)) else None,
                 str(r.get("note") or "")) for r in raw.get("rows") or [] if isinstance(r, dict)]
        gain = raw.get("gain")
        sweeps.append(Sweep(setting=_s(raw, "setting"), measure=_s(raw, "measure"), rows=rows,
                            best=raw.get("best"), baseline=raw.get("baseline"),
                            gain=gain if isinstance(gain, (int, float)) else None, note=_s(raw, "note")))
    seconds, budget, runs = data.get("seconds"), data.get("budget_s"), data.get("runs")
    return Verification(seconds=float(seconds) if isinstance(seconds, (int, float)) else 0.0,
                        budget_s=float(budget) if isinstance(budget, (int, float)) else 0.0,
                        runs=runs if isinstance(runs, int) else 0, sweeps=sweeps, notes=_str_list(data.get("notes")))


def finding_from_json(data: dict[str, Any]) -> Finding:
    evidence = data.get("evidence")
    return Finding(
        id=_s(data, "id", "?"), slug=_s(data, "slug"), cls=_s(data, "class"), area=_s(data, "area", "Other"),
        severity=_severity(data, "info"), confidence=_confidence(data),
        title=_s(data, "title"), message=_s(data, "message"), explain=_s(data, "explain"),
        evidence=[evidence_from_json(e) for e in evidence if isinstance(e, dict)] if isinstance(evidence, list) else [],
        fix=fix_from_json(data.get("fix")), references=_str_list(data.get("references")),
        inhibits=_str_list(data.get("inhibits")),
        session=data["session"] if isinstance(data.get("session"), int) and not isinstance(data["session"], bool)
        else None,
    )


def sessions_from_json(data: Any, latest: list[Finding]) -> list[SessionFindings]:
    """The report's sessions; the last one's findings are the report's own."""
    if not isinstance(data, list):
        return []
    out: list[SessionFindings] = []
    for i, raw in enumerate(data[:MAX_SESSIONS]):
        if not isinstance(raw, dict):
            continue
        found = raw.get("findings")
        findings = (latest if i == len(data) - 1 else
                    [finding_from_json(f) for f in found if isinstance(f, dict)] if isinstance(found, list) else [])
        out.append(SessionFindings(Session.from_json({k: v for k, v in raw.items() if k != "facts"}), findings))
    return out


def check_from_json(data: dict[str, Any]) -> Check:
    return Check(id=_s(data, "id", "?"), slug=_s(data, "slug"), cls=_s(data, "class"),
                 area=_s(data, "area", "Other"), severity=_severity(data, "info"),
                 title=_s(data, "title"), outcome=_outcome(data),
                 missing=_str_list(data.get("missing")), inhibited_by=_opt_s(data, "inhibited_by"))


def report_from_json(data: dict[str, Any]) -> Report:
    raw_facts = data.get("facts")
    try:
        facts = Facts.from_json(raw_facts) if isinstance(raw_facts, dict) else Facts()
    except ValueError:
        facts = Facts()
    assessment = data.get("assessment")
    findings = data.get("findings")
    checks = data.get("checks")
    latest = [finding_from_json(f) for f in findings if isinstance(f, dict)] if isinstance(findings, list) else []
    return Report(
        command=_s(data, "command", "watch"),
        engine=_opt_s(data, "engine"),
        facts=facts,
        findings=latest,
        checks=[check_from_json(c) for c in checks if isinstance(c, dict)] if isinstance(checks, list) else [],
        assessment=Assessment(id=_s(assessment, "id"), cls=_s(assessment, "class"),
                              severity=_severity(assessment, "warning"),
                              confidence=_confidence(assessment), title=_s(assessment, "title"),
                              message=_s(assessment, "message")) if isinstance(assessment, dict) else None,
        errors=_str_list(data.get("errors")),
        notes=_str_list(data.get("notes")),
        mode=_mode(data) or "",
        sessions=sessions_from_json(data.get("sessions"), latest),
        verification=verification_from_json(data.get("verification")),
    )
