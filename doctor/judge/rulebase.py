"""Load and validate the YAML rule base.

Rules are data: YAML is read with a safe loader that also refuses aliases (no alias bombs) and
remembers line numbers (doctor/judge/ruleyaml.py), so a broken rule is reported as one line naming
file, line and field (doctor/judge/ruleparse.py checks each rule). Every fact and event kind a rule
names is checked against the catalogue, every class against the families (rules/families.yaml,
doctor/judge/families.py). Built-in rules ship in `rules/` (in the wheel: `doctor/_builtin_rules`);
users add folders with `--rules DIR` or the LLM_DOCTOR_RULES environment variable (paths separated by
the OS path separator); an engine of the engine table (doctor/core/engines.py) may bring its own
folder, read after the built-ins. A user rule with the id of a built-in one replaces it, and the rule
base says so in `notes`. The engine names a rule's `engines:` and `fix:` may use are the engine table's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from doctor.core import engines
from doctor.core.errors import RuleError
from doctor.judge import families as families_module
from doctor.judge.families import Families
from doctor.judge.rule import Rule
from doctor.judge.ruleparse import rules_from_tree
from doctor.judge.ruleyaml import builtin_rules_dir, load_yaml, read_tree

ENV_RULES = "LLM_DOCTOR_RULES"


@dataclass(slots=True)
class RuleBase:
    rules: list[Rule] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    families: Families = field(default_factory=Families)

    def by_id(self, rule_id: str) -> Rule | None:
        key = rule_id.upper()
        for rule in self.rules:
            if rule.id == key or rule.slug == rule_id.lower():
                return rule
        return None

    def select(self, selector: str) -> list[Rule]:
        """The rules a selector names: an id, a slug, a class or a class family (see Rule.matches)."""
        return [rule for rule in self.rules if rule.matches(selector)]


# -- locating rule folders -----------------------------------------------------------------------

def rule_dirs(extra: list[str] | None = None, env: Mapping[str, str] | None = None) -> list[tuple[Path, bool]]:
    env = os.environ if env is None else env
    dirs: list[tuple[Path, bool]] = [(builtin_rules_dir(), True)]
    dirs += [(directory, False) for directory in engines.rule_dirs()]  # rules that come with an engine
    for raw in env.get(ENV_RULES, "").split(os.pathsep):
        if raw.strip():
            dirs.append((Path(raw.strip()).expanduser(), False))
    for raw in extra or []:
        dirs.append((Path(raw).expanduser(), False))
    return dirs


def rule_files(directory: Path) -> list[Path]:
    """The rule files of a folder (or the one file named), without its families.yaml."""
    if directory.is_file():
        return [directory]
    if not directory.is_dir():
        raise RuleError(str(directory), None, None, "rule folder does not exist")
    return sorted(p for p in directory.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()
                  and p.name != families_module.FILE)


def load_rulebase(extra_dirs: list[str] | None = None, env: dict[str, str] | None = None) -> RuleBase:
    base = RuleBase()
    index: dict[str, Rule] = {}
    slugs: dict[str, Rule] = {}
    for directory, builtin in rule_dirs(extra_dirs, env):
        paths = rule_files(directory)
        own = directory / families_module.FILE
        if builtin or (directory.is_dir() and own.is_file()):
            base.families.add(families_module.load_families(own))
        if not paths and not builtin:
            raise RuleError(str(directory), None, None, "no rule files in this folder (*.yaml, *.yml)")
        loaded = [(path, load_rule_file(path, builtin=builtin, families=base.families)) for path in paths]
        if not builtin and not any(rules for _, rules in loaded):
            raise RuleError(str(directory), None, None, "its rule files hold no rules")
        for path, rules in loaded:
            base.sources.append(str(path))
            for rule in rules:
                previous = index.get(rule.id)
                if previous is not None:
                    if previous.builtin and not rule.builtin:
                        base.notes.append(
                            f"rule {rule.id} from {rule.path}:{rule.line} replaces the built-in rule "
                            f"{previous.id} ({previous.slug})")
                        base.rules.remove(previous)
                        slugs.pop(previous.slug, None)
                    else:
                        raise RuleError(rule.path, rule.line, "id",
                                        f"duplicate rule id {rule.id} (also {previous.path}:{previous.line})")
                other = slugs.get(rule.slug)
                if other is not None:
                    raise RuleError(rule.path, rule.line, "slug",
                                    f"duplicate slug {rule.slug} (also {other.id} in {other.path})")
                index[rule.id] = rule
                slugs[rule.slug] = rule
                base.rules.append(rule)
    _check_inhibits(base.rules)
    base.rules.sort(key=lambda r: r.id)
    return base


def _check_inhibits(rules: list[Rule]) -> None:
    ids = {r.id for r in rules}
    graph = {r.id: set(r.inhibits) for r in rules}
    for rule in rules:
        for target in rule.inhibits:
            if target not in ids:
                raise RuleError(rule.path, rule.line, "inhibits", f"{rule.id} inhibits unknown rule {target}")
            if target == rule.id:
                raise RuleError(rule.path, rule.line, "inhibits", f"{rule.id} inhibits itself")
    # no cycles: a root cause cannot be a symptom of its own symptom
    for start in graph:
        stack, seen = list(graph[start]), set()
        while stack:
            node = stack.pop()
            if node == start:
                rule = next(r for r in rules if r.id == start)
                raise RuleError(rule.path, rule.line, "inhibits", f"inhibition cycle through {start}")
            if node not in seen:
                seen.add(node)
                stack.extend(graph.get(node, ()))


def load_rule_file(path: Path, builtin: bool = False, families: Families | None = None) -> list[Rule]:
    """One rule file's rules, validated (classes against `families`; default: the built-in ones)."""
    known = families if families is not None else families_module.builtin()
    return rules_from_tree(read_tree(path), str(path), known, builtin=builtin)


def parse_rules(text: str, where: str, builtin: bool = False, families: Families | None = None) -> list[Rule]:
    """The rules of a rule file's text (classes against `families`; default: the built-in ones)."""
    known = families if families is not None else families_module.builtin()
    return rules_from_tree(load_yaml(text, where), where, known, builtin=builtin)
