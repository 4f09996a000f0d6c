"""Reading a rule's `when:` and `confidence:` into predicates (doctor/judge/predicates.py), checked
against the fact catalogue and the event kinds (doctor/core/catalog): all / any / not over fact tests
(`fact: NAME` with one operator) and event tests (`events: {kind, phase, data}`, `min_count`).

Judge floor. The error texts are this module's; a bad predicate is one line naming file, line and field.
"""

from __future__ import annotations

import re
from typing import Any

from doctor.core import catalog
from doctor.core.vocab import CONFIDENCES, Confidence, is_confidence
from doctor.judge.predicates import (
    COMPARE_OPS,
    All,
    Any_,
    Compare,
    Events,
    FactRef,
    Not,
    Predicate,
    compile_regex,
)
from doctor.judge.ruleyaml import Ctx

MAX_DEPTH = 24
MAX_REGEX = 200


def check_fact_name(ctx: Ctx, name: Any, field_name: str, node: Any) -> str:
    if not isinstance(name, str) or not name:
        raise ctx.fail(field_name, "a fact name must be a string", node)
    if not catalog.is_known(name):
        raise ctx.fail(field_name, f"unknown fact '{name}' (see `llm-doctor facts`)", node)
    return name


def parse_predicate(ctx: Ctx, node: Any, path: str, depth: int) -> Predicate:
    if depth > MAX_DEPTH:
        raise ctx.fail(path, f"predicate nested deeper than {MAX_DEPTH}", node)
    if not isinstance(node, dict) or not node:
        raise ctx.fail(path, "a predicate must be a mapping (all / any / not / fact / events)", node)
    if "all" in node or "any" in node:
        key = "all" if "all" in node else "any"
        if len(node) != 1:
            raise ctx.fail(path, f"'{key}' must stand alone in its mapping", node)
        items = node[key]
        if not isinstance(items, list) or not items:
            raise ctx.fail(f"{path}.{key}", f"'{key}' needs a non-empty list", node)
        parsed = [parse_predicate(ctx, item, f"{path}.{key}[{i}]", depth + 1) for i, item in enumerate(items)]
        return All(parsed) if key == "all" else Any_(parsed)
    if "not" in node:
        if len(node) != 1:
            raise ctx.fail(path, "'not' must stand alone in its mapping", node)
        return Not(parse_predicate(ctx, node["not"], f"{path}.not", depth + 1))
    if "events" in node:
        return _parse_events(ctx, node, path)
    if "fact" in node:
        name = check_fact_name(ctx, node["fact"], f"{path}.fact", node)
        ops = [k for k in node if k != "fact"]
        if len(ops) != 1:
            raise ctx.fail(path, f"a fact test needs exactly one operator of: {', '.join(COMPARE_OPS)}", node)
        op = ops[0]
        if op not in COMPARE_OPS:
            raise ctx.fail(f"{path}.{op}", f"unknown operator '{op}' (known: {', '.join(COMPARE_OPS)})", node)
        return Compare(name, op, _parse_operand(ctx, op, node[op], f"{path}.{op}", node))
    raise ctx.fail(path, f"unknown predicate keys {sorted(node)} (use all / any / not / fact / events)", node)


