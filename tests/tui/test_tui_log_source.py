"""The log pane's reader: line numbers as the analyzer counts them, bounded reads, hostile text."""

from __future__ import annotations

import gzip
import io
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.sources.inputs import read_input
from doctor.views.tui import log_source
from doctor.views.tui.log_source import LogSource, is_plain_log

from .conftest import LOGS, TUI_FIXTURES


def _reference(data: bytes) -> list[str]:
    """Lines the way the analyzer numbers them (LF, CRLF as one end, CR alone without LF)."""
    text = data.decode("utf-8", errors="replace")
    if "\n" not in text[:65536] and "\r" in text[:65536]:
        parts = text.split("\r")
    else:
        parts = [p[:-1] if p.endswith("\r") else p for p in text.split("\n")]
    if parts and parts[-1] == "":
        parts.pop()
    return parts


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.text(alphabet="ab \t\r", max_size=30), max_size=60),
    first=st.integers(1, 70), count=st.integers(1, 20), chunk=st.integers(1, 40),
    crlf=st.booleans(), trailing=st.booleans(),
)
def test_windows_match_a_plain_split(lines: list[str], first: int, count: int, chunk: int, crlf: bool,
                                     trailing: bool) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(log_source, "CHUNK", chunk)
        _check_windows(lines, first, count, crlf, trailing)


def _check_windows(lines: list[str], first: int, count: int, crlf: bool, trailing: bool) -> None:
    lines = [line.replace("\r", "") for line in lines]
    end = "\r\n" if crlf else "\n"
    data = (end.join(lines) + (end if trailing and lines else "")).encode()
    expected = _reference(data)
    source = LogSource.from_bytes(data)
    # read twice (the second time from a checkpoint) and out of order
    for start in (first, 1, first):
        got = source.read(start, count)
        want = [(n, t.expandtabs(4)) for n, t in enumerate(expected, start=1)][start - 1:start - 1 + count]
        assert [(line.number, line.text) for line in got] == want
    assert source.read_tail(3) == source.read(max(1, len(expected) - 2), 3)
    assert source.total_lines == len(expected)


def test_cr_only_log_is_numbered_by_cr() -> None:
    source = LogSource.from_bytes(b"one\rtwo\rthree")
    assert [(line.number, line.text) for line in source.read(2, 5)] == [(2, "two"), (3, "three")]


def test_evidence_lines_match_the_analyzer(analyze) -> None:
    for path in (LOGS / "llama.cpp" / "pasted-issue-crlf.log", LOGS / "llama.cpp" / "cuda-oom-kv.log",
                 TUI_FIXTURES / "kv-oom.log"):
        report = analyze(path)
        source = LogSource.from_path(path)
        cited = [(e.line, e.text) for f in report.findings for e in f.evidence if e.kind == "log" and e.line]
        assert cited, path
        for line, text in cited:
            [shown] = source.read(line, 1)
            assert shown.number == line
            # evidence is the line, normalised; a line that placed a failure in the run's timeline leads with
            # what it shows in words ("[the weights had been placed] ...", doctor/sources/logs/timeline.py)
            quoted = re.sub(r"^\[[^\]]*\] ", "", text.strip())
            assert quoted[:60] in shown.text, (path, line)


def test_long_lines_are_cut_and_memory_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_source, "CHUNK", 1 << 12)
    huge = b"x" * (1 << 20)
    data = b"first\n" + huge + b"\nthird\n" + b"filler line\n" * 20000 + b"last"
    reads: list[int] = []

    class Counting(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            out = super().read(size)
            reads.append(len(out))
            return out

    source = LogSource(lambda: Counting(data), "big")
    second, third = source.read(2, 2)
    assert second.cut and len(second.text) == log_source.MAX_COLUMNS and set(second.text) == {"x"}
    assert third.text == "third" and not third.cut
    assert max(reads) <= 1 << 16  # never one big read of the file
    [last] = source.read(20004, 1)
    assert last.text == "last" and source.total_lines == 20004
    reads.clear()
    source.read(20003, 1)  # from a checkpoint: reads far less than the file again
    assert sum(reads) < len(data) // 10


def test_gzip_log(tmp_path: Path) -> None:
    path = tmp_path / "run.log.gz"
    path.write_bytes(gzip.compress(b"a\nb\nc\n"))
    assert [line.text for line in LogSource.from_path(path).read(2, 9)] == ["b", "c"]
    assert is_plain_log(path)


def test_hostile_lines_are_inert() -> None:
    data = (b"ok\n\x1b]52;c;ZXZpbA==\x07copy\x1b[2J\x1b[H\x1b]0;title\x07done\n"
            b"\x9b31mc1\x9dtitle\x9c \xe2\x80\xaebidi\x00nul\x08bs\n")
    a, b, c = LogSource.from_bytes(data).read(1, 3)
    assert a.text == "ok"
    assert b.text == "copydone"
    assert "\x1b" not in c.text and "\x9b" not in c.text and "\u202e" not in c.text
    assert "\\x00" in c.text and "\\x08" in c.text  # other controls shown, not sent


def test_saved_json_is_not_a_log(tmp_path: Path, recording: Path) -> None:
    saved = tmp_path / "scan.json"
    saved.write_text('{"llm_doctor": "facts", "facts": {}}\n')
    assert not is_plain_log(saved)
    assert not is_plain_log(recording)
    assert is_plain_log(TUI_FIXTURES / "kv-oom.log")
    assert read_input(str(TUI_FIXTURES / "kv-oom.log")).value("run.log_lines") == LogSource.from_path(
        TUI_FIXTURES / "kv-oom.log").read_tail(1)[0].number
