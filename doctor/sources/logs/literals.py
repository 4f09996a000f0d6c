"""What a regex's own syntax tree says about the text it can match (sources floor; the patterns are the
parsers' own, the reader is Python's `re` parser): `required_literals`, substrings one of which every match
contains (the gate doctor/sources/logs/matcher.py `gated` checks with `in` before running the regex), and
`leading_literals`, substrings one of which every match holds within a bounded distance of its start (where
a search of a long line may begin). Both answers are kept between runs (doctor/sources/logs/literal_cache.py).
An unexpected tree shape answers None (no gate, no skip), never a wrong answer.

Pure.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from doctor.sources.logs import literal_cache

try:  # the parser `re` itself uses; private, so any surprise means "no gate", never a wrong answer
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_parse as _sre_parse


_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def required_literals(pattern: re.Pattern[str] | str, flags: int = 0) -> tuple[str, ...] | None:
    """Substrings such that every match of `pattern` contains at least one of them; None when the
    pattern names none (or uses case-insensitive matching, where a plain `in` would not do)."""
    if isinstance(pattern, re.Pattern):
        flags, pattern = pattern.flags, pattern.pattern
    if not isinstance(pattern, str) or flags & re.IGNORECASE:
        return None
    return literal_cache.literals(pattern, flags, _read_literals)


def _read_literals(pattern: str, flags: int) -> tuple[str, ...] | None:
    """required_literals of a pattern text: read from the syntax tree Python's own parser makes."""
    try:
        parsed = _sre_parse.parse(pattern, flags)
        if parsed.state.flags & re.IGNORECASE:  # an inline (?i) at the start: case-insensitive throughout
            return None
        found = _sequence(list(parsed))
    except Exception:  # an unexpected tree shape in some Python version: no gate
        return None
    return tuple(sorted(found, key=lambda s: (-len(s), s))) if found else None


def _sequence(items: list[tuple[Any, Any]]) -> frozenset[str] | None:
    """Best requirement of a sequence: a run of consecutive literals, or what one item requires."""
    best: frozenset[str] | None = None
    run: list[str] = []

    def consider(candidate: frozenset[str] | None) -> None:
        nonlocal best
        if candidate and (best is None or _rank(candidate) > _rank(best)):
            best = candidate

    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            run.append(chr(av))
            continue
        if run and name == "BRANCH":  # `-(?:ngl|-gpu-layers)`, as `re` factors `-ngl|--gpu-layers`: whole words
            consider(_prefixed("".join(run), av[1]))
        if run:
            consider(frozenset(["".join(run)]))
            run = []
        if name == "SUBPATTERN":
            _group, add_flags, _del_flags, sub = av
            if not add_flags & re.IGNORECASE:
                consider(_sequence(list(sub)))
        elif name == "ATOMIC_GROUP":
            consider(_sequence(list(av)))
        elif name == "BRANCH":
            alternatives = [_sequence(list(branch)) for branch in av[1]]
            if alternatives and all(alternatives):
                consider(_simplify(frozenset().union(*alternatives)))  # type: ignore[arg-type]
        elif name in _REPEATS:
            low, _high, sub = av
            if low >= 1:
                consider(_sequence(list(sub)))
    if run:
        consider(frozenset(["".join(run)]))
    return best


def _prefixed(prefix: str, branches: list[list[tuple[Any, Any]]]) -> frozenset[str] | None:
    """`prefix` followed by each branch's leading literals, when every branch begins with one."""
    found = _branch_words(prefix, branches)
    return _simplify(found) if found else None


def _branch_words(prefix: str, branches: list[list[tuple[Any, Any]]]) -> frozenset[str] | None:
    """`prefix` and each branch's leading literals, every word starting where the prefix does (`re` factors
    `-ngl|--gpu-layers` as `-(?:ngl|-gpu-layers)`); None when a branch begins with something else."""
    words = set()
    for branch in branches:
        lead = "".join(chr(av) for _op, av in itertools.takewhile(lambda item: str(item[0]) == "LITERAL", branch))
        if not lead:
            return None
        words.add(prefix + lead)
    return frozenset(words)


