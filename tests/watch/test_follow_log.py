"""`watch --log`: tail -F semantics, and a followed log giving the same findings as analyze."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.core.events import FindingEvent, LiveEvent, LogEvent
from doctor.core.lines import LineSplitter, block_lines
from doctor.judge.live_judge import LiveJudge
from doctor.judge.rulebase import RuleBase
from doctor.sources.live.follow.follower import LogFollower, follow_log
from doctor.sources.live.session import TraceSession

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "fixtures" / "logs"
SERVER_LOG = LOGS / "llama-server" / "session-slowdown-then-full.log"


def _data(changes: list) -> bytes:
    return b"".join(c.data for c in changes if c.kind == "data")


def _notes(changes: list) -> list[str]:
    return [c.text for c in changes if c.kind == "note"]


def test_appends_are_read_as_they_arrive(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(b"one\n")
    f = LogFollower(str(path))
    assert _data(f.poll()) == b"one\n"
    assert _data(f.poll()) == b""
    with path.open("ab") as h:
        h.write(b"two\nthr")
    assert _data(f.poll()) == b"two\nthr"
    with path.open("ab") as h:
        h.write(b"ee\n")
    assert _data(f.poll()) == b"ee\n"
    f.close()


def test_from_end_skips_what_is_there(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(b"old line\n" * 100)
    f = LogFollower(str(path), from_start=False)
    first = f.poll()
    assert _data(first) == b""
    assert "from its end" in _notes(first)[0]
    with path.open("ab") as h:
        h.write(b"new\n")
    assert _data(f.poll()) == b"new\n"
    f.close()


def test_truncation_restarts_from_the_top(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(b"a long first line of the old content\n")
    f = LogFollower(str(path))
    f.poll()
    path.write_bytes(b"fresh\n")  # copytruncate / `> file`: same inode, smaller
    changes = f.poll()
    assert any("truncated" in n for n in _notes(changes))
    assert _data(changes) == b"fresh\n"
    f.close()


def test_rotation_finishes_the_old_file_then_follows_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(b"before\n")
    f = LogFollower(str(path))
    assert _data(f.poll()) == b"before\n"
    with path.open("ab") as h:
        h.write(b"last words of the old file\n")
    os.rename(path, tmp_path / "server.log.1")  # logrotate: rename, then create
    path.write_bytes(b"first line of the new file\n")
    changes = f.poll()
    assert _data(changes) == b"last words of the old file\nfirst line of the new file\n"
    assert any("rotated" in n for n in _notes(changes))
    with path.open("ab") as h:
        h.write(b"more\n")
    assert _data(f.poll()) == b"more\n"
    f.close()


def test_a_file_that_is_not_there_yet_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "later.log"
    f = LogFollower(str(path))
    assert "waiting" in _notes(f.poll())[0]
    assert f.poll() == []  # said once
    path.write_bytes(b"hello\n")
    assert _data(f.poll()) == b"hello\n"
    f.close()


def test_reads_are_bounded_per_poll(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_bytes(b"x" * 100_000 + b"\n")
    f = LogFollower(str(path), chunk=4096)
    assert len(_data(f.poll())) == 4096
    f.close()


def test_line_splitter_holds_partial_lines_and_cuts_huge_ones() -> None:
    s = LineSplitter(max_line=10)
    assert s.feed(b"ab") == []
    assert s.feed(b"c\r\nde") == [b"abc"]
    assert s.feed(b"f\n") == [b"def"]
    assert s.feed(b"0123456789ABCDEF") == [b"0123456789"]  # the head of an over-long line
    assert s.feed(b"GHIJ\nok\n") == [b"ok"]  # the rest of it is skipped
    assert s.feed(b"tail") == []
    assert s.finish() == [b"tail"]



@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\r\n", b"0123456789AB", b""]), max_size=40),
       st.lists(st.integers(1, 30), min_size=1, max_size=10))
def test_blocks_hold_the_same_lines_however_the_bytes_arrive(pieces: list[bytes], cuts: list[int]) -> None:
    """Whatever the read sizes, the blocks split into the lines one pass over all the bytes gives."""
    data = b"".join(pieces)
    whole = LineSplitter(max_line=10)
    expected = whole.feed(data) + whole.finish()
    s = LineSplitter(max_line=10)
    got: list[bytes] = []
    pos, i = 0, 0
    while pos < len(data):
        step = cuts[i % len(cuts)]
        got += block_lines(s.feed_block(data[pos:pos + step]), 10)
        pos, i = pos + step, i + 1
    got += block_lines(s.finish_block(), 10)
    assert got == expected


def test_block_lines_can_take_only_the_last_ones() -> None:
    block = b"one\ntwo\r\nthree\n"
    assert block_lines(block) == [b"one", b"two", b"three"]
    assert block_lines(block, last=2) == [b"two", b"three"]
    assert block_lines(block, last=5) == [b"one", b"two", b"three"]
    assert block_lines(block, last=0) == []
    assert block_lines(b"") == []

def _follow(path: Path, rulebase: RuleBase, events: list[LiveEvent] | None = None):
    session = TraceSession(path.name, source="log", judge=LiveJudge(rulebase, mode="analyze"),
                           on_event=events.append if events is not None else None, keep_events=False)
    follow_log(str(path), session, stop=lambda: False, until_idle_s=0.0, poll_s=0.01)
    return session.report


# every log fixture of every engine (Ollama, vLLM, TGI, pasted issues...): what analyze reads in one
# go, watch --log reads as it grows
ALL_LOGS = sorted(p for p in LOGS.rglob("*") if p.is_file() and p.suffix in (".log", ".md", ".txt")
                  and p.name != "README.md" and "buffers" not in p.parts)


@pytest.mark.parametrize("path", ALL_LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_followed_log_gives_the_same_findings_as_analyze(path: Path, analyze, rulebase: RuleBase) -> None:
    expected = analyze(path)
    followed = _follow(path, rulebase)
    assert [(f.id, f.confidence) for f in followed.findings] == [(f.id, f.confidence) for f in expected.findings]
    for mine, theirs in zip(followed.findings, expected.findings, strict=True):
        assert mine.lines == theirs.lines  # the same evidence lines


def test_findings_fire_as_the_lines_arrive(tmp_path: Path, rulebase: RuleBase) -> None:
    lines = SERVER_LOG.read_bytes().splitlines(keepends=True)
    slow_at = next(i for i, line in enumerate(lines) if b"tg_3s =   7.32" in line)
    full_at = next(i for i, line in enumerate(lines) if b"failed to find a memory slot" in line)
    path = tmp_path / "server.log"
    path.write_bytes(b"")
    events: list[LiveEvent] = []
    session = TraceSession("server.log", source="log", judge=LiveJudge(rulebase), on_event=events.append,
                           keep_events=False, eval_interval_s=0.0)
    follower_state = {"written": 0}

    def write_more() -> bool:
        """Append a few lines per poll, like a server writing its log; stop when all are written."""
        n = follower_state["written"]
        if n >= len(lines):
            return True
        with path.open("ab") as h:
            h.writelines(lines[n:n + 3])
        follower_state["written"] = n + 3
        return False

    follow_log(str(path), session, stop=write_more, poll_s=0.0)
    fired = [(e.finding["id"], _lines_before(events, e)) for e in events
             if isinstance(e, FindingEvent) and e.state == "fired"]
    by_id = dict(fired)
    assert "LD802" in by_id and "LD202" in by_id
    # each finding fired once the lines that show it had arrived, and the rate swing long before the end
    assert slow_at < by_id["LD802"] <= full_at
    assert by_id["LD202"] > full_at


def _lines_before(events: list[LiveEvent], finding: FindingEvent) -> int:
    count = 0
    for e in events:
        if e is finding:
            return count
        if isinstance(e, LogEvent):
            count += 1
    return count


def _follow_with(path: Path, rulebase: RuleBase, line_events: str, record: Path | None = None
                 ) -> tuple[TraceSession, list[LiveEvent]]:
    seen: list[LiveEvent] = []
    session = TraceSession(path.name, source="log", judge=LiveJudge(rulebase), on_event=seen.append,
                           keep_events=False, line_events=line_events, record=str(record) if record else None)
    follow_log(str(path), session, stop=lambda: False, until_idle_s=0.2, poll_s=0.01)
    return session, seen


@pytest.mark.parametrize("mode", ["all", "tail", "none"])
def test_every_line_is_parsed_whatever_the_consumer_is_shown(tmp_path: Path, rulebase: RuleBase, mode: str) -> None:
    """The ticker and the final-report formats get no LogEvents, the TUI the newest of each batch;
    the parsers, the findings, the line count and the recording are the same in every mode."""
    from doctor.sources.live.recording import read_recording

    path = tmp_path / "server.log"
    path.write_bytes(SERVER_LOG.read_bytes() * 3)
    total = path.read_bytes().count(b"\n")
    record = tmp_path / "run.jsonl"
    session, seen = _follow_with(path, rulebase, mode, record)
    shown = [e for e in seen if isinstance(e, LogEvent)]
    if mode == "all":
        assert [e.line for e in shown] == list(range(1, total + 1))
    elif mode == "tail":  # one read holds the whole file: its newest 200 lines
        assert [e.line for e in shown] == list(range(total - 199, total + 1))
        assert shown[-1].text == SERVER_LOG.read_text().splitlines()[-1]
    else:
        assert shown == []
    report = session.report
    assert report is not None and report.facts.value("run.log_lines") == total
    assert {"LD202", "LD802"} <= {f.id for f in report.findings}
    with record.open("rb") as handle:
        _, events, damaged = read_recording(handle)
    assert damaged == 0 and [e.line for e in events if isinstance(e, LogEvent)] == list(range(1, total + 1))


def test_a_followed_log_with_cr_only_line_ends(tmp_path: Path, rulebase: RuleBase) -> None:
    """Progress output saved to a file: lines end in a lone CR. Read as lines, as analyze reads them."""
    path = tmp_path / "server.log"
    text = SERVER_LOG.read_bytes()
    path.write_bytes(text.replace(b"\n", b"\r"))
    session, _ = _follow_with(path, rulebase, "none")
    assert session.report is not None
    assert session.report.facts.value("run.log_lines") == text.count(b"\n")
    assert {"LD202", "LD802"} <= {f.id for f in session.report.findings}


def test_a_pipe_never_guesses_cr_line_ends() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"\rloading 10%\rloading 20%") == []
    assert splitter.feed(b"\ndone\n") == [b"\rloading 10%\rloading 20%", b"done"]
    files = LineSplitter(sniff_cr=True)
    # a file's head decides (doctor/core/lines.py): no LF yet, too short to tell -> held until it ends
    assert files.feed(b"one\rtwo\r") == []
    assert files.finish() == [b"one", b"two"]
    # ... or until an LF shows: a CR at the end of a read was half of a CRLF, not a CR-only file
    files = LineSplitter(sniff_cr=True)
    assert files.feed(b"one\r") == []
    assert files.feed(b"\ntwo\r\n") == [b"one", b"two"]
