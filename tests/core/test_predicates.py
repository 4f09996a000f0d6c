"""Three-valued rule predicates: a missing fact makes a predicate unknown, never silently false."""

from __future__ import annotations

import pytest

from doctor.core.facts import Facts
from doctor.judge.predicates import All, Any_, Compare, Events, FactRef, Not, compile_regex


def f(**values: object) -> Facts:
    return Facts.from_values({k.replace("__", "."): v for k, v in values.items()})


def test_missing_fact_is_unknown_with_its_name() -> None:
    out = Compare("config.n_ctx", "gt", 100).evaluate(Facts())
    assert out.value is None and out.missing == {"config.n_ctx"}


@pytest.mark.parametrize(("op", "operand", "expected"), [
    ("eq", 512, True), ("ne", 512, False), ("lt", 1024, True), ("le", 512, True), ("gt", 512, False),
    ("ge", 512, True), ("in", [256, 512], True), ("not_in", [256, 512], False),
])
def test_operators(op: str, operand: object, expected: bool) -> None:
    assert Compare("config.n_ctx", op, operand).evaluate(f(config__n_ctx=512)).value is expected


def test_string_equality_ignores_case_and_bool_is_not_a_number() -> None:
    assert Compare("config.type_k", "eq", "F32").evaluate(f(config__type_k="f32")).value is True
    assert Compare("config.use_mmap", "eq", 0).evaluate(f(config__use_mmap=False)).value is False
    assert Compare("config.use_mmap", "gt", 0).evaluate(f(config__use_mmap=True)).value is None


def test_fact_against_fact_with_scale() -> None:
    facts = f(config__n_threads=32, derived__threads_recommended=4)
    assert Compare("config.n_threads", "gt", FactRef("derived.threads_recommended", 1.5)).evaluate(facts).value
    out = Compare("config.n_threads", "gt", FactRef("host.cpu.usable_cores")).evaluate(facts)
    assert out.value is None and out.missing == {"host.cpu.usable_cores"}


def test_exists_is_never_unknown() -> None:
    assert Compare("config.n_ctx", "exists", False).evaluate(Facts()).value is True
    assert Compare("config.n_ctx", "exists", True).evaluate(Facts()).value is False


def test_matches() -> None:
    assert Compare("model.arch", "matches", compile_regex("^qwen")).evaluate(f(model__arch="Qwen2")).value


def test_all_any_not_three_valued() -> None:
    t = Compare("config.n_ctx", "eq", 512)
    fl = Compare("config.n_ctx", "eq", 1)
    unk = Compare("config.n_batch", "eq", 1)
    facts = f(config__n_ctx=512)
    assert All([t, unk]).evaluate(facts).value is None
    assert All([fl, unk]).evaluate(facts).value is False
    assert Any_([t, unk]).evaluate(facts).value is True
    assert Any_([fl, unk]).evaluate(facts).value is None
    assert Any_([fl, fl]).evaluate(facts).value is False
    assert Not(unk).evaluate(facts).value is None
    assert Not(fl).evaluate(facts).value is True


def test_events_unknown_until_an_event_source_was_read() -> None:
    assert Events("oom").evaluate(Facts()).value is None
    oom = {"kind": "oom", "phase": "kv_cache", "line": 9, "data": {"phase_from": "message"}}
    seen = Facts.from_values({}, events=[oom])
    assert Events("oom", ("kv_cache",)).evaluate(seen).value is True
    assert Events("oom", ("weights",)).evaluate(seen).value is False
    assert Events("oom", (), 1, {"phase_from": "message"}).evaluate(seen).value is True
    assert Events("oom", (), 2).evaluate(seen).value is False
    out = Events("oom").evaluate(seen)
    assert [e.line for e in out.events] == [9]
