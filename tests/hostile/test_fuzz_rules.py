"""Rules are data. The rule loader on hostile rule files: malformed YAML, wrong types, unknown
operators, alias bombs and recursive anchors, python tags; every outcome is a list of rules or a
one-line RuleError naming the file. No rule can run code, read a file or reach the network; a
template cannot reach an attribute; a regular expression cannot hang the tool; a user folder that
replaces a built-in rule says so."""

from __future__ import annotations

import builtins
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from random import Random

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.core.errors import RuleError
from doctor.core.facts import Facts, Source
from doctor.core.format import render
from doctor.judge import families
from doctor.judge.evaluate import build_report
from doctor.judge.predicates import compile_regex
from doctor.judge.rulebase import RuleBase, load_rulebase, parse_rules, rule_files

from .fuzz_targets import (
    HOSTILE_YAML,
    TEMPLATE_ATTACKS,
    gen_rule_bytes,
    gen_rules,
    render_all,
    rules_target,
    time_limit,
)

ROOT = Path(__file__).resolve().parents[2]
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])
KEYS = ["id", "slug", "class", "severity", "title", "when", "fix", "tests", "all", "any", "not", "fact",
        "events", "kind", "eq", "lt", "gt", "in", "matches", "exists", "confidence", "inhibits", "text"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20),
                    st.sampled_from(["LD201", "config.n_ctx", "oom", "error", "context.overflow", "f16"]))
trees = st.recursive(scalars, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(st.sampled_from(KEYS), children, max_size=5)), max_leaves=30)
GOOD_RULE = """
- id: LD999
  slug: user-rule
  class: context.overflow
  severity: warning
  title: A user rule
  when: {fact: config.n_ctx, lt: 100000}
  message: "n_ctx is {config.n_ctx}"
  fix: {text: "Raise the context."}
"""


def load(text: str) -> None:
    try:
        parse_rules(text, "fuzz.yaml")
    except RuleError as exc:
        assert str(exc).startswith("fuzz.yaml")
        assert "\n" not in exc.one_line()


@FUZZ
@given(trees)
def test_structured_garbage(tree: object) -> None:
    load(yaml.safe_dump([tree], allow_unicode=True))


@FUZZ
@given(st.text(max_size=500))
def test_arbitrary_text(text: str) -> None:
    load(text)


@FUZZ
@given(st.randoms(use_true_random=False))
def test_mutated_real_rules_load_or_refuse_and_what_loads_runs(rng: Random) -> None:
    """Real rules with mutated trees, lines or one hostile leaf; what loads is evaluated on real
    facts of every engine, its messages rendered in every view and its own test cases run."""
    with time_limit(30):
        rules_target(gen_rules(rng))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_rule_files_as_bytes(tmp_path: Path, rng: Random) -> None:
    """Through the file loader: invalid UTF-8, NUL bytes, files over the size limit."""
    with time_limit(30):
        rules_target(gen_rule_bytes(rng), tmp_path / "rules.yaml")


def test_alias_bomb_is_refused_without_expanding() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 20):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    with time_limit(5), pytest.raises(RuleError, match="aliases"):
        parse_rules("\n".join(lines), "fuzz.yaml")


@pytest.mark.parametrize("text", HOSTILE_YAML)
def test_hostile_yaml_constructs(text: str) -> None:
    with time_limit(10):
        load(text)


def test_python_tags_run_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    payloads = [f"- !!python/object/apply:os.system ['touch {marker}']\n",
                f"- !!python/object/new:subprocess.Popen [['touch', '{marker}']]\n",
                f"- !!python/object/apply:builtins.exec ['open(\"{marker}\", \"w\")']\n",
                "- !!python/name:os.system\n", "- !!python/module:os\n"]
    for payload in payloads:
        with pytest.raises(RuleError, match=r"^fuzz\.yaml"):
            parse_rules(payload, "fuzz.yaml")
    assert not marker.exists()


def test_recursive_anchors_are_refused() -> None:
    for text in ("- &a [*a]\n", "a: &a {b: *a}\n", "- &r {id: LD999, when: *r}\n"):
        with pytest.raises(RuleError, match="aliases"):
            parse_rules(text, "fuzz.yaml")


