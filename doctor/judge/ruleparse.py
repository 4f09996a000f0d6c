"""Reading one rule of a rule file: every field checked against the vocabularies, the fact catalogue,
the families (its class) and the engine table (its `engines:` and `fix:` keys), and its templates'
placeholders against the catalogue. A broken rule is one line naming file, line and field.

`fix:` is words, or {text, change, <engine>: command}: `change` is a settings change written once
and spelled for each engine by the engine table (doctor/judge/changes.py); an engine's own key
replaces its spelling (null: no command for it). `verify:` says what `--verify` tries; a rule that
names none takes its class's default (rules/families.yaml).

Judge floor. The error texts are this module's; the words are the rule files'.
"""

from __future__ import annotations

import re
from typing import Any

from doctor.core import catalog, engines
from doctor.core.errors import RuleError
from doctor.core.format import FILTERS, placeholders
from doctor.core.vocab import (
    CONFIDENCES,
    MODES,
    SEVERITIES,
    STATUSES,
    Mode,
    is_confidence,
    is_mode,
    is_rule_outcome,
    is_severity,
    is_status,
)
from doctor.judge import changes
from doctor.judge.families import Families
from doctor.judge.predparse import check_fact_name, parse_confidence, parse_predicate
from doctor.judge.rule import Rule, RuleCase
from doctor.judge.ruleyaml import Ctx, line_of

ID_RE = re.compile(r"^[A-Z]{2,4}\d{3,4}$")
SLUG_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")

RULE_KEYS = {"id", "slug", "class", "severity", "title", "when", "confidence", "message", "explain",
             "fix", "verify", "inhibits", "references", "tests", "modes", "engines", "status"}
CASE_KEYS = {"name", "facts", "events", "events_observed", "expect", "confidence", "missing", "mode"}


