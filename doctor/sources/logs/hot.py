"""What a parser that folds runs of lines declares (`HotLines`) and is handed (`HotRun`); the folding
itself: doctor/sources/logs/fold.py.

Pure.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from doctor.core.lines import MAX_LINE
from doctor.sources.logs.line import LogLine, make_line
from doctor.sources.logs.stream import cut_line


@dataclass(frozen=True, slots=True)
class HotLines:
    """The hot lines a parser folds: `line`, the RE2 source of one unit of a run without its end (an
    alternation of exact shapes; a unit may be a few lines that always come together); `samples`,
    real units of each shape that the fold reads (lines joined by a newline); `quiet`, real lines of
    the shapes a run may hold that no trigger selects (a slot launch between timings: the fold passes
    over them as the scanner would); `kinds`, the names of the line kinds a fold consumes (what a run
    stands for, to a parser that reads some of its lines too)."""

    line: str
    samples: tuple[bytes, ...]
    quiet: tuple[bytes, ...] = ()
    kinds: tuple[str, ...] = ()
    # a cheap first test: every unit's first line holds one of these within its first `probe_within` bytes
    probes: tuple[bytes, ...] = ()
    probe_within: int = 0
    # a shape with free text of any length (a logged prompt): a run ends before a line longer than the scanner's
    # cut (doctor/core/lines.py MAX_LINE; its parsers read such a line cut), and the fold is off where the
    # analysis unescapes its lines (analyze.py `escaped`: such a line's text is not its bytes)
    unbounded: bool = False


Finder = Callable[[bytes, int, int], "tuple[int, int] | None"]  # find(region, start, end): a match's span
FedLine = tuple[int, bytes, bytes | None]  # a line of a run to feed: its index in the run, its bytes, its next line
Reaches = Callable[[object, LogLine, bytes], bool]  # whether the analysis hands a line to a parser (fold.py)


RunLine = tuple[int, bytes]  # a line of a run: its index in the run (0: the first line), its bytes (no CR, no LF)


def run_line(number: int, item: RunLine) -> LogLine:
    """A line of a run (`item`, HotRun.at), decoded as the per-line path decodes it, the run's first line being
    numbered `number`."""
    return make_line(number + item[0], item[1])


class HotRun:
    """A run of hot lines: region[start:end], complete lines (each ending in a newline), the first
    numbered `number`; every parser that reads some of its lines gets it (`LogParser.fold`).

    A parser folds a run in two steps (`LogParser.read_run`, then `take_run`): what the run holds, read from its
    bytes alone (a worker process may read it: doctor/sources/logs/parallel.py), then that folded into the
    parser's state. In the second step the run's bytes may come from a loader (`load`), called on first use:
    the rare lookups there (the line of a new extreme) fetch them only when they happen."""

    __slots__ = ("_hit", "_lines", "_load", "_region", "end", "kinds", "number", "reaches", "shape", "start", "trigger",
                 "wanted")

    def __init__(self, region: bytes | None, start: int, end: int, number: int, kinds: tuple[str, ...] = (),
                 shape: str = "", lines: int = -1, load: Callable[[], bytes] | None = None,
                 trigger: Finder | None = None,
                 reaches: Reaches | None = None) -> None:
        self._region = region
        self._load = load
        self.trigger = trigger  # the analysis's candidate search (its scanner's: doctor/sources/logs/stream.py)
        self.reaches = reaches  # whether the analysis hands a line to a parser (its router's answer)
        self.wanted: Finder | None = None  # any line a parser of the run reads one by one (LogParser.fold_patterns)
        self._hit: list[FedLine] | None = None
        self.start = start
        self.end = end
        self.number = number
        self.kinds = kinds  # the line kinds of the spec that matched it (HotLines.kinds)
        self.shape = shape  # the spec's unit (HotLines.line): every line of the run is part of one ("": unknown)
        self._lines = lines

    @property
    def region(self) -> bytes:
        """The bytes the run lies in (fetched by the loader on first use, where the run has one)."""
        region = self._region
        if region is None:
            assert self._load is not None, "a run without bytes nor a loader"
            region = self._region = self._load()
        return region

    @property
    def lines(self) -> int:
        """How many lines the run holds (counted once)."""
        if self._lines < 0:
            self._lines = self.region.count(b"\n", self.start, self.end)
        return self._lines

    def each_line(self) -> Iterator[LogLine]:
        """The run's lines one by one, decoded as the per-line path decodes them (for a parser that reads a
        run line by line where a search found something in it)."""
        region, pos, end, number = self.region, self.start, self.end, self.number
        while pos < end:
            stop = region.index(b"\n", pos, end)
            raw = region[pos:stop]
            yield make_line(number, raw[:-1] if raw.endswith(b"\r") else raw)
            pos, number = stop + 1, number + 1

    def index_at(self, pos: int) -> int:
        """The index in the run (0: its first line) of the line that holds position `pos` of the region (counted
        from the nearer end of the run: the evidence lines are mostly its last ones)."""
        if pos - self.start > (self.end - self.start) // 2:
            return self.lines - self.region.count(b"\n", pos, self.end)
        return self.region.count(b"\n", self.start, pos)

    def number_at(self, pos: int) -> int:
        """The line number of the line that holds position `pos` of the region."""
        return self.number + self.index_at(pos)

    def _raw_at(self, pos: int) -> bytes:
        region = self.region
        begin = region.rfind(b"\n", self.start, pos) + 1 or self.start
        stop = region.find(b"\n", pos, self.end)
        raw = region[begin: stop if stop >= 0 else self.end]
        return raw[:-1] if raw.endswith(b"\r") else raw

    def at(self, pos: int) -> RunLine:
        """The line holding `pos`: its index in the run and its bytes (what `run_line` decodes), for a fold's
        first step, which reads no line numbers (`read_run`)."""
        return self.index_at(pos), self._raw_at(pos)

    def line_at(self, pos: int, number: int | None = None) -> LogLine:
        """The line holding `pos`, decoded as the per-line path decodes it (for evidence); `number`: its line
        number, when the caller knows it (lines_at)."""
        return make_line(self.number_at(pos) if number is None else number, self._raw_at(pos))

    def first(self, pattern: re.Pattern[bytes], want: float, read: Callable[[bytes], float] = float) -> int:
        """Where the first match of `pattern` in the run whose number (the group that took part, `read`) is
        `want` starts: the line a folded extreme was first seen on, as line by line it is kept."""
        for m in pattern.finditer(self.region, self.start, self.end):
            if read(m.group(m.lastindex or 0)) == want:
                return m.start()
        raise AssertionError("a folded extreme not found again")  # cannot happen: it came from the same run

    def lines_at(self, positions: Iterable[int]) -> Iterator[LogLine]:
        """line_at for each of `positions`, in increasing order: the numbers counted on from the last one (many
        lines of a long run without a count over the run for each)."""
        at, number = self.start, self.number
        for pos in positions:
            number += self.region.count(b"\n", at, pos)
            at = pos
            yield self.line_at(pos, number)

    def hits(self, find: Finder, limit: int = -1, begin: int = -1, stop: int = -1,
             max_line: int = MAX_LINE) -> list[FedLine]:
        """The candidate lines of the run (lines the analysis's scan selects) in which `find` finds something, in
        order (the first `limit` of them; of those in region[begin:stop], line starts, where given), each cut as
        the scanner cuts it, with its next line (a parser may read a line with its next)."""
        region, start, trigger = self.region, self.start, self.trigger
        end = self.end if stop < 0 else stop
        out: list[FedLine] = []
        pos = at = max(start, begin)
        index = self.index_at(pos) if pos > start else 0
        while pos < end and len(out) != limit:
            hit = find(region, pos, end)
            if hit is None:
                break
            first = region.rfind(b"\n", start, hit[0]) + 1 or start
            last = region.find(b"\n", hit[0], self.end)
            last = self.end if last < 0 else last
            if trigger is None or trigger(region, first, last) is not None:
                index += region.count(b"\n", at, first)
                at = first
                out.append((index, *cut_line(region, first, last, max_line)))
            pos = last + 1
        return out

    def wanted_lines(self, find: Finder | None) -> list[FedLine]:
        """The lines of `hits(wanted)` (one search of the run for what any of its parsers reads line by line, kept
        for all of them) in which `find` (one parser's) finds something in the line as the scanner hands it."""
        if find is None:
            return []
        if self.wanted is None:
            return self.hits(find)
        if self._hit is None:
            self._hit = self.hits(self.wanted)
        return [item for item in self._hit if find(item[1] + b"\n", 0, len(item[1]) + 1) is not None]

    def last_hit(self, find: Finder, window: int = 1 << 16) -> FedLine | None:
        """The last of `hits(find)`, searched for from the run's end backwards, a window of lines at a time."""
        region, start = self.region, self.start
        stop = self.end
        while stop > start:
            begin = (region.rfind(b"\n", start, stop - window) + 1 or start) if stop - window > start else start
            if find(region, begin, stop) is not None:
                found = self.hits(find, begin=begin, stop=stop)
                if found:
                    return found[-1]
            stop = begin
        return None

    def feed(self, parser: Any, lines: Iterable[FedLine], kinds: tuple[str, ...]) -> None:
        """Feed `parser` these lines of the run, as the per-line path hands them: each only where the analysis
        hands it to that parser (`reaches`); after a line that leaves the parser not ready for a fold of `kinds`
        (a message waiting for its next line), every candidate line that follows, until it is ready again."""
        last = -1
        for index, raw, nxt in lines:
            if index <= last:
                continue
            last = self._feed(parser, index, raw, nxt)
            if not parser.fold_ready(kinds):
                last = self._feed_until_ready(parser, kinds, last)

    def _feed(self, parser: Any, index: int, raw: bytes, nxt: bytes | None) -> int:
        line = make_line(self.number + index, raw, nxt)
        if self.reaches is None or self.reaches(parser, line, raw):
            # as the per-line path: a line shaped like a known one with numbers no engine prints is not that line
            with contextlib.suppress(ValueError, OverflowError, ArithmeticError):
                parser.feed(line)
        return index

    def _feed_until_ready(self, parser: Any, kinds: tuple[str, ...], after: int) -> int:
        trigger = self.trigger
        assert trigger is not None, "a run fed line by line without the analysis's scan"
        for index, raw, nxt in self.hits(trigger):
            if index > after:
                self._feed(parser, index, raw, nxt)
                after = index
                if parser.fold_ready(kinds):
                    break
        return after