@pytest.mark.parametrize(("when", "message"), [
    ({"fact": "config.n_ctx", "between": [1, 2]}, "unknown operator 'between'"),
    ({"fact": "config.n_ctx", "__class__": 1}, "unknown operator '__class__'"),
    ({"fact": "config.n_ctx", "gt": "4096"}, "takes a number"),
    ({"fact": "config.n_ctx", "in": 4096}, "non-empty list"),
    ({"fact": "config.__class__", "exists": True}, "unknown fact"),
    ({"fact": ["config.n_ctx"], "exists": True}, "a fact name must be a string"),
    ({"fact": "config.n_ctx", "matches": "(?=a)b"}, "RE2 cannot run it"),
    ({"fact": "config.n_ctx", "matches": "("}, "bad regular expression"),
    ({"events": {"kind": {"a": 1}}}, "unknown event kind"),
    ({"events": {"kind": ["oom"]}}, "unknown event kind"),
    ({"eval": "__import__('os').system('id')"}, "unknown predicate keys"),
])
def test_wrong_types_and_unknown_operators_are_one_line_errors(when: object, message: str) -> None:
    rule = yaml.safe_load(GOOD_RULE)
    rule[0]["when"] = when
    with pytest.raises(RuleError) as err:
        parse_rules(yaml.safe_dump(rule), "user.yaml")
    assert message in str(err.value) and str(err.value).startswith("user.yaml:")


def test_a_test_case_with_an_unhashable_event_kind() -> None:
    rule = yaml.safe_load(GOOD_RULE)
    rule[0]["tests"] = [{"facts": {"config.n_ctx": 1}, "events": [{"kind": {"x": 1}}], "expect": "fired"}]
    with pytest.raises(RuleError, match="unknown event kind"):
        parse_rules(yaml.safe_dump(rule), "user.yaml")


@pytest.mark.parametrize("scalar", ["9" * 5000, "2024-13-45"])
def test_scalars_the_yaml_constructors_reject(scalar: str) -> None:
    with pytest.raises(RuleError, match="not valid YAML"):
        parse_rules(f"- id: LD999\n  n: {scalar}\n  d: !!timestamp {scalar}\n", "user.yaml")


def test_a_regex_cannot_hang_the_tool() -> None:
    """`(a+)+$` against a 16 KiB line backtracks for ages in Python's `re`; rules match with RE2."""
    rule = yaml.safe_load(GOOD_RULE)
    rule[0]["when"] = {"fact": "model.name", "matches": "(a+)+$"}
    rules = parse_rules(yaml.safe_dump(rule), "user.yaml")
    facts = Facts()
    facts.set("model.name", "a" * 16_384 + "b", Source("log", "test"))
    with time_limit(5):
        report = build_report(RuleBase(rules=rules), facts, command="analyze", mode="analyze")
    assert report.findings == []


# -- templates -------------------------------------------------------------------------------------

@FUZZ
@given(st.text(max_size=200))
def test_templates_never_raise_and_reach_no_attribute(template: str) -> None:
    out = render(template, Facts.from_values({"config.n_ctx": 4096}))
    assert "<bound method" not in out and "<class" not in out


@pytest.mark.parametrize("attack", TEMPLATE_ATTACKS)
def test_format_string_attacks(attack: str) -> None:
    facts = Facts.from_values({"config.n_ctx": 4096})
    out = render(attack, facts)
    for leak in ("<class", "<bound", "<function", "<built-in", "mappingproxy", "object at 0x", "{'", "40964096"):
        assert leak not in out, (attack, out)
    assert len(out) < 2100
    # and the loader refuses such a placeholder in a rule outright, or keeps it as plain text
    rule = yaml.safe_load(GOOD_RULE)
    rule[0]["message"] = attack
    try:
        rules = parse_rules(yaml.safe_dump(rule), "user.yaml")
    except RuleError as exc:
        assert "unknown fact" in str(exc) or "filter" in str(exc)
    else:
        report = build_report(RuleBase(rules=rules), facts, command="analyze", mode="analyze")
        assert "<class" not in report.findings[0].message
        render_all(report)


