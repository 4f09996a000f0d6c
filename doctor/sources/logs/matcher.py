"""The matchers of the log path: the trigger scan over raw bytes, and literal gates for line patterns.

Python's `re` tries each alternative at each position, which crawls on a pattern of a hundred
alternatives. RE2 (google-re2) compiles the alternation to an automaton and scans at hundreds of
MB/s; it is used when installed, with `re` as the fallback so the tool still works without it.
Fragments must use the syntax both engines share (no look-around, no backreferences).

A parser runs dozens of patterns on each candidate line, and `re` walks the whole line for each
one. `gated(pattern)` takes from the pattern's own syntax tree (doctor/sources/logs/literals.py) the
substrings every match must contain (one of a set) and checks those with `in` (a fast byte search)
before running the regex: same matches, found only where they can be. Most patterns also name
literals that every match holds within a bounded distance of its start (`leading_literals`); on a
long line the regex is then tried only that far before each of their occurrences, not along the
whole line: a vLLM `Received request` line holds a whole prompt (and its token ids after) around the
few sampling parameters the patterns read. `LiteralIndex` tells which of many such literals a
line holds in one RE2 set match (every parser routes its line kinds with it, doctor/sources/logs/base.py);
`set_matcher`, `span_finder` and `text_filter` call RE2 without the binding's per-call overhead
where it allows; a `Verdict` lets whoever already matched a gate on a line say so. Pure.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from doctor.sources.logs.literals import Lead, leading_literals, required_literals

__all__ = ["BytesPattern", "FragmentIndex", "GatedPattern", "LiteralIndex", "Verdict", "compile_triggers", "gated",
           "leading_literals", "required_literals", "set_matcher", "span_finder", "text_filter", "verdict"]


class BytesPattern(Protocol):
    def search(self, data: bytes, pos: int = ...) -> re.Match[bytes] | None: ...


def compile_triggers(fragments: list[str]) -> BytesPattern:
    """One pattern for any of `fragments` (RE2 where it takes it), compiled once per process for the same list:
    every analysis of a process (a session's, a worker's: doctor/sources/logs/parallel.py) scans with the same."""
    return _compile_triggers(tuple(fragments))


@functools.lru_cache(maxsize=16)
def _compile_triggers(fragments: tuple[str, ...]) -> BytesPattern:
    source = "|".join(f"(?:{f})" for f in fragments).encode()
    try:
        import re2
    except ImportError:
        return re.compile(source)
    try:
        return re2.compile(source, re2_options(re2))
    except Exception:
        return re.compile(source)


def span_finder(pattern: BytesPattern) -> Callable[[bytes, int, int], tuple[int, int] | None]:
    """`find(data, pos, endpos)`: the span of the first match in data[pos:endpos], or None. With RE2
    it calls the compiled program directly (the Python wrapper's generator and match object cost
    more than the search on a line-sized hop); otherwise it is `pattern.search`."""
    program = getattr(pattern, "_regexp", None)
    try:
        import re2

        anchor = re2._Anchor.UNANCHORED
        direct = program.Match  # type: ignore[union-attr]
        probe = direct(anchor, b"", 0, 0)
        if not isinstance(probe, list) or len(probe[0]) != 2:  # the shape we rely on: [(start, end), ...]
            raise TypeError
    except Exception:
        def find(data: bytes, pos: int, endpos: int) -> tuple[int, int] | None:
            m = pattern.search(data, pos, endpos)  # type: ignore[call-arg]
            return None if m is None else m.span()

        return find

    def find_direct(data: bytes, pos: int, endpos: int) -> tuple[int, int] | None:
        span: tuple[int, int] = direct(anchor, data, pos, endpos)[0]
        return None if span[0] < 0 else span

    return find_direct


class Verdict:
    """The last text known to pass one gate (a fragment list), told by whoever matched it already
    (the log router, in its one pass over the raw bytes). One text at a time; a reader that finds
    another text there simply runs the gate itself."""

    __slots__ = ("passed",)

    def __init__(self) -> None:
        self.passed: str | None = None


_VERDICTS: dict[tuple[str, ...], Verdict] = {}


def verdict(fragments: Iterable[str]) -> Verdict:
    """The shared verdict slot of the gate made of these fragments (equal lists share one)."""
    return _VERDICTS.setdefault(tuple(fragments), Verdict())


def text_filter(fragments: Iterable[str]) -> Callable[[str], object]:
    """`test(text)`: true when `text` holds a match of one of `fragments` (RE2 when installed). The
    text is encoded once and searched as bytes (what the RE2 binding does for a str, less its
    per-call offset bookkeeping); a lone surrogate raises UnicodeEncodeError, as it does there.
    A text the gate's Verdict names is known to pass without a search."""
    fragments = tuple(fragments)
    source = "|".join(f"(?:{f})" for f in fragments)
    known = verdict(fragments)
    search: Callable[[str], object] | None = None  # compiled on the first text no Verdict vouches for

    def test(text: str) -> object:
        nonlocal search
        if known.passed is text:
            return True
        if search is None:
            search = _text_search(source)
        return search(text)

    return test


