"""The report model: findings with evidence and fixes, every check's outcome, the assessment.

Views (text, JSON, Markdown, TUI) only render a Report; nothing here renders or does I/O. Each model
reads itself back from its JSON (`from_json`, lenient: a report from another version of llm-doctor
loses a field rather than failing), which is how the watch screen shows what `watch` sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from doctor import __version__
from doctor.core.facts import MAX_SESSIONS, Facts, Session
from doctor.core.vocab import CONFIDENCE_RANK as CONFIDENCE_RANK  # re-exported: views rank findings with them
from doctor.core.vocab import SEVERITY_RANK as SEVERITY_RANK
from doctor.core.vocab import (
    CheckOutcome,
    Confidence,
    FailOn,
    Mode,
    Severity,
    Verdict,
    VerifyOutcome,
    is_check_outcome,
    is_confidence,
    is_mode,
    is_severity,
    is_verify_outcome,
)

SCHEMA_VERSION = "1"


@dataclass(slots=True)
class Evidence:
    """One piece of evidence: a log line, or a fact value with its source."""

    kind: str  # "log" (a line of the input) | "fact"
    text: str
    line: int | None = None
    fact: str | None = None
    value: Any = None
    unit: str | None = None
    source: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "text": self.text}
        if self.line is not None:
            out["line"] = self.line
        if self.fact is not None:
            out["fact"] = self.fact
            out["value"] = self.value
            if self.unit:
                out["unit"] = self.unit
        if self.source:
            out["source"] = self.source
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Evidence:
        return cls(kind=_s(data, "kind", "fact"), text=_s(data, "text"), line=_opt_i(data, "line"),
                   fact=_opt_s(data, "fact"), value=data.get("value"), unit=_opt_s(data, "unit"),
                   source=_opt_s(data, "source"))


@dataclass(slots=True)
class Verified:
    """A fix tried on this machine (`--verify`): the same short job re-run with the fix applied."""

    outcome: VerifyOutcome
    line: str  # the short before -> after line the views show beside the fix
    applied: dict[str, Any] = field(default_factory=dict)  # embedded engine's settings changed
    flags: dict[str, str] = field(default_factory=dict)  # the same change in each engine's flags
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    fired_after: list[str] = field(default_factory=list)  # rule ids that fired in the re-run
    reason: str = ""  # why not tried; what made it worse
    tries: list[dict[str, Any]] = field(default_factory=list)  # earlier candidates (made worse)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"outcome": self.outcome, "line": self.line, "applied": self.applied,
                               "flags": self.flags, "before": self.before, "after": self.after,
                               "fired_after": self.fired_after, "seconds": round(self.seconds, 1)}
        if self.reason:
            out["reason"] = self.reason
        if self.tries:
            out["tries"] = self.tries
        return out

    @classmethod
    def from_json(cls, data: Any) -> Verified | None:
        outcome = data.get("outcome") if isinstance(data, dict) else None
        if not isinstance(data, dict) or not is_verify_outcome(outcome):
            return None

        def d(key: str) -> dict[str, Any]:
            value = data.get(key)
            return dict(value) if isinstance(value, dict) else {}

        return cls(outcome=outcome, line=_s(data, "line"), applied=d("applied"),
                   flags={str(k): str(v) for k, v in d("flags").items()}, before=d("before"), after=d("after"),
                   fired_after=_str_list(data.get("fired_after")), reason=_s(data, "reason"))


@dataclass(slots=True)
class Fix:
    text: str
    engine: str | None  # the engine the command is for
    command: str | None  # the command / setting for that engine
    by_engine: dict[str, str] = field(default_factory=dict)
    verified: Verified | None = None  # set by --verify
    # the fix check (doctor/judge/recheck.py): changes set aside for the engine and why, the settings the
    # run already has (setting -> its value), and what is said when no setting change passed
    checks: list[str] = field(default_factory=list)
    already: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text, "engine": self.engine, "command": self.command,
                               "by_engine": self.by_engine}
        if self.checks:
            out["checks"] = list(self.checks)
        if self.already:
            out["already"] = dict(self.already)
        if self.note:
            out["note"] = self.note
        if self.verified is not None:
            out["verified"] = self.verified.to_json()
        return out

    @classmethod
    def from_json(cls, data: Any) -> Fix:
        if not isinstance(data, dict):
            return cls(text="", engine=None, command=None)
        by_engine = data.get("by_engine")
        already = data.get("already")
        return cls(text=_s(data, "text"), engine=_opt_s(data, "engine"), command=_opt_s(data, "command"),
                   by_engine={str(k): str(v) for k, v in by_engine.items()} if isinstance(by_engine, dict) else {},
                   verified=Verified.from_json(data.get("verified")), checks=_str_list(data.get("checks")),
                   already={str(k): str(v) for k, v in already.items()} if isinstance(already, dict) else {},
                   note=_s(data, "note"))


@dataclass(slots=True)
class Sweep:
    """A measured sweep of one setting (`--verify`): threads, batch size, GPU layers."""

    setting: str  # n_threads | n_batch | n_gpu_layers
    measure: str  # "decode ms/token" | "prefill ms"
    rows: list[tuple[Any, float | None, str]] = field(default_factory=list)  # (value, figure, note)
    best: Any = None
    baseline: Any = None  # the value the first run used
    gain: float | None = None  # best vs baseline, as a fraction (0.25 = 25 % faster)
    note: str = ""  # why skipped, or a remark

    def to_json(self) -> dict[str, Any]:
        return {"setting": self.setting, "measure": self.measure,
                "rows": [{"value": v, "figure": f, "note": n} for v, f, n in self.rows],
                "best": self.best, "baseline": self.baseline, "gain": self.gain, "note": self.note}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Sweep:
        rows = [(r.get("value"), r.get("figure") if isinstance(r.get("figure"), (int, float)) else None,
                 str(r.get("note") or "")) for r in raw.get("rows") or [] if isinstance(r, dict)]
        gain = raw.get("gain")
        return cls(setting=_s(raw, "setting"), measure=_s(raw, "measure"), rows=rows,
                   best=raw.get("best"), baseline=raw.get("baseline"),
                   gain=gain if isinstance(gain, (int, float)) else None, note=_s(raw, "note"))


    def lines(self) -> list[str]:
        """A compact table: a head line with the best value and its gain, then value: figure cells."""
        if not self.rows:
            return [f"{self.setting}: {self.note}"]
        head = f"{self.setting} sweep ({self.measure})"
        if self.best is not None:
            head += f": best {self.best}"
            if self.best == self.baseline:
                head += " (what the run used)"
            elif self.gain is not None and self.baseline is not None:
                head += f", {self.gain:.0%} {'faster' if self.gain >= 0 else 'slower'} than {self.baseline}"
        elif self.note:
            head += f": {self.note}"
        cells = []
        for value, figure, note in self.rows:
            mark = "*" if value == self.best else ""
            cells.append(f"{value}{mark}: {self.cell(figure, note)}")
        return [head, "  " + " | ".join(cells)]

    @staticmethod
    def cell(figure: float | None, note: str) -> str:
        """A row's figure with its note ("41% of ceiling"), or the note alone where nothing was measured."""
        if isinstance(figure, (int, float)):
            return f"{figure:.1f}" + (f" ({note})" if note else "")
        return note or "-"


