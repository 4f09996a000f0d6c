"""The rule loader on hostile rule files: malformed YAML, wrong types, unknown operators, alias
bombs, python tags. Every outcome is a list of rules or a RuleError naming the file."""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.errors import RuleError
from doctor.facts import Facts
from doctor.rulebase import parse_rules
from doctor.templates import render

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEYS = ["id", "slug", "class", "severity", "title", "when", "fix", "tests", "all", "any", "not", "fact",
        "events", "kind", "eq", "lt", "gt", "in", "matches", "exists", "confidence", "inhibits", "text"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20),
                    st.sampled_from(["LD201", "config.n_ctx", "oom", "error", "context.overflow", "f16"]))
trees = st.recursive(scalars, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(st.sampled_from(KEYS), children, max_size=5)), max_leaves=30)


def load(text: str) -> None:
    try:
        parse_rules(text, "fuzz.yaml")
    except RuleError as exc:
        assert str(exc).startswith("fuzz.yaml")


@FUZZ
@given(trees)
def test_structured_garbage(tree: object) -> None:
    load(yaml.safe_dump([tree], allow_unicode=True))


@FUZZ
@given(st.text(max_size=500))
def test_arbitrary_text(text: str) -> None:
    load(text)


def test_alias_bomb_is_refused_without_expanding() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 20):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    load("\n".join(lines))


def test_python_object_tags_are_refused() -> None:
    for tag in ("!!python/object/apply:os.system ['id']", "!!python/name:os.system", "!!binary aGk="):
        load(f"- {tag}\n")


@FUZZ
@given(st.text(max_size=200))
def test_templates_never_raise_and_reach_no_attribute(template: str) -> None:
    out = render(template, Facts.from_values({"config.n_ctx": 4096}))
    assert "<bound method" not in out and "<class" not in out
