"""The message catalogue as data: reading and checking messages/<engine>.yaml.

Sources floor. Each file lists one engine's (or one wrapper's) log and exception messages, taken
from that engine's own sources at several releases (the research behind them: docs/catalogue.md;
re-checked against a new release with scripts/extract_messages.py). The words of the entries (their
meanings and fixes) are the files'; this module only reads them, with a safe YAML loader that keeps
line numbers, and refuses a bad entry with one line, file:line [field]: what is wrong.

An entry: id, level (error | warning | info), pattern (a Python `re` pattern that RE2 also
compiles, unanchored, matched on the message text), numbers (named groups -> unit), sample (a line
the pattern matches), meaning (a diagnosis class of rules/families.yaml, or benign / info),
versions {first, last}, source, fix, and optionally facts (named group -> fact name of the fact
catalogue, set when the entry matches).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.core import catalog
from doctor.core.errors import RuleError

MESSAGES = Path(__file__).resolve().parent / "messages"
LEVELS = ("error", "warning", "info")
PLAIN = frozenset({"benign", "info"})  # meanings that are no diagnosis: such an entry never warns
REQUIRED = ("id", "level", "pattern", "numbers", "sample", "meaning", "versions", "source", "fix")
OPTIONAL = ("literal", "literal_any", "prefer", "unverified", "facts")
# the catalogue's units -> (the fact catalogue's unit, the factor to it); None: a label, no fact unit
UNITS: dict[str, tuple[str | None, float]] = {
    "bytes": ("bytes", 1), "MiB": ("bytes", 1 << 20), "GiB": ("bytes", 1 << 30), "tokens": ("tokens", 1),
    "ms": ("ms", 1), "s": ("s", 1), "tok/s": ("tokens/s", 1), "count": ("count", 1), "percent": ("%", 1),
    "index": (None, 1), "text": (None, 1),
    "ratio": (None, 1),  # a plain number without a unit (a share of memory: LMDeploy's cache_max_entry_count 0.8)
}
NUMERIC_LABELS = frozenset({"ratio"})  # units with no fact unit whose value is still a number
# fact units a count may be set in (a number of layers, threads, sequences...)
COUNTS = frozenset({"count", "layers", "threads", "sequences", "requests", "slots", "blocks", "cores", "GPUs"})
# what RE2 lacks (look-around, backreferences, possessive and atomic groups)
_RE2_LACKS = re.compile(r"\(\?[=!]|\(\?<[=!]|\\[1-9]|\(\?P=|\(\?>|[*+?}]\+")


@dataclass(frozen=True)
class Entry:  # no slots: `regex` is cached on the instance
    """One catalogued message."""

    id: str
    engine: str  # the file's name: the engine table's key, or a wrapper's own name
    level: str
    pattern: str
    numbers: dict[str, str]  # named group -> unit (UNITS)
    sample: str
    meaning: str  # a diagnosis class, or benign / info
    first: str | None
    last: str | None  # None: still printed by the newest release checked
    source: str
    fix: str
    facts: dict[str, str] = field(default_factory=dict)  # named group -> fact name
    unverified: bool = False
    line: int = 0  # where it is written in its file

    @property
    def diagnostic(self) -> bool:
        """A warning or error that means something: evidence for its class."""
        return self.level != "info" and self.meaning not in PLAIN

    @property
    def active(self) -> bool:
        """Whether `analyze` reads it: evidence for a class, or numbers it sets as facts (a benign or
        informational line without facts changes no report: it is catalogued, not matched)."""
        return self.diagnostic or bool(self.facts)

    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    def value(self, group: str, text: str) -> float | str | None:
        """The number a group read, in the fact catalogue's unit (MiB -> bytes); text as it is."""
        unit = self.numbers.get(group, "text")
        target, factor = UNITS[unit]
        if target is None and unit not in NUMERIC_LABELS:
            return text
        try:
            number = float(text)
        except ValueError:
            return None
        number *= factor
        return int(number) if number.is_integer() and abs(number) < 1 << 63 else number


@functools.lru_cache(maxsize=1)
def _fact_units() -> frozenset[str | None]:
    return frozenset(spec.unit for spec in catalog.CATALOG.values())


def _line_of(node: Any) -> int:
    return int(node.start_mark.line) + 1


