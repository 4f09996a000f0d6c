"""Folding: runs of a parser's "hot" lines read block by block in native passes, not line by line.

A busy server prints the same few lines for every request (slot launches, timings, releases): in a
long log nearly every line is a candidate, and the per-line path (scanner hop, decode, router,
handlers, a Fact per value) costs tens of microseconds a line. A parser that knows such lines
declares them (`hot`: doctor/sources/logs/hot.py HotLines, the RE2 source of the units of a run, exact
down to their numbers and padding, with real sample lines) and implements `fold_ready(kinds)` / `fold(run)`.
Where the scanner meets a candidate line that passes a cheap probe, one anchored RE2 match (a DFA pass)
finds how far the run of consecutive hot units goes, and the parser folds the whole run at once
(counts, findall over the block, the few evidence lines read again), leaving its state as feeding
each line would have. The run's last line is left to the per-line path (its `next` line lies past the
run), as is any run a parser is not ready for.

Checked at build, on the spec's real sample lines, against this analysis's triggers, router and start
lines: its quiet lines (lines a run passes over) are no candidates, and every candidate line of its
units starts no session and goes to the owning parser alone, or also to parsers that fold the spec's
kinds too (`absorbs`: the catalogue's parser, doctor/sources/catalogue/parser.py; these get every run);
any other reader turns the fold off. tests/logs/test_fold.py compares both paths on real and built logs.
Each parser that declares hot lines gets its own Folder (llama-server's request lines, Ollama's access lines,
SGLang's batch lines: each engine folder's fold.py), checked on its own: one that fails the checks is read line
by line, the others still fold. `Folders` puts them behind the scanner's one hook and builds each when a line
first passes its probe. The parsers without a gate (llama.cpp's, the catalogue's) read every line: they fold the other
engines' runs too (`absorbs`). A shape with free text (an access line's path) is not told apart by its
samples: each of its runs is also searched once for what another parser would read in it (`_guard`).
A shape of free text of any length (a vLLM server's logged prompts: HotLines.unbounded) is also cut before a
line longer than the scanner's cut; its parsers read only the lines of a run they may read something from, one
by one (LogParser.fold_patterns: one search of the run for all of them, HotRun.wanted_lines, HotRun.feed: each
line where the analysis's router hands it to that parser), and a parser may end a run before a line that would
change how it reads the rest (LogParser.fold_guard: greedy settings that start a capture).
A fold is two steps (LogParser.read_run, pure, and take_run, the state), so a worker process can read runs
ahead (doctor/sources/logs/ahead.py, parallel.py: `Folders.recorder`).
`LLM_DOCTOR_FOLD=0` (or `LogAnalyzer(fold=False)`) turns folding off: the reference path.

Pure.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable

from doctor.core.lines import MAX_LINE
from doctor.sources.logs.base import LogParser
from doctor.sources.logs.hot import Finder, HotLines, HotRun
from doctor.sources.logs.line import LogLine, make_line
from doctor.sources.logs.matcher import re2_options, span_finder
from doctor.sources.logs.router import Router
from doctor.sources.logs.sessions import StartLines
from doctor.sources.logs.shapes import free_text, shape_finder
from doctor.sources.logs.stream import LineScanner

ENV = "LLM_DOCTOR_FOLD"
NOTHING = (0, 0)  # what `try_fold` answers where it folds nothing


def fold_enabled() -> bool:
    """Folding is on unless LLM_DOCTOR_FOLD=0 (tests and the bench compare both paths)."""
    return os.environ.get(ENV, "1") != "0"


@functools.lru_cache(maxsize=16)
def _compile_run(line: str) -> Callable[[bytes, int, int], int] | None:
    """`run_end(region, start, end)`: where the run of hot lines at `start` ends (start when none); one per shape
    and process (every analysis of a process, a worker's too, matches runs with it: its DFA's memory is shared)."""
    try:
        import re2

        options = re2_options(re2)
        options.longest_match = True  # the longest run (units end at a line end): a simpler DFA, faster
        program = re2.compile(f"(?:(?:{line})\\r?\\n)+".encode(), options)._regexp
        anchor = re2._Anchor.ANCHOR_START
        probe = program.Match(anchor, b"", 0, 0)
        if not isinstance(probe, list) or len(probe[0]) != 2:
            return None
    except Exception:  # no RE2 (or a binding of another shape): no folding, the per-line path reads all
        return None
    match = program.Match

    def run_end(region: bytes, start: int, end: int) -> int:
        found: int = match(anchor, region, start, end)[0][1]
        return found if found > start else start

    return run_end


class Folder:
    """The fold of one analysis: the owning parser's hot-line run matcher, checked against the
    analysis's router, triggers and start lines; `try_fold` is the scanner's hook."""

    def __init__(self, owner: int, spec: HotLines, run_end: Callable[[bytes, int, int], int],
                 others: tuple[int, ...] = (), guard: Finder | None = None) -> None:
        self.owner = owner  # the index of the parser that folds, in the analyzer's parser list
        self.others = others  # other parsers that read some hot lines too and fold them (`absorbs`)
        self.spec = spec
        self.run_end = run_end
        # where a line of a run may reach another parser or start a session (`_guard`; None: nowhere)
        self.guard = guard
        self._matched: tuple[bytes | None, int] = (None, 0)  # the last run matched: its region and end
        self.parsers: list[LogParser] = []
        self.runs = 0  # runs folded (tests read it: a fold that never happens proves nothing)
        self.trigger: Finder | None = None  # the analysis's candidate search (HotRun.hits)
        self._guarded = _FirstLine(guard) if guard is not None else _FirstLine(lambda *a: None)
        self._long = _LongLine()
        self._end_finders: dict[tuple[str, ...], _FirstLine | None] = {}
        self._wanted: Finder | bool | None = False  # what any parser reads line by line (HotRun.wanted; False: unmade)
        self._all: list[LogParser] = []  # every parser of the session, and the router it routes them with
        self._router: Router | None = None

    @classmethod
    def build(cls, owner: int, parsers: list[LogParser], router: Router, scanner: LineScanner,
              starts: StartLines) -> Folder | None:
        """The fold of parser `owner`'s hot lines, or None where they cannot be folded (see `_checked`)."""
        spec = type(parsers[owner]).hot
        if spec is None:
            return None
        others = _checked(spec, owner, parsers, router, scanner, starts)
        if others is None:
            return None
        run_end = _compile_run(spec.line)
        if run_end is None:
            return None
        guard = _guard(spec, {owner, *others}, parsers, starts)
        if guard is not None and "\\n" in spec.line:
            return None  # a guarded run is matched again after a guarded line: its units must be single lines
        folder = cls(owner, spec, run_end, others, guard)
        folder.trigger = span_finder(scanner.trigger)
        folder.bind(parsers, router)
        return folder

    def bind(self, parsers: list[LogParser], router: Router | None = None) -> None:
        """The parsers of a new session: the owner first."""
        self.parsers = [parsers[self.owner], *(parsers[i] for i in self.others)]
        self._all = parsers
        self._router = router

    def reaches(self, parser: object, line: LogLine, raw: bytes) -> bool:
        """Whether the analysis hands candidate line `line` (its bytes `raw`) to `parser`, as its `_consume` routes
        it (doctor/sources/logs/analyze.py): for a parser that reads some lines of a run one by one (HotRun.feed)."""
        router = self._router
        found = router.route(raw, router.plain(line, raw)) if router is not None else None
        targets = router.targets(found, line.text) if found is not None and router is not None else self._all
        return any(p is parser for p in targets)

    def run(self, region: bytes | None, start: int, end: int, number: int, lines: int = -1,
            load: Callable[[], bytes] | None = None) -> HotRun:
        """A run of this folder's lines, for its parsers to read and take (HotRun)."""
        spec = self.spec
        run = HotRun(region, start, end, number, spec.kinds, spec.line, lines, load, self.trigger, self.reaches)
        if self._wanted is False:
            patterns = tuple(dict.fromkeys(p for parser in self.parsers for p in parser.fold_patterns(spec.kinds)))
            self._wanted = shape_finder(patterns, spec.line) if patterns else None
        run.wanted = self._wanted if self._wanted is not True else None
        return run

    def try_fold(self, region: bytes, start: int, end: int, number: int) -> tuple[int, int]:
        """Fold the run of hot lines at region[start:...] (a candidate line, number `number`) when the
        owner is ready for it: the position after the folded lines and their number, or (0, 0)
        when nothing was folded. The run's last line stays for the per-line path."""
        # readiness first: a run match reads the whole run, and a parser that is not ready (an OOM line
        # waiting for its phase) would have it read again at each of its lines
        kinds = self.spec.kinds
        if not all(p.fold_ready(kinds) for p in self.parsers):
            return NOTHING
        run = self.match(region, start, end, number)
        if run is None:
            return NOTHING
        for parser in self.parsers:
            parser.fold(run)
        self.runs += 1
        return run.end, run.lines

    def ready(self) -> bool:
        """Whether every parser that folds this folder's runs is ready for one now."""
        kinds = self.spec.kinds
        return all(p.fold_ready(kinds) for p in self.parsers)

    def match(self, region: bytes, start: int, end: int, number: int, known: bool = True) -> HotRun | None:
        """The run of hot lines at region[start:...] that `try_fold` folds (None: none there), whatever the parsers'
        state but for the lines they say a run must end before (LogParser.fold_guard; `known=False`: a run read
        ahead, not cut there: `ends` says where it would be). Its last line is left out: it stays for the
        per-line path."""
        matched, matched_end = self._matched
        if matched is region and start < matched_end:  # further on in a run a guarded line cut (its lines are units)
            stop = matched_end
        else:
            stop = self.run_end(region, start, end)
            if stop <= start:
                return None
            self._matched = (region, stop)
        if self.spec.unbounded:
            stop = self._long.first(region, start, stop)
        if known:
            ends = self._ends(known=True)
            if ends is not None:
                stop = ends.first(region, start, stop)
        if self.guard is not None:
            stop = self._guarded.first(region, start, stop)
        if stop <= start:  # the first line itself is one a run ends before
            return None
        stop = region.rfind(b"\n", start, stop - 1) + 1  # the last line goes line by line
        if stop <= start:
            return None
        return self.run(region, start, stop, number)

    def _ends(self, known: bool) -> _FirstLine | None:
        """Where a run must end for its parsers' state (LogParser.fold_guard): None where nowhere."""
        kinds = self.spec.kinds
        patterns = tuple(dict.fromkeys(p for parser in self.parsers for p in parser.fold_guard(kinds, known)))
        if not patterns:
            return None
        found = self._end_finders.get(patterns)
        if found is None:
            find = shape_finder(patterns, self.spec.line)
            found = self._end_finders[patterns] = _FirstLine(find) if find is not None else None
        return found

    def ends_in(self, run: HotRun) -> bool:
        """Whether a run read ahead holds a line it would end before for some state of its parsers (fold_guard)."""
        ends = self._ends(known=False)
        return ends is not None and ends.first(run.region, run.start, run.end) < run.end

    def ends_now(self) -> bool:
        """Whether, its parsers being as they are now, a run may have to end before one of its lines (fold_guard)."""
        return self._ends(known=True) is not None


