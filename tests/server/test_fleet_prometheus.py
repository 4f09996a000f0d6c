"""`llm-doctor fleet` against a real Prometheus scraping three real llama-servers on 127.0.0.1.

One healthy server, one whose single slot is saturated by concurrent requests, one whose slot is too
small for the requests (generation runs into the end of the context), plus a target nothing listens
on. The fleet report must name the right instance for each problem, and nothing on the healthy one.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from pathlib import Path

import pytest

from doctor.cli import main
from tests.server.harness import (
    HOST,
    free_port,
    llama_server,
    prometheus,
    start_load,
    wait_scraped,
)

pytestmark = [pytest.mark.server, pytest.mark.slow]

PROMPT = "Write a short note about the weather in {city} today, for a travel blog."
CITIES = ["Lisbon", "Oslo", "Kyoto", "Quito", "Perth", "Accra", "Lima", "Riga"]


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def fleet_report(server_bin: Path, prometheus_bin: Path, model: Path, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("fleet")
    with contextlib.ExitStack() as stack:
        healthy = stack.enter_context(llama_server(server_bin, model, tmp / "healthy.log", "-c", "2048", "-np", "2"))
        saturated = stack.enter_context(llama_server(server_bin, model, tmp / "saturated.log", "-c", "1024",
                                                     "-np", "1"))
        small = stack.enter_context(llama_server(server_bin, model, tmp / "small.log", "-c", "256", "-np", "1"))
        nobody = f"{HOST}:{free_port()}"
        servers = {"healthy": healthy, "saturated": saturated, "small": small}
        addrs = {name: f"{HOST}:{s.port}" for name, s in servers.items()}
        prom = stack.enter_context(prometheus(prometheus_bin, tmp / "prom",
                                              {"llama-server": [*addrs.values(), nobody]}))
        wait_scraped(prom, list(addrs.values()))
        loads = [
            start_load(healthy, [PROMPT.format(city=c) for c in CITIES[:3]], 16, concurrency=1),
            start_load(saturated, [PROMPT.format(city=c) for c in CITIES], 48, concurrency=4),
            start_load(small, [PROMPT.format(city=c) for c in CITIES[:2]], 400, concurrency=1),
        ]
        for load in loads:
            load.join(timeout_s=240.0)
            assert not load.errors, load.errors
        time.sleep(3.0)  # a few more scrapes after the load
        code, text = run_cli("fleet", "--prometheus", prom.base, "--duration", "120s", "--format", "json")
        _, plain = run_cli("fleet", "--prometheus", prom.base, "--duration", "120s", "--format", "text",
                           "--color", "never")
        # a wrong selector is a usage error, not a crash
        bad, _ = run_cli("fleet", "--prometheus", prom.base, "--match", "job=nope")
    print(plain)
    return {"code": code, "json": json.loads(text), "text": plain, "addrs": addrs, "nobody": nobody,
            "bad": bad, "loads": loads}


def _by_instance(doc: dict) -> dict[str, dict]:
    return {row["instance"]: row for row in doc["instances"]}


def _ids(row: dict) -> set[str]:
    return {f["id"] for f in row["report"]["findings"]}


def test_each_problem_is_named_on_the_right_instance(fleet_report: dict) -> None:
    rows = _by_instance(fleet_report["json"])
    addrs = fleet_report["addrs"]
    assert set(addrs.values()) | {fleet_report["nobody"]} == set(rows)
    assert "LD202" in _ids(rows[addrs["small"]])           # generation ran into the end of the slot
    assert "LD752" in _ids(rows[addrs["saturated"]])       # requests waited for the one slot
    assert "LD962" in _ids(rows[fleet_report["nobody"]])   # nothing listens: a finding, not a crash
    assert _ids(rows[addrs["healthy"]]) == set()
    assert "LD752" not in _ids(rows[addrs["small"]])
    assert "LD202" not in _ids(rows[addrs["saturated"]])
    assert fleet_report["code"] == 1  # errors at the default --fail-on
    assert fleet_report["bad"] == 2


def test_evidence_is_the_promql_and_its_values(fleet_report: dict) -> None:
    rows = _by_instance(fleet_report["json"])
    small = rows[fleet_report["addrs"]["small"]]
    ld202 = next(f for f in small["report"]["findings"] if f["id"] == "LD202")
    texts = " | ".join(e["text"] for e in ld202["evidence"])
    assert "llamacpp:n_tokens_max" in texts and "max_over_time" in texts
    assert "derived.n_ctx_seq = 256" in texts
    slot = small["report"]["facts"]["facts"]["config.n_ctx_seq"]  # the slot size, from /props
    assert slot["value"] == 256 and "/props: default_generation_settings.n_ctx = 256" in slot["source"]["text"]
    sat = rows[fleet_report["addrs"]["saturated"]]
    ld752 = next(f for f in sat["report"]["findings"] if f["id"] == "LD752")
    waiting = next(e for e in ld752["evidence"] if e.get("fact") == "server.waiting_max")
    assert waiting["value"] >= 1 and "llamacpp:requests_deferred" in waiting["text"]
    assert ld752["confidence"] == "high"  # running reached the slot count
    assert ld752["fix"]["engine"] == "llama.cpp" and "--parallel" in ld752["fix"]["command"]


def test_worst_first_and_the_cost_is_reported(fleet_report: dict) -> None:
    doc = fleet_report["json"]
    worst = [row["worst"] for row in doc["instances"]]
    rank = {"error": 3, "warning": 2, "info": 1, "ok": 0}
    assert worst == sorted(worst, key=lambda w: -rank[w])
    assert doc["instances"][-1]["instance"] == fleet_report["addrs"]["healthy"]
    cost = doc["cost"]
    assert cost["queries"] >= 10 and cost["series_returned"] > 0 and cost["samples_read"] > 0
    text = fleet_report["text"]
    assert text.index(fleet_report["addrs"]["small"]) < text.index(fleet_report["addrs"]["healthy"])
    assert "Prometheus:" in text and "samples read" in text


def test_rates_over_the_window_are_facts(fleet_report: dict) -> None:
    rows = _by_instance(fleet_report["json"])
    facts = rows[fleet_report["addrs"]["healthy"]]["report"]["facts"]["facts"]
    assert facts["server.gen_tps_rate"]["value"] > 0
    assert facts["server.decode_tps_per_request"]["value"] > 0
    assert facts["config.n_parallel"]["value"] == 2
