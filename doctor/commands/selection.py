"""--only / --skip for every command: split the names into probes (scan) and checks, refuse unknown ones.

A check is named by rule id, slug, diagnosis class (context.overflow or context-overflow) or class
family (context); scan also takes probe names. A name that is neither is a usage error (exit 2), so
a typo never silently checks everything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from doctor.core.errors import UsageError

if TYPE_CHECKING:
    from doctor.judge.rulebase import RuleBase

PROBE_GROUPS = ("trace", "bench")


def flatten(groups: list[list[str]] | None) -> list[str]:
    seen: list[str] = []
    for group in groups or []:
        for item in group:
            if item not in seen:
                seen.append(item)
    return seen


def split(names: list[str], option: str, rulebase: RuleBase, probe_names: tuple[str, ...] = (),
          command: str = "scan") -> tuple[set[str], set[str]]:
    """(probe names, check selectors); an unknown name raises UsageError naming it."""
    probes: set[str] = set()
    checks: set[str] = set()
    known_probes = (*probe_names, *PROBE_GROUPS) if probe_names else ()
    scan_probes = ("gguf", "storage", "cpu", "memory", "gpu", "engine", "readbench", "gpubench", *PROBE_GROUPS)
    for name in names:
        if name.lower() in known_probes:
            probes.add(name.lower())
        elif rulebase.select(name):
            checks.add(name)
        elif not probe_names and name.lower() in scan_probes:
            raise UsageError(f"{option} {name}: a scan probe; {command} takes checks only "
                             "(a rule id, slug or class; see `llm-doctor rules list`)")
        else:
            probes_hint = f"; probes: {', '.join((*probe_names, *PROBE_GROUPS))}" if probe_names else ""
            raise UsageError(f"{option} {name}: no such check{' or probe' if probe_names else ''} "
                             f"(checks: a rule id, slug or class, see `llm-doctor rules list`{probes_hint})")
    return probes, checks


def filter_rules(rulebase: RuleBase, only: set[str], skip: set[str]) -> RuleBase:
    from doctor.judge.rulebase import RuleBase

    def match(rule: Any, selectors: set[str]) -> bool:
        return any(rule.matches(s) for s in selectors)

    kept = [r for r in rulebase.rules if (not only or match(r, only)) and not (skip and match(r, skip))]
    return RuleBase(rules=kept, notes=list(rulebase.notes), sources=list(rulebase.sources),
                    families=rulebase.families)


def select_rules(args: Any, rulebase: RuleBase, command: str) -> RuleBase:
    """analyze and watch: --only / --skip name checks only."""
    _, only = split(flatten(getattr(args, "only", [])), "--only", rulebase, command=command)
    _, skip = split(flatten(getattr(args, "skip", [])), "--skip", rulebase, command=command)
    return filter_rules(rulebase, only, skip) if only or skip else rulebase
