"""No holes in messages (issue 37, item 3): every rule's message (each mode's too), explanation and fix
text, rendered with each of its placeholders' values missing in turn, reads whole: no "(unknown)", no
empty slot ("needed  tokens"), no punctuation left dangling ("(it was )", " ,", "( )"). A value
nobody knows takes its clause with it (doctor/core/clauses.py)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from doctor.core.facts import Facts, Source
from doctor.core.format import OPTIONAL, placeholders, render
from doctor.judge.rule import Rule
from tests.core.test_no_placeholders import HOLE, RULES, _cases, _fired

DANGLING = re.compile(r"\(\s*\)|\(\s*[,;:.]|[,;:]\s*\)|[^\S\n][,;:.!?)]|[,;:]\s*[,;:.!?]|^\s*[,;:.)]|\w[^\S\n]{2,}\w"
                      r"|\b(?:of|the|is|was|at|to|and|in|by|a|an)\s*[.;,:)]")
SOURCE = Source("test", "missing")


def _templates(rule: Rule) -> list[tuple[str, str]]:
    return [("message", rule.message), *[(f"message.{m}", t) for m, t in rule.message_by_mode.items()],
            ("explain", rule.explain), ("fix", rule.fix_text)]


def _without(facts: Facts, name: str) -> Facts:
    out = Facts()
    out.merge(facts)
    out.unknown(name, "left out by the test", SOURCE)
    return out


@pytest.mark.parametrize(("rule_id", "index"), _cases(RULES), ids=lambda x: str(x))
def test_every_template_reads_whole_with_each_value_missing(rule_id: str, index: int) -> None:
    rule, result, facts = _fired(RULES, rule_id, index)
    event = min(result.events, key=lambda e: e.line or 0) if result.events else None
    for field_name, template in _templates(rule):
        whole = render(template, facts, event)
        # what the words say with every value known is the rule's own prose ("the class each one is
        # evidence for."): only what a missing value adds counts
        known_shapes = set(DANGLING.findall(whole))
        names = {ph.name for ph in placeholders(template)}
        for name in sorted(names):
            if name.startswith("event."):
                if event is None:
                    continue
                key = name[len("event."):]
                missing_event = replace(event, data={k: v for k, v in event.data.items() if k != key})
                text = render(template, facts, missing_event)
            else:
                text = render(template, _without(facts, name), event)
            assert "(unknown)" not in text, (field_name, name, text)
            assert not HOLE.search(text), (field_name, name, text)
            assert not set(DANGLING.findall(text)) - known_shapes, (field_name, name, text)
            assert text.strip() or field_name != "fix", f"{rule_id}: the fix says nothing without {name}"
        if field_name.startswith("message"):
            assert whole.strip(), f"{rule_id} {field_name}: nothing left of the message with every value known"


def test_the_issue_s_messages_read_whole() -> None:
    """The three holes the issue quotes: LD201's message, LD302's fix text, each with its value unknown."""
    facts = Facts.from_values({}, [{"kind": "prompt_too_long", "line": 4}], events_observed=True)
    ld201 = RULES.by_id("LD201")
    ld302 = RULES.by_id("LD302")
    assert ld201 is not None and ld302 is not None
    message = render(ld201.message, facts)
    assert message and "(unknown)" not in message and "needed tokens" not in message and "  " not in message
    fix = render(ld302.fix_text, facts)
    assert fix.startswith("Lower the context to what you need") and "(it was" not in fix and "(unknown)" not in fix


def test_a_clause_goes_with_its_unknown_value() -> None:
    facts = Facts.from_values({"config.n_ctx": 4096})
    assert render("Lower it (it was {config.n_ctx}), or quantise.", facts) == "Lower it (it was 4096), or quantise."
    assert render("Lower it (it was {derived.ctx_reduced}), or quantise.", facts) == "Lower it, or quantise."
    assert render("It needed {derived.tokens_needed} tokens; the engine refused it.", facts) == "The engine refused it."
    assert render("A, b {derived.tokens_needed}, c.", facts) == "A, c."
    assert render("Only {derived.tokens_needed} here.", facts) == ""
    # an optional part still goes first, and a known value stays where it was
    assert render("n_ctx {config.n_ctx}[[ ({derived.kv_bytes|bytes})]].", facts) == "n_ctx 4096."


def test_optional_parts_are_found_where_they_are() -> None:
    """The test above reaches every placeholder: the optional ones too (they are dropped, not holes)."""
    rule = RULES.by_id("LD201")
    assert rule is not None
    assert any(placeholders(m.group(1)) for m in OPTIONAL.finditer(rule.fix_text + rule.message))
