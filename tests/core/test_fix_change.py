"""A fix that is a settings change is written once (`fix.change`) and spelled for each engine by the
engine table; an engine's own key replaces the spelling, null leaves the engine out. `verify:` sits
beside `fix:`. Both are checked at load, one line naming file, line and field."""

from __future__ import annotations

import pytest

from doctor.core import engines
from doctor.core.errors import RuleError
from doctor.judge.changes import Recipe, flags
from doctor.judge.rulebase import RuleBase, parse_rules

RULE = """
- id: LD990
  slug: test-rule
  class: context.oversized
  severity: warning
  title: A test rule
  when: {fact: config.n_ctx, gt: 8192}
  fix:
    text: a smaller context
    change: {n_ctx: "{derived.ctx_recommended}"}
    vllm: "--max-model-len {derived.ctx_recommended}"
  tests:
    - facts: {config.n_ctx: 16384}
      expect: fired
"""


def one(text: str) -> object:
    [rule] = parse_rules(text, "user.yaml")
    return rule


def broken(text: str) -> RuleError:
    with pytest.raises(RuleError) as info:
        parse_rules(text, "user.yaml")
    return info.value


def test_the_change_is_spelled_by_every_engine_that_spells_settings() -> None:
    rule = one(RULE)
    assert rule.fix_change == {"n_ctx": "{derived.ctx_recommended}"}
    spelled = flags(rule.fix_change)
    assert set(spelled) == {e.name for e in engines.table() if e.spelling is not None}
    # each engine's command: its own key, else the change in its terms; in table order
    assert rule.fix_engines == {**spelled, "vllm": "--max-model-len {derived.ctx_recommended}"}
    assert list(rule.fix_engines) == [e for e in engines.names() if e in rule.fix_engines]
    assert rule.fix_engines["llama.cpp"] == "--ctx-size {derived.ctx_recommended}"


def test_an_engine_key_replaces_the_spelling_and_null_leaves_the_engine_out() -> None:
    rule = one(RULE.replace('    vllm:', '    ollama: ~\n    llama.cpp: "-c {derived.ctx_recommended}"\n    vllm:'))
    assert "ollama" not in rule.fix_engines
    assert rule.fix_engines["llama.cpp"] == "-c {derived.ctx_recommended}"
    assert rule.fix_engines["llama-cpp-python"] == flags(rule.fix_change)["llama-cpp-python"]


def test_a_new_engine_with_a_spelling_gets_every_change() -> None:
    toy = engines.Engine("toy", "Toy", spelling=engines.Spelling({"n_ctx": "--toy-context {v}"}))
    engines.register(toy)
    try:
        assert one(RULE).fix_engines["toy"] == "--toy-context {derived.ctx_recommended}"
    finally:
        engines.unregister("toy")


@pytest.mark.parametrize(("change", "field", "words"), [
    (('{n_ctx: "{derived.ctx_recommended}"}', "{n_cxt: 4096}"), "fix.change", "unknown setting 'n_cxt'"),
    (('{n_ctx: "{derived.ctx_recommended}"}', '{n_ctx: "{derived.nope}"}'), "fix.change.n_ctx", "not a known fact"),
    (('{n_ctx: "{derived.ctx_recommended}"}', '{n_ctx: "@needed"}'), "fix.change.n_ctx", "verify value only"),
    (('{n_ctx: "{derived.ctx_recommended}"}', "{n_ctx: [1, 2]}"), "fix.change.n_ctx", "one value"),
    (('{n_ctx: "{derived.ctx_recommended}"}', "{}"), "fix.change", "maps settings to values"),
    (('{n_ctx: "{derived.ctx_recommended}"}', '{type_k: "{config.type_k}"}'), "fix.change.type_k",
     "a fact cannot go into"),
])
def test_a_bad_change_is_one_line(change: tuple[str, str], field: str, words: str) -> None:
    err = broken(RULE.replace(*change))
    assert err.field == field and words in err.message, str(err)
    assert err.line == 10 and str(err).startswith(f"user.yaml:10 [{field}]")


def test_null_without_a_change_is_refused() -> None:
    text = RULE.replace('    change: {n_ctx: "{derived.ctx_recommended}"}\n', "    ollama: ~\n")
    err = broken(text)
    assert err.field == "fix.ollama" and "non-empty string" in err.message


def test_verify_sits_beside_the_fix_and_else_the_class_default_applies(rulebase: RuleBase) -> None:
    rule = one(RULE.replace("  tests:", '  verify:\n    try:\n      - {n_ctx: "@needed"}\n  tests:'))
    assert rule.verify == Recipe(((("n_ctx", "@needed"),),))
    default = one(RULE)
    assert default.verify == rulebase.families.classes["context.oversized"].verify
    assert one(RULE.replace("  tests:", "  verify: {not_tried: a server setting}\n  tests:")).verify == \
        Recipe(not_tried="a server setting")


@pytest.mark.parametrize(("verify", "field", "words"), [
    ("{try: [], not_tried: x}", "verify", "either 'try'"),
    ("{}", "verify", "either 'try'"),
    ("{try: []}", "verify.try", "non-empty list"),
    ("{try: [{n_ctx: 1}], gpu: true}", "verify", "unknown keys in verify"),
    ("{not_tried: ''}", "verify.not_tried", "says why"),
    ("{try: [{n_ctx: 1}], needs_gpu: yes please}", "verify.needs_gpu", "true or false"),
    ("[n_ctx]", "verify", "'verify' is"),
    ("{try: [{max_num_seqs: 16}]}", "verify.try[0]", "the embedded engine has"),  # a server's, not re-run
])
def test_a_bad_verify_is_one_line(verify: str, field: str, words: str) -> None:
    err = broken(RULE.replace("  tests:", f"  verify: {verify}\n  tests:"))
    assert err.field == field and words in err.message, str(err)
    assert err.line is not None