def _simplify(literals: frozenset[str]) -> frozenset[str]:
    """Drop a literal that contains another one of the set: finding the shorter one is enough."""
    return frozenset(s for s in literals if not any(o != s and o in s for o in literals))


def _rank(literals: frozenset[str]) -> tuple[bool, int, int]:
    shortest = min(len(s) for s in literals)
    return shortest >= 4, -len(literals), shortest


# -- where a search may begin ------------------------------------------------------------------------
Lead = tuple[int, tuple[str, ...]]  # (back, marks): see leading_literals
_WIDE = 1 << 16  # an item that may match more characters than this counts as unbounded


def leading_literals(pattern: str, flags: int = 0) -> Lead | None:
    """(back, marks): every match of `pattern` holds an occurrence of one of `marks` that starts at most
    `back` characters after the match does. So no match starts before the first occurrence of a mark,
    less `back`, and a search may begin there (a long line whose marks come late is mostly skipped).
    None when the pattern's beginning is unbounded before any literal (`\\s*x`), when it is case-insensitive,
    or when it begins with a literal (`re` then finds where it can start by itself)."""
    if flags & re.IGNORECASE:
        return None
    found = literal_cache.literals(pattern, flags, _read_lead, kind="lead")
    return (int(found[0]), found[1:]) if found else None


def _read_lead(pattern: str, flags: int) -> tuple[str, ...] | None:
    """leading_literals as the cache keeps it: (str(back), *marks)."""
    try:
        parsed = _sre_parse.parse(pattern, flags)
        if parsed.state.flags & re.IGNORECASE:
            return None
        if _literal_first(list(parsed)):  # `re` finds such a pattern's starts itself, as fast as `find`
            return None
        found = _lead(list(parsed), parsed.state)
    except Exception:  # an unexpected tree shape: no skip, the search starts where it was asked to
        return None
    return (str(found[0]), *sorted(found[1])) if found else None


def _literal_first(items: list[tuple[Any, Any]]) -> bool:
    """Whether the pattern begins with a literal character (inside plain groups too): its literal prefix."""
    while items:
        op, av = items[0]
        if str(op) == "LITERAL":
            return True
        if str(op) != "SUBPATTERN" or av[1] or av[2]:
            return False
        items = list(av[3])
    return False


def _lead(items: list[tuple[Any, Any]], state: Any) -> tuple[int, frozenset[str]] | None:
    """(back, marks) of a sequence: its first literal run, or the first item that has a lead, after
    items of bounded width; None when an unbounded item comes first."""
    offset = 0
    run: list[str] = []
    run_at = 0
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            if not run:
                run_at = offset
            run.append(chr(av))
            offset += 1
            continue
        if run:  # `prompt_(?:tokens|eval_count)`, as `re` factors a shared prefix: the whole words
            prefix = "".join(run)
            words = _branch_words(prefix, av[1]) if name == "BRANCH" else None
            return run_at, words or frozenset([prefix])
        found: tuple[int, frozenset[str]] | None = None
        if name == "SUBPATTERN":
            _group, add_flags, _del_flags, sub = av
            if not add_flags & re.IGNORECASE:
                found = _lead(list(sub), state)
        elif name == "ATOMIC_GROUP":
            found = _lead(list(av), state)
        elif name == "BRANCH":
            alternatives = [_lead(list(branch), state) for branch in av[1]]
            if alternatives and all(alternatives):
                found = (max(a[0] for a in alternatives if a),
                         frozenset().union(*(a[1] for a in alternatives if a)))
        elif name in _REPEATS and av[0] >= 1:
            found = _lead(list(av[2]), state)
        if found is not None:
            return offset + found[0], found[1]
        width = _sre_parse.SubPattern(state, [(op, av)]).getwidth()[1]
        if width >= _WIDE:
            return None
        offset += width
    return (run_at, frozenset(["".join(run)])) if run else None
