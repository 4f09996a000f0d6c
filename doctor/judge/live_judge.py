"""Live judgement: run the rules over the facts so far and say which findings fired or resolved.

Each `update(facts)` runs the whole pipeline (`doctor.judge.evaluate.diagnose`) on a fresh snapshot and
compares the findings with the previous evaluation: a new id is `fired`, a missing one `resolved`,
and one whose message or confidence changed (a loop that keeps growing, a median that moves) is
`updated` — at most every UPDATE_EVERY_MS per finding, so a stream of small changes stays quiet.
The final evaluation announces every change, so what the stream said last and what the report
says agree. While the engine is still loading (`run.loaded` false), findings judged on facts alone are
held back: start-up facts can still change, and a finding must not fire and then resolve.

Pure (the rules and facts are given). The core's side of a live run: the command builds a LiveJudge and
hands it to the source (doctor/sources/live/session.py takes any `Judge`), so sources never run the rules.
"""

from __future__ import annotations

from doctor.core.events import FindingEvent
from doctor.core.facts import Facts
from doctor.core.report import Finding, Report
from doctor.core.vocab import Mode
from doctor.judge.evaluate import SessionMemo, diagnose
from doctor.judge.rulebase import RuleBase

UPDATE_EVERY_MS = 2000.0


class LiveJudge:
    def __init__(self, rulebase: RuleBase, *, command: str = "watch", mode: Mode = "watch",
                 engine: str | None = None) -> None:
        self.rulebase = rulebase
        self.command = command
        self.mode = mode
        self.engine = engine
        self.active: dict[str, Finding] = {}
        self.announced_ms: dict[str, float] = {}
        self.evaluations = 0
        self.memo = SessionMemo()  # earlier sessions, judged once for this run

    def report(self, facts: Facts, errors: list[str] | None = None) -> Report:
        return diagnose(facts, self.rulebase, command=self.command, mode=self.mode, engine=self.engine,
                        errors=errors, memo=self.memo)

    def update(self, facts: Facts, t_ms: float = 0.0, errors: list[str] | None = None,
               final: bool = False) -> tuple[Report, list[FindingEvent]]:
        """Evaluate `facts` (a snapshot this call may modify) and return the report and the changes."""
        report = self.report(facts, errors)
        self.evaluations += 1
        return report, self.diff(report, t_ms, final)

    def diff(self, report: Report, t_ms: float, final: bool = False) -> list[FindingEvent]:
        # every session's findings, by a key that stays the same when a new session begins: a finding of
        # an earlier session is not "resolved" because a later run does not have it
        now = {f.key: f for f in report.all_findings()}
        if not final and report.facts.value("run.loaded") is False:
            # the engine is still starting: facts read so far may yet change (a GPU backend line after a
            # CPU-only system line), so a finding judged on facts alone waits until loading is over; one
            # with an event behind it (an OOM, a failed load) is settled and is announced at once
            now = {key: f for key, f in now.items() if key in self.active or _has_event(f)}
        changes: list[FindingEvent] = []
        for fid, finding in now.items():
            before = self.active.get(fid)
            if before is None:
                changes.append(FindingEvent(t_ms=t_ms, state="fired", finding=finding.to_json()))
                self.announced_ms[fid] = t_ms
            elif (before.message, before.confidence) != (finding.message, finding.confidence):
                if final or t_ms - self.announced_ms.get(fid, 0.0) >= UPDATE_EVERY_MS:
                    changes.append(FindingEvent(t_ms=t_ms, state="updated", finding=finding.to_json()))
                    self.announced_ms[fid] = t_ms
                else:
                    now[fid] = before  # keep the announced version until the next announcement
        for fid, finding in self.active.items():
            if fid not in now:
                changes.append(FindingEvent(t_ms=t_ms, state="resolved", finding=finding.to_json()))
                self.announced_ms.pop(fid, None)
        self.active = now
        return changes


def _has_event(finding: Finding) -> bool:
    return any(e.kind == "log" for e in finding.evidence)
