"""The line policy (doctor/core/lines.py): every reader of log bytes gives the same line numbers and
texts — the analyzer's scanner, the follower of `watch --log` fed in any read sizes, and the TUI's
log pane — so a finding's line N is the line the pane shows as N."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.core.events import LiveEvent, LogEvent
from doctor.core.lines import MAX_LINE, SNIFF, EndSniffer, LineSplitter, block_lines, decode, split_lines
from doctor.core.sanitize import strip_controls
from doctor.sources.live.follow.follower import follow_log
from doctor.sources.live.session import TraceSession
from doctor.sources.logs.entry import analyze_bytes
from doctor.sources.logs.stream import LineScanner
from doctor.views.tui import log_source
from doctor.views.tui.log_source import LogSource, shown

ROOT = Path(__file__).resolve().parents[2]
KV_OOM = ROOT / "fixtures" / "traces" / "tui" / "kv-oom.log"  # a real llama.cpp log, just under SNIFF
SERVER_LOG = ROOT / "fixtures" / "logs" / "llama-server" / "session-slowdown-then-full.log"

SAMPLES: dict[str, bytes] = {
    "lf": b"one\ntwo\n\nfour\n",
    "crlf": b"one\r\ntwo\r\n\r\nfour\r\n",
    "cr only": b"one\rtwo\r\rfour\r",
    "cr only, no final cr": b"a\rb",
    "progress bars in an lf file": b"loading 10%\rloading 50%\rloading 100%\ndone\r\n\rredrawn\n",
    "a cr-only start, an lf within the sniff window": b"10%\r20%\r" + b"ok\n",
    "cr-only head, lf and crlf past the sniff window": b"progress 42%\r" * (SNIFF // 13 + 10) + b"a\r\nb\nc",
    "a line over the cut": b"head\n" + b"x" * (MAX_LINE + 100) + b"\nafter\n",
    "a huge line, no newline at its end": b"first\n" + b"z" * (5 * MAX_LINE) + b"\tend",
    "a crlf at the cut": b"y" * MAX_LINE + b"\r\n" + b"w" * (MAX_LINE + 1) + b"\r\nnext\r\n",
    "a cr inside a line past the cut": b"v" * MAX_LINE + b"\rmore\nlast\n",
    "non-utf-8": b"caf\xc3\xa9 \xff\xfe bad\n\x00nul\x08bs\n\xc3\n",
    "a character cut in half": b"\xe2\x82\xac" * (MAX_LINE // 3 + 5) + b"\nafter\n",
    "no final newline": b"a\nb",
    "no final newline, a lone cr last": b"a\r\nb\r",
    "escape sequences": b"\x1b[31mred\x1b[0m\n\x1b]0;title\x07t\n\x1b[2K\rprogress\n\x9b31mc1\n",
    "empty": b"",
    "one empty line": b"\n",
    "one empty crlf line": b"\r\n",
}


def reference(data: bytes) -> list[bytes]:
    """The policy, written plainly for the whole input at once: line N is item N - 1."""
    head = data[:SNIFF]
    if b"\n" not in head and b"\r" in head:
        data = data.replace(b"\r", b"\n")
    parts = data.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    return [(p[:-1] if p.endswith(b"\r") else p)[:MAX_LINE] for p in parts]


def _pieces(data: bytes, sizes: list[int]) -> list[bytes]:
    """`data` cut into reads of the given sizes (cycled; at least len/500 each, to keep big ones fast)."""
    floor = max(1, len(data) // 500)
    out, pos, i = [], 0, 0
    while pos < len(data):
        step = max(sizes[i % len(sizes)], floor)
        out.append(data[pos:pos + step])
        pos, i = pos + step, i + 1
    return out


EVERY_LINE = re.compile(rb"[^\r\n]")  # a trigger on every line that has a byte besides its end


def analyzer_lines(pieces: list[bytes], hold_last: bool) -> tuple[list[tuple[int, bytes]], int]:
    """The analyzer's reader: its candidate lines (every line with a byte) and its line count."""
    scanner = LineScanner(EVERY_LINE)
    scanner.hold_last = hold_last
    got: list[tuple[int, bytes]] = []
    for piece in pieces:
        got += [(r.number, r.text) for r in scanner.feed(piece) if r.text is not None]
    got += [(r.number, r.text) for r in scanner.finish() if r.text is not None]
    return got, scanner.lines


def follower_lines(pieces: list[bytes]) -> list[bytes]:
    """The follower's splitter (a file: sniffed), fed read by read."""
    splitter = LineSplitter(sniff_cr=True)
    got: list[bytes] = []
    for piece in pieces:
        got += block_lines(splitter.feed_block(piece))
    return got + block_lines(splitter.finish_block())


def pane_lines(data: bytes, chunk: int, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str, bool]]:
    monkeypatch.setattr(log_source, "CHUNK", chunk)
    source = LogSource.from_bytes(data)
    return [(line.number, line.text, line.cut) for line in source.read(1, 1 << 20)]