@dataclass(slots=True)
class Verification:
    """What --verify did: how long, how many runs, within what budget, and the sweeps."""

    seconds: float
    budget_s: float
    runs: int
    sweeps: list[Sweep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    processes: int | None = None  # engine processes the runs started (more than `runs` after a crash triage)

    def to_json(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 1), "budget_s": self.budget_s, "runs": self.runs,
                "processes": self.runs if self.processes is None else self.processes,
                "sweeps": [s.to_json() for s in self.sweeps], "notes": self.notes}

    @classmethod
    def from_json(cls, data: Any) -> Verification | None:
        if not isinstance(data, dict):
            return None
        sweeps = [Sweep.from_json(raw) for raw in data.get("sweeps") or [] if isinstance(raw, dict)]
        seconds, budget, runs = data.get("seconds"), data.get("budget_s"), data.get("runs")
        return cls(seconds=float(seconds) if isinstance(seconds, (int, float)) else 0.0,
                   budget_s=float(budget) if isinstance(budget, (int, float)) else 0.0,
                   runs=runs if isinstance(runs, int) else 0, sweeps=sweeps, notes=_str_list(data.get("notes")),
                   processes=data["processes"] if isinstance(data.get("processes"), int) else None)


@dataclass(slots=True)
class Finding:
    id: str
    slug: str
    cls: str
    area: str
    severity: Severity
    confidence: Confidence
    title: str
    message: str
    explain: str
    evidence: list[Evidence]
    fix: Fix
    references: list[str]
    inhibits: list[str] = field(default_factory=list)  # ids this finding hid
    session: int | None = None  # the engine session (Facts.sessions) it belongs to, when there are several

    @property
    def lines(self) -> list[int]:
        return sorted({e.line for e in self.evidence if e.line is not None})

    @property
    def key(self) -> str:
        """Stable across evaluations: the id, with the session number from the second session on (so
        the findings of a first session keep their key when a second one begins)."""
        return self.id if self.session is None or self.session <= 1 else f"{self.session}:{self.id}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id, "slug": self.slug, "class": self.cls, "area": self.area,
            "severity": self.severity, "confidence": self.confidence, "title": self.title,
            "message": self.message, "explain": self.explain,
            "evidence": [e.to_json() for e in self.evidence], "lines": self.lines,
            "fix": self.fix.to_json(), "references": self.references, "inhibits": self.inhibits,
        }
        if self.session is not None:
            out["session"] = self.session
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        evidence = data.get("evidence")
        return cls(
            id=_s(data, "id", "?"), slug=_s(data, "slug"), cls=_s(data, "class"), area=_s(data, "area", "Other"),
            severity=_severity(data, "info"), confidence=_confidence(data),
            title=_s(data, "title"), message=_s(data, "message"), explain=_s(data, "explain"),
            evidence=[Evidence.from_json(e) for e in evidence if isinstance(e, dict)]
            if isinstance(evidence, list) else [],
            fix=Fix.from_json(data.get("fix")), references=_str_list(data.get("references")),
            inhibits=_str_list(data.get("inhibits")),
            session=data["session"] if isinstance(data.get("session"), int) and not isinstance(data["session"], bool)
            else None,
        )


