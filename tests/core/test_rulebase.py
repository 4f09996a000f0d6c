"""Rule loading: the built-in base validates; a broken rule is one error naming file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.core.errors import RuleError
from doctor.judge import families, ruleyaml
from doctor.judge.rulebase import ENV_RULES, builtin_rules_dir, load_rulebase, parse_rules, rule_files
from doctor.judge.rulecache import _key

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
    assert {r.cls for r in rulebase.rules} <= set(families.builtin().classes)
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


# -- the parsed-rules cache (doctor/judge/rulecache.py) -------------------------------------------------

def _cached_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str] | None = None):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("LLM_DOCTOR_NO_CACHE", raising=False)
    return load_rulebase(extra or [], env={})


def _no_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str, path: str) -> None:
        raise AssertionError(f"YAML parsed again: {path}")

    monkeypatch.setattr(ruleyaml, "load_yaml", refuse)


def test_a_second_load_reads_the_cache_and_gives_the_same_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  rulebase) -> None:
    first = _cached_base(tmp_path, monkeypatch)
    entries = sorted((tmp_path / "cache" / "llm-doctor" / "rules").glob("*.json"))
    assert len(entries) == len(rule_files(builtin_rules_dir())) + 1  # and families.yaml
    json.loads(entries[0].read_text(encoding="utf-8"))  # plain JSON, nothing that runs code when loaded
    _no_yaml(monkeypatch)
    second = load_rulebase([], env={})
    # the same rules field by field: predicates, compiled patterns, messages, test cases, line numbers
    assert second.rules == first.rules == rulebase.rules
    assert [r.line for r in second.rules] == [r.line for r in rulebase.rules]
    assert [c.line for r in second.rules for c in r.tests] == [c.line for r in rulebase.rules for c in r.tests]


def test_an_edited_rule_file_is_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _write(tmp_path, GOOD)
    _cached_base(tmp_path, monkeypatch, [str(folder)])
    (folder / "mine.yaml").write_text(GOOD.replace("lt: 1024", "lt: 2048"), encoding="utf-8")
    rule = load_rulebase([str(folder)], env={}).by_id("LD990")
    assert rule is not None and rule.when.operand == 2048


def test_a_damaged_or_foreign_entry_is_ignored_and_rewritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _write(tmp_path, GOOD)
    _cached_base(tmp_path, monkeypatch, [str(folder)])
    cache = tmp_path / "cache" / "llm-doctor" / "rules"
    text = (folder / "mine.yaml").read_text(encoding="utf-8")
    [entry] = [p for p in cache.glob("*.json") if p.name == _key(text) + ".json"]
    good = entry.read_text(encoding="utf-8")
    # another file's tree under this key, a tree without line numbers, and bytes that are not JSON
    for damaged in (good.replace(_key(text), "0" * 64), good.replace('"\\u0000line"', '"x"'), "\x80not json"):
        entry.write_text(damaged, encoding="utf-8")
        [rule] = [r for r in load_rulebase([str(folder)], env={}).rules if r.id == "LD990"]
        assert rule.line == 2 and rule.fix_engines == {"llama.cpp": "--ctx-size 4096"}
        assert entry.read_text(encoding="utf-8") == good


def test_a_broken_file_is_reported_as_before_and_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _write(tmp_path, GOOD.replace("severity: warning", "severity: [warning"))
    for _ in range(2):
        with pytest.raises(RuleError) as info:
            _cached_base(tmp_path, monkeypatch, [str(folder)])
        assert info.value.path.endswith("mine.yaml") and info.value.line is not None
    cache = tmp_path / "cache" / "llm-doctor" / "rules"
    assert len(list(cache.glob("*.json"))) == len(rule_files(builtin_rules_dir())) + 1


def test_a_tree_json_cannot_hold_is_parsed_each_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # an unquoted date is a datetime.date to YAML: the file loads, it is just not cached
    text = GOOD + "    - facts: {config.n_ctx: 2024-01-01}\n      expect: ok\n"
    folder = _write(tmp_path, text)
    parsed = []
    real = ruleyaml.load_yaml
    monkeypatch.setattr(ruleyaml, "load_yaml", lambda t, w: parsed.append(w) or real(t, w))
    for _ in range(2):
        rule = _cached_base(tmp_path, monkeypatch, [str(folder)]).by_id("LD990")
        assert rule is not None and str(rule.tests[1].facts["config.n_ctx"]) == "2024-01-01"
    assert [w for w in parsed if w.endswith("mine.yaml")] == [str(folder / "mine.yaml")] * 2
    assert not (tmp_path / "cache" / "llm-doctor" / "rules" / f"{_key(text)}.json").exists()


def test_no_cache_means_no_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("LLM_DOCTOR_NO_CACHE", "1")
    assert load_rulebase([], env={}).rules
    assert not (tmp_path / "cache").exists()


def test_a_cache_folder_that_cannot_be_made_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        rulebase) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder would go", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    monkeypatch.delenv("LLM_DOCTOR_NO_CACHE", raising=False)
    assert load_rulebase([], env={}).rules == rulebase.rules