class _FirstLine:
    """The start of the first line in region[start:stop] where `find` finds something (stop: none), the answer kept
    for the next call further on in the same region (a run ends there, the scanner comes back after that line)."""

    def __init__(self, find: Finder) -> None:
        self.find = find
        self._last: tuple[bytes | None, int, int, int] = (None, 0, 0, 0)  # region, from, to, answer

    def first(self, region: bytes, start: int, stop: int) -> int:
        last_region, lo, hi, answer = self._last
        if last_region is region and lo <= start and stop <= hi and start <= answer:
            return min(answer, stop) if answer < hi else stop
        hit = self.find(region, start, stop)
        answer = stop if hit is None else region.rfind(b"\n", start, hit[0]) + 1 or start
        self._last = (region, start, stop, answer)
        return answer


class _LongLine:
    """`first`: the start of the first line in region[start:stop] longer than the scanner's cut (stop: none)."""

    def __init__(self) -> None:
        self._last: tuple[bytes | None, int, int, int] = (None, 0, 0, 0)

    def first(self, region: bytes, start: int, stop: int) -> int:
        last_region, lo, hi, answer = self._last
        if last_region is region and lo <= start and stop <= hi and start <= answer:
            return min(answer, stop) if answer < hi else stop
        answer = _short_lines(region, start, stop)
        self._last = (region, start, stop, answer)
        return answer


class Folders:
    """Every fold of one analysis (one per parser that declares hot lines and passes the checks), behind one
    hook for the scanner: its probe is any spec's probe, and a candidate line that passes it is offered to the
    folders whose own probe it passes, in parser order, until one folds a run. A folder is built (checked,
    compiled) when a line first passes its probe: a log that holds no such line pays nothing for it."""

    def __init__(self, owners: list[int], parsers: list[LogParser], router: Router, scanner: LineScanner,
                 starts: StartLines, escaped: bool = False) -> None:
        # the parsers (their indices) that declare hot lines (where the analysis unescapes lines: bounded shapes only)
        owners = [i for i in owners if not (escaped and (h := type(parsers[i]).hot) is not None and h.unbounded)]
        self.owners = owners
        self.specs = [h for h in (type(parsers[i]).hot for i in owners) if h is not None]
        self._parsers = parsers
        self._router: Router | None = router
        self._context = (scanner, starts)
        self._built: dict[int, Folder | None] = {}
        self._probes = [re.compile(b"|".join(map(re.escape, s.probes))).search if s.probes else None
                        for s in self.specs]
        probes = [p for s in self.specs for p in s.probes]
        every = all(s.probes for s in self.specs)
        self.probe = re.compile(b"|".join(map(re.escape, dict.fromkeys(probes)))).search if every else None
        self.probe_within = max(s.probe_within for s in self.specs)
        # reading ahead (doctor/sources/logs/parallel.py): each run a folder would fold, whatever the parsers' state,
        # handed with what its parsers read in it (`read_run`), instead of folded: recorder(owner, run, reads, ends),
        # `ends`: it holds a line some state of its parsers would end it before (Folder.ends_in)
        self.recorder: Callable[[int, HotRun, tuple[object, ...], bool], None] | None = None

    @classmethod
    def build(cls, parsers: list[LogParser], router: Router | None, scanner: LineScanner,
              starts: StartLines, escaped: bool = False) -> Folders | None:
        owners = [i for i, p in enumerate(parsers) if type(p).hot is not None]
        if router is None or not owners:
            return None
        return cls(owners, parsers, router, scanner, starts, escaped)

    def _folder(self, owner: int) -> Folder | None:
        if owner not in self._built:
            router = self._router
            self._built[owner] = None if router is None else Folder.build(owner, self._parsers, router, *self._context)
        return self._built[owner]

    @property
    def folders(self) -> list[Folder]:
        """The folders that passed their checks (every one built)."""
        return [f for f in map(self._folder, self.owners) if f is not None]

    @property
    def runs(self) -> int:
        """Runs folded, by every folder (tests read it: a fold that never happens proves nothing)."""
        return sum(f.runs for f in self._built.values() if f is not None)

    def of(self, owner: type[LogParser]) -> Folder | None:
        """The folder of the parser of class `owner` (None: its hot lines are read line by line)."""
        return next((self._folder(i) for i in self.owners if isinstance(self._parsers[i], owner)), None)

    def bind(self, parsers: list[LogParser], router: Router | None) -> None:
        """The parsers of a new session, and the router the analysis routes them with (a folder built later is
        checked against it: another router would name other parsers; none: no folder is built any more)."""
        self._parsers = parsers
        self._router = router
        for folder in self._built.values():
            if folder is not None:
                folder.bind(parsers, router)

    def attach(self, scanner: LineScanner) -> None:
        """Make `scanner` hand its candidate lines that pass a probe to `try_fold`."""
        scanner.fold = self.try_fold
        scanner.probe = self.probe
        scanner.probe_within = self.probe_within

    def try_fold(self, region: bytes, start: int, end: int, number: int) -> tuple[int, int]:
        """The first folder whose probe the line passes and that folds a run there (Folder.try_fold)."""
        recorder = self.recorder
        for owner, spec, probe in zip(self.owners, self.specs, self._probes, strict=True):
            if probe is not None and not probe(region, start, start + spec.probe_within):
                continue
            folder = self._folder(owner)
            if folder is None:
                continue
            if recorder is not None:
                run = folder.match(region, start, end, number, known=False)
                if run is not None:
                    recorder(owner, run, tuple(p.read_run(run) for p in folder.parsers), folder.ends_in(run))
                    return run.end, run.lines
                continue
            taken = folder.try_fold(region, start, end, number)
            if taken[1]:
                return taken
        return NOTHING


def _guard(spec: HotLines, folding: set[int], parsers: list[LogParser], starts: StartLines) -> Finder | None:
    """Where, in a run of lines of a shape with free text (shapes.py free_text: Ollama's access lines hold a
    path), a line may reach a parser that does not fold the run or start a session: one search for every
    other gated parser's gate, every other alone parser's index patterns and the start lines (those that can
    match inside such a line). The router gives a line to a gated parser only where its gate is in it, to an
    alone one only where its index finds something; a parser with neither reads every line and must fold the
    run (`_checked`). None for an exact shape (llama-server's: numbers and spaces are all its lines vary in,
    and `_checked` reads its samples) or where nothing can match."""
    if not free_text(spec.line) and not spec.unbounded:
        return None
    patterns: list[str] = list(starts.fragments)
    for index, parser in enumerate(parsers):
        if index in folding:
            continue
        if parser.gate:
            patterns += parser.gate
        elif parser.alone and parser.literal_index is not None:
            patterns += parser.literal_index.patterns
    return shape_finder(tuple(dict.fromkeys(patterns)), spec.line)


def _checked(spec: HotLines, owner: int, parsers: list[LogParser], router: Router, scanner: LineScanner,
             starts: StartLines) -> tuple[int, ...] | None:
    """The spec's quiet lines are no candidates; each of its samples is a unit, each line of which is
    either no candidate at all (a line a unit holds between its hot lines) or a line that starts no
    session, for the owner and parsers that fold the spec's kinds too (their `absorbs`) alone:
    those others, or None when a line would go to a parser that reads it line by line (folding would
    hide it from that parser: the fold stays off)."""
    import re2

    try:
        whole = re2.compile(f"(?:{spec.line})".encode(), re2_options(re2))
    except re2.error:  # a spec RE2 refuses is read line by line
        return None
    for sample in spec.samples:  # the probe must not turn a unit away
        if spec.probes and not any(p in sample[:spec.probe_within] for p in spec.probes):
            return None
    for sample in spec.quiet:  # a quiet line a trigger selects (another parser's, say) would be hidden
        if whole.fullmatch(sample) is None or scanner.trigger.search(sample) is not None:
            return None
    owner_parser = parsers[owner]
    others: set[int] = set()
    for sample in spec.samples:
        if whole.fullmatch(sample) is None:
            return None
        for raw in sample.split(b"\n"):
            if scanner.trigger.search(raw) is None:
                continue
            line = make_line(1, raw)
            if router.plain(line, raw):
                found = router.route(raw)
                if found is None or found.start:  # (a plain line always has a route)
                    return None
                targets = router.targets(found, line.text)
            else:  # such a line goes to every parser, each asking its own gate
                targets = [p for p in parsers if p.passes_gate(line.text)]
            if starts.marker(raw) is not None:
                return None
            for parser in targets:
                if parser is owner_parser:
                    continue
                if not set(spec.kinds) <= type(parser).absorbs:
                    return None
                others.add(next(i for i, p in enumerate(parsers) if p is parser))
    # a parser that folds the spec's kinds gets every run, whether or not a sample line went to it: a run's
    # lines vary in their numbers, and its fold alone can say what they hold for it (the catalogue's)
    others.update(i for i, p in enumerate(parsers) if p is not owner_parser and set(spec.kinds) <= type(p).absorbs)
    return tuple(sorted(others))


def _short_lines(region: bytes, start: int, stop: int, max_line: int = MAX_LINE) -> int:
    """`stop`, or the start of the first line in region[start:stop] that may be longer than the scanner's cut (a
    stretch of half of it without a line end: each is checked at once): such a line goes line by line."""
    half = max_line // 2
    for pos in range(start, stop, half):
        if region.find(b"\n", pos, min(pos + half, stop)) < 0 and min(pos + half, stop) - pos == half:
            begin = region.rfind(b"\n", start, pos) + 1 or start
            end = region.find(b"\n", pos, stop)
            if (end if end >= 0 else stop) - begin > max_line:
                return begin
    return stop
