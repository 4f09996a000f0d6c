"""Two engine sessions in one input keep their facts apart (issue 13 item 3): `cat a.log b.log`,
journalctl across a restart, a followed log that is truncated or rotated. Findings and line numbers
belong to their session; the report leads with the latest and keeps the earlier ones' findings."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from doctor.core.events import FindingEvent, LiveEvent, NoticeEvent
from doctor.core.report import Report
from doctor.judge.evaluate import SessionMemo, diagnose
from doctor.judge.live_judge import LiveJudge
from doctor.judge.rulebase import RuleBase
from doctor.sources.live.follow.follower import follow_log
from doctor.sources.live.recording import facts_from_recording
from doctor.sources.live.session import TraceSession
from doctor.sources.logs.entry import analyze_bytes
from doctor.views.render.markdown import render_markdown
from doctor.views.render.style import Style
from doctor.views.render.text import render_text

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
SLOTS = LOGS / "llama.cpp" / "server-slots-truncated.log"  # 4 slots of 2048: a 3174-token request cut
FULL = LOGS / "llama-server" / "session-slowdown-then-full.log"  # one slot of 4096 that fills up


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines())


def test_cat_of_two_server_logs_is_two_sessions(rulebase: RuleBase) -> None:
    facts = analyze_bytes(SLOTS.read_bytes() + FULL.read_bytes(), "stdin")
    first, latest = facts.sessions
    assert (first.first_line, first.last_line, first.started_by) == (1, _lines(SLOTS), "input")
    assert (latest.first_line, latest.last_line, latest.started_by) == (_lines(SLOTS) + 1,
                                                                        _lines(SLOTS) + _lines(FULL), "engine start")
    assert facts.value("config.n_parallel") == 1  # the latest run's settings, not the first run's 4 slots
    report = diagnose(facts, rulebase, command="analyze", mode="analyze")
    # the first run's real finding stays visible, with its own numbers and lines
    earlier = report.sessions[0]
    slot = next(f for f in earlier.findings if f.id == "LD203")
    assert slot.session == 1 and "3174" in slot.message and max(slot.lines) <= _lines(SLOTS)
    # ... and nothing of the latest run mixes numbers from both
    assert all("3174" not in f.message for f in report.findings)
    assert {f.id for f in report.findings} >= {"LD202"} and all(f.session == 2 for f in report.findings)
    assert report.fails("error")
    text = render_text(report, Style(colour=False, unicode=True))
    assert "2 engine sessions in this input" in text and "Earlier session 1: lines 1-73" in text
    assert "LD203" in text
    markdown = render_markdown(report)
    assert "## Earlier session 1" in markdown
    doc = report.to_json()
    assert [s["number"] for s in doc["sessions"]] == [1, 2]
    assert doc["sessions"][0]["findings"][0]["session"] == 1
    back = Report.from_json(json.loads(json.dumps(doc)))  # what the TUI and a saved report read back
    assert [(s.session.number, [f.id for f in s.findings]) for s in back.sessions] == [
        (s.session.number, [f.id for f in s.findings]) for s in report.sessions]


def test_closed_session_is_judged_once_with_the_callers_memo(rulebase: RuleBase) -> None:
    """The memo of judged sessions is the caller's (the live judge holds one), not a module global."""
    facts = analyze_bytes(SLOTS.read_bytes() + FULL.read_bytes(), "stdin")
    memo = SessionMemo()
    first = diagnose(facts, rulebase, command="analyze", mode="analyze", memo=memo)
    again = diagnose(facts, rulebase, command="analyze", mode="analyze", memo=memo)
    assert again.sessions[0].findings is first.sessions[0].findings  # judged once
    assert "LD203" in {f.id for f in again.sessions[0].findings}
    fresh = diagnose(facts, rulebase, command="analyze", mode="analyze")  # no memo: judged afresh
    assert fresh.sessions[0].findings is not first.sessions[0].findings
    assert [f.id for f in fresh.sessions[0].findings] == [f.id for f in first.sessions[0].findings]
    other = diagnose(facts, rulebase, command="analyze", mode="watch", memo=memo)  # other options: not reused
    assert other.sessions[0].findings is not first.sessions[0].findings
    judge = LiveJudge(rulebase, mode="analyze")
    a, _ = judge.update(facts, 0.0)
    b, _ = judge.update(facts, 100.0)
    assert b.sessions[0].findings is a.sessions[0].findings