def _text_search(source: str) -> Callable[[str], object]:
    """`search(text)` of `source`: RE2 on the text's UTF-8 bytes, else the standard engine."""
    try:
        import re2

        pattern = re2.compile(source)
    except Exception:  # RE2 missing or refusing the pattern: the standard engine works
        return re.compile(source).search
    find = span_finder(pattern)

    def search(text: str) -> object:
        data = text.encode("utf-8")
        return find(data, 0, len(data))

    return search


_UNSET: Any = object()


class GatedPattern:
    """`re.compile(source, flags)` behind a literal gate: `search`, `findall` and `finditer` run the
    regex only on text that holds one of its required literals, so they find exactly what the plain
    pattern finds. Compiled, and its literals read, on first use: a parser module holds dozens of
    patterns and a short log touches few of them (start-up is part of every command)."""

    __slots__ = ("_flags", "_literals", "_regex", "findall", "finditer", "pattern", "search")

    def __init__(self, source: str, flags: int = 0) -> None:
        self.pattern = source
        self._flags = flags
        self._regex: re.Pattern[str] | None = None
        self._literals: tuple[str, ...] | None = _UNSET
        self.search: Callable[..., re.Match[str] | None] = self._first_search
        self.findall: Callable[..., list[Any]] = self._first_findall
        self.finditer: Callable[..., Iterator[re.Match[str]]] = self._first_finditer

    @property
    def literals(self) -> tuple[str, ...] | None:
        """The required literals (one of them is in every match), or None: no gate."""
        if self._literals is _UNSET:
            self._literals = required_literals(self.pattern, self._flags)
        return self._literals

    @property
    def regex(self) -> re.Pattern[str]:
        if self._regex is None:
            self._ready()
        assert self._regex is not None
        return self._regex

    def _ready(self) -> None:
        regex = self._regex = re.compile(self.pattern, self._flags)
        search, findall, finditer = regex.search, regex.findall, regex.finditer
        literals = self.literals
        if not literals:
            self.search, self.findall, self.finditer = search, findall, finditer
            return
        lead = leading_literals(self.pattern, self._flags)
        if len(literals) == 1:
            literal = literals[0]

            def opened(text: str) -> bool:
                return literal in text

            def gated_search(text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
                return search(text, pos, endpos) if literal in text else None
        else:
            def opened(text: str) -> bool:
                for lit in literals:  # noqa: SIM110 - a loop is faster than any() over a generator here
                    if lit in text:
                        return True
                return False

            def gated_search(text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
                for lit in literals:
                    if lit in text:
                        return search(text, pos, endpos)
                return None

        if lead is not None:
            gated_search = _skipping(gated_search, None if set(lead[1]) == set(literals) else opened, regex, lead)

        def gated_findall(text: str, pos: int = 0, endpos: int = sys.maxsize) -> list[Any]:
            return findall(text, pos, endpos) if opened(text) else []

        def gated_finditer(text: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[re.Match[str]]:
            return finditer(text, pos, endpos) if opened(text) else iter(())

        self.search, self.findall, self.finditer = gated_search, gated_findall, gated_finditer

    def _first_search(self, *args: Any) -> re.Match[str] | None:
        self._ready()
        return self.search(*args)

    def _first_findall(self, *args: Any) -> list[Any]:
        self._ready()
        return self.findall(*args)

    def _first_finditer(self, *args: Any) -> Iterator[re.Match[str]]:
        self._ready()
        return self.finditer(*args)

    def __getattr__(self, name: str) -> Any:  # match, sub, groups, flags, ...: the plain pattern's
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.regex, name)

    def __repr__(self) -> str:
        return f"gated({self.pattern!r})"


_FEW_STARTS = 8  # past this many places a match could start, one search from the first is cheaper
_LONG = 256  # a shorter text is searched whole: the regex walks it faster than the skip's own steps cost


def _skipping(gated_search: Callable[..., re.Match[str] | None], opened: Callable[[str], bool] | None,
              regex: re.Pattern[str], lead: Lead) -> Callable[..., re.Match[str] | None]:
    """`gated_search`, for a long text tried only where a match can start (leading_literals): within `back`
    characters before an occurrence of a mark, in order, so the first that matches is the leftmost match,
    the one a search finds. Where marks occur often (or `back` is long), one search from the first mark
    less `back`. `opened`: the literal gate, None where the marks are its literals (finding them is the gate)."""
    back, marks = lead
    search, match = regex.search, regex.match
    few = _FEW_STARTS if back <= _FEW_STARTS else 0  # a long lead: always the one search

    def skipping_search(text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        if len(text) < _LONG:
            return gated_search(text, pos, endpos)
        if opened is not None and not opened(text):
            return None
        pos = max(pos, 0)  # as `re` reads it (str.find would count from the end)
        found: list[int] = []
        first = -1
        for mark in marks:
            at = text.find(mark, pos, endpos)
            if at >= 0 and (first < 0 or at < first):
                first = at
            while at >= 0 and len(found) <= few:
                found.append(at)
                at = text.find(mark, at + 1, endpos)
        if first < 0:
            return None
        if len(found) > few:  # many places to try (past the cap, later marks were only looked for once)
            return search(text, max(first - back, pos), endpos)
        found.sort()
        tried = pos - 1
        for at in found:
            for start in range(at - back if at - back > tried else tried + 1, at + 1):
                m = match(text, start, endpos)
                if m is not None:
                    return m
            tried = at
        return None

    return skipping_search


def gated(source: str | re.Pattern[str], flags: int = 0) -> Any:
    """`re.compile(source, flags)` behind a literal gate (same matches); see GatedPattern. A pattern
    already compiled is returned as it is."""
    if isinstance(source, re.Pattern):
        return source
    return GatedPattern(source, flags)


# RE2's memory for one set (a bound, not an allocation): its program and the DFA states it caches. With
# RE2's default (8 MiB) the router's set, once it holds the message catalogue's patterns, leaves the DFA
# too little room and rebuilds its states on every line (45 us a line instead of 1)
SET_MAX_MEM = 64 << 20


def re2_options(re2: Any) -> Any:
    """RE2's options for the log path's large patterns (trigger alternations, sets, folded shapes of many
    fields): SET_MAX_MEM of state. With the default, a large DFA falls back to a slower engine (and RE2
    says so on stderr)."""
    options = re2.Options()
    options.max_mem = SET_MAX_MEM
    return options


_PYTHON_ONLY = re.compile(r"\(\?<?[=!]|\(\?P=|\\[1-9]")  # syntax RE2 refuses (asked anyway, it logs why)


def class_end(pattern: str, i: int) -> int:
    """Where the character class that opens at pattern[i] (a `[`) ends: the position after its `]`."""
    end = i + 1 + pattern.startswith("^", i + 1)
    end += pattern.startswith("]", end)
    while end < len(pattern) and pattern[end] != "]":
        end += 2 if pattern[end] == "\\" else 1
    return end + 1


def _without_lookarounds(source: str) -> str:
    """`source` with its lookarounds dropped and its backreferences as anything (`.*`): a pattern that matches
    wherever `source` matches (in a line), for a search that may find more."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c == "\\" and i + 1 < n:
            out.append(".*" if source[i + 1] in "123456789" else source[i:i + 2])
            i += 2
            continue
        if c == "[":  # a class, copied whole
            end = class_end(source, i)
            out.append(source[i:end])
            i = end
            continue
        if source.startswith(("(?=", "(?!", "(?<=", "(?<!", "(?P="), i):
            depth, j = 0, i
            while j < n:  # to its closing parenthesis
                if source[j] == "\\":
                    j += 2
                    continue
                if source[j] == "[":
                    j = source.find("]", j + 2) + 1 or n
                    continue
                depth += {"(": 1, ")": -1}.get(source[j], 0)
                j += 1
                if depth == 0:
                    break
            if source.startswith("(?P=", i):
                out.append(".*")
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def rough(source: str, flags: int = 0, literals: tuple[str, ...] | None = None) -> str:
    """An RE2 source that matches wherever Python's `re.compile(source, flags)` does in an ASCII line: the
    pattern itself where RE2 takes it (case-insensitive flag kept), else any of its required literals, else
    anything."""
    if _PYTHON_ONLY.search(source):
        source = _without_lookarounds(source)  # less said of a match: it matches wherever the pattern did, and more
    wrapped = f"(?i:{source})" if flags & re.IGNORECASE else f"(?:{source})"
    if flags & ~(re.IGNORECASE | re.UNICODE) or _PYTHON_ONLY.search(source):
        wrapped = ""  # flags RE2 is not given here (multiline, verbose, ...): fall back
    try:
        import re2

        if wrapped:
            re2.compile(wrapped, re2_options(re2))
            return wrapped
    except Exception:
        pass
    if literals:
        return "|".join(f"(?i:{re.escape(lit)})" if flags & re.IGNORECASE else re.escape(lit) for lit in literals)
    return "(?s:.)"


def set_matcher(patterns: list[str]) -> Callable[[bytes], list[int]] | None:
    """`match(data)`: the indices of every pattern found in `data`, from one RE2 set (all at once,
    one pass); None without RE2 or when it refuses a pattern. Calls the compiled set directly where
    the binding allows, as `span_finder` does. Compiled once per process for the same list."""
    return _set_matcher(tuple(patterns))


@functools.lru_cache(maxsize=16)
def _set_matcher(patterns: tuple[str, ...]) -> Callable[[bytes], list[int]] | None:
    try:
        import re2

        matcher = re2.Set.SearchSet(re2_options(re2))
        for pattern in patterns:
            matcher.Add(pattern)
        matcher.Compile()
    except Exception:
        return None
    direct = getattr(matcher, "_set", None)
    try:
        if direct is not None and isinstance(direct.Match(b""), list):  # the shape we rely on
            return direct.Match
    except Exception:
        pass

    def match(data: bytes) -> list[int]:
        return matcher.Match(data) or []

    return match


class LiteralIndex:
    """Which of many literals a text holds, as a bit set (bit i: `literals[i] in text`), found in one
    RE2 set match instead of one `in` test per literal. Exact: without RE2 it tests each literal."""

    def __init__(self, literals: list[str]) -> None:
        if any(not s or not s.isascii() for s in literals):
            raise ValueError("literal index: literals must be non-empty ASCII")
        self.literals = list(literals)
        # each literal as an RE2 pattern matching exactly it (every non-word character escaped)
        self.patterns = ["".join(c if c.isalnum() or c == "_" else f"\\x{ord(c):02x}" for c in s)
                         for s in self.literals]
        # the RE2 set is compiled on the first text nobody primed: the log router primes every line
        # it routes, so in `analyze` most indexes never need their own (one compile each, at start)
        self._compiled = False
        self._match: Callable[[bytes], list[int]] | None = None
        self._primed: tuple[str | None, int] = (None, 0)

    def __getstate__(self) -> dict[str, Any]:
        """Between processes (a parser's state: doctor/sources/logs/parallel.py) without its compiled set (made
        again on first use there, where the analysis does not put its own in its place: LogAnalyzer.adopt)."""
        return {**self.__dict__, "_compiled": False, "_match": None, "_primed": (None, 0)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def prime(self, text: str, hits: Iterable[int]) -> None:
        """Hand over the bits of `text`, found by someone who matched these literals (`patterns`)
        together with other patterns in one pass (the log router); `bits(text)` then returns them.
        One text at a time; kept as one tuple so a reader never pairs a text with another's bits."""
        bits = 0
        for i in hits:
            bits |= 1 << i
        self._primed = (text, bits)

    def prime_bits(self, text: str, bits: int) -> None:
        """`prime` with the bits already made."""
        self._primed = (text, bits)

    def without_re2(self, text: str) -> int:
        """The bits of `text` where RE2 is missing (or refused a pattern): each member looked for in turn."""
        return sum(1 << i for i, s in enumerate(self.literals) if s in text)

    def mask(self, *literals: str) -> int:
        """The bits of these literals (each must be in the index)."""
        bits = 0
        for s in literals:
            bits |= 1 << self.literals.index(s)
        return bits

    def _fallback_bits(self, text: str) -> int:
        """Without RE2: each member tested on its own."""
        return sum(1 << i for i, s in enumerate(self.literals) if s in text)

    def bits(self, text: str) -> int:
        primed = self._primed
        if primed[0] is text:
            return primed[1]
        if not self._compiled:
            self._compiled = True
            self._match = set_matcher(self.patterns)
        match = self._match
        if match is None:
            return self.without_re2(text)
        # ASCII literals are found in UTF-8 bytes exactly where they are in the text; lone surrogates
        # (from JSON escapes) are passed through rather than refused
        bits = 0
        for i in match(text.encode("utf-8", "surrogatepass")):
            bits |= 1 << i
        return bits


class FragmentIndex(LiteralIndex):
    """A LiteralIndex whose members are regular-expression fragments (RE2 syntax), not literals: which of an
    alone reader's triggers a line holds (doctor/sources/logs/router.py; the vocabulary's relation words, the
    launch, host-memory and error-line readers' words), as a bit set from one RE2 set match, or primed by the
    router that matched them with its own set. Without RE2 each fragment is searched with `re`."""

    def __init__(self, fragments: Iterable[str]) -> None:
        self.patterns = list(fragments)
        self.literals = [f"fragment {i}" for i in range(len(self.patterns))]  # names for mask(); never searched for
        self._compiled = False
        self._match = None
        self._primed = (None, 0)
        self._searches: list[Callable[[str], object]] = []

    def without_re2(self, text: str) -> int:
        if not self._searches:
            self._searches = [re.compile(f).search for f in self.patterns]
        return sum(1 << i for i, search in enumerate(self._searches) if search(text))
