"""Rule loading: the built-in base validates; a broken rule is one error naming file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.errors import RuleError
from doctor.rulebase import CLASSES, ENV_RULES, builtin_rules_dir, load_rulebase, parse_rules

GOOD = """
- id: LD990
  slug: test-rule
  class: context.overflow
  severity: warning
  title: A test rule
  when:
    fact: config.n_ctx
    lt: 1024
  message: n_ctx is {config.n_ctx}
  fix:
    text: raise it
    llama.cpp: "--ctx-size 4096"
  tests:
    - facts: {config.n_ctx: 512}
      expect: fired
"""


def test_builtin_rules_load_and_cover_every_class_they_name(rulebase) -> None:
    assert len(rulebase.rules) >= 25
    assert {r.cls for r in rulebase.rules} <= set(CLASSES)
    assert builtin_rules_dir().name in ("rules", "_builtin_rules")


def test_every_builtin_rule_has_a_firing_and_a_passing_case(rulebase) -> None:
    for rule in rulebase.rules:
        outcomes = {case.expect for case in rule.tests}
        assert "fired" in outcomes, f"{rule.id} has no positive case"
        assert "ok" in outcomes, f"{rule.id} has no negative case"


def test_every_builtin_fix_names_the_engines_flag(rulebase) -> None:
    for rule in rulebase.rules:
        assert rule.fix_text
        assert rule.fix_engines, f"{rule.id} gives no engine-specific fix"


def bad(text: str) -> RuleError:
    with pytest.raises(RuleError) as info:
        parse_rules(text, "user.yaml")
    return info.value


def test_good_rule_parses() -> None:
    [rule] = parse_rules(GOOD, "user.yaml")
    assert rule.id == "LD990" and rule.fix_engines == {"llama.cpp": "--ctx-size 4096"}


def test_unknown_field_names_its_line() -> None:
    err = bad(GOOD.replace("  title: A test rule", "  title: A test rule\n  titel: typo"))
    assert err.line == 7 and err.field == "titel" and "unknown field" in err.message
    assert str(err).startswith("user.yaml:7 [titel]")


def test_unknown_fact_is_rejected() -> None:
    err = bad(GOOD.replace("fact: config.n_ctx", "fact: config.n_cxt"))
    assert "unknown fact 'config.n_cxt'" in err.message and err.line == 8


def test_unknown_operator_and_bad_operand() -> None:
    assert "unknown operator 'bigger'" in bad(GOOD.replace("lt: 1024", "bigger: 1024")).message
    assert "takes a number" in bad(GOOD.replace("lt: 1024", "lt: lots")).message


def test_malformed_yaml_names_the_line() -> None:
    err = bad("- id: LD990\n  slug: [unclosed\n")
    assert err.line is not None and "not valid YAML" in err.message


def test_aliases_and_python_tags_are_refused() -> None:
    bomb = "a: &a [x, x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n"
    assert "aliases" in bad(bomb).message
    assert "not valid YAML" in bad("- !!python/object/apply:os.system ['echo hi']\n").message


def test_placeholder_must_name_a_fact() -> None:
    err = bad(GOOD.replace("n_ctx is {config.n_ctx}", "n_ctx is {config.__class__}"))
    assert "unknown fact" in err.message and err.field == "message"


def test_unknown_class_and_severity() -> None:
    assert "unknown diagnosis class" in bad(GOOD.replace("class: context.overflow", "class: vibes.bad")).message
    assert "severity must be" in bad(GOOD.replace("severity: warning", "severity: panic")).message


def test_closed_vocabularies_are_checked_with_the_same_messages() -> None:
    assert bad(GOOD.replace("  title: A test rule", "  title: A test rule\n  confidence: sure")).message == \
        "LD990: confidence must be one of high, medium, low"
    assert bad(GOOD.replace("  title: A test rule", "  title: A test rule\n  modes: [scan, replay]")).message == \
        "LD990: unknown mode 'replay' (known: scan, watch, analyze)"
    assert bad(GOOD.replace("  title: A test rule", "  title: A test rule\n  status: beta")).message == \
        "LD990: status must be one of stable, experimental, deprecated"
    assert "'expect' is fired, ok, unknown or skipped" in bad(GOOD.replace("expect: fired", "expect: fires")).message
    assert "mode must be one of scan, watch, analyze" in bad(GOOD.replace("expect: fired",
                                                                          "expect: fired\n      mode: live")).message
    [rule] = parse_rules(GOOD.replace("  title: A test rule", "  title: A test rule\n  modes: [watch]"), "user.yaml")
    assert rule.modes == ("watch",) and rule.severity == "warning" and rule.tests[0].expect == "fired"


def test_long_regex_is_refused() -> None:
    text = GOOD.replace("fact: config.n_ctx\n    lt: 1024", "fact: model.arch\n    matches: '" + "a" * 300 + "'")
    assert "at most" in bad(text).message


def test_nesting_is_bounded() -> None:
    pred = "{fact: config.n_ctx, lt: 1}"
    for _ in range(30):
        pred = "{not: " + pred + "}"
    assert "deeper" in bad(GOOD.replace("fact: config.n_ctx\n    lt: 1024", "all: [" + pred + "]")).message


def _write(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    folder = tmp_path / "rules"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    return folder


def test_user_folder_adds_rules_and_env_var_works(tmp_path: Path) -> None:
    folder = _write(tmp_path, GOOD)
    assert load_rulebase([str(folder)], env={}).by_id("LD990") is not None
    assert load_rulebase([], env={ENV_RULES: str(folder)}).by_id("test-rule") is not None


def test_user_rule_replacing_a_builtin_is_said(tmp_path: Path) -> None:
    folder = _write(tmp_path, GOOD.replace("LD990", "LD201").replace("test-rule", "my-context"))
    rb = load_rulebase([str(folder)], env={})
    assert rb.by_id("LD201").slug == "my-context"
    assert any("replaces the built-in rule LD201" in n for n in rb.notes)


def test_duplicate_ids_in_user_folders_are_an_error(tmp_path: Path) -> None:
    folder = _write(tmp_path, GOOD)
    (folder / "again.yaml").write_text(GOOD.replace("test-rule", "other"))
    with pytest.raises(RuleError, match="duplicate rule id LD990"):
        load_rulebase([str(folder)], env={})


def test_inhibition_cycles_and_unknown_targets_are_errors(tmp_path: Path) -> None:
    a = GOOD.replace("  tests:", "  inhibits: [LD991]\n  tests:")
    b = (GOOD.replace("LD990", "LD991").replace("test-rule", "test-two")
         .replace("  tests:", "  inhibits: [LD990]\n  tests:"))
    folder = _write(tmp_path, a + b)
    with pytest.raises(RuleError, match="cycle"):
        load_rulebase([str(folder)], env={})
    folder2 = _write(tmp_path, GOOD.replace("  tests:", "  inhibits: [LD999]\n  tests:"), "x.yaml")
    (folder2 / "mine.yaml").unlink()
    with pytest.raises(RuleError, match="unknown rule LD999"):
        load_rulebase([str(folder2)], env={})


def test_missing_folder_and_non_utf8_file(tmp_path: Path) -> None:
    with pytest.raises(RuleError, match="does not exist"):
        load_rulebase([str(tmp_path / "nope")], env={})
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "bin.yaml").write_bytes(b"- id: \xff\xfe\n")
    with pytest.raises(RuleError, match="not UTF-8"):
        load_rulebase([str(folder)], env={})