def _parse_operand(ctx: Ctx, op: str, value: Any, path: str, node: Any) -> Any:
    if op == "exists":
        if not isinstance(value, bool):
            raise ctx.fail(path, "'exists' takes true or false", node)
        return value
    if op in ("in", "not_in"):
        if not isinstance(value, list) or not value or any(isinstance(v, dict | list) for v in value):
            raise ctx.fail(path, f"'{op}' takes a non-empty list of values", node)
        return list(value)
    if op == "matches":
        if not isinstance(value, str) or len(value) > MAX_REGEX:
            raise ctx.fail(path, f"'matches' takes a regular expression of at most {MAX_REGEX} characters", node)
        try:
            return compile_regex(value)
        except re.error as exc:
            raise ctx.fail(path, f"bad regular expression: {exc}", node) from None
    if isinstance(value, dict):
        extra = set(value) - {"fact", "times", "plus"}
        if "fact" not in value or extra:
            raise ctx.fail(path, "a fact operand is {fact: NAME, times: N, plus: N}", node)
        name = check_fact_name(ctx, value["fact"], path + ".fact", value)
        times, plus = value.get("times", 1.0), value.get("plus", 0.0)
        for label, number in (("times", times), ("plus", plus)):
            if not isinstance(number, int | float) or isinstance(number, bool):
                raise ctx.fail(f"{path}.{label}", f"'{label}' must be a number", value)
        if op not in ("lt", "le", "gt", "ge", "eq", "ne"):
            raise ctx.fail(path, f"'{op}' cannot take a fact operand", node)
        return FactRef(name, float(times), float(plus))
    if isinstance(value, list):
        raise ctx.fail(path, f"'{op}' takes a single value (use in / not_in for lists)", node)
    if op in ("lt", "le", "gt", "ge") and (not isinstance(value, int | float) or isinstance(value, bool)):
        raise ctx.fail(path, f"'{op}' takes a number", node)
    return value


def _parse_events(ctx: Ctx, node: dict[str, Any], path: str) -> Events:
    extra = set(node) - {"events", "min_count"}
    if extra:
        raise ctx.fail(path, f"unknown keys beside 'events': {sorted(extra)}", node)
    spec = node["events"]
    if not isinstance(spec, dict) or "kind" not in spec:
        raise ctx.fail(f"{path}.events", "'events' needs {kind: ..., phase: ...}", node)
    bad = set(spec) - {"kind", "phase", "data"}
    if bad:
        raise ctx.fail(f"{path}.events", f"unknown keys in 'events': {sorted(bad)}", spec)
    kind = spec["kind"]
    if not isinstance(kind, str) or kind not in catalog.EVENT_KINDS:
        known = ", ".join(catalog.EVENT_KINDS)
        raise ctx.fail(f"{path}.events.kind", f"unknown event kind '{kind}' (known: {known})", spec)
    phase = spec.get("phase")
    phases: tuple[str, ...]
    if phase is None:
        phases = ()
    elif isinstance(phase, str):
        phases = (phase,)
    elif isinstance(phase, list) and all(isinstance(p, str) for p in phase):
        phases = tuple(phase)
    else:
        raise ctx.fail(f"{path}.events.phase", "'phase' is a string or a list of strings", spec)
    data = spec.get("data") or {}
    if not isinstance(data, dict) or any(isinstance(v, dict | list) for v in data.values()):
        raise ctx.fail(f"{path}.events.data", "'data' maps keys to single values", spec)
    min_count = node.get("min_count", 1)
    if not isinstance(min_count, int) or isinstance(min_count, bool) or min_count < 1:
        raise ctx.fail(f"{path}.min_count", "'min_count' must be a positive integer", node)
    return Events(kind, phases, min_count, dict(data))


def parse_confidence(ctx: Ctx, node: Any) -> tuple[list[tuple[Confidence, Predicate]], Confidence]:
    if isinstance(node, str):
        if not is_confidence(node):
            raise ctx.fail("confidence", f"confidence must be one of {', '.join(CONFIDENCES)}")
        return [], node
    if not isinstance(node, dict):
        raise ctx.fail("confidence", "confidence is a level or {high: PREDICATE, medium: PREDICATE, default: LEVEL}")
    bad = set(node) - {"high", "medium", "low", "default"}
    if bad:
        raise ctx.fail("confidence", f"unknown keys in confidence: {sorted(bad)}", node)
    default = node.get("default", "low")
    if not is_confidence(default):
        raise ctx.fail("confidence.default", f"default must be one of {', '.join(CONFIDENCES)}", node)
    levels = [(level, parse_predicate(ctx, node[level], f"confidence.{level}", 1))
              for level in CONFIDENCES if level in node]
    return levels, default
