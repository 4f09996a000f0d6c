"""The rule families as data (rules/families.yaml): each family's id range (LD2xx: the ids 200 to 299), its
title, and its diagnosis classes, each with the area it shows under and its default `verify:` (what
`--verify` does for a rule of that class that names none itself).

A rule file belongs to one family: its name starts with the family's key ("LD2-context.yaml") and
every id in it lies in the family's range (tests/core/test_rulebase.py checks the built-in files).
A rule's class may be any family's: the class says what the finding is about, the id where it is kept.

Judge floor. Read with the rule files' safe loader and checked the same way (file:line [field]);
the words are families.yaml's. A user or engine rule folder may hold its own families.yaml, which
adds families and classes (a class or a range already taken must be the same).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.core.errors import RuleError
from doctor.judge.changes import Recipe, parse_verify
from doctor.judge.ruleyaml import Ctx, builtin_rules_dir, line_of, read_tree

FILE = "families.yaml"
IDS_RE = re.compile(r"^([A-Z]{2,4})([0-9]{1,3})(x+)$")  # LD2xx: prefix, leading digits, free digits
CLASS_RE = re.compile(r"^[a-z0-9]+\.[a-z0-9_]+$")
FAMILY_KEYS = ("ids", "title", "classes")
CLASS_KEYS = ("area", "verify")


@dataclass(frozen=True, slots=True)
class DiagnosisClass:
    name: str  # context.overflow: stable, carried in the JSON
    area: str  # the heading it shows under ("Context")
    family: str  # the key of the family that lists it ("LD2")
    verify: Recipe | None = None  # the default for rules of this class that name no `verify:`


@dataclass(frozen=True, slots=True)
class Family:
    key: str  # LD2: the start of its files' names
    prefix: str  # LD
    low: int  # 200
    high: int  # 299
    title: str  # context
    classes: tuple[str, ...]
    path: str = ""
    line: int | None = None

    @property
    def ids(self) -> str:
        """The range as families.yaml writes it: LD2xx."""
        return self.key + "x" * (len(str(self.high)) - len(self.key) + len(self.prefix))

    def holds(self, rule_id: str) -> bool:
        digits = rule_id[len(self.prefix):]
        return rule_id.startswith(self.prefix) and digits.isdigit() and self.low <= int(digits) <= self.high


@dataclass(slots=True)
class Families:
    families: list[Family] = field(default_factory=list)
    classes: dict[str, DiagnosisClass] = field(default_factory=dict)  # in the order families.yaml lists them

    def area(self, cls: str) -> str:
        known = self.classes.get(cls)
        return known.area if known is not None else cls

    def family_of(self, rule_id: str) -> Family | None:
        return next((f for f in self.families if f.holds(rule_id)), None)

    def class_for(self, selector: str) -> str | None:
        """The diagnosis class a selector names (context-overflow -> context.overflow), or None."""
        return next((cls for cls in self.classes if canon(cls) == canon(selector)), None)

    def example_id(self) -> str:
        """A real-looking rule id for messages: the first id of the first family."""
        first = self.families[0] if self.families else None
        return f"{first.prefix}{first.low + 1}" if first is not None else "an id"

    def add(self, other: Families) -> None:
        """Take another folder's families and classes; what both name must be the same."""
        for family in other.families:
            same = next((f for f in self.families if f.key == family.key), None)
            if same is not None and (same.low, same.high) != (family.low, family.high):
                raise RuleError(family.path, family.line, "ids", f"family {family.key} is {same.ids} "
                                                                  f"in {same.path}")
            clash = next((f for f in self.families if f is not same and f.prefix == family.prefix
                          and f.low <= family.high and family.low <= f.high), None)
            if clash is not None:
                raise RuleError(family.path, family.line, "ids", f"{family.ids} overlaps {clash.ids} "
                                                                  f"({clash.path})")
            if same is None:
                self.families.append(family)
        for name, cls in other.classes.items():
            known = self.classes.get(name)
            if known is not None and known.area != cls.area:
                fam = next(f for f in other.families if name in f.classes)
                raise RuleError(fam.path, fam.line, "classes", f"class {name} shows under '{known.area}' already")
            self.classes.setdefault(name, cls)


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.strip().lower())


