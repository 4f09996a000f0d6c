"""The report model: findings with evidence and fixes, every check's outcome, the assessment.

Views (text, JSON, Markdown, TUI) only render a Report; nothing here renders or does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from doctor import __version__
from doctor.facts import Facts, Session
from doctor.vocab import CONFIDENCE_RANK as CONFIDENCE_RANK  # re-exported: views rank findings with them
from doctor.vocab import SEVERITY_RANK as SEVERITY_RANK
from doctor.vocab import (
    CheckOutcome,
    Confidence,
    FailOn,
    Mode,
    Severity,
    Verdict,
    VerifyOutcome,
    is_mode,
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


@dataclass(slots=True)
class Fix:
    text: str
    engine: str | None  # the engine the command is for
    command: str | None  # the command / setting for that engine
    by_engine: dict[str, str] = field(default_factory=dict)
    verified: Verified | None = None  # set by --verify

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text, "engine": self.engine, "command": self.command,
                               "by_engine": self.by_engine}
        if self.verified is not None:
            out["verified"] = self.verified.to_json()
        return out


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
            shown = f"{figure:.1f}" if isinstance(figure, (int, float)) else (note or "-")
            cells.append(f"{value}{mark}: {shown}")
        return [head, "  " + " | ".join(cells)]


@dataclass(slots=True)
class Verification:
    """What --verify did: how long, how many runs, within what budget, and the sweeps."""

    seconds: float
    budget_s: float
    runs: int
    sweeps: list[Sweep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 1), "budget_s": self.budget_s, "runs": self.runs,
                "sweeps": [s.to_json() for s in self.sweeps], "notes": self.notes}


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


@dataclass(slots=True)
class SessionFindings:
    """One engine session of the input and what was found in it (the latest's are Report.findings)."""

    session: Session
    findings: list[Finding]

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.session.to_json().items() if k != "facts"}
        out["findings"] = [f.to_json() for f in self.findings]
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


@dataclass(slots=True)
class Assessment:
    id: str
    cls: str
    severity: Severity
    confidence: Confidence
    title: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "class": self.cls, "severity": self.severity, "confidence": self.confidence,
                "title": self.title, "message": self.message}


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
        if not self.findings:
            return None
        return max(self.findings, key=lambda f: SEVERITY_RANK[f.severity]).severity

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
        """problems | no_problems | nothing_recognised: the one answer every view gives. Notes (info
        findings) are not problems; nothing recognised is never "no problems"."""
        if any(f.severity in ("error", "warning") for f in self.findings):
            return "problems"
        return "no_problems" if self.recognised() else "nothing_recognised"

    def verdict_text(self) -> str:
        """The verdict in words: the same sentence in text, Markdown, JSON and the TUI."""
        verdict = self.verdict()
        if verdict == "nothing_recognised":
            return f"Nothing to judge: {self._seen()}. No check could use it, so this is not a clean bill of health."
        if verdict == "no_problems":
            return "No problems found in the latest session." if len(self.sessions) > 1 else "No problems found."
        head = f"Likely root cause: {self.assessment.title}." if self.assessment else "Problems found."
        note = self.unrecognised_note()
        return f"{head} {note}" if note else head

    def unrecognised_note(self) -> str | None:
        """Beside findings (a command's exit status): what in the input was not recognised."""
        return None if self.recognised() else f"Nothing else recognised: {self._seen()}."

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
            "verdict": {"kind": self.verdict(), "text": self.verdict_text()},
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