def test_journalctl_across_a_vllm_restart() -> None:
    a = (LOGS / "vllm" / "preemption-v0.34.log").read_bytes()
    b = (LOGS / "vllm" / "healthy-v0.34.log").read_bytes()
    facts = analyze_bytes(a + b, "journal")
    assert [s.engine for s in facts.sessions] == ["vllm", "vllm"]
    assert facts.sessions[1].first_line == len(a.splitlines()) + 1
    assert facts.event_count("preempted") == 0  # the preemptions were the first run's
    assert facts.sessions[0].facts is not None and facts.sessions[0].facts.event_count("preempted") > 0


def test_one_log_is_one_session() -> None:
    assert analyze_bytes(FULL.read_bytes(), "x").sessions == []
    assert analyze_bytes(SLOTS.read_bytes(), "x").sessions == []


def _follow_and_replace(tmp_path: Path, rulebase: RuleBase, how: str) -> tuple[TraceSession, list[LiveEvent], Path]:
    path = tmp_path / "server.log"
    path.write_bytes(SLOTS.read_bytes())
    events: list[LiveEvent] = []
    record = tmp_path / "run.ndjson"
    session = TraceSession(path.name, source="log", judge=LiveJudge(rulebase), on_event=events.append,
                           keep_events=False, eval_interval_s=0.0, record=str(record))
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        if calls["n"] == 2:
            if how == "truncated":
                with path.open("r+b") as h:
                    h.truncate(0)
            else:
                os.rename(path, tmp_path / "server.log.1")
                path.write_bytes(b"")
        elif calls["n"] == 4:
            with path.open("ab") as h:
                h.write(FULL.read_bytes())
        return False

    follow_log(str(path), session, stop=stop, until_idle_s=0.5, poll_s=0.01)
    return session, events, record


@pytest.mark.parametrize("how", ["truncated", "rotated"])
def test_a_followed_log_that_starts_over_is_a_new_session(tmp_path: Path, rulebase: RuleBase, how: str) -> None:
    session, events, record = _follow_and_replace(tmp_path, rulebase, how)
    report = session.report
    assert report is not None
    notices = [e for e in events if isinstance(e, NoticeEvent)]
    assert [n.session for n in notices] == [how] and f"after line {_lines(SLOTS)}" in notices[0].text
    assert report.errors == []  # a notice, not "error:"
    first, latest = (s.session for s in report.sessions)
    assert (first.first_line, first.last_line) == (1, _lines(SLOTS))
    assert (latest.first_line, latest.last_line, latest.started_by) == (1, _lines(FULL), how)
    # line numbers restart with the new file: no evidence past its end
    assert report.findings and all(max(f.lines, default=0) <= _lines(FULL) for f in report.findings)
    full = next(f for f in report.findings if f.id == "LD202")
    assert full.lines == [65, 66, 67]  # where FULL itself has them
    # the first file's real finding is kept, and never announced as resolved
    assert any(f.id == "LD203" for f in report.sessions[0].findings)
    resolved = [e.finding["id"] for e in events if isinstance(e, FindingEvent) and e.state == "resolved"]
    assert "LD203" not in resolved
    assert "Earlier session 1" in render_text(report, Style(colour=False, unicode=True))
    # the ndjson stream and the recording carry the notice, and a replay finds the same sessions
    assert any(json.loads(line).get("kind") == "notice" for line in record.read_text().splitlines()[1:])
    with record.open("rb") as handle:
        replayed = facts_from_recording(handle, "run.ndjson")
    assert [(s.first_line, s.last_line, s.started_by) for s in replayed.sessions] == [
        (1, _lines(SLOTS), "input"), (1, _lines(FULL), how)]


