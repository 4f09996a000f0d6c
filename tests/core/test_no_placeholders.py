"""No raw placeholder ever reaches the user (issue 13 item 5): every rule's message, fix text and fix
command for every engine of the engine table, rendered with realistic facts (a machine, a model, the
settings, and the rule's own firing test case on top), holds no `<...>` or `{...}` placeholder; every
`fix.change` spelled for every engine of the table (and for one added to it) renders whole. And where
a fact is unknown after all, the command is left out rather than shown with a hole in it."""

from __future__ import annotations

import re

import pytest

from doctor.core import engines
from doctor.core.facts import Facts, Source
from doctor.core.format import render_complete
from doctor.derive import derive
from doctor.judge.changes import flags, setting_names
from doctor.judge.evaluate import RuleResult, _finding, build_report, evaluate_rule
from doctor.judge.rule import Rule
from doctor.judge.rulebase import RuleBase, load_rulebase

GIB = 1 << 30
# a workstation with one 24 GiB GPU running a 7B Q4_K_M model, and what its engines logged
REALISTIC: dict[str, object] = {
    "host.cpu.physical_cores": 8, "host.cpu.logical_cores": 16, "host.cpu.usable_cores": 16,
    "host.cpu.model": "AMD Ryzen 7 5800X", "host.ram.total": 64 * GIB, "host.ram.available": 48 * GIB,
    "host.ram.swap_total": 8 * GIB, "host.ram.swap_used": 0, "host.gpu.count": 1, "host.gpu.vendor": "nvidia",
    "host.gpu[0].name": "NVIDIA GeForce RTX 4090", "host.gpu[0].vram_total": 24 * GIB,
    "host.gpu[0].vram_free": 22 * GIB,
    "model.path": "/models/qwen2.5-7b-instruct-q4_k_m.gguf", "model.name": "Qwen2.5 7B Instruct",
    "model.arch": "qwen2", "model.file_bytes": 4_683_073_952, "model.weights_bytes": 4_683_073_952,
    "model.n_params": 7_615_616_512, "model.n_layer": 28, "model.n_embd": 3584, "model.n_head": 28,
    "model.n_head_kv": 4, "model.head_dim_k": 128, "model.head_dim_v": 128, "model.n_ctx_train": 32768,
    "model.n_vocab": 152064, "model.layer_bytes": [148_000_000] * 28, "model.input_bytes": 300_000_000,
    "model.output_bytes": 400_000_000, "model.output_tied": False, "engine.gpu_offload_supported": True,
    "config.n_ctx": 8192, "config.n_parallel": 1, "config.n_gpu_layers": 29, "config.n_threads": 8,
    "config.n_batch": 2048, "config.n_ubatch": 512, "config.type_k": "f16", "config.type_v": "f16",
    "config.flash_attn": True, "config.max_new_tokens": 512, "config.prompt_tokens": 1200,
    "config.max_model_len": 32768, "config.max_num_seqs": 256, "config.max_num_batched_tokens": 8192,
    "config.gpu_memory_utilization": 0.9, "config.num_ctx": 8192, "config.max_total_tokens": 4096,
    "config.max_input_tokens": 4095, "config.max_batch_prefill_tokens": 4096,
    "run.prompt_tokens_max": 3174, "run.tokens_used_max": 3600, "server.running_max": 24,
    "server.max_num_seqs_suggested": 12, "server.kv_tokens": 40960, "server.batch_total_tokens": 16000,
}
HOLE = re.compile(r"<[A-Za-z_][^<>]{0,40}>|\{[A-Za-z_][A-Za-z0-9_.\[\]|]*\}")


def _realistic(case_facts: dict[str, object], events: list[dict[str, object]]) -> Facts:
    """The realistic setting with the case on top; the case's own derived values stand (a case that
    states derived.oom_phase describes a plan that does not fit)."""
    facts = derive(Facts.from_values({**REALISTIC, **case_facts}, events, events_observed=True))
    src = Source("test", "case")
    for name, value in case_facts.items():
        facts.set(name, value, src)
    return facts


def _cases(rulebase: RuleBase) -> list[tuple[str, int]]:
    return [(rule.id, i) for rule in rulebase.rules for i, case in enumerate(rule.tests) if case.expect == "fired"]