@dataclass(slots=True)
class SessionFindings:
    """One engine session of the input and what was found in it (the latest's are Report.findings)."""

    session: Session
    findings: list[Finding]

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.session.to_json().items() if k != "facts"}
        out["findings"] = [f.to_json() for f in self.findings]
        return out

    @classmethod
    def list_from_json(cls, data: Any, latest: list[Finding]) -> list[SessionFindings]:
        """A report's sessions; the last one's findings are the report's own."""
        if not isinstance(data, list):
            return []
        out: list[SessionFindings] = []
        for i, raw in enumerate(data[:MAX_SESSIONS]):
            if not isinstance(raw, dict):
                continue
            found = raw.get("findings")
            findings = (latest if i == len(data) - 1 else
                        [Finding.from_json(f) for f in found if isinstance(f, dict)] if isinstance(found, list)
                        else [])
            out.append(cls(Session.from_json({k: v for k, v in raw.items() if k != "facts"}), findings))
        return out


@dataclass(slots=True)
class Check:
    id: str
    slug: str
    cls: str
    area: str
    severity: Severity
    title: str
    outcome: CheckOutcome
    missing: list[str] = field(default_factory=list)
    inhibited_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "slug": self.slug, "class": self.cls, "area": self.area,
                               "severity": self.severity, "title": self.title, "outcome": self.outcome}
        if self.missing:
            out["missing"] = self.missing
        if self.inhibited_by:
            out["inhibited_by"] = self.inhibited_by
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Check:
        return cls(id=_s(data, "id", "?"), slug=_s(data, "slug"), cls=_s(data, "class"),
                   area=_s(data, "area", "Other"), severity=_severity(data, "info"),
                   title=_s(data, "title"), outcome=_outcome(data),
                   missing=_str_list(data.get("missing")), inhibited_by=_opt_s(data, "inhibited_by"))


