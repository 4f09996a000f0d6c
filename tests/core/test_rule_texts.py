"""Every rule's words, rendered: with the facts of its own firing test cases (messages in every mode,
explain, fix text and each engine's fix) and without any facts (`explain`). No raw `{fact}` reaches a
reader and no unit is written twice ("100 MB/s MB/s", "58.4 tokens/s tokens/s")."""

from __future__ import annotations

import re

import pytest

from doctor.cli import main
from doctor.commands.rules import explain_rule
from doctor.core.catalog import CATALOG
from doctor.core.facts import Facts, Source
from doctor.core.format import render
from doctor.judge.rulebase import load_rulebase
from doctor.judge.ruletest import facts_for_case
from doctor.views.render.markdown import render_markdown

RAW = re.compile(r"\{[A-Za-z_][A-Za-z0-9_.\[\]]*(?:\|[a-z0-9_]+)?\}")
UNITS = sorted({s.unit for s in CATALOG.values() if s.unit} | {"KiB", "MiB", "GiB", "ms", "s", "B"}, key=len,
               reverse=True)
DOUBLED = re.compile(r"(?<![\w/])(" + "|".join(re.escape(u) for u in UNITS) + r")\s+\1(?![\w/])|%%")  # "1.9%%" too

RULEBASE = load_rulebase([], env={})


def texts_of(rule) -> list[str]:
    return [rule.message, *rule.message_by_mode.values(), rule.explain, rule.fix_text, *rule.fix_engines.values()]


@pytest.mark.parametrize("rule", RULEBASE.rules, ids=lambda r: r.id)
def test_rendered_with_its_own_facts_no_raw_placeholder_and_no_doubled_unit(rule) -> None:
    cases = [c for c in rule.tests if c.expect == "fired"] or rule.tests[:1]
    for case in cases:
        facts = facts_for_case(case)
        event = facts.events()[0] if facts.events() else None
        for template in texts_of(rule):
            text = render(template, facts, event)
            assert not RAW.search(text), f"{rule.id} {case.name}: {text}"
            assert not DOUBLED.search(text), f"{rule.id} {case.name}: {text}"


@pytest.mark.parametrize("rule", RULEBASE.rules, ids=lambda r: r.id)
def test_explained_without_facts_every_placeholder_reads_as_a_name(rule) -> None:
    text = "\n".join(explain_rule(rule))
    assert not RAW.search(text), text
    for template in texts_of(rule):
        if "{" in template and RAW.search(template):
            short = RAW.search(template).group(0)[1:-1].split("|")[0].rsplit(".", 1)[-1]
            assert f"<{short}>" in text


def test_explain_ld201_renders_the_kv_bytes_placeholder(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "LD201"]) == 0
    out = capsys.readouterr().out
    assert "{derived.kv_bytes_per_token|bytes}" not in out and "<kv_bytes_per_token>" in out
    assert "<kv_bytes_per_token> is KV bytes per token" in out


def test_a_unit_the_template_writes_is_not_repeated() -> None:
    facts = Facts()
    facts.set("run.load_mb_s", 100.0, Source("trace", "t"))
    facts.set("run.decode_tps_min", 10.2, Source("trace", "t"))
    facts.set("run.decode_tps_max", 58.4, Source("trace", "t"))
    assert render("({run.load_mb_s} MB/s)", facts) == "(100 MB/s)"
    assert render("between {run.decode_tps_min} and {run.decode_tps_max} tokens/s.", facts) == \
        "between 10.2 tokens/s and 58.4 tokens/s."
    assert render("{run.load_mb_s}, then", facts) == "100 MB/s, then"  # the unit stays where the template has none
    for rid in ("LD101", "LD802"):
        rule = RULEBASE.by_id(rid)
        if rule is not None:
            assert not DOUBLED.search(render(rule.message, facts))


def test_markdown_marks_an_info_finding_as_a_note_not_a_failure() -> None:
    from doctor.judge.evaluate import diagnose

    facts = Facts.from_values({"engine.gpu_offload_supported": False}, [], events_observed=True)
    report = diagnose(facts, RULEBASE, command="analyze", mode="analyze")
    assert [f.severity for f in report.findings if f.id == "LD505"] == ["info"]
    row = next(line for line in render_markdown(report).splitlines() if "LD505" in line and line.startswith("|"))
    assert "✗" not in row and row.startswith("| • |") and "info" in row
