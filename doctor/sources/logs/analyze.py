"""Turn a log (file, pipe or growing file) into a Facts snapshot.

`LogAnalyzer` is incremental: feed it bytes as they arrive and ask for a `snapshot()` at any time
(watch --log does this); `read_to_end` feeds it a whole stream in fixed-size reads, so memory stays flat on
logs of any size (doctor/sources/logs/entry.py `analyze_stream`: the way in, serial or with workers). The
scanner finds candidate lines with every parser's triggers; each candidate is decoded, made inert and given to
every parser — except to a parser with a `gate`
when one RE2 set match on the raw bytes shows the line is not one of its own (only for plain lines,
whose text is their raw bytes, so the parser's own gate would say the same). The same match hands
the gates that pass, and every parser's literal index (doctor/sources/logs/base.py, LineKinds), their answers
for that line, and says whether the line can be an engine start (doctor/sources/logs/router.py).

Sessions: an engine start line (doctor/sources/logs/sessions.py) that begins another run, or a truncation or
rotation of a followed file (`new_session`), closes the session so far with its own snapshot and
starts the parsers afresh; the snapshot's facts are the latest session's, and `Facts.sessions` lists
every session (earlier ones with their facts). After a truncation or rotation, lines count from 1.

A big input is read with worker processes where cores are free (doctor/sources/logs/parallel.py: the same facts,
byte for byte, each worker's regions replayed through this analyzer; `LLM_DOCTOR_WORKERS=0` reads it here alone).

Pure apart from reading the given stream.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import BinaryIO

from doctor.core.facts import MAX_SESSIONS, Facts, Session, Source
from doctor.core.paste import Pasted
from doctor.sources.logs.base import AnalysisState, LogParser
from doctor.sources.logs.detect import detect
from doctor.sources.logs.fold import Folders, fold_enabled
from doctor.sources.logs.line import LogLine, decode, make_line, unescape
from doctor.sources.logs.matcher import BytesPattern, compile_triggers
from doctor.sources.logs.registry import parser_classes
from doctor.sources.logs.router import Router
from doctor.sources.logs.sessions import OpenSession, StartLines, StartMarker, start_lines
from doctor.sources.logs.stream import LineScanner, RawLine

_QUOTE_IN_FRAGMENT = re.compile(r"""\\?(['"])""")


def quote_tolerant(fragment: str) -> str:
    """A trigger fragment that also matches its quotes escaped (`model\\'s`, `msg=\\"...`)."""
    return _QUOTE_IN_FRAGMENT.sub(r"\\\\?\1", fragment)


def _trigger_pattern(parsers: list[LogParser], starts: StartLines, escaped: bool = False) -> BytesPattern:
    fragments: list[str] = []
    seen: set[str] = set()
    for frag in starts.fragments:  # engine start lines begin sessions: every one must be a candidate
        if frag not in seen:
            seen.add(frag)
            fragments.append(frag)
    for parser in parsers:
        for frag in parser.triggers:
            if frag not in seen:
                seen.add(frag)
                fragments.append(frag)
    return compile_triggers([quote_tolerant(f) for f in fragments] if escaped else fragments)


@dataclass(slots=True)
class Live:
    """An analysis's state within its latest session, and the sessions it closed (LogAnalyzer.live, adopt)."""

    parsers: list[LogParser]
    facts: Facts
    state: AnalysisState
    open: OpenSession
    skipped: int
    summarised: int
    sessions: list[Session]
    closed: int
    capture: bool


STARTUP_EVENTS = frozenset({"no_gpu", "gpu_init_failed", "warning", "ctx_over_train"})


class LogAnalyzer:
    def __init__(self, name: str = "input", parsers: list[LogParser] | None = None, fold: bool | None = None,
                 escaped: bool = False) -> None:
        """`fold`: read runs of hot lines block by block (doctor/sources/logs/fold.py); None: unless
        LLM_DOCTOR_FOLD=0. False is the per-line reference path. `escaped`: the input holds escaped
        quotes (a JSON log whose messages quote): its triggers match them escaped too."""
        self.name = name
        self.parsers = parsers if parsers is not None else [cls() for cls in parser_classes()]
        self.starts = start_lines()  # the engine table's start lines (doctor/sources/logs/sessions.py)
        self.folders: Folders | None = None  # the folds of runs of hot lines (doctor/sources/logs/fold.py)
        self._bind_fresh(self.parsers)
        self.escaped = escaped
        self.scanner = LineScanner(_trigger_pattern(self.parsers, self.starts, escaped))
        self._others: BytesPattern | None = None  # see _alone_only
        if fold if fold is not None else fold_enabled():
            self.folders = Folders.build(self.parsers, self.router, self.scanner, self.starts, escaped)
            if self.folders is not None:
                self.folders.attach(self.scanner)
        self.skipped_lines = 0
        # a normalised paste (doctor/core/paste.py): the scanner reads its logical lines, the facts cite
        # the physical line each begins on; runs are not folded then (a paste is small)
        self.pasted: Pasted | None = None
        self.sessions: list[Session] = []  # the closed ones, oldest first (at most MAX_SESSIONS kept)
        self.sessions_closed = 0
        self.open = OpenSession()

    def _bind_fresh(self, parsers: list[LogParser], router: Router | None = None) -> None:
        self.parsers = parsers
        self.facts = Facts()
        self.facts.events_observed = True
        self.facts.inputs.append(self.name)
        self.state = AnalysisState()  # what the parsers of this session share (doctor/sources/logs/base.py)
        for parser in self.parsers:
            parser.bind(self.facts, self.state)
        self.router = router.rebind(parsers) if router is not None else \
            Router.build(self.parsers, self.starts.fragments)
        if self.folders is not None:
            self.folders.bind(parsers, self.router)
        # the parsers that ever ask for the text between candidates (the others never do)
        self._capturing = [p for p in self.parsers if type(p).wants_capture is not LogParser.wants_capture]
        self.skipped_lines = 0
        self._summarised = 0  # facts in the last snapshot before detection added its own

    # -- sessions ----------------------------------------------------------------------------
    def new_session(self, started_by: str, text: str | None = None, restart_lines: bool = False) -> None:
        """Close the session so far and begin another: `started_by` "truncated" or "rotated" (a followed
        file; then `restart_lines`: the new file is numbered from line 1) or "engine start"."""
        if restart_lines:
            self._consume(self.scanner.finish())
        last = self.scanner.lines
        if last >= self.open.first_line:  # the session so far read lines: it is kept
            self._close(last)
        if restart_lines:
            self.scanner = LineScanner(self.scanner.trigger)
            if self.folders is not None:
                self.folders.attach(self.scanner)
        self.open = OpenSession(first_line=self.scanner.lines + 1, started_by=started_by, text=text)

    def _has_run(self) -> bool:
        """Whether the session so far got past starting: it ran (run facts) or ended (an OOM, a crash,
        a failed load...). Start-up warnings printed before an engine's banner (no usable GPU) are not."""
        return (any(k not in STARTUP_EVENTS for k in self.facts.event_counts)
                or self.facts.has_prefix("run."))

    def _close(self, last_line: int) -> None:
        # the session's lines end at `last_line`: its snapshot counts them so, whatever the scanner counted at the
        # start of the read it closes in (a count that would make the report depend on where reads cut the input)
        # (a paste's lines are numbered as the user's: `last_line` is one of those, and the paste is one read)
        counted = self.scanner.lines
        if self.pasted is None:
            self.scanner.lines = last_line
        try:
            snap = self.snapshot()
        finally:
            self.scanner.lines = counted
        snap.sessions = []
        self.sessions_closed += 1
        self.sessions.append(Session(
            number=self.sessions_closed, input=self.name, first_line=self.open.first_line,
            last_line=max(last_line, self.open.first_line), started_by=self.open.started_by, text=self.open.text,
            engine=snap.value("engine.name"), facts=snap))
        del self.sessions[:-MAX_SESSIONS]
        self._bind_fresh([type(p)() for p in self.parsers], self.router)

    def _start_line(self, marker: StartMarker, number: int, text: str) -> bool:
        """An engine start line: True when it began a new session (the parsers were replaced)."""
        voted = {name for p in self.parsers for name, count in p.votes.items() if count}
        if self.open.begins_new(marker, self._has_run(), voted):
            self._close(number - 1)
            self.open = OpenSession(first_line=number, started_by="engine start", text=text[:300])
            self.open.note(marker)
            return True
        self.open.note(marker)
        return False

    def feed(self, data: bytes) -> None:
        self._consume(self.scanner.feed(data))

    def replay(self, items: Iterable[RawLine], started: int = 0) -> None:
        """Candidate lines as the scanner hands them, from a region read ahead (doctor/sources/logs/parallel.py);
        `started`: the number of a start line whose session is already begun (`begin_at`)."""
        self._consume(items, started)

    # -- a session begun elsewhere (doctor/sources/logs/ahead.py, parallel.py) -----------------
    def begin_at(self, number: int, text: str, marker: StartMarker, lines: int) -> None:
        """Be what the serial analysis is right after an engine start line began a new session there (line
        `number`, its text as read, `lines` the scanner's count then), but for the sessions before it: fresh
        parsers, no session closed yet. The start line itself is then fed with `started=number`."""
        self._bind_fresh([type(p)() for p in self.parsers], self.router)
        self.sessions = []
        self.sessions_closed = 0
        self.open = OpenSession(first_line=number, started_by="engine start", text=text[:300])
        self.open.note(marker)
        self.scanner.lines = lines
        self.scanner.capture = False

    def live(self) -> Live:
        """What a session begun by `begin_at` left, and the sessions after it: the state `adopt` takes."""
        return Live(self.parsers, self.facts, self.state, self.open, self.skipped_lines, self._summarised,
                    self.sessions, self.sessions_closed, self.scanner.capture)

    def adopt(self, live: Live, since: int = 1) -> None:
        """Go on from another analysis's `live` state: that analysis read on from a line where this one's last
        session began, and began its session number `since` there too (`begin_at`, or a start line of its
        own): from there on both read the same. Its parsers, and the sessions it closed from that one on."""
        for new, own in zip(live.parsers, self.parsers, strict=True):  # this process's indexes: the router's own
            index, mine = new.__dict__.get("literal_index"), getattr(own, "literal_index", None)
            if index is not None and mine is not None and type(mine) is type(index) and mine.patterns == index.patterns:
                new.literal_index = mine
                new.here()
        self.parsers = live.parsers
        self.facts = live.facts
        self.state = live.state
        if self.router is not None:
            self.router = self.router.rebind(self.parsers)
        if self.folders is not None:
            self.folders.bind(self.parsers, self.router)
        self._capturing = [p for p in self.parsers if type(p).wants_capture is not LogParser.wants_capture]
        self.skipped_lines = live.skipped
        self._summarised = live.summarised
        before = since - 1  # its sessions before that one: this analysis read them itself
        for session in live.sessions:
            if session.number > before:
                session.number += self.sessions_closed - before
                self.sessions.append(session)
        del self.sessions[:-MAX_SESSIONS]
        self.sessions_closed += live.closed - before
        self.open = live.open
        self.scanner.capture = live.capture

    def finish(self) -> Facts:
        self._consume(self.scanner.finish())
        return self.snapshot()

    def _consume(self, items: object, started: int = 0) -> None:
        parsers = self.parsers
        router = self.router
        capturing = self._capturing
        wants = capturing[0].wants_capture if len(capturing) == 1 else None
        capture_any = self.scanner.capture  # a gap may come in a later feed() than its trigger line
        starts = self.starts
        pasted = self.pasted
        escaped = self.escaped
        for raw in items:  # type: ignore[attr-defined]
            if pasted is not None:
                raw.number = pasted.line_of(raw.number)
            text = raw.text
            if text is not None:
                line = make_line(raw.number, text, raw.next)
                if escaped and not line.fields and b"\\" in text:
                    unescape(line)
                # a plain line: one RE2 set match says which parsers it concerns and whether it holds
                # a start fragment; any other line goes to every parser and to the start-line pattern
                found = router.route(text, router.plain(line, text)) if router is not None else None
                if found is not None and not found.others and router is not None:  # only the catalogue's triggers
                    self._feed_alone(router.targets(found, line.text), line, text, capture_any)
                    if line.more is not None:
                        self._feed_more(line.more)
                    continue
                if router is None and self._alone_only(text):
                    self._feed_alone([p for p in parsers if p.alone], line, text, capture_any)
                    if line.more is not None:
                        self._feed_more(line.more)
                    continue
                marker = starts.marker(text) if found is None or found.start else None
                if marker is not None and raw.number != started and self._start_line(marker, raw.number, line.raw):
                    parsers = self.parsers  # a new session: fresh parsers
                    capturing = self._capturing
                    wants = capturing[0].wants_capture if len(capturing) == 1 else None
                targets = router.targets(found, line.text) if found is not None and router is not None else parsers
                for parser in targets:
                    try:
                        parser.feed(line)
                    except (ValueError, OverflowError, ArithmeticError):
                        # a line shaped like a known one but with numbers no engine prints
                        # (30 000 digits, ...): it is not that line; go on with the next
                        self.skipped_lines += 1
                if line.more is not None:  # a JSON message of several lines: the others to every parser
                    self._feed_more(line.more)
                if capturing:
                    capture_any = wants() if wants is not None else any(p.wants_capture() for p in capturing)
                    self.scanner.capture = capture_any
            elif raw.gap is not None and capture_any:
                gap = decode(raw.gap)
                for parser in capturing:
                    if parser.wants_capture():
                        parser.feed_gap(raw.number, gap)

    def _feed_more(self, lines: list[LogLine]) -> None:
        """The further lines of a JSON message (doctor/sources/logs/line.py), after its first line."""
        for sub in lines:
            for parser in self.parsers:
                try:
                    parser.feed(sub)
                except (ValueError, OverflowError, ArithmeticError):
                    self.skipped_lines += 1

    def _alone_only(self, raw: bytes) -> bool:
        """Without a router (no RE2): whether only an alone parser's triggers selected `raw` (router.py)."""
        if not any(p.alone for p in self.parsers):
            return False
        if self._others is None:
            self._others = _trigger_pattern([p for p in self.parsers if not p.alone], self.starts, self.escaped)
        return not self._others.search(raw)

    def _feed_alone(self, targets: list[LogParser], line: LogLine, raw: bytes, capture: bool) -> None:
        """A line only an alone parser's triggers selected (doctor/sources/logs/router.py): to those
        parsers; the other parsers see it as before, inside the text between candidates when they capture."""
        for parser in targets:
            try:
                parser.feed(line)
            except (ValueError, OverflowError, ArithmeticError):
                self.skipped_lines += 1
        if capture:
            gap = decode(raw + b"\n")
            for parser in self._capturing:
                if parser.wants_capture():
                    parser.feed_gap(line.number, gap)

    def snapshot(self) -> Facts:
        """The facts so far, with whole-input summaries; the analyzer can go on afterwards."""
        facts = Facts()
        facts.merge(self.facts)
        facts.events_observed = True
        # the parsers whose findings say the input was an engine's first, then those that only say what no
        # other parser read (doctor/sources/logs/unexplained.py): their facts do not make an input recognised
        self._summarise(facts, [p for p in self.parsers if p.recognises])
        votes: Counter[str] = Counter()
        for parser in self.parsers:
            votes.update(parser.votes)
        self._summarised = len(facts)  # facts the parsers read (some only as whole-input summaries)
        summary_events = bool(facts.event_counts)  # events the summaries made (a crash cause, an OOM kill)
        self._summarise(facts, [p for p in self.parsers if not p.recognises])
        found = detect(votes)
        src = Source("log", "detect", text=f"signature lines: {found.scores}")
        if found.engine:
            facts.set("engine.name", found.engine, src)
        else:
            facts.unknown("engine.name", "no engine's signature lines were recognised", src)
        facts.set("engine.detect_confidence", found.confidence, src)
        facts.set("engine.detected", found.seen, src)
        facts.set("run.log_lines", self._lines_read(), Source("log", "scanner"))
        recognised = self.recognised(votes) or summary_events
        facts.set("run.recognised", recognised, Source("log", "scanner", text=self._recognised_text(votes, recognised)))
        # events are judged only where engine lines were read: "no OOM line" in a file of other text
        # (or in nothing) is not evidence that there was no OOM
        facts.events_observed = recognised
        if self.sessions:
            facts.sessions = [*self.sessions, Session(
                number=self.sessions_closed + 1, input=self.name, first_line=self.open.first_line,
                last_line=max(self._lines_read(), self.open.first_line), started_by=self.open.started_by,
                text=self.open.text, engine=facts.value("engine.name"), ran=self._has_run())]
        return facts

    def _summarise(self, facts: Facts, parsers: list[LogParser]) -> None:
        for parser in parsers:
            try:
                parser.summarize(facts)
            except (ValueError, OverflowError, ArithmeticError):
                # numbers no engine prints (1e309 MiB buffers, ...) reached a whole-input sum: that
                # parser's summary is left out rather than the whole snapshot
                self.skipped_lines += 1

    def recognised(self, votes: Counter[str] | None = None) -> bool:
        """Whether any line so far was an engine's: a signature line, a fact or an event read from it."""
        if votes is None:
            votes = Counter()
            for parser in self.parsers:
                votes.update(parser.votes)
        return bool(+votes) or len(self.facts) > 0 or self._summarised > 0 or bool(self.facts.event_counts)

    def _lines_read(self) -> int:
        """The lines read so far, as the user's input numbers them (a paste's physical lines)."""
        lines = self.scanner.lines
        if self.pasted is None:
            return lines
        return self.pasted.lines if lines >= len(self.pasted.physical) else self.pasted.line_of(lines)

    def _recognised_text(self, votes: Counter[str], recognised: bool) -> str:
        lines = self._lines_read()
        if not lines:
            return f"{self.name} is empty: no line to read"
        if not recognised:
            return f"none of the {lines} line(s) of {self.name} is an engine's log line llm-doctor knows"
        signature = sum(v for v in votes.values() if v > 0)
        return f"{signature} engine signature line(s), {self._summarised} fact(s) and " \
               f"{sum(self.facts.event_counts.values())} event(s) read from {lines} line(s)"


def read_to_end(analyzer: LogAnalyzer, stream: BinaryIO, chunk: int, reads: list[bytes] | None = None) -> Facts:
    """Feed `reads` (the input read so far, from its start: it may be a post, read for its prose too) or, without
    them, the rest of an input read elsewhere, then the rest of `stream` in reads of `chunk` bytes: the facts."""
    from doctor.sources.logs.prose import MAX_PROSE, read_prose

    kept: list[bytes] | None = [] if reads is not None else None  # the input while it can be a post
    size = 0
    for data in reads or ():
        size += len(data)
        kept = [*kept, data] if kept is not None and size <= MAX_PROSE else None
        analyzer.feed(data)
    while True:
        data = stream.read(chunk)
        if not data:
            break
        size += len(data)
        if kept is not None and size <= MAX_PROSE:
            kept.append(data)
        else:
            kept = None
        analyzer.feed(data)
    facts = analyzer.finish()
    if kept is not None:
        read_prose(facts, decode(b"".join(kept)))
    return facts