def builtin() -> Families:
    """The built-in rule base's families (rules/families.yaml), read once per process; a copy, so a
    caller may add to it."""
    known = _builtin()
    return Families(list(known.families), dict(known.classes))


@functools.lru_cache(maxsize=1)
def _builtin() -> Families:
    return load_families(builtin_rules_dir() / FILE)


def load_families(path: Path) -> Families:
    """A families.yaml, validated."""
    return families_from_tree(read_tree(path), str(path))


def families_from_tree(data: Any, where: str) -> Families:
    if not isinstance(data, list) or not data:
        raise RuleError(where, getattr(data, "line", 1), None, "families.yaml holds a YAML list of families")
    out = Families()
    for item in data:
        ctx = Ctx(where, item)
        if not isinstance(item, dict):
            raise ctx.fail("ids", "each family is a mapping {ids: LD2xx, title: ..., classes: {...}}", data)
        family, classes = _family(ctx, item)
        if any(f.key == family.key for f in out.families):
            raise RuleError(where, family.line, "ids", f"family {family.ids} is listed twice")
        twice = next((name for name in classes if name in out.classes), None)
        if twice is not None:
            raise RuleError(where, family.line, "classes", f"class {twice} is listed twice")
        out.add(Families([family], classes))
    return out


def _family(ctx: Ctx, node: dict[str, Any]) -> tuple[Family, dict[str, DiagnosisClass]]:
    bad = set(node) - set(FAMILY_KEYS)
    if bad:
        first = sorted(bad)[0]
        raise ctx.fail(first, f"unknown field '{first}' (allowed: {', '.join(FAMILY_KEYS)})")
    ids = node.get("ids")
    match = IDS_RE.match(ids) if isinstance(ids, str) else None
    if match is None or len(match[2]) + len(match[3]) not in (3, 4):
        raise ctx.fail("ids", "'ids' is a range written like LD2xx (a prefix, digits, then x for each free digit)")
    prefix, lead, free = match[1], match[2], match[3]
    key = prefix + lead
    ctx.rule_id = key
    title = node.get("title")
    if not isinstance(title, str) or not title.strip():
        raise ctx.fail("title", "'title' says what the family is about")
    table = node.get("classes")
    if not isinstance(table, dict) or not table:
        raise ctx.fail("classes", "'classes' maps each diagnosis class to {area: ..., verify: ...}")
    classes: dict[str, DiagnosisClass] = {}
    for name, spec in table.items():
        label = f"classes.{name}"
        if not isinstance(name, str) or not CLASS_RE.match(name):
            raise ctx.fail("classes", f"class '{name}' must look like area.kind (context.overflow)", table)
        if not isinstance(spec, dict):
            raise ctx.fail(label, f"class {name} is {{area: ..., verify: ...}}", table)
        bad = set(spec) - set(CLASS_KEYS)
        if bad:
            raise ctx.fail(label, f"unknown keys in class {name}: {sorted(bad)} (known: {', '.join(CLASS_KEYS)})",
                           spec)
        area = spec.get("area")
        if not isinstance(area, str) or not area.strip():
            raise ctx.fail(f"{label}.area", f"class {name} needs an 'area' (the heading it shows under)", spec)
        verify = parse_verify(ctx, spec["verify"], f"{label}.verify") if "verify" in spec else None
        classes[name] = DiagnosisClass(name, " ".join(area.split()), key, verify)
    family = Family(key, prefix, int(lead + "0" * len(free)), int(lead + "9" * len(free)), " ".join(title.split()),
                    tuple(classes), ctx.where, line_of(node))
    return family, classes