def test_the_tui_lists_earlier_sessions_findings(rulebase: RuleBase) -> None:
    from doctor.views.tui.view import group_checks, header_info

    facts = analyze_bytes(SLOTS.read_bytes() + FULL.read_bytes(), "stdin")
    report = diagnose(facts, rulebase, command="analyze", mode="analyze")
    groups = group_checks(report)
    earlier = [g for g in groups if g.area.startswith("Earlier session 1")]
    assert [r.id for g in earlier for r in g.rows] == ["s1:LD203"]
    ids = [r.id for g in groups for r in g.rows]
    assert len(ids) == len(set(ids))  # option ids stay unique
    assert "session 2 of 2" in header_info(report).source


def test_cat_a_b_into_analyze_stdin_keeps_the_first_runs_error() -> None:
    import subprocess
    import sys

    lcp = LOGS / "llama-cpp-python"
    data = (lcp / "prompt-too-long.log").read_bytes() + (lcp / "healthy.log").read_bytes()
    proc = subprocess.run([sys.executable, "-m", "doctor", "analyze", "-", "--no-tui", "--format", "text"],
                          input=data, capture_output=True, env={**os.environ, "NO_COLOR": "1"},
                          cwd=LOGS.parents[1], timeout=120, check=False)
    out = proc.stdout.decode()
    assert "2 engine sessions in this input" in out and "No problems found in the latest session." in out
    assert "Earlier session 1" in out and "LD201" in out  # the first run's rejected prompt, still shown
    assert proc.returncode == 1  # ... and it still fails the run


def test_redact_covers_every_session(rulebase: RuleBase) -> None:
    from doctor.core.redact import Redactor

    first = SLOTS.read_bytes().replace(b"/srv/llm/", b"/home/alice/models/")
    facts = analyze_bytes(first + FULL.read_bytes(), "stdin")
    report = diagnose(facts, rulebase, command="analyze", mode="analyze")
    assert "/home/alice" in json.dumps(report.to_json())  # the first session's start line names the path
    redacted = Redactor(users=["alice"]).report(report)
    doc = json.dumps(redacted.to_json())
    assert "alice" not in doc and len(redacted.sessions) == 2 and redacted.sessions[0].findings
    # the earlier session's own facts are kept, redacted, so the saved report can be judged again
    kept = redacted.facts.sessions[0].facts
    assert kept is not None and "~/models/" in str(kept.value("model.path"))


def test_a_restart_that_did_not_get_past_starting_keeps_the_run_before_it(rulebase: RuleBase) -> None:
    """The input ends with the engine's start-up lines (build, system info, the model being loaded): that run
    shows nothing of its own, so the assessment is the run before it's, said as such."""
    start = b"".join(FULL.read_bytes().splitlines(True)[:6])  # build ... "srv    load_model: loading model"
    facts = analyze_bytes(SLOTS.read_bytes() + start, "stdin")
    first, latest = facts.sessions
    assert latest.started_by == "engine start" and latest.ran is False and first.ran
    report = diagnose(facts, rulebase, command="analyze", mode="analyze")
    assert report.assessment is not None and (report.assessment.id, report.assessment.session) == ("LD203", 1)
    assert report.assessment.message.startswith("Session 1 (the run before the restart")
    # a restart that ran (its own requests) is judged on its own
    facts = analyze_bytes(SLOTS.read_bytes() + FULL.read_bytes(), "stdin")
    assert facts.sessions[-1].ran
    assert diagnose(facts, rulebase, command="analyze", mode="analyze").assessment.session != 1  # type: ignore[union-attr]
