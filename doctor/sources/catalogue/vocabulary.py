"""The meaning layer's vocabulary as data: reading and checking vocabulary.yaml.

Sources floor. The words are the file's (relations, resources, roles, modifiers, steps, the events a reading
becomes, and the real lines that test them, each citing where it comes from); this module reads them with a
safe YAML loader and refuses a bad entry with one line, file:line [field]: what is wrong (an unknown event
kind, phase or fact, a word that does not compile, a relation word RE2 cannot take as a trigger, a `when`
naming an id the file lacks). doctor/sources/catalogue/meaning.py reads a line with the compiled words.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.core import catalog
from doctor.core.errors import RuleError
from doctor.core.json_cache import cache_folder, store_text
from doctor.sources.catalogue.loader import _RE2_LACKS

VOCABULARY = Path(__file__).resolve().parent / "vocabulary.yaml"
SECTIONS = ("relations", "resources", "roles", "modifiers", "launches", "steps", "events", "examples")
ROLES = ("limit", "needed", "capacity", "request")
UNITS = ("tokens", "bytes", "blocks", "count")
PHASES = ("weights", "kv_cache", "compute", "runtime", "concurrency", "host", "timeline")
NUMBERS = ("needed", "limit", "count")
WHEN = ("relation", "resource", "with", "modifier")


@dataclass(frozen=True, slots=True)
class Group:
    """Words that mean one thing (a relation, a resource, a modifier, a step), in the file's order."""

    id: str
    words: tuple[str, ...]
    units: tuple[str, ...] = ()
    device: str | None = None  # a resource's device (gpu, host), the event's `device`
    line: int = 0


@dataclass(frozen=True, slots=True)
class EventRule:
    """What a reading becomes when `when` holds: an event (kind, phase, fixed data, numbers into fields) or
    facts (numbers into fact names); numbers only in `unit`."""

    relation: tuple[str, ...] = ()
    resource: tuple[str, ...] = ()
    with_: tuple[str, ...] = ()
    modifier: tuple[str, ...] = ()
    event: str | None = None
    phase: str | None = None
    data: dict[str, str | int | float | bool] = field(default_factory=dict)
    unit: str | None = None
    numbers: dict[str, str] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)
    line: int = 0


@dataclass(frozen=True, slots=True)
class Example:
    """A real line, where it comes from, and what it must read as ({}: nothing)."""

    line: str
    source: str
    reads: dict[str, Any]


@dataclass(frozen=True)
class Vocabulary:  # no slots: the compiled patterns are cached on the instance
    relations: tuple[Group, ...]
    resources: tuple[Group, ...]
    roles: dict[str, tuple[str, ...]]
    modifiers: tuple[Group, ...]
    launches: tuple[tuple[str, str], ...]  # (trigger, line pattern)
    steps: tuple[Group, ...]
    events: tuple[EventRule, ...]
    examples: tuple[Example, ...]

    @functools.cached_property
    def triggers(self) -> tuple[str, ...]:
        """The relations' words and the launches' triggers as the analyzer's trigger fragments (RE2), each
        letter spelt in both cases (a case-insensitive flag would keep doctor/sources/logs/shapes.py from ruling
        a fragment out of a folded run's shape, and every such run would be searched for it)."""
        words = (*(w for g in self.relations for w in g.words), *(t for t, _ in self.launches))
        return tuple(dict.fromkeys(fold_case(w) for w in words))

    @functools.cached_property
    def launch_re(self) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{w})" for _, w in self.launches), re.IGNORECASE)

    @functools.cached_property
    def relation_re(self) -> re.Pattern[str]:
        return _alternation(self.relations)

    @functools.cached_property
    def resource_re(self) -> re.Pattern[str]:
        return _alternation(self.resources)

    @functools.cached_property
    def modifier_re(self) -> re.Pattern[str]:
        return _alternation(self.modifiers)

    @functools.cached_property
    def step_re(self) -> re.Pattern[str]:
        return _alternation(self.steps)

    @functools.cached_property
    def role_words(self) -> dict[str, frozenset[str]]:
        return {role: frozenset(w.lower() for w in words if w.isidentifier()) for role, words in self.roles.items()}

    @functools.cached_property
    def request_re(self) -> re.Pattern[str]:
        return re.compile(r"\b(?:" + "|".join(self.roles["request"]) + r")\b", re.IGNORECASE)

    @functools.cached_property
    def order(self) -> dict[str, int]:
        """A resource's rank: the first a line names in the file's order is its subject."""
        return {g.id: n for n, g in enumerate(self.resources)}

    def units(self, resource: str) -> tuple[str, ...]:
        return next((g.units for g in self.resources if g.id == resource), ())

    def device(self, resource: str) -> str | None:
        return next((g.device for g in self.resources if g.id == resource), None)