RULES = load_rulebase()


def _fired(rule_base: RuleBase, rule_id: str, index: int) -> tuple[Rule, RuleResult, Facts]:
    rule = rule_base.by_id(rule_id)
    assert rule is not None
    case = rule.tests[index]
    facts = _realistic(case.facts, case.events)
    result = evaluate_rule(rule, facts, None)
    if result.outcome != "fired":  # the realistic setting answers the rule otherwise: its own case alone
        facts = derive(Facts.from_values(case.facts, case.events, events_observed=True))
        result = evaluate_rule(rule, facts, None)
    assert result.outcome == "fired"
    return rule, result, facts


@pytest.mark.parametrize(("rule_id", "index"), _cases(RULES), ids=lambda x: str(x))
def test_every_fired_rule_renders_without_placeholders(rule_id: str, index: int) -> None:
    rule, result, facts = _fired(RULES, rule_id, index)
    for engine in engines.names():
        finding = _finding(rule, result, facts, engine)
        shown = [finding.message, finding.fix.text, *(finding.fix.by_engine.values())]
        for text in shown:
            assert not HOLE.search(text), (engine, text)
        assert set(finding.fix.by_engine) == set(rule.fix_engines), "a command was left out for want of a fact"


CHANGED = [(rid, i) for rid, i in _cases(RULES) if RULES.by_id(rid).fix_change]


@pytest.mark.parametrize(("rule_id", "index"), CHANGED, ids=lambda x: str(x))
def test_every_change_renders_whole_for_every_engine_of_the_table(rule_id: str, index: int) -> None:
    """`fix.change` as each engine of the table spells it (where the rule gives its own words or null,
    too: they may go, the spelling stays), with the firing case's facts read in."""
    rule, result, facts = _fired(RULES, rule_id, index)
    event = min(result.events, key=lambda e: e.line or 0) if result.events else None
    spelled = flags(rule.fix_change)
    assert spelled, f"{rule_id}: no engine of the table spells {sorted(rule.fix_change)}"
    for engine in engines.table():
        if engine.spelling is None or engine.name not in spelled:
            continue
        text = render_complete(spelled[engine.name], facts, event)
        assert text is not None and not HOLE.search(text), (engine.name, spelled[engine.name], text)


def test_an_engine_added_to_the_table_gets_every_change_rendered_whole() -> None:
    """A new engine that spells every setting gets a command from every `fix.change`, with the facts
    read in (not only the five engines the rules were written for)."""
    spelling = engines.Spelling({name: f"--toy-{name.replace('_', '-')} {{v}}" for name in setting_names()})
    engines.register(engines.Engine("toy-spelling", "Toy", spelling=spelling))
    try:
        rules = load_rulebase([], env={})
        cases = [(rid, i) for rid, i in _cases(rules) if rules.by_id(rid).fix_change]
        assert cases
        for rule_id, index in cases:
            rule, result, facts = _fired(rules, rule_id, index)
            finding = _finding(rule, result, facts, "toy-spelling")
            command = finding.fix.by_engine.get("toy-spelling")
            assert command and command == finding.fix.command, rule_id
            assert command.startswith("--toy-") and not HOLE.search(command), (rule_id, command)
    finally:
        engines.unregister("toy-spelling")


def test_a_command_with_an_unknown_fact_is_left_out_not_shown_with_a_hole() -> None:
    rule = RULES.by_id("LD750")
    assert rule is not None
    facts = Facts.from_values({"server.preemptions": 20}, [{"kind": "preempted", "line": 3, "data": {"new": 20}}],
                              events_observed=True)
    report = build_report(RULES, facts, command="analyze", mode="analyze", engine="vllm")
    finding = next(f for f in report.findings if f.id == "LD750")
    assert "vllm" not in finding.fix.by_engine and finding.fix.command is None
    assert not HOLE.search(finding.message + finding.fix.text)


def test_unknown_facts_in_a_message_take_their_clause() -> None:
    facts = Facts()
    facts.set("model.ssm_d_conv", 3, Source("test", "t"))
    from doctor.core.format import render

    assert render("{model.ssm_d_conv} kept; {c.d} tokens", facts) == "3 kept"
