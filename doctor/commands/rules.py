"""`llm-doctor rules list|test` and `llm-doctor explain ID`: the rule base, its tests, its docs."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from doctor.commands.output import write_stdout
from doctor.core.catalog import CATALOG, EVENT_KINDS
from doctor.core.errors import UsageError
from doctor.core.format import describe, placeholders
from doctor.core.sanitize import inert

if TYPE_CHECKING:
    from doctor.judge.rule import Rule

RULES_HELP = "an extra rule folder (repeatable; also LLM_DOCTOR_RULES)"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rules", help="list the rules, or run their own test cases")
    rsub = p.add_subparsers(dest="rules_command", metavar="{list,test}")
    pl = rsub.add_parser("list", help="every rule: id, class, severity, title")
    pl.add_argument("--rules", action="append", metavar="DIR", default=[], help=RULES_HELP)
    pl.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    pl.set_defaults(run=run_list)
    pt = rsub.add_parser("test", help="run every rule's test cases; show expected vs actual on failure")
    pt.add_argument("dir", nargs="?", help="a rule folder to test on top of the built-in rules")
    pt.add_argument("--rules", action="append", metavar="DIR", default=[], help=RULES_HELP)
    pt.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    pt.set_defaults(run=run_test)
    p.set_defaults(run=_which_one)

    pe = sub.add_parser("explain", help="what a rule checks, why, and how to fix it",
                        description="Explain a rule, or every rule of a diagnosis class.")
    pe.add_argument("rule", metavar="NAME",
                    help="a rule id (LDnnn), a slug (prompt-exceeds-context), a diagnosis class "
                         "(context.overflow or context-overflow) or a class family (context)")
    pe.add_argument("--rules", action="append", metavar="DIR", default=[], help=RULES_HELP)
    pe.set_defaults(run=run_explain)

    pf = sub.add_parser("facts", help="the fact catalogue: every fact name rules can use")
    pf.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    pf.set_defaults(run=run_facts)


def _which_one(args: argparse.Namespace) -> int:
    raise UsageError("rules: say which: `llm-doctor rules list` or `llm-doctor rules test [DIR]`")


def run_list(args: argparse.Namespace) -> int:
    from doctor.judge.rulebase import load_rulebase  # the rule base: imported by the runs, not with the parser

    rb = load_rulebase(args.rules)
    if args.format == "json":
        write_stdout(json.dumps([{"id": r.id, "slug": r.slug, "class": r.cls, "severity": r.severity,
                                  "title": r.title, "modes": list(r.modes), "builtin": r.builtin,
                                  "path": r.path} for r in rb.rules], indent=2) + "\n")
        return 0
    lines = [f"{r.id:<7} {r.severity:<8} {r.cls:<20} {r.slug:<34} {r.title}" for r in rb.rules]
    lines.append(f"\n{len(rb.rules)} rules from {len(rb.sources)} files.")
    lines += [f"note: {n}" for n in rb.notes]
    write_stdout(inert("\n".join(lines)).replace("\\x0a", "\n") + "\n")  # user rules' titles are outside text
    return 0


def run_test(args: argparse.Namespace) -> int:
    from doctor.judge.rulebase import load_rulebase
    from doctor.judge.ruletest import run_all

    extra = list(args.rules) + ([args.dir] if args.dir else [])
    rb = load_rulebase(extra)
    results = run_all(rb)
    failed = [r for r in results if not r.passed]
    no_cases = [r for r in rb.rules if not r.tests]
    if args.format == "json":
        write_stdout(json.dumps({
            "cases": len(results), "passed": len(results) - len(failed), "failed": len(failed),
            "failures": [{"rule": r.rule.id, "case": r.case.name, "expected": r.expected, "actual": r.actual,
                          "path": r.rule.path, "line": r.case.line} for r in failed],
            "rules_without_cases": [r.id for r in no_cases]}, indent=2) + "\n")
    else:
        lines = [f"FAIL {r.describe()}" for r in failed]
        lines += [f"warning: {r.id} {r.slug} has no test cases ({r.path})" for r in no_cases]
        lines.append(f"{len(results) - len(failed)}/{len(results)} rule test cases passed"
                     f" across {len(rb.rules)} rules.")
        write_stdout(inert("\n".join(lines)).replace("\\x0a", "\n") + "\n")
    return 1 if failed else 0


def run_explain(args: argparse.Namespace) -> int:
    from doctor.judge.rulebase import load_rulebase

    rb = load_rulebase(args.rules)
    rules = rb.select(args.rule)
    if not rules:
        raise UsageError(f"no rule, slug or class {args.rule!r} (see `llm-doctor rules list`; classes: "
                         f"{', '.join(rb.families.classes)})")
    out: list[str] = []
    if len(rules) > 1:
        cls = rb.families.class_for(args.rule)
        what = f"class {cls} ({rb.families.area(cls)})" if cls else f"family {args.rule.lower()}"
        out += [f"{len(rules)} rules in {what}: {', '.join(r.id for r in rules)}", ""]
    for i, rule in enumerate(rules):
        if i:
            out += ["", "-" * 72, ""]
        out += explain_rule(rule)
    write_stdout(inert("\n".join(out)).replace("\\x0a", "\n") + "\n")
    return 0


def explain_rule(rule: Rule) -> list[str]:
    """A rule for people: its templates rendered without facts (a value reads <name>)."""
    out = [f"{rule.id} {rule.slug} — {rule.title}",
           f"class: {rule.cls} ({rule.area})   severity: {rule.severity}   modes: {', '.join(rule.modes)}",
           f"defined in: {rule.path}:{rule.line}", ""]
    out += ["Says:", "  " + " ".join(describe(rule.message).split())]
    out += [f"  ({mode}) " + " ".join(describe(text).split()) for mode, text in rule.message_by_mode.items()]
    out.append("")
    if rule.explain:
        out += ["Why:", "  " + " ".join(describe(rule.explain).split()), ""]
    names = sorted(rule.when.fact_names())
    if names:
        described = [f"  {n}  — {CATALOG[_norm(n)].doc}" if _norm(n) in CATALOG else f"  {n}" for n in names]
        out += ["Reads facts:", *described, ""]
    kinds = _event_kinds(rule)
    if kinds:
        out += ["Reads events:", *[f"  {k}  — {EVENT_KINDS[k]}" for k in kinds], ""]
    out += ["Fix:", "  " + describe(rule.fix_text)]
    for engine, command in rule.fix_engines.items():
        out.append(f"  {engine}: {describe(command)}")
    values = _template_values(rule)
    if values:
        out += ["", "Where:", *[f"  <{short}> is {doc}" for short, doc in values]]
    if rule.inhibits:
        out += ["", "When it fires it explains (hides): " + ", ".join(rule.inhibits)]
    if rule.references:
        out += ["", "References:", *[f"  {r}" for r in rule.references]]
    out += ["", f"Test cases: {len(rule.tests)}"]
    return out


def _template_values(rule: Rule) -> list[tuple[str, str]]:
    """<name> -> what it stands for, for every placeholder the rendered text shows."""
    seen: dict[str, str] = {}
    texts = [rule.message, *rule.message_by_mode.values(), rule.explain, rule.fix_text, *rule.fix_engines.values()]
    for text in texts:
        for ph in placeholders(text):
            short = ph.name.rsplit(".", 1)[-1]
            if short in seen:
                continue
            if ph.name.startswith("event."):
                seen[short] = "a value from the engine's own message"
            else:
                spec = CATALOG.get(_norm(ph.name))
                seen[short] = f"{spec.doc} ({ph.name})" if spec else ph.name
    return sorted(seen.items())


def run_facts(args: argparse.Namespace) -> int:
    if args.format == "json":
        write_stdout(json.dumps({"facts": {n: {"type": s.type, "unit": s.unit, "doc": s.doc}
                                           for n, s in sorted(CATALOG.items())},
                                 "events": EVENT_KINDS}, indent=2) + "\n")
        return 0
    lines = [f"{n:<42} {s.type:<6} {s.unit or '':<9} {s.doc}" for n, s in sorted(CATALOG.items())]
    lines += ["", "Event kinds:"] + [f"  {k:<16} {v}" for k, v in EVENT_KINDS.items()]
    write_stdout("\n".join(lines) + "\n")
    print(f"{len(CATALOG)} facts.", file=sys.stderr)
    return 0


def _norm(name: str) -> str:
    from doctor.core.catalog import normalise

    return normalise(name)


def _event_kinds(rule: object) -> list[str]:
    from doctor.judge.predicates import All, Any_, Events, Not

    kinds: set[str] = set()

    def walk(p: object) -> None:
        if isinstance(p, Events):
            kinds.add(p.kind)
        elif isinstance(p, All | Any_):
            for item in p.items:
                walk(item)
        elif isinstance(p, Not):
            walk(p.item)

    walk(rule.when)  # type: ignore[attr-defined]
    return sorted(kinds)