def fold_case(word: str) -> str:
    """`word` matching either case without a flag: each ASCII letter outside a class and an escape as [xX]."""
    out: list[str] = []
    i, n = 0, len(word)
    while i < n:
        c = word[i]
        if c == "\\":
            out.append(word[i:i + 2])
            i += 2
        elif c == "[":  # a class is copied whole (its ranges keep their case)
            end = word.index("]", i + 2 if word.startswith("[^]", i) or word.startswith("[]", i) else i + 1)
            out.append(word[i:end + 1])
            i = end + 1
        elif c == "(" and word.startswith("(?", i):  # a group's flags or kind: copied as written
            j = i + 2
            while j < n and word[j] not in ":)":
                j += 1
            out.append(word[i:j + 1])
            i = j + 1
        else:
            out.append(f"[{c.lower()}{c.upper()}]" if c.isascii() and c.isalpha() else c)
            i += 1
    return "".join(out)


def _alternation(groups: tuple[Group, ...]) -> re.Pattern[str]:
    """One pattern with a named group per id: which id a match is, from `lastgroup`."""
    return re.compile("|".join(f"(?P<{g.id}>{'|'.join(f'(?:{w})' for w in g.words)})" for g in groups),
                      re.IGNORECASE)


# -- reading and checking the file ------------------------------------------------------------------
def _compose(path: Path) -> Any:
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
        return yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except OSError as exc:
        raise RuleError(str(path), None, None, f"cannot read: {exc.strerror or exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise RuleError(str(path), mark.line + 1 if mark else None, None, f"not valid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise RuleError(str(path), None, None, f"not valid YAML: {exc}") from None


def _items(path: Path, node: Any, section: str) -> list[tuple[int, Any]]:
    """A section's entries (a list of mappings, or of anything for `roles`), each with its line."""
    import yaml

    constructor = yaml.SafeLoader("")
    if section == "roles":
        if not isinstance(node, yaml.MappingNode):
            raise RuleError(str(path), node.start_mark.line + 1, section, "roles maps a role to its words")
        return [(node.start_mark.line + 1, constructor.construct_mapping(node, deep=True))]
    if not isinstance(node, yaml.SequenceNode):
        raise RuleError(str(path), node.start_mark.line + 1, section, f"{section} is a list")
    out: list[tuple[int, Any]] = []
    for item in node.value:
        if not isinstance(item, yaml.MappingNode):
            raise RuleError(str(path), item.start_mark.line + 1, section, "an entry is a mapping")
        out.append((item.start_mark.line + 1, constructor.construct_mapping(item, deep=True)))
    return out


def _words(fail: Any, raw: Any, trigger: bool) -> tuple[str, ...]:
    words = raw.get("words")
    if not isinstance(words, list) or not words or not all(isinstance(w, str) and w for w in words):
        raise fail("words", "words is a list of regular-expression fragments")
    for word in words:
        try:
            re.compile(word)
        except re.error as exc:
            raise fail("words", f"{word!r} does not compile: {exc}") from None
        if trigger and _RE2_LACKS.search(word):
            raise fail("words", f"{word!r} uses what RE2 lacks (a relation's words are the analyzer's triggers)")
        if re.compile(word, re.IGNORECASE).search(""):
            raise fail("words", f"{word!r} matches the empty text")
    return tuple(words)


def _groups(path: Path, entries: list[tuple[int, Any]], section: str, keys: tuple[str, ...]) -> tuple[Group, ...]:
    seen: set[str] = set()
    out: list[Group] = []
    for line, raw in entries:
        def fail(key: str | None, message: str, line: int = line) -> RuleError:
            return RuleError(str(path), line, key, message)

        unknown = sorted(set(map(str, raw)) - {"id", "words", *keys})
        if unknown:
            raise fail(None, f"unknown keys {unknown}")
        gid = raw.get("id")
        if not isinstance(gid, str) or not gid.isidentifier() or gid in seen:
            raise fail("id", "an id is a name (letters, digits, _) used once in its section")
        seen.add(gid)
        units = raw.get("units", [])
        if "units" in keys and (not isinstance(units, list) or not units or any(u not in UNITS for u in units)):
            raise fail("units", f"units lists some of {', '.join(UNITS)}")
        device = raw.get("device")
        if device is not None and device not in ("gpu", "host"):
            raise fail("device", "device is gpu or host")
        out.append(Group(gid, _words(fail, raw, section == "relations"), tuple(units), device, line))
    return tuple(out)


def _names(value: Any) -> tuple[str, ...]:
    return tuple(map(str, value)) if isinstance(value, list) else (str(value),)


def _event(path: Path, line: int, raw: dict[str, Any], ids: dict[str, set[str]]) -> EventRule:
    def fail(key: str | None, message: str) -> RuleError:
        return RuleError(str(path), line, key, message)

    unknown = sorted(set(map(str, raw)) - {"when", "event", "phase", "data", "unit", "numbers", "facts"})
    if unknown:
        raise fail(None, f"unknown keys {unknown}")
    when = raw.get("when")
    if not isinstance(when, dict) or not when or set(map(str, when)) - set(WHEN):
        raise fail("when", f"when maps some of {', '.join(WHEN)} to ids")
    section = {"relation": "relations", "resource": "resources", "with": "resources", "modifier": "modifiers"}
    for key, value in when.items():
        for name in _names(value):
            if name not in ids[section[key]]:
                raise fail("when", f"{key} {name!r} is not an id of {section[key]}")
    event, facts = raw.get("event"), raw.get("facts") or {}
    if (event is None) == (not facts):
        raise fail("event", "a rule makes an event or sets facts (one of the two)")
    if event is not None and event not in catalog.EVENT_KINDS:
        raise fail("event", f"unknown event kind {event!r} (doctor/core/catalog EVENT_KINDS)")
    phase = raw.get("phase")
    if phase is not None and phase not in PHASES:
        raise fail("phase", f"phase is one of {', '.join(PHASES)}")
    unit = raw.get("unit")
    if unit is not None and unit not in UNITS:
        raise fail("unit", f"unit is one of {', '.join(UNITS)}")
    numbers = raw.get("numbers") or {}
    if not isinstance(numbers, dict) or set(map(str, numbers)) - set(NUMBERS):
        raise fail("numbers", f"numbers maps some of {', '.join(NUMBERS)} to the event's data fields")
    if not isinstance(facts, dict) or set(map(str, facts)) - set(NUMBERS):
        raise fail("facts", f"facts maps some of {', '.join(NUMBERS)} to fact names")
    for name in facts.values():
        if catalog.spec(str(name)) is None:
            raise fail("facts", f"unknown fact {name!r} (doctor/core/catalog)")
    data = raw.get("data") or {}
    if not isinstance(data, dict) or not all(isinstance(v, str | int | float | bool) for v in data.values()):
        raise fail("data", "data maps fields to scalars")
    return EventRule(relation=_names(when["relation"]) if "relation" in when else (),
                     resource=_names(when["resource"]) if "resource" in when else (),
                     with_=_names(when["with"]) if "with" in when else (),
                     modifier=_names(when["modifier"]) if "modifier" in when else (),
                     event=event, phase=phase, data={str(k): v for k, v in data.items()}, unit=unit,
                     numbers={str(k): str(v) for k, v in numbers.items()},
                     facts={str(k): str(v) for k, v in facts.items()}, line=line)


def load(path: Path = VOCABULARY) -> Vocabulary:
    """The vocabulary in `path`, checked (RuleError, one line, on the first thing wrong)."""
    import yaml

    root = _compose(path)
    if not isinstance(root, yaml.MappingNode):
        raise RuleError(str(path), None, None, f"the vocabulary is a mapping of {', '.join(SECTIONS)}")
    nodes = {str(k.value): v for k, v in root.value}
    missing = [s for s in SECTIONS if s not in nodes]
    extra = sorted(set(nodes) - set(SECTIONS))
    if missing or extra:
        raise RuleError(str(path), None, None, f"sections: missing {missing}, unknown {extra}")
    entries = {s: _items(path, nodes[s], s) for s in SECTIONS}
    relations = _groups(path, entries["relations"], "relations", ())
    resources = _groups(path, entries["resources"], "resources", ("units", "device"))
    modifiers = _groups(path, entries["modifiers"], "modifiers", ())
    launches: list[tuple[str, str]] = []
    for n, raw in entries["launches"]:
        def fail(key: str | None, message: str, n: int = n) -> RuleError:
            return RuleError(str(path), n, key, message)

        if set(map(str, raw)) != {"trigger", "line"}:
            raise fail(None, "a launch is {trigger (RE2, selects its lines), line (the pattern that decides)}")
        trigger = _words(fail, {"words": [raw["trigger"]]}, True)[0]
        pattern = _words(fail, {"words": [raw["line"]]}, False)[0]
        launches.append((trigger, pattern))
    steps = _groups(path, entries["steps"], "steps", ())
    from doctor.sources.logs.timeline import STEPS

    for group in steps:
        if group.id not in STEPS:
            raise RuleError(str(path), group.line, "id", f"a step is one of the timeline's ({', '.join(STEPS)})")
    line, roles_raw = entries["roles"][0]
    if set(map(str, roles_raw)) != set(ROLES) or not all(
            isinstance(v, list) and v and all(isinstance(w, str) and w for w in v) for v in roles_raw.values()):
        raise RuleError(str(path), line, "roles", f"roles maps {', '.join(ROLES)} to lists of words")
    ids = {"relations": {g.id for g in relations}, "resources": {g.id for g in resources},
           "modifiers": {g.id for g in modifiers}}
    events = tuple(_event(path, n, raw, ids) for n, raw in entries["events"])
    examples: list[Example] = []
    for n, raw in entries["examples"]:
        if not isinstance(raw.get("line"), str) or not isinstance(raw.get("from"), str) or not raw["from"].strip() \
                or not isinstance(raw.get("reads"), dict) or set(raw) != {"line", "from", "reads"}:
            raise RuleError(str(path), n, "examples", "an example is {line, from (where it comes from), reads}")
        examples.append(Example(raw["line"], raw["from"], dict(raw["reads"])))
    return Vocabulary(relations, resources, {str(k): tuple(map(str, v)) for k, v in roles_raw.items()}, modifiers,
                      tuple(launches), steps, events, tuple(examples))


# -- the checked vocabulary kept as JSON (as doctor/sources/catalogue/store.py keeps the catalogue): `analyze`
# neither imports nor parses YAML on its start ------------------------------------------------------------
CACHE_VERSION = 2
CACHE_KEEP = 4


def _key(path: Path) -> str:
    from doctor.sources.logs import timeline

    digest = hashlib.sha256(f"vocabulary {CACHE_VERSION}".encode())
    for source in (Path(__file__), Path(timeline.__file__), path):
        digest.update(b"\0" + source.read_bytes())
    return digest.hexdigest()


def _to_json(v: Vocabulary) -> dict[str, Any]:
    out: dict[str, Any] = {name: [dataclasses.asdict(item) for item in getattr(v, name)]
                           for name in ("relations", "resources", "modifiers", "steps", "events", "examples")}
    out["roles"] = {k: list(w) for k, w in v.roles.items()}
    out["launches"] = [list(pair) for pair in v.launches]
    return out


def _group(raw: dict[str, Any]) -> Group:
    return Group(raw["id"], tuple(raw["words"]), tuple(raw["units"]), raw["device"], raw["line"])


def _from_json(raw: dict[str, Any]) -> Vocabulary:
    def rule(e: dict[str, Any]) -> EventRule:
        return EventRule(**{**e, **{k: tuple(e[k]) for k in ("relation", "resource", "with_", "modifier")}})

    return Vocabulary(tuple(map(_group, raw["relations"])), tuple(map(_group, raw["resources"])),
                      {k: tuple(w) for k, w in raw["roles"].items()}, tuple(map(_group, raw["modifiers"])),
                      tuple((t, w) for t, w in raw["launches"]), tuple(map(_group, raw["steps"])),
                      tuple(map(rule, raw["events"])),
                      tuple(Example(**e) for e in raw["examples"]))


@functools.lru_cache(maxsize=1)
def builtin() -> Vocabulary:
    """The shipped vocabulary, checked once and kept as JSON under a key made of its file and its readers
    (`$XDG_CACHE_HOME/llm-doctor/vocabulary`; LLM_DOCTOR_NO_CACHE=1: read afresh). An entry that does not
    match its key or its shape is read afresh and written again."""
    folder = cache_folder("vocabulary")
    if folder is None:
        return load(VOCABULARY)
    try:
        key = _key(VOCABULARY)
    except OSError:
        return load(VOCABULARY)
    path = os.path.join(folder, key + ".json")
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        with open(path, encoding="utf-8") as handle:
            stored = json.load(handle)
        if isinstance(stored, list) and len(stored) == 2 and stored[0] == key:
            return _from_json(stored[1])
    found = load(VOCABULARY)
    with contextlib.suppress(OSError, ValueError, TypeError):
        store_text(folder, path, json.dumps([key, _to_json(found)], ensure_ascii=False), CACHE_KEEP)
    return found