def _read(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The file's entries, each with its line; safe YAML (no tags, no aliases)."""
    import yaml

    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
        root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except OSError as exc:
        raise RuleError(name, None, None, f"cannot read: {exc.strerror or exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise RuleError(name, mark.line + 1 if mark else None, None, f"not valid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise RuleError(name, None, None, f"not valid YAML: {exc}") from None
    if root is None:
        return []
    if not isinstance(root, yaml.SequenceNode):
        raise RuleError(name, _line_of(root), None, "a catalogue file is a list of entries")
    constructor = yaml.SafeLoader("")
    out: list[tuple[int, dict[str, Any]]] = []
    for node in root.value:
        if not isinstance(node, yaml.MappingNode):
            raise RuleError(name, _line_of(node), None, "an entry is a mapping (id, level, pattern, ...)")
        try:
            data = constructor.construct_mapping(node, deep=True)
        except yaml.YAMLError as exc:
            raise RuleError(name, _line_of(node), None, f"not valid YAML: {exc}") from None
        out.append((_line_of(node), {str(k): v for k, v in data.items()}))
    return out


def _check(path: str, line: int, engine: str, raw: dict[str, Any], classes: frozenset[str] | None) -> Entry:
    def fail(key: str | None, message: str) -> RuleError:
        return RuleError(path, line, key, message)

    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        return _raise(fail(None, f"missing {', '.join(missing)}"))
    unknown = sorted(set(map(str, raw)) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        return _raise(fail(None, f"unknown keys {unknown}"))
    eid = raw["id"]
    if not isinstance(eid, str) or not eid.startswith(engine + "."):
        return _raise(fail("id", f"an id is '{engine}.<name>' (the file's engine)"))
    if raw["level"] not in LEVELS:
        return _raise(fail("level", f"level is one of {', '.join(LEVELS)}"))
    meaning = raw["meaning"]
    if not isinstance(meaning, str) or (meaning not in PLAIN and classes is not None and meaning not in classes):
        return _raise(fail("meaning", f"unknown class {meaning!r} (rules/families.yaml, or benign / info)"))
    pattern, sample = raw["pattern"], raw["sample"]
    if not isinstance(pattern, str) or not isinstance(sample, str):
        return _raise(fail("pattern", "pattern and sample are strings"))
    if _RE2_LACKS.search(pattern):
        return _raise(fail("pattern", "uses what RE2 lacks (look-around, backreference, possessive or atomic)"))
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        return _raise(fail("pattern", f"does not compile: {exc}"))
    if not regex.search(sample):
        return _raise(fail("sample", "the pattern does not match its own sample"))
    numbers = raw["numbers"] or {}
    if not isinstance(numbers, dict):
        return _raise(fail("numbers", "numbers maps named groups to units"))
    for group, unit in numbers.items():
        if group not in regex.groupindex:
            return _raise(fail("numbers", f"{group!r} is not a named group of the pattern"))
        if unit not in UNITS:
            return _raise(fail("numbers", f"unknown unit {unit!r} (known: {', '.join(UNITS)})"))
        if UNITS[unit][0] not in _fact_units():
            return _raise(fail("numbers", f"unit {unit!r} has no unit of the fact catalogue"))
    facts = raw.get("facts") or {}
    if not isinstance(facts, dict):
        return _raise(fail("facts", "facts maps named groups to fact names"))
    for group, name in facts.items():
        spec = catalog.spec(str(name))
        if group not in numbers:
            return _raise(fail("facts", f"{group!r} is not one of the entry's numbers"))
        if spec is None:
            return _raise(fail("facts", f"unknown fact {name!r} (doctor/core/catalog)"))
        unit = UNITS[numbers[group]][0]
        if spec.unit != unit and not (unit == "count" and spec.unit in COUNTS):
            return _raise(fail("facts", f"{name} is in {spec.unit}, the number in {numbers[group]}"))
    versions = raw["versions"]
    if not isinstance(versions, dict) or set(versions) != {"first", "last"}:
        return _raise(fail("versions", "versions is {first: TAG, last: TAG or null}"))
    return Entry(id=eid, engine=engine, level=raw["level"], pattern=pattern, numbers=dict(numbers), sample=sample,
                 meaning=meaning, first=_tag(versions["first"]), last=_tag(versions["last"]),
                 source=str(raw["source"]), fix=str(raw["fix"]), facts={str(k): str(v) for k, v in facts.items()},
                 unverified=bool(raw.get("unverified", False)), line=line)


def _raise(error: RuleError) -> Entry:
    raise error


def _tag(value: object) -> str | None:
    return None if value is None else str(value)


def load_file(path: Path, classes: frozenset[str] | None = None) -> list[Entry]:
    """One engine's entries (the engine: the file's name). `classes`: the diagnosis classes an entry may
    name besides benign / info (rules/families.yaml's; None: not checked here)."""
    entries = [_check(str(path), line, path.stem, raw, classes) for line, raw in _read(path)]
    seen: dict[str, int] = {}
    for entry in entries:
        if entry.id in seen:
            raise RuleError(str(path), entry.line, "id", f"{entry.id} is also at line {seen[entry.id]}")
        seen[entry.id] = entry.line
    return entries


def load(folder: Path = MESSAGES, classes: frozenset[str] | None = None) -> dict[str, list[Entry]]:
    """Every engine's entries, by engine, in file-name order."""
    return {path.stem: load_file(path, classes) for path in sorted(folder.glob("*.yaml"))}