def _check(data: bytes, pieces: list[bytes], chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = reference(data)
    assert split_lines(data) == expected
    assert follower_lines(pieces) == expected
    for hold_last in (False, True):
        candidates, count = analyzer_lines(pieces, hold_last)
        assert count == len(expected)
        assert candidates == [(n, line) for n, line in enumerate(expected, 1) if EVERY_LINE.search(line)]
    pane = pane_lines(data, chunk, monkeypatch)
    assert [(n, text) for n, text, _ in pane] == [(n, shown(decode(line))[0]) for n, line in enumerate(expected, 1)]


@pytest.mark.parametrize("name", SAMPLES)
def test_every_reader_numbers_the_same_lines(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = SAMPLES[name]
    _check(data, [data] if data else [], log_source.CHUNK, monkeypatch)


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(sorted(SAMPLES)), sizes=st.lists(st.integers(1, 70_000), min_size=1, max_size=8),
       chunk=st.sampled_from([1, 2, 7, 4096, 1 << 20]))
def test_read_sizes_do_not_move_a_line(name: str, sizes: list[int], chunk: int) -> None:
    data = SAMPLES[name]
    with pytest.MonkeyPatch.context() as mp:
        _check(data, _pieces(data, sizes), chunk if len(data) < 4096 or chunk > 2 else 4096, mp)


@pytest.mark.parametrize("name", [n for n, d in SAMPLES.items() if b"\r" in d and len(d) < 4 * SNIFF])
def test_a_crlf_split_between_two_reads(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read that ends in the CR of a CRLF: the LF in the next read makes them one line end."""
    data = SAMPLES[name]
    cuts = [m.end() for m in re.finditer(rb"\r", data)][:20]
    for cut in cuts:
        _check(data, [data[:cut], data[cut:]], 4096, monkeypatch)


def test_the_head_of_the_input_decides_not_the_first_read() -> None:
    sniffer = EndSniffer()
    assert sniffer.feed(b"50%\r") == b""  # too little to tell: held
    assert sniffer.feed(b"\n") == b"50%\r\n"  # an LF: an LF file, the CR was half of a CRLF
    sniffer = EndSniffer()
    assert sniffer.feed(b"50%\r" * (SNIFF // 4 - 1)) == b""
    assert sniffer.feed(b"99%\r") == b"50%\n" * (SNIFF // 4 - 1) + b"99%\n"  # SNIFF bytes, no LF: CR-only
    assert sniffer.feed(b"a\r\n") == b"a\n\n"  # read as its head says
    pipe = EndSniffer(sniff_cr=False)
    assert pipe.feed(b"50%\r") == b"50%\r"


@pytest.mark.parametrize("name", ["lf", "cr only", "a line over the cut", "non-utf-8", "escape sequences",
                                  "no final newline", "cr-only head, lf and crlf past the sniff window"])
def test_a_followed_file_gives_the_same_numbered_lines(name: str, tmp_path: Path) -> None:
    """`watch --log` on a file written in pieces: its LogEvents are the policy's lines, numbered alike."""
    data = SAMPLES[name]
    pieces = _pieces(data, [1, 5, 3000, 2, 70_000, 13])
    path = tmp_path / "run.log"
    path.write_bytes(b"")
    written = {"n": 0}

    def write_more() -> bool:
        if written["n"] >= len(pieces):
            return True
        with path.open("ab") as handle:
            handle.write(pieces[written["n"]])
        written["n"] += 1
        return False

    seen: list[LiveEvent] = []
    session = TraceSession(path.name, source="log", on_event=seen.append, keep_events=False, line_events="all")
    follow_log(str(path), session, stop=write_more, poll_s=0.0)
    got = [(e.line, e.text) for e in seen if isinstance(e, LogEvent)]
    assert got == [(n, strip_controls(decode(line))) for n, line in enumerate(reference(data), 1)]


def _variants(log: bytes) -> dict[str, bytes]:
    """One real log, saved the ways logs reach us."""
    lines = log.splitlines()
    progress = b"\r".join(lines) + b"\r"
    return {
        "as written": log,
        "crlf": b"\r\n".join(lines) + b"\r\n",
        "cr only": progress,
        # a CR-only head (the log itself, saved by a progress-style writer) and the log again with
        # CRLF ends past the sniff window: every CR and every LF ends a line there
        "cr-only head, crlf body": progress * (SNIFF // len(progress) + 1) + b"\r\n".join(lines) + b"\r\n",
        "progress bars and colour": b"\n".join(b"\x1b[2K\r\x1b[32m" + line + b"\x1b[0m" for line in lines) + b"\n",
        "long and broken lines, no final newline": b"\n".join(
            [b"x" * (3 * MAX_LINE), b"\xff\xfe\xc3 not utf-8", *lines[: len(lines) // 2],
             b"y" * (MAX_LINE + 7) + b"\r", *lines[len(lines) // 2:]]),
    }


@pytest.mark.parametrize("variant", list(_variants(b"x\n")))
@pytest.mark.parametrize("log", [KV_OOM, SERVER_LOG], ids=lambda p: p.name)
def test_a_findings_line_is_the_line_the_pane_shows(log: Path, variant: str, tmp_path: Path, analyze) -> None:
    data = _variants(log.read_bytes())[variant]
    path = tmp_path / "run.log"
    path.write_bytes(data)
    report = analyze(path)
    cited = [(e.line, e.text) for f in report.findings for e in f.evidence if e.kind == "log" and e.line]
    assert cited
    if variant == "cr-only head, crlf body":  # the findings cite the body, where a CRLF is two line ends
        assert max(line for line, _ in cited) > len(reference(data)) // 2
    source = LogSource.from_path(path)
    for line, text in cited:
        [pane] = source.read(line, 1)
        assert pane.number == line
        assert text.strip()[:60] in pane.text, (variant, line)
    assert source.read_tail(1)[0].number == len(reference(data)) == analyze_bytes(data).value("run.log_lines")
