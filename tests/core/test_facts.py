"""Facts: last value wins, unknown never hides a known value, JSON round-trip keeps everything."""

from __future__ import annotations

import json
import math

import pytest

from doctor.core import facts as facts_module
from doctor.core.errors import FactNameError
from doctor.core.facts import EVENTS_KEPT_PER_KIND, Event, Facts, Source

SRC = Source("log", "llama.cpp", 12, "llama_context: n_ctx = 2048")


def test_last_value_wins_and_keeps_its_source() -> None:
    facts = Facts()
    facts.set("config.n_ctx", 512, Source("log", "x", 3), "tokens")
    facts.set("config.n_ctx", 2048, SRC, "tokens")
    fact = facts.get("config.n_ctx")
    assert fact is not None and fact.value == 2048 and fact.source.line == 12 and fact.unit == "tokens"


def test_unknown_carries_a_reason_and_never_replaces_a_known_value() -> None:
    facts = Facts()
    facts.unknown("host.gpu.count", "NVML library not found", Source("probe", "probe.gpu"))
    assert not facts.has("host.gpu.count")
    assert facts.get("host.gpu.count").unknown == "NVML library not found"
    facts.set("host.gpu.count", 1, SRC)
    facts.unknown("host.gpu.count", "later failure", SRC)
    assert facts.value("host.gpu.count") == 1


def test_non_finite_numbers_become_unknown() -> None:
    facts = Facts()
    facts.set("run.prefill_tps", math.inf, SRC)
    assert not facts.has("run.prefill_tps")
    assert "finite" in (facts.get("run.prefill_tps").unknown or "")


def test_json_round_trip_keeps_values_units_sources_events() -> None:
    facts = Facts()
    facts.set("config.n_ctx", 2048, SRC, "tokens")
    facts.set("engine.backends", ["CPU", "CUDA"], SRC)
    facts.unknown("host.ram.total", "cannot read /proc/meminfo", Source("probe", "probe.memory"))
    facts.add_event(Event("oom", 40, "cudaMalloc failed: out of memory", "llama.cpp", "weights", {"bytes": 10}))
    facts.inputs.append("run.log")
    data = json.loads(json.dumps(facts.to_json()))
    back = Facts.from_json(data)
    assert back.value("config.n_ctx") == 2048
    assert back.get("config.n_ctx").source.line == 12
    assert back.value("engine.backends") == ["CPU", "CUDA"]
    assert back.get("host.ram.total").unknown == "cannot read /proc/meminfo"
    [event] = back.events("oom")
    assert (event.phase, event.line, event.data["bytes"]) == ("weights", 40, 10)
    assert back.events_observed and back.inputs == ["run.log"]


def test_event_text_is_bounded_and_counts_go_on_past_the_kept_ones() -> None:
    facts = Facts()
    for i in range(EVENTS_KEPT_PER_KIND + 25):
        facts.add_event(Event("context_shift", i, "x" * 10_000, "llama.cpp"))
    assert len(facts.events("context_shift")) == EVENTS_KEPT_PER_KIND
    assert facts.event_count("context_shift") == EVENTS_KEPT_PER_KIND + 25
    assert all(len(e.text) <= 400 for e in facts.events())


def test_merge_adds_counts_beyond_kept_events() -> None:
    a, b = Facts(), Facts()
    for i in range(EVENTS_KEPT_PER_KIND + 5):
        b.add_event(Event("ctx_full", i, "full", "llama.cpp"))
    a.merge(b)
    assert a.event_count("ctx_full") == EVENTS_KEPT_PER_KIND + 5


def test_the_unit_comes_from_the_catalogue_also_for_indexed_names() -> None:
    facts = Facts()
    facts.set("model.n_layer", 32, SRC)  # no unit passed: the catalogue's
    facts.set("host.gpu[3].vram_total", 1 << 30, SRC)
    facts.unknown("host.gpu[0].util_gpu", "NVML not found", SRC)
    facts.set_default("config.n_batch", 2048, SRC)
    assert facts.get("model.n_layer").unit == "layers"
    assert facts.get("host.gpu[3].vram_total").unit == "bytes"
    assert facts.get("host.gpu[0].util_gpu").unit == "%"
    assert facts.get("config.n_batch").unit == "tokens"


def test_strict_names_refuse_an_unknown_fact_and_a_unit_that_is_not_the_catalogues() -> None:
    assert facts_module.STRICT  # tests/conftest.py turns it on for the whole suite
    facts = Facts()
    with pytest.raises(FactNameError, match=r"config\.n_ctxx"):
        facts.set("config.n_ctxx", 2048, SRC)
    with pytest.raises(FactNameError, match="not in the fact catalogue"):
        facts.unknown("host.gpu[0].vram_totl", "typo", SRC)
    with pytest.raises(FactNameError, match="'MiB' passed, the catalogue says 'bytes'"):
        facts.set("host.ram.total", 16, SRC, "MiB")
    with pytest.raises(FactNameError):
        facts.set_default("host.ram.total", 16, SRC, "MiB")
    facts.set("config.n_ctx", 2048, SRC, "tokens")  # the catalogue's own unit passes


def test_a_users_run_keeps_an_unknown_fact_unitless_and_the_catalogue_unit_wins(
    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(facts_module, "STRICT", False)
    facts = Facts()
    facts.set("server.vllm.some_new_field", 5, SRC, "widgets")
    facts.set("host.ram.total", 16 << 30, SRC, "MiB")
    assert facts.value("server.vllm.some_new_field") == 5
    assert facts.get("server.vllm.some_new_field").unit is None
    assert facts.get("host.ram.total").unit == "bytes"


def test_facts_read_back_from_json_take_the_catalogue_unit() -> None:
    # a scan saved before units came from the catalogue: model.n_layer without its unit
    back = Facts.from_json({"facts": {"model.n_layer": {"value": 32, "source": {"kind": "log", "name": "x"}},
                                      "x.unlisted": {"value": 1, "unit": "widgets",
                                                     "source": {"kind": "log", "name": "x"}}}})
    assert back.get("model.n_layer").unit == "layers"
    assert back.get("x.unlisted").unit == "widgets"