def rules_from_tree(data: Any, where: str, families: Families, builtin: bool = False) -> list[Rule]:
    """The rules of one file's YAML tree (parsed now or from the cache), each validated."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise RuleError(where, getattr(data, "line", 1), None, "a rule file holds a YAML list of rules")
    rules = []
    for item in data:
        if not isinstance(item, dict):
            raise RuleError(where, getattr(data, "line", None), None, "each rule must be a mapping")
        try:
            rules.append(_parse_rule(item, where, families, builtin))
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:
            # a shape no check above foresaw: still one line naming the file and the rule, never a traceback
            raise RuleError(where, getattr(item, "line", None), None,
                            f"malformed rule ({type(exc).__name__}: {exc})"[:300]) from None
    return rules


def _parse_rule(node: dict[str, Any], where: str, families: Families, builtin: bool) -> Rule:
    ctx = Ctx(where, node)
    unknown = set(node) - RULE_KEYS
    if unknown:
        first = sorted(unknown)[0]
        raise ctx.fail(first, f"unknown field '{first}' (allowed: {', '.join(sorted(RULE_KEYS))})")
    rule_id = _req_str(ctx, node, "id")
    if not ID_RE.match(rule_id):
        raise ctx.fail("id", f"id '{rule_id}' must look like {families.example_id()}")
    ctx.rule_id = rule_id
    slug = _req_str(ctx, node, "slug")
    if not SLUG_RE.match(slug):
        raise ctx.fail("slug", f"slug '{slug}' must be kebab-case")
    cls = _req_str(ctx, node, "class")
    if cls not in families.classes:
        raise ctx.fail("class", f"unknown diagnosis class '{cls}' (known: {', '.join(families.classes)})")
    severity = _req_str(ctx, node, "severity")
    if not is_severity(severity):
        raise ctx.fail("severity", f"severity must be one of {', '.join(SEVERITIES)}")
    title = _req_str(ctx, node, "title")
    if "when" not in node:
        raise ctx.fail("when", "missing 'when'")
    when = parse_predicate(ctx, node["when"], "when", 0)
    levels, default = parse_confidence(ctx, node.get("confidence", "medium"))
    message, message_by_mode = _parse_message(ctx, node.get("message"), title)
    explain = _opt_str(ctx, node, "explain") or ""
    fix_text, fix_engines, fix_candidates, spelled = _parse_fix(ctx, node.get("fix"))
    verify = changes.parse_verify(ctx, node["verify"]) if "verify" in node else families.classes[cls].verify
    inhibits = _str_list(ctx, node, "inhibits")
    for target in inhibits:
        if not ID_RE.match(target):
            raise ctx.fail("inhibits", f"'{target}' is not a rule id")
    references = _str_list(ctx, node, "references")
    modes: list[Mode] = []
    for mode in _str_list(ctx, node, "modes") or MODES:
        if not is_mode(mode):
            raise ctx.fail("modes", f"unknown mode '{mode}' (known: {', '.join(MODES)})")
        modes.append(mode)
    engine_names = tuple(_str_list(ctx, node, "engines"))
    known = engines.names()
    for engine in engine_names:
        if engine not in known:
            raise ctx.fail("engines", f"unknown engine '{engine}' (known: {', '.join(known)})")
    status = _opt_str(ctx, node, "status") or "stable"
    if not is_status(status):
        raise ctx.fail("status", f"status must be one of {', '.join(STATUSES)}")
    for name, template in [("message", message), *[(f"message.{m}", t) for m, t in message_by_mode.items()],
                           ("explain", explain), ("fix", fix_text),
                           *[("fix.change" if e in spelled else f"fix.{e}", t) for e, t in fix_engines.items()]]:
        _check_template(ctx, name, template)
    tests = _parse_cases(ctx, node.get("tests"))
    return Rule(
        id=rule_id, slug=slug, cls=cls, severity=severity, title=title, when=when,
        confidence_levels=levels, confidence_default=default, message=message, explain=explain,
        fix_text=fix_text, fix_engines=fix_engines, inhibits=inhibits, references=references,
        tests=tests, modes=tuple(modes), status=status, path=where, line=line_of(node), builtin=builtin,
        message_by_mode=message_by_mode, engines=engine_names, area=families.area(cls),
        fix_change=fix_candidates[0].change if fix_candidates else {}, fix_candidates=fix_candidates, verify=verify,
    )


def _parse_message(ctx: Ctx, node: Any, title: str) -> tuple[str, dict[str, str]]:
    """A message is a string, or words per mode: {default: ..., scan: ..., watch: ..., analyze: ...}
    (a scan judges a plan - nothing ran unless its trace did - so "the model ran" is not a scan's word)."""
    if node is None:
        return title, {}
    if isinstance(node, str):
        return " ".join(node.split()) or title, {}
    if not isinstance(node, dict):
        raise ctx.fail("message", "'message' is a string or {default: ..., scan: ..., watch: ..., analyze: ...}")
    bad = set(node) - {"default", *MODES}
    if bad:
        raise ctx.fail("message", f"unknown keys in message: {sorted(bad)} (default, {', '.join(MODES)})", node)
    texts = {}
    for key, value in node.items():
        if not isinstance(value, str) or not value.strip():
            raise ctx.fail(f"message.{key}", "each message must be a non-empty string", node)
        texts[key] = " ".join(value.split())
    if "default" not in texts:
        raise ctx.fail("message", "a message by mode needs a 'default'", node)
    default = texts.pop("default")
    return default, texts


def _req_str(ctx: Ctx, node: dict[str, Any], key: str) -> str:
    if key not in node:
        raise ctx.fail(key, f"missing '{key}'")
    value = node[key]
    if not isinstance(value, str) or not value.strip():
        raise ctx.fail(key, f"'{key}' must be a non-empty string")
    return value.strip()


def _opt_str(ctx: Ctx, node: dict[str, Any], key: str) -> str | None:
    value = node.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ctx.fail(key, f"'{key}' must be a string")
    return " ".join(value.split()) if key in ("message", "title") else value.strip()


def _str_list(ctx: Ctx, node: dict[str, Any], key: str) -> list[str]:
    value = node.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ctx.fail(key, f"'{key}' must be a list of strings")
    return [v.strip() for v in value]


def _parse_fix(ctx: Ctx, node: Any) -> tuple[str, dict[str, str], tuple[changes.Candidate, ...], set[str]]:
    """(text, engine -> command template, the changes in the order to offer them, the engines whose
    command is the first change spelled)."""
    if node is None:
        raise ctx.fail("fix", "missing 'fix' (every finding says what to do)")
    if isinstance(node, str):
        return " ".join(node.split()), {}, (), set()
    known = engines.names()
    if not isinstance(node, dict):
        raise ctx.fail("fix", f"'fix' is a mapping {{text: ..., change: {{...}}, {known[0]}: ..., ...}}")
    bad = set(node) - {"text", "change", *known}
    if bad:
        raise ctx.fail("fix", f"unknown keys in fix: {sorted(bad)} (text, change, engines: {', '.join(known)})", node)
    text = node.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ctx.fail("fix.text", "'fix.text' must say what to do", node)
    candidates = changes.parse_candidates(ctx, node["change"], "fix.change") if "change" in node else ()
    change = candidates[0].change if candidates else {}
    spelled = changes.flags(change)
    by_engine: dict[str, str] = {}
    for engine in known:
        if engine not in node:
            if engine in spelled:
                by_engine[engine] = spelled[engine]
            continue
        value = node[engine]
        if value is None and change:
            continue  # no command for this engine, though the table spells the change for it
        if not isinstance(value, str) or not value.strip():
            raise ctx.fail(f"fix.{engine}", f"fix for {engine} must be a non-empty string"
                                            + (" (or null: no command for it)" if change else ""), node)
        by_engine[engine] = value.strip()
    return " ".join(text.split()), by_engine, candidates, {e for e in by_engine if e not in node}


def _check_template(ctx: Ctx, field_name: str, template: str) -> None:
    if template.count("[[") != template.count("]]"):
        raise ctx.fail(field_name, "unbalanced [[ ]] optional part")
    for ph in placeholders(template):
        if ph.filter is not None and ph.filter not in FILTERS:
            raise ctx.fail(field_name, f"unknown filter '|{ph.filter}' (known: {', '.join(FILTERS)})")
        if ph.name.startswith("event."):
            continue
        if not catalog.is_known(ph.name):
            raise ctx.fail(field_name, f"placeholder {{{ph.name}}} names an unknown fact")


def _parse_cases(ctx: Ctx, node: Any) -> list[RuleCase]:
    if node is None:
        return []
    if not isinstance(node, list):
        raise ctx.fail("tests", "'tests' is a list of cases")
    cases = []
    for i, case in enumerate(node):
        label = f"tests[{i}]"
        if not isinstance(case, dict):
            raise ctx.fail(label, "a test case is a mapping", node)
        bad = set(case) - CASE_KEYS
        if bad:
            raise ctx.fail(label, f"unknown keys in test case: {sorted(bad)}", case)
        facts = case.get("facts") or {}
        if not isinstance(facts, dict):
            raise ctx.fail(f"{label}.facts", "'facts' maps fact names to values", case)
        for name, value in facts.items():
            check_fact_name(ctx, name, f"{label}.facts", case)
            if isinstance(value, dict):
                raise ctx.fail(f"{label}.facts", f"value of {name} must be a number, string, bool or list", case)
        events = case.get("events") or []
        if not isinstance(events, list) or not all(isinstance(e, dict) and "kind" in e for e in events):
            raise ctx.fail(f"{label}.events", "'events' is a list of {kind: ..., phase: ..., line: ...}", case)
        for event in events:
            if not isinstance(event["kind"], str) or event["kind"] not in catalog.EVENT_KINDS:
                raise ctx.fail(f"{label}.events", f"unknown event kind '{event['kind']}'", case)
        expect = case.get("expect")
        if not is_rule_outcome(expect):
            raise ctx.fail(f"{label}.expect", "'expect' is fired, ok, unknown or skipped", case)
        conf = case.get("confidence")
        if conf is not None and not is_confidence(conf):
            raise ctx.fail(f"{label}.confidence", f"confidence must be one of {', '.join(CONFIDENCES)}", case)
        missing = case.get("missing")
        if missing is not None and (not isinstance(missing, list) or not all(isinstance(m, str) for m in missing)):
            raise ctx.fail(f"{label}.missing", "'missing' is a list of fact names", case)
        mode = case.get("mode")
        if mode is not None and not is_mode(mode):
            raise ctx.fail(f"{label}.mode", f"mode must be one of {', '.join(MODES)}", case)
        observed = case.get("events_observed", True)
        if not isinstance(observed, bool):
            raise ctx.fail(f"{label}.events_observed", "'events_observed' is true or false", case)
        name = case.get("name") or f"case {i + 1}"
        cases.append(RuleCase(str(name), dict(facts), [dict(e) for e in events], observed, expect, conf,
                              list(missing) if missing is not None else None, mode, line_of(case)))
    return cases
