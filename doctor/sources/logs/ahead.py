"""Reading a region ahead of the analysis: what the serial scan of it hands the analyzer, worked out without the
analysis's state, so that another process can do it (doctor/sources/logs/parallel.py).

The scan of a region (doctor/sources/logs/stream.py `LineScanner._scan`) depends on the analysis's state in two
ways only: whether a parser wants the text between candidates (`capture`), and whether the parsers that fold a
run of hot lines are ready for it (doctor/sources/logs/fold.py `fold_ready`). A read ahead assumes the usual
answers (no capture, every parser ready) and records, in order, each candidate line (its number counted from
the region's start, its bytes, its next line, where the scan goes on after it) and each run a folder would
fold (where it lies, its lines, and what each of its parsers reads in it: `LogParser.read_run`). The analysis
replays these (parallel.py) and scans the rest of a region itself from the first item the assumption does not
hold for.

Pure: bytes in, records out.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from itertools import chain
from typing import Any

from doctor.sources.logs.analyze import LogAnalyzer
from doctor.sources.logs.hot import HotRun
from doctor.sources.logs.line import make_line
from doctor.sources.logs.sessions import StartMarker
from doctor.sources.logs.stream import RawLine

LINE = 0  # (LINE, stop, number, start): a candidate line in [start, stop) (its bytes are the region's: cut_line)
RUN = 1  # (RUN, end, number, lines, owner, reads, start, ends): a run of hot lines in [start, end), folded by
# `owner`; `ends`: it holds a line some state of its parsers would end a run before (LogParser.fold_guard)
Item = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Speculation:
    """The rest of a region read by a whole analysis from its first engine start line on, as if that line began
    a new session (LogAnalyzer.begin_at): the start line (a LINE item), the analysis's state at the region's
    end (LogAnalyzer.live, pickled), the lines it folded and where it began sessions. Good from any of those
    lines at which the analysis also begins a session: from there on both read the same."""

    first: Item
    state: bytes
    folded: int
    starts: dict[int, int]  # the lines it began its (kept) sessions at -> their number in it (1: the first)


@dataclass(slots=True)
class Ahead:
    """A region read ahead: its line count and its items, in the order the scan meets them, and a speculation from
    its first engine start line (`spec`: the region read on from there by a whole analysis)."""

    lines: int
    items: list[Item]
    spec: Speculation | None = None


class Reader:
    """Reads regions ahead with one analyzer's scanner, router and folds (its parsers are never fed); where it is
    told how many lines come before a region, it also reads the region on from its first engine start line with
    a second analyzer, as if a session began there (`Speculation`)."""

    def __init__(self, name: str, fold: bool, escaped: bool = False) -> None:
        self.analyzer = LogAnalyzer(name, fold=fold, escaped=escaped)
        self._items: list[Item] = []
        if self.analyzer.folders is not None:
            self.analyzer.folders.recorder = self._record
        self._fold = fold
        self._spec: LogAnalyzer | None = None
        self.speculating = True  # off once a state could not be pickled: its parsers' state is not ours to move

    def _record(self, owner: int, run: HotRun, reads: tuple[object, ...], ends: bool) -> None:
        self._items.append((RUN, run.end, run.number, run.lines, owner, reads, run.start, ends))

    def read(self, buf: bytes, end: int, lines_before: int | None = None) -> Ahead:
        """The items of the region buf[:end] (complete lines; the buffer may run on past it: the next lines);
        with `lines_before` (the lines before the region), a speculation from its first engine start line."""
        scanner = self.analyzer.scanner
        scanner.capture = False
        items: list[Item] = []
        self._items = items
        append = items.append
        marker = self.analyzer.starts.marker if lines_before is not None and self.speculating else None
        first: tuple[Item, bytes, bytes | None, StartMarker] | None = None
        for raw in scanner._scan(buf, 0, end, line_base=0):
            item = (LINE, raw.stop, raw.number, raw.start)
            append(item)
            if marker is not None and raw.text is not None and (raw.number > 1 or lines_before):
                found = marker(raw.text)
                if found is not None:
                    first = item, raw.text, raw.next, found
                    marker = None
        ahead = Ahead(scanner.lines, items)
        if first is not None and lines_before is not None:
            ahead.spec = self._speculate(buf, end, lines_before, *first)
        return ahead

    def _speculate(self, buf: bytes, end: int, lines_before: int, item: Item, text: bytes, nxt: bytes | None,
                   found: StartMarker) -> Speculation | None:
        _, stop, number, start = item
        spec = self._spec
        if spec is None:
            spec = self._spec = LogAnalyzer(self.analyzer.name, fold=self._fold, escaped=self.analyzer.escaped)
        first = lines_before + number
        spec.begin_at(first, make_line(first, text, nxt).raw, found, lines_before)
        rest = spec.scanner._scan(buf, stop, end, line_base=first)
        lines = chain((RawLine(first, text, None, nxt, stop, start),), rest)
        folded = spec.scanner.folded
        spec.replay(lines, started=first)
        try:
            state = pickle.dumps(spec.live(), pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            self.speculating = False
            return None
        starts = {session.first_line: session.number for session in spec.sessions}
        starts[spec.open.first_line] = spec.sessions_closed + 1
        spec.sessions = []  # moved: not kept here until the next region
        spec.begin_at(first, "", found, lines_before)  # nor its parsers' state
        return Speculation(item, state, spec.scanner.folded - folded, starts)
