"""Turn a log (file, pipe or growing file) into a Facts snapshot.

`LogAnalyzer` is incremental: feed it bytes as they arrive and ask for a `snapshot()` at any time
(watch --log does this); `analyze_stream` reads a whole stream in fixed-size chunks, so memory
stays flat on logs of any size. The scanner finds candidate lines with every parser's triggers;
each candidate is decoded, made inert and given to every parser.

Pure apart from reading the given stream.
"""

from __future__ import annotations

from collections import Counter
from typing import BinaryIO

from doctor.facts import Facts, Source
from doctor.logs.base import LogParser
from doctor.logs.detect import detect
from doctor.logs.line import decode, make_line
from doctor.logs.matcher import BytesPattern, compile_triggers
from doctor.logs.registry import parser_classes
from doctor.logs.stream import CHUNK, LineScanner, open_input, rewindable


def _trigger_pattern(parsers: list[LogParser]) -> BytesPattern:
    fragments: list[str] = []
    seen: set[str] = set()
    for parser in parsers:
        for frag in parser.triggers:
            if frag not in seen:
                seen.add(frag)
                fragments.append(frag)
    return compile_triggers(fragments)


class LogAnalyzer:
    def __init__(self, name: str = "input", parsers: list[LogParser] | None = None) -> None:
        self.name = name
        self.parsers = parsers if parsers is not None else [cls() for cls in parser_classes()]
        self.facts = Facts()
        self.facts.events_observed = True
        self.facts.inputs.append(name)
        for parser in self.parsers:
            parser.bind(self.facts)
        self.scanner = LineScanner(_trigger_pattern(self.parsers))
        self.skipped_lines = 0

    def feed(self, data: bytes) -> None:
        self._consume(self.scanner.feed(data))

    def finish(self) -> Facts:
        self._consume(self.scanner.finish())
        return self.snapshot()

    def _consume(self, items: object) -> None:
        parsers = self.parsers
        capture_any = self.scanner.capture  # a gap may come in a later feed() than its trigger line
        for raw in items:  # type: ignore[attr-defined]
            if raw.text is not None:
                line = make_line(raw.number, raw.text, raw.next)
                for parser in parsers:
                    try:
                        parser.feed(line)
                    except (ValueError, OverflowError, ArithmeticError):
                        # a line shaped like a known one but with numbers no engine prints
                        # (30 000 digits, ...): it is not that line; go on with the next
                        self.skipped_lines += 1
                capture_any = any(p.wants_capture() for p in parsers)
                self.scanner.capture = capture_any
            elif raw.gap is not None and capture_any:
                text = decode(raw.gap)
                for parser in parsers:
                    if parser.wants_capture():
                        parser.feed_gap(raw.number, text)

    def snapshot(self) -> Facts:
        """The facts so far, with whole-input summaries; the analyzer can go on afterwards."""
        facts = Facts()
        facts.merge(self.facts)
        facts.events_observed = True
        for parser in self.parsers:
            parser.summarize(facts)
        votes: Counter[str] = Counter()
        for parser in self.parsers:
            votes.update(parser.votes)
        found = detect(votes)
        src = Source("log", "detect", text=f"signature lines: {found.scores}")
        if found.engine:
            facts.set("engine.name", found.engine, src)
        else:
            facts.unknown("engine.name", "no engine's signature lines were recognised", src)
        facts.set("engine.detect_confidence", found.confidence, src)
        facts.set("engine.detected", found.seen, src)
        facts.set("run.log_lines", self.scanner.lines, Source("log", "scanner"), "lines")
        return facts


def analyze_stream(stream: BinaryIO, name: str = "input", chunk: int = CHUNK) -> Facts:
    stream = open_input(rewindable(stream))
    analyzer = LogAnalyzer(name)
    while True:
        data = stream.read(chunk)
        if not data:
            break
        analyzer.feed(data)
    return analyzer.finish()


def analyze_bytes(data: bytes, name: str = "input") -> Facts:
    import io

    return analyze_stream(io.BytesIO(data), name)