def test_loading_and_judging_touch_no_file_process_or_network(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    """Parse every built-in rule and a hostile user rule, evaluate and render them on real facts,
    with opening files, starting processes and connecting anywhere made to fail loudly."""
    texts = [p.read_text(encoding="utf-8") for p in rule_files(ROOT / "rules")]
    families.builtin()  # the classes rules are checked against: read once, before the patches
    hostile = yaml.safe_load(GOOD_RULE)
    hostile[0]["message"] = "{config.n_ctx} $HOME $(id) `id` {{config.n_ctx}} %s; {event.__class__} {event.__init__}"
    hostile[0]["when"] = {"all": [{"fact": "config.n_ctx", "exists": True},
                                  {"fact": "model.path", "matches": "^/etc/passwd$|(a+)+$"}]}
    texts.append(yaml.safe_dump(hostile))
    from doctor.sources.logs.entry import analyze_bytes

    facts = analyze_bytes((ROOT / "fixtures/logs/llama-cpp-python/prompt-too-long.log").read_bytes(), "log")
    facts.set("model.path", "/etc/passwd", Source("log", "test"))
    compile_regex("warm up")  # the regex engine's import happens before the patches
    calls: list[str] = []

    def refuse(what: str):
        def fail(*args: object, **kwargs: object) -> None:
            calls.append(what)
            raise AssertionError(f"a rule reached {what}")
        return fail

    monkeypatch.setattr(builtins, "open", refuse("open"))
    monkeypatch.setattr(os, "open", refuse("os.open"))
    monkeypatch.setattr(os, "system", refuse("os.system"))
    monkeypatch.setattr(os, "popen", refuse("os.popen"))
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse("subprocess"))
    monkeypatch.setattr(socket.socket, "connect", refuse("socket.connect"))
    monkeypatch.setattr(socket, "create_connection", refuse("socket.create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    rules = [rule for i, text in enumerate(texts) for rule in parse_rules(text, f"r{i}.yaml")]
    report = build_report(RuleBase(rules=rules), facts, command="analyze", mode="analyze")
    monkeypatch.undo()
    assert calls == []
    finding = next(f for f in report.findings if f.id == "LD999")
    assert "/etc/passwd" not in finding.message and "root:" not in finding.message
    # an attribute is no fact: its clause goes (doctor/core/clauses.py), never a Python object in its place
    assert "__class__" not in finding.message and "<class" not in finding.message and "<slot" not in finding.message
    assert "$(id)" in finding.message  # shown as text, never run


# -- a user folder that replaces a built-in rule says so ------------------------------------------

SHADOW = GOOD_RULE.replace("LD999", "LD201").replace("user-rule", "my-context-rule")


def test_a_user_rule_replacing_a_built_in_is_noted(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(SHADOW)
    base = load_rulebase([str(tmp_path)], env={})
    assert any("LD201" in note and "replaces the built-in rule" in note for note in base.notes)
    assert base.by_id("LD201").builtin is False
    # through the environment variable too
    env_base = load_rulebase([], env={"LLM_DOCTOR_RULES": str(tmp_path)})
    assert any("replaces the built-in rule" in note for note in env_base.notes)


def test_the_replacement_is_said_on_stderr_and_in_the_json_report(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(SHADOW)
    log = ROOT / "fixtures/logs/llama-cpp-python/prompt-too-long.log"
    proc = subprocess.run([sys.executable, "-m", "doctor", "analyze", str(log), "--format", "json",
                           "--rules", str(tmp_path)], capture_output=True, cwd=ROOT, check=False,
                          env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode in (0, 1), proc.stderr
    assert b"replaces the built-in rule LD201" in proc.stderr
    doc = json.loads(proc.stdout)
    assert any("replaces the built-in rule LD201" in note for note in doc["notes"])


def test_a_user_rule_cannot_take_a_built_in_slug_silently(tmp_path: Path) -> None:
    builtin_slug = next(r.slug for r in load_rulebase([], env={}).rules if r.id == "LD201")
    (tmp_path / "mine.yaml").write_text(GOOD_RULE.replace("user-rule", builtin_slug))
    with pytest.raises(RuleError, match="duplicate slug"):
        load_rulebase([str(tmp_path)], env={})


def test_a_hostile_rule_folder_error_is_inert_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("- id: \"\\e]52;c;cm0gLXJmIH4=\\a\\e[2J\"\n  slug: x\n")
    log = ROOT / "fixtures/logs/llama.cpp/cuda-oom-kv.log"
    proc = subprocess.run([sys.executable, "-m", "doctor", "analyze", str(log), "--format", "json",
                           "--rules", str(tmp_path)], capture_output=True, cwd=ROOT, check=False)
    assert proc.returncode == 2
    assert proc.stderr.count(b"\n") == 1 and proc.stderr.startswith(b"llm-doctor: error: ")
    assert b"\x1b" not in proc.stderr and b"\x07" not in proc.stderr
