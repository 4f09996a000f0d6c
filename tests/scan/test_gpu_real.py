"""On a machine with an NVIDIA GPU: the real NVML and torch paths (skipped elsewhere).

Checks that the probe reads real NVML answers into sane facts, that the recorder and the replay
stand-in answer the same calls the same way, that the torch benchmarks measure plausible copies,
and that `scan --bench` judges the real machine without errors.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu


def test_nvml_probe_on_the_real_gpu() -> None:
    from doctor.sources.probes.base import Roots
    from doctor.sources.probes.gpu import collect_gpus

    facts = collect_gpus(Roots())
    assert facts.value("host.gpu.count") >= 1 and facts.value("host.gpu.vendor") == "nvidia"
    assert facts.value("host.gpu[0].vram_total") > 1 << 30
    assert 0 <= facts.value("host.gpu[0].vram_free") <= facts.value("host.gpu[0].vram_total")
    assert facts.value("host.gpu[0].pcie.gen_max") in (1, 2, 3, 4, 5, 6) or not facts.has("host.gpu[0].pcie.gen_max")
    spec = facts.get("host.gpu[0].bandwidth_spec_gbs")
    assert spec is not None and ((spec.known and 100 < spec.value < 10_000) or spec.unknown)


def test_recording_replays_to_the_same_facts(tmp_path: Path) -> None:
    import pynvml

    from doctor.sources.probes.base import Roots
    from doctor.sources.probes.gpu import collect_gpus
    from doctor.sources.probes.record import nvml_answers
    from doctor.sources.probes.replay import RecordedNvml

    live = collect_gpus(Roots())
    replayed = collect_gpus(Roots(nvml=RecordedNvml(nvml_answers(pynvml))))
    for name in ("host.gpu.count", "host.gpu[0].name", "host.gpu[0].uuid", "host.gpu[0].vram_total",
                 "host.gpu[0].mem_bus_bits", "host.gpu[0].pcie.gen_max", "host.gpu[0].pcie.gen_gpu_max"):
        assert live.value(name) == replayed.value(name), name


def test_torch_bandwidth_benchmarks() -> None:
    from doctor.sources.probes.base import Reporter
    from doctor.sources.probes.gpubench import bench_facts, run_bench

    answer = run_bench(seconds=6)
    assert answer.get("cuda") is True, answer
    rep = Reporter("gpubench")
    bench_facts(answer, rep)
    d2d = rep.facts.value("host.gpu[0].bandwidth_measured_gbs")
    h2d = rep.facts.value("host.gpu[0].pcie.h2d_measured_gbs")
    pageable = rep.facts.value("host.gpu[0].pcie.h2d_pageable_gbs")
    assert 50 < d2d < 10_000 and 0.5 < h2d < 150 and pageable > 0
    assert rep.facts.value("host.gpu[0].pcie.gen_under_load") in (1, 2, 3, 4, 5, 6)


def test_scan_with_bench_on_the_real_machine(capsys: pytest.CaptureFixture[str]) -> None:
    from doctor.cli import main

    code = main(["scan", "--bench", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    facts = {n: f.get("value") for n, f in report["facts"]["facts"].items()}
    assert code in (0, 1)
    ratio = facts.get("host.gpu[0].bandwidth_ratio")
    assert ratio is None or 0.3 < ratio < 1.2, f"measured/spec bandwidth {ratio}: the spec formula or the copy is off"
    if facts.get("engine.gpu_offload_supported"):
        assert facts["derived.gpu_layers"] == facts["derived.total_layers"]  # SmolLM2 fits any GPU
        assert facts.get("run.offloaded_layers") == facts["derived.total_layers"]
        assert facts["run.kv_gpu_bytes"] == facts["derived.kv_gpu_bytes"] or \
            round(facts["run.kv_gpu_bytes"] / 2**20, 2) == round(facts["derived.kv_gpu_bytes"] / 2**20, 2)
