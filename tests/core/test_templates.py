"""Message templates: facts only, safe, with units rendered for people and optional parts."""

from __future__ import annotations

import pytest

from doctor.core.facts import Event, Facts, Source
from doctor.core.format import format_value, human_bytes, render, render_complete

SRC = Source("test", "t")


def facts() -> Facts:
    fx = Facts()
    fx.set("config.n_ctx", 4096, SRC)
    fx.set("derived.kv_bytes", 47185920, SRC)
    fx.set("run.load_ms", 412093.66, SRC)
    fx.set("run.output_repetition", 0.8, SRC)
    return fx


def test_units() -> None:
    assert render("{config.n_ctx} tokens", facts()) == "4096 tokens"
    assert render("{derived.kv_bytes}", facts()) == "45.00 MiB"
    assert render("{run.load_ms}", facts()) == "412.1 s"
    assert render("{run.output_repetition|pct}", facts()) == "80%"
    assert render("{derived.kv_bytes|raw}", facts()) == "47185920"


def test_unknown_placeholder_takes_its_clause_never_a_stand_in() -> None:
    assert render("Use a context of {derived.ctx_recommended}, or fewer slots.", facts()) == "Fewer slots."
    assert render("--ctx-size {derived.ctx_recommended}", facts()) == ""
    assert render_complete("--ctx-size {derived.ctx_recommended}", facts()) is None  # a fix command is left out


def test_optional_parts_drop_when_a_fact_is_unknown() -> None:
    assert render("ctx {config.n_ctx}[[ ({derived.ctx_recommended} advised)]].", facts()) == "ctx 4096."
    assert render("ctx[[ {config.n_ctx}]].", facts()) == "ctx 4096."


def test_event_fields() -> None:
    ev = Event("prompt_too_long", 7, "Requested tokens (401) exceed", "llama.cpp", data={"n_tokens": 401})
    assert render("{event.n_tokens} at line {event.line}", facts(), ev) == "401 at line 7"
    assert render("{event.n_tokens} asked; {event.n_ctx} held", facts(), ev) == "401 asked"


def test_format_string_attacks_reach_nothing() -> None:
    out = render("{config.n_ctx.__class__} {config.__init__.__globals__} {0} {__import__}", facts())
    assert "class" not in out and "function" not in out and "module" not in out


def test_human_bytes_negative_and_small() -> None:
    assert human_bytes(-3 * 2**30) == "-3.00 GiB" and human_bytes(12) == "12 B"
    assert format_value(True, None) == "yes" and format_value([1, 2], None) == "1, 2"


@pytest.mark.parametrize("value,shown", [(25.0, "25%"), (1.91, "1.91%"), (0.5, "0.5%"), (12.345, "12.3%")])
def test_a_unit_the_template_writes_itself_is_written_once_with_decimals_too(value: float, shown: str) -> None:
    """"{x}%" with a percent fact: the value gives up its own "%" (it was "0.5%%": the decimals were read
    as the unit ".5%")."""
    facts = Facts.from_values({"host.cpu.steal_pct": value}, [], events_observed=True)
    assert render("steal {host.cpu.steal_pct}% of the time", facts, None) == f"steal {shown} of the time"
    facts = Facts.from_values({"model.storage.read_mb_s": 2.5}, [], events_observed=True)
    assert render("{model.storage.read_mb_s} MB/s", facts, None) == "2.5 MB/s"