@dataclass(slots=True)
class Assessment:
    id: str
    cls: str
    severity: Severity
    confidence: Confidence
    title: str
    message: str
    # the earlier session whose finding this is, when the latest session (a restart that did not get past
    # starting) shows nothing of its own; None: the latest session's
    session: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "class": self.cls, "severity": self.severity,
                               "confidence": self.confidence, "title": self.title, "message": self.message}
        if self.session is not None:
            out["session"] = self.session
        return out

    @classmethod
    def from_json(cls, data: Any) -> Assessment | None:
        if not isinstance(data, dict):
            return None
        session = data.get("session")
        return cls(id=_s(data, "id"), cls=_s(data, "class"), severity=_severity(data, "warning"),
                   confidence=_confidence(data), title=_s(data, "title"), message=_s(data, "message"),
                   session=session if isinstance(session, int) and not isinstance(session, bool) else None)


@dataclass(slots=True)
class Report:
    command: str
    engine: str | None
    facts: Facts
    findings: list[Finding] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    assessment: Assessment | None = None
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # how the rules judged (analyze of a saved scan judges as scan); "" = as the command says
    mode: Mode | Literal[""] = ""

    def __post_init__(self) -> None:
        if not self.mode and is_mode(self.command):
            self.mode = self.command
    # every engine session when the input held several, oldest first; the last is the one the
    # findings above are about, earlier ones keep theirs
    sessions: list[SessionFindings] = field(default_factory=list)

    @property
    def earlier(self) -> list[SessionFindings]:
        return self.sessions[:-1]

    def all_findings(self) -> list[Finding]:
        return [f for s in self.earlier for f in s.findings] + self.findings
    verification: Verification | None = None  # --verify

    def worst(self) -> Severity | None:
        severities = [f.severity for f in self.findings]
        if self._earlier_assessed() and self.assessment is not None:
            severities.append(self.assessment.severity)  # a restart that did not run clears nothing
        if not severities:
            return None
        return max(severities, key=lambda s: SEVERITY_RANK[s])

    def _earlier_assessed(self) -> bool:
        """The assessment is an earlier session's (the latest did not get past starting)."""
        return self.assessment is not None and self.assessment.session is not None

    def fails(self, threshold: FailOn) -> bool:
        """True when a finding is at or above `threshold` (error | warning | info | none)."""
        if threshold == "none":
            return False
        rank = SEVERITY_RANK[threshold]
        return any(SEVERITY_RANK[f.severity] >= rank for f in self.all_findings())

    def recognised(self) -> bool:
        """False when the input held nothing llm-doctor recognises as an engine's output (a file of other
        text, an empty input, a metrics URL that gave no metrics, a command that printed nothing known)."""
        return self.facts.value("run.recognised") is not False

    def verdict(self) -> Verdict:
        """problems | no_problems | unexplained | nothing_recognised: the one answer every view gives. Notes
        (info findings) are not problems; nothing recognised is never "no problems"; lines that read as errors
        which nothing explains (run.unexplained_errors, doctor/sources/logs/unexplained.py) are neither."""
        if any(f.severity in ("error", "warning") for f in self.findings) or self._earlier_assessed():
            return "problems"
        if self.unexplained():
            return "unexplained"
        return "no_problems" if self.recognised() else "nothing_recognised"

    def unexplained(self) -> int:
        """Lines of the input that read as errors and that no check explains (0: none)."""
        count = self.facts.value("run.unexplained_errors")
        return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0

    def verdict_text(self) -> str:
        """The verdict in words: the same sentence in text, Markdown, JSON and the TUI."""
        verdict = self.verdict()
        if verdict == "unexplained":
            n = self.unexplained()
            return (f"No known problem, but {n} line(s) read as errors that llm-doctor does not know (quoted under "
                    f"Engine process). This is not a clean bill of health.")
        if verdict == "nothing_recognised":
            return f"Nothing to judge: {self._seen()}. No check could use it, so this is not a clean bill of health."
        cut = self.cut_short()
        if verdict == "no_problems":
            thin = self.facts.value("derived.input_thin")
            if isinstance(thin, str) and thin != "one line":
                return (f"No problem in what was pasted, but it was only {thin}: the run itself was not seen "
                        f"({self.facts.value('derived.input_missing')}).")
            if cut:
                return f"No problems found in the part recorded. {cut}"
            return "No problems found in the latest session." if len(self.sessions) > 1 else "No problems found."
        head = f"Likely root cause: {self.assessment.title}." if self.assessment else "Problems found."
        note = self.input_note()
        return f"{head} {note}" if note else head

    def input_note(self) -> str | None:
        """Beside findings (a command's exit status): what in the input was not recognised, and whether
        a recording was cut short."""
        notes = [None if self.recognised() else f"Nothing else recognised: {self._seen()}.", self.cut_short()]
        return " ".join(n for n in notes if n) or None

    def cut_short(self) -> str | None:
        """A watch recording with no end, in words (None when it ended, or the input is no recording)."""
        if self.facts.value("run.recording_complete") is not False:
            return None
        return ("The recording was cut short (it has no end: the run, or watch, stopped before the run ended), "
                "so the rest of the run was not seen.")

    def _seen(self) -> str:
        fact = self.facts.get("run.recognised")
        return fact.source.text if fact is not None and fact.source.text else "no engine output was read"

    def counts(self) -> dict[str, int]:
        out = {"error": 0, "warning": 0, "info": 0, "ok": 0, "unknown": 0, "inhibited": 0}
        for f in self.findings:
            out[f.severity] += 1
        for c in self.checks:
            if c.outcome == "ok":
                out["ok"] += 1
            elif c.outcome == "unknown":
                out["unknown"] += 1
            elif c.inhibited_by:
                out["inhibited"] += 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "llm-doctor", "version": __version__},
            "command": self.command,
            "mode": self.mode,
            "engine": self.engine,
            "inputs": list(self.facts.inputs),
            # complete: false for a recording cut short (the verdict covers only the part recorded)
            "verdict": {"kind": self.verdict(), "text": self.verdict_text(), "complete": self.cut_short() is None},
            "assessment": self.assessment.to_json() if self.assessment else None,
            "summary": self.counts(),
            "findings": [f.to_json() for f in self.findings],
            "checks": [c.to_json() for c in self.checks],
            "facts": self.facts.to_json(),
            "errors": list(self.errors),
            "notes": list(self.notes),
            **({"sessions": [s.to_json() for s in self.sessions]} if self.sessions else {}),
            **({"verification": self.verification.to_json()} if self.verification is not None else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Report:
        """Rebuild a report from its JSON (`to_json()`), as `watch` sends it in its FindingEvent and EndEvent
        and as a saved report holds it. Lenient on purpose: a field that is missing or of the wrong type
        becomes empty rather than an error, because this JSON may come from another version of llm-doctor."""
        raw_facts = data.get("facts")
        try:
            facts = Facts.from_json(raw_facts) if isinstance(raw_facts, dict) else Facts()
        except ValueError:
            facts = Facts()
        findings = data.get("findings")
        checks = data.get("checks")
        latest = [Finding.from_json(f) for f in findings if isinstance(f, dict)] if isinstance(findings, list) else []
        return cls(
            command=_s(data, "command", "watch"),
            engine=_opt_s(data, "engine"),
            facts=facts,
            findings=latest,
            checks=[Check.from_json(c) for c in checks if isinstance(c, dict)] if isinstance(checks, list) else [],
            assessment=Assessment.from_json(data.get("assessment")),
            errors=_str_list(data.get("errors")),
            notes=_str_list(data.get("notes")),
            mode=_mode(data) or "",
            sessions=SessionFindings.list_from_json(data.get("sessions"), latest),
            verification=Verification.from_json(data.get("verification")),
        )


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


def _s(data: dict[str, Any], key: str, default: str = "") -> str:
    value = data.get(key)
    return value if isinstance(value, str) else default


def _opt_s(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def _opt_i(data: dict[str, Any], key: str) -> int | None:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []
