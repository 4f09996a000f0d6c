"""The interface every engine's log parser implements, and the shape each one declares its lines in.

A parser declares its line kinds once, as a `LineKinds` table of `LineKind`s: for each kind, the
regular-expression fragments of its lines, the method that reads it, the patterns that method
matches and the phase it runs in. From that table come the parser's `triggers` (the fragments the
analyzer's scan over the raw bytes selects candidate lines with), its `gate` (the lines it reads at
all) and its literal index with the dispatch plan (which kinds a line can be, told by the literals
every match of their patterns must hold; doctor/sources/logs/matcher.py), so the four cannot drift apart.
The scanner hands a parser only the lines that match one of the triggers of any parser.

`feed` reads a line and writes facts and events into the shared snapshot as it goes (last value
wins, so memory stays flat); `summarize` writes the facts that need the whole input (aggregates,
pending OOM phases) and must leave the parser able to go on (watch --log asks for summaries while
the log grows). Parsers vote for the engines whose signature lines they saw; the analyzer turns the
votes into `engine.name`.

What the parsers of one analysis share besides the snapshot (the PyTorch OOM board the vLLM and TGI
parsers both write to) lives in an `AnalysisState` that the analyzer makes for each session and
hands to every parser in `bind`; nothing is kept in module globals.

Pure: text in, facts out.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from doctor.core.facts import Event, Facts, Source, Value
from doctor.sources.logs.hot import HotLines, HotRun
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.matcher import FragmentIndex, LiteralIndex, rough, text_filter
from doctor.sources.logs.timeline import Placement, Timeline


@dataclass(slots=True)
class Extremes:
    """The smallest and largest value of a series, each with the source of the line it was read from.

    A derived min/max fact must cite the line that holds that value, not the last line of the
    series (evidence "58.4 tokens/s (log line 58)" while 58.45 is on line 50); keeping the extremes
    as the values arrive also keeps them right when a bounded history drops its oldest entries."""

    low: float | None = None
    low_source: Source | None = None
    high: float | None = None
    high_source: Source | None = None
    count: int = 0

    def add(self, value: float | None, source: Source) -> None:
        if value is None:
            return
        self.count += 1
        if self.low is None or value < self.low:
            self.low, self.low_source = value, source
        if self.high is None or value > self.high:
            self.high, self.high_source = value, source

    def emit(self, facts: Facts, low_name: str | None, high_name: str | None, at_least: int = 1) -> None:
        """Set the min fact and/or the max fact, each sourced from its own line."""
        if self.count < at_least:
            return
        if low_name and self.low is not None and self.low_source is not None:
            facts.set(low_name, self.low, self.low_source)
        if high_name and self.high is not None and self.high_source is not None:
            facts.set(high_name, self.high, self.high_source)


T = TypeVar("T")


class AnalysisState:
    """The per-analysis state that several parsers share, one object of each kind: made by the
    analyzer for each session (so a new session starts clean) and handed to every parser in `bind`.
    A part is made on first use, `state.part(TorchOomBoard)`, from its class called without arguments."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: dict[type, Any] = {}

    def part(self, kind: type[T]) -> T:
        found = self._parts.get(kind)
        if found is None:
            found = self._parts[kind] = kind()
        return found


@dataclass(frozen=True, slots=True)
class LineKind:
    """One kind of line a parser reads.

    Its handler is the parser method decorated with `@reads(this kind)`, `handler(line, *args) -> bool`:
    True when it took the line (the kinds after it in the same phase are then not tried); the parser
    class finds it when it is made (a kind with no handler fails there). `patterns` are what the
    handler matches on the line's own text (gated patterns, whose required literals are read from
    their syntax, or plain substrings): the kind is tried only on a line that holds one of their
    literals, so a handler must change nothing and return False when none of them matches. A kind
    without patterns, or with one that names no literal (case-insensitive, or reading more than the
    line: the line joined with the next, a slog message), is tried on every line of its phase.
    `keys` is a cheaper first need (substrings the handler tests itself before its patterns).
    `lines` are the RE2 fragments of the lines of this kind (they make the parser's gate) and
    `scan` those it adds to the analyzer's scan, `lines` when None (a parser without a gate lists
    its trigger fragments there). A kind with `handled=False` has no handler: it only names lines
    that the parser reads before its dispatch (an engine's header, read for its vote)."""

    name: str
    patterns: tuple[object, ...] = ()
    lines: tuple[str, ...] = ()
    scan: tuple[str, ...] | None = None
    keys: tuple[str, ...] = ()
    phase: str = "read"
    handled: bool = True

    def needs(self) -> list[tuple[str, ...]]:
        """The literal sets a line must meet (one literal of each) for this kind to be tried."""
        found: list[tuple[str, ...]] = []
        if self.keys:
            found.append(self.keys)
        literals = _literals(self.patterns)
        if literals:
            found.append(literals)
        return found


READS = "__line_kinds__"  # the attribute `reads` puts on a handler: the kinds it reads
H = TypeVar("H", bound=Callable[..., Any])


def reads(*kinds: LineKind) -> Callable[[H], H]:
    """Mark a parser method as the handler of these line kinds: `@reads(KV_SIZE_KIND)` above
    `def _kv_size(self, line)`. The parser's LineKinds table binds it when the class is made."""
    def mark(handler: H) -> H:
        setattr(handler, READS, (*getattr(handler, READS, ()), *kinds))
        return handler

    return mark


def _literals(patterns: tuple[object, ...]) -> tuple[str, ...] | None:
    """One of these is in every line any of `patterns` matches; None when some pattern names none."""
    if not patterns:
        return None
    out: list[str] = []
    for item in patterns:
        literals = (item,) if isinstance(item, str) else getattr(item, "literals", None)
        if not literals or not all(lit and lit.isascii() for lit in literals):
            return None  # a literal index holds ASCII literals: such a kind is always tried
        out.extend(literals)
    return tuple(dict.fromkeys(out))


def _unique(fragments: Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(fragments))


class LineKinds:
    """A parser's line kinds, in the order they are tried, and what follows from them: `triggers`,
    `gate` (None for a parser that reads every candidate line, `gated=False`), the literal `index`
    (None when no kind needs a literal) and, per set of literals a line holds, the `plan`: for each
    phase, the handlers of the kinds the line can be."""

    PLANS_MAX = 4096  # lines of a log fall into few literal sets; a hostile one cannot grow the cache

    def __init__(self, *kinds: LineKind, phases: tuple[str, ...] = ("read",), gated: bool = True) -> None:
        unknown = {k.phase for k in kinds} - set(phases)
        if unknown:
            raise ValueError(f"line kinds: phases {sorted(unknown)} not in {phases}")
        self.kinds = kinds
        self.phases = phases
        self.triggers = _unique(f for k in kinds for f in (k.lines if k.scan is None else k.scan))
        self.gate = _unique(f for k in kinds for f in k.lines) if gated else None
        needs = [k.needs() for k in kinds]
        literals = _unique(lit for kind_needs in needs for need in kind_needs for lit in need)
        self.index = LiteralIndex(list(literals)) if literals else None
        index = self.index
        # per kind: the masks of its needs (a line must hold a literal of each)
        self._masks = [tuple(index.mask(*need) for need in kind_needs) if index else () for kind_needs in needs]
        self._handlers: tuple[Callable[..., Any] | None, ...] = ()
        self._plans: dict[int, tuple[tuple[Callable[..., Any], ...], ...]] = {}

    @functools.cached_property
    def sources(self) -> tuple[str, ...]:
        """Every kind's patterns as RE2 sources, for a search of a block for lines a handler may take (a run of
        hot lines another parser folds: doctor/sources/logs/hot.py HotRun.hits): a plain substring escaped, a
        regex as it is where RE2 takes it, else any of its literals (or anything, without one). A line none of
        them is found in is one no handler of this parser changes anything on (LineKind's contract)."""
        return self.sources_without()

    @functools.lru_cache(maxsize=16)  # noqa: B019 - a parser class's table lives as long as the process
    def sources_without(self, *left_out: LineKind) -> tuple[str, ...]:
        """`sources` of every kind but these (a parser that reads their lines its own way in a fold)."""
        out: list[str] = []
        for kind in self.kinds:
            if kind in left_out:
                continue
            for item in kind.patterns:
                if isinstance(item, str):
                    out.append(re.escape(item))
                    continue
                source = getattr(item, "pattern", None)
                flags = getattr(item, "_flags", getattr(item, "flags", 0))
                out.append(rough(source, flags, getattr(item, "literals", None)) if isinstance(source, str)
                           else "(?s:.)")
        return tuple(dict.fromkeys(out))

    def phase(self, name: str) -> int:
        """The position of a phase in a plan."""
        return self.phases.index(name)

    def bind_class(self, cls: type) -> None:
        """Find each kind's handler on the parser class: the method marked `@reads(kind)` (a method
        that overrides it in a subclass keeps the mark's place). A kind without one fails here, when
        the class is made."""
        marked: dict[int, str] = {}
        for klass in reversed(cls.__mro__):
            for attr_name, attr in vars(klass).items():
                for kind in getattr(attr, READS, ()):
                    marked[id(kind)] = attr_name
        handlers: list[Callable[..., Any] | None] = []
        for kind in self.kinds:
            if not kind.handled:
                handlers.append(None)
                continue
            if id(kind) not in marked:
                raise TypeError(f"{cls.__name__}: line kind {kind.name!r} has no handler (a method marked "
                                f"@reads({kind.name} kind))")
            handlers.append(getattr(cls, marked[id(kind)]))
        self._handlers = tuple(handlers)
        self._plans = {}

    def handler(self, kind: LineKind) -> Callable[..., Any] | None:
        """The handler bound to `kind` (None for a kind without one)."""
        for k, found in zip(self.kinds, self._handlers, strict=True):
            if k is kind:
                return found
        raise KeyError(kind.name)

    def bits(self, text: str) -> int:
        index = self.index
        return index.bits(text) if index is not None else 0

    def plan(self, bits: int) -> tuple[tuple[Callable[..., Any], ...], ...]:
        """For each phase, the handlers of the kinds whose needs `bits` meets, in declared order."""
        plan = self._plans.get(bits)
        if plan is None:
            lists: list[list[Callable[..., Any]]] = [[] for _ in self.phases]
            for kind, handler, masks in zip(self.kinds, self._handlers, self._masks, strict=True):
                if handler is not None and all(bits & m for m in masks):
                    lists[self.phases.index(kind.phase)].append(handler)
            plan = tuple(tuple(x) for x in lists)
            if len(self._plans) >= self.PLANS_MAX:
                self._plans.clear()
            self._plans[bits] = plan
        return plan


_GATE_TESTS: dict[tuple[str, ...], Callable[[str], object]] = {}


def _gate_test(gate: tuple[str, ...]) -> Callable[[str], object]:
    """One compiled gate per fragment list, shared by every parser instance (a log with many engine
    sessions makes fresh parsers for each)."""
    test = _GATE_TESTS.get(gate)
    if test is None:
        test = _GATE_TESTS[gate] = text_filter(gate)
    return test


class LogParser:
    name = "base"
    # the parser's line kinds; a subclass that sets `kinds` gets the three below from it
    kinds: ClassVar[LineKinds | None] = None
    triggers: tuple[str, ...] = ()
    # when set, feed() ignores every line whose text matches none of these fragments, so the
    # analyzer may leave such lines out (it checks them all at once on the raw bytes)
    gate: tuple[str, ...] | None = None
    # the kinds' literal index: the analyzer's router fills it in its own pass over a plain line
    literal_index: LiteralIndex | None = None
    # the runs of lines this parser folds (doctor/sources/logs/fold.py): None for a parser that reads
    # every line one by one
    hot: ClassVar[HotLines | None] = None
    # the kinds of another parser's hot lines (HotLines.kinds) this one reads and folds too: a parser that
    # reads some hot lines (a catalogue's print_timing, say) sees the runs through `fold` instead of
    # turning folding off
    absorbs: ClassVar[frozenset[str]] = frozenset()
    # a parser that reads its lines alone (no gate; its literal index's patterns are its triggers and say which
    # lines are its own): a line only its triggers select goes to it and to no other parser (logs/router.py)
    alone: ClassVar[bool] = False
    # False for a parser that only says what no other parser read (doctor/sources/logs/unexplained.py): its facts
    # do not make an input an engine's, and it summarises after every other parser
    recognises: ClassVar[bool] = True
    # the engine's own start-up order where it differs from the timeline's (doctor/sources/logs/timeline.py
    # PLACED): step reached -> (out-of-memory phase, step) of what runs next
    startup_next: ClassVar[Mapping[str, tuple[str, str]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kinds = cls.__dict__.get("kinds")
        if kinds is not None:
            kinds.bind_class(cls)
            cls.triggers, cls.gate, cls.literal_index = kinds.triggers, kinds.gate, kinds.index
            if cls.__dict__.get("alone"):  # no gate: an index of its triggers says which lines are its own
                cls.gate, cls.literal_index = None, FragmentIndex(kinds.triggers)

    def __init__(self) -> None:
        self.votes: Counter[str] = Counter()
        self.facts = Facts()  # replaced by the analyzer with the shared snapshot
        self.state = AnalysisState()  # replaced by the analyzer with the one of its analysis
        self._gate_test = _gate_test(self.gate) if self.gate else None
        index = self.literal_index
        self._alone_index = index if self.alone and isinstance(index, FragmentIndex) else None
        self._last_src: tuple[LogLine | None, Source | None] = (None, None)

    def __getstate__(self) -> dict[str, Any]:
        """A parser's state moves between processes (doctor/sources/logs/parallel.py): its compiled gate and alone
        index do not (made again from the class's `gate` and the parser's literal index: `here`)."""
        state = self.__dict__.copy()
        state.pop("_gate_test", None)
        state.pop("_alone_index", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.here()

    def here(self) -> None:
        """Make again what a parser keeps of this process (its gate's test, its alone index), after its state
        moved here or its literal index was put back to this process's own (LogAnalyzer.adopt)."""
        self._gate_test = _gate_test(self.gate) if self.gate else None
        index = self.literal_index
        self._alone_index = index if self.alone and isinstance(index, FragmentIndex) else None

    def passes_gate(self, text: str) -> bool:
        """Whether `text` is one of this parser's lines (always, for a parser without a gate). Cheap
        when the analyzer's grouped scan has already said so (doctor/sources/logs/matcher.py, Verdict). An alone
        parser made from its line kinds has no gate: its lines are those its triggers' index finds something in."""
        if self._alone_index is not None:
            return bool(self._alone_index.bits(text))
        return self._gate_test is None or bool(self._gate_test(text))

    def bind(self, facts: Facts, state: AnalysisState | None = None) -> None:
        """Write into `facts` and share `state` with the other parsers of the same analysis."""
        self.facts = facts
        if state is not None:
            self.state = state

    def dispatch(self, line: LogLine, phase: int = 0, *args: Any, bits: int | None = None) -> bool:
        """Try the kinds of `phase` that `line` can be, in order, until one takes it (True). `bits`:
        the line's literal bits, when the caller has them already."""
        kinds = self.kinds
        assert kinds is not None
        if bits is None:
            bits = kinds.bits(line.text)
        for handler in kinds.plan(bits)[phase]:  # noqa: SIM110 - a plain loop: any() costs more per line
            if handler(self, line, *args):
                return True
        return False

    def run(self, handlers: tuple[Callable[..., Any], ...], line: LogLine, *args: Any) -> bool:
        """Try `handlers` (one phase of a plan, `kinds.plan(bits)[phase]`) until one takes the line."""
        for handler in handlers:  # noqa: SIM110 - a plain loop: any() costs more per line
            if handler(self, line, *args):
                return True
        return False

    # -- called by the analyzer ------------------------------------------------------------
    def feed(self, line: LogLine) -> None:
        """Read a candidate line: by default, a line that passes the gate goes to the kinds it can be."""
        if self.kinds is None:
            raise NotImplementedError
        if self.passes_gate(line.text):  # an alone parser: its triggers are in the line (the router's answer)
            self.dispatch(line)

    def feed_gap(self, number: int, text: str) -> None:
        """Text between candidate lines, delivered only while `wants_capture()` is true."""

    def wants_capture(self) -> bool:
        return False

    def summarize(self, facts: Facts) -> None:
        """Write whole-input facts into `facts` (a copy of the shared snapshot)."""

    def fold_ready(self, kinds: tuple[str, ...]) -> bool:
        """Whether a run of hot lines of `kinds` (its own `hot`'s, or another's it `absorbs`: HotLines.kinds)
        may be folded now: its state is one where `fold` leaves what feeding the lines one by one would."""
        return False

    def fold_patterns(self, kinds: tuple[str, ...]) -> tuple[str, ...]:
        """Patterns (RE2 sources) of the lines of a run of `kinds` this parser reads one by one (its `read_run` asks
        HotRun.wanted_lines for them): the run is searched once for every parser's, HotRun.wanted."""
        return ()

    def fold_guard(self, kinds: tuple[str, ...], known: bool = True) -> tuple[str, ...]:
        """Patterns (RE2 sources) of lines a run of `kinds` must end before, this parser being as it is (a line
        that would make it read the lines after it otherwise: ask for the text between candidates, say);
        `known=False`: whatever its state (a run read ahead, doctor/sources/logs/ahead.py)."""
        return ()

    def fold(self, run: HotRun) -> None:
        """Read a run of hot lines at once, as `feed` would read them one by one: `read_run`, then `take_run`."""
        self.take_run(self.read_run(run), run)

    def read_run(self, run: HotRun) -> Any:
        """What a run of hot lines holds for this parser, read from the run's bytes alone: never from the parser's
        state nor the run's line numbers (a worker process reads runs ahead of the analysis, with lines counted
        from its own start: doctor/sources/logs/parallel.py), so where the run holds a line, its place in the run
        (HotRun.at). Pickled between processes."""
        raise NotImplementedError

    def take_run(self, read: Any, run: HotRun) -> None:
        """Fold what `read_run` read from `run` into the state, as feeding the run's lines one by one would; `run`
        is numbered, and its bytes are fetched on first use (HotRun.region) where the fold needs to look again."""
        raise NotImplementedError

    # -- helpers for subclasses ------------------------------------------------------------
    def src(self, line: LogLine) -> Source:
        """The source of facts read from `line`: one (immutable) object for all the facts of a line."""
        last_line, last = self._last_src
        if last_line is line and last is not None:
            return last
        found = Source("log", self.name, line.number, line.raw[:300])
        self._last_src = (line, found)
        return found

    def set(self, name: str, value: Value, line: LogLine) -> None:
        """Set a fact read from `line` (its unit is the catalogue's)."""
        self.facts.set(name, value, self.src(line))

    def event(self, kind: str, line: LogLine, phase: str | None = None, **data: object) -> Event:
        event = Event(kind=kind, line=line.number, text=line.raw[:400], source=self.name, phase=phase,
                      data={k: v for k, v in data.items() if isinstance(v, int | float | str | bool)})
        self.facts.add_event(event)
        return event

    def placed_event(self, kind: str, line: LogLine, placed: Placement, *, in_phase: bool = True,
                     **data: object) -> Event:
        """An event where the run's timeline placed it, citing the line that placed it: in that phase (an
        out-of-memory event), or (`in_phase=False`: a crash) with only what the run had done before it."""
        event = self.event(kind, line, placed.phase if in_phase else None, **{**data, **placed.data()})
        event.placed_by = placed.lines()
        return event

    # -- the run's timeline (doctor/sources/logs/timeline.py) -------------------------------------
    @property
    def timeline(self) -> Timeline:
        """The timeline this parser's analysis shares (one per session)."""
        return self.state.part(Timeline)

    def mark(self, step: str, line: LogLine, what: str | None = None) -> bool:
        """`line` shows the run reached `step` (True when that moved the run on)."""
        return self.timeline.reach(step, line.number, line.raw, self.name, what, self.startup_next)

    def placed(self, line: LogLine | int) -> Placement | None:
        """Where a failure on `line` fell in the run (None: no step marked before it)."""
        return self.timeline.place(line if isinstance(line, int) else line.number)



def lines_read(facts: Facts, skip_kinds: tuple[str, ...] = (), skip_sources: tuple[str, ...] = ()) -> set[int]:
    """The log lines some parser made an event or a fact from, less the events of `skip_kinds` and the events
    and facts of the parsers named in `skip_sources` (a parser asking about the others leaves out its own)."""
    read = {e.line for e in facts.events()
            if e.kind not in skip_kinds and e.source not in skip_sources and e.line is not None}
    read.update(f.source.line for f in facts if f.source.kind == "log" and f.source.line is not None
                and f.source.name not in skip_sources)
    return read
