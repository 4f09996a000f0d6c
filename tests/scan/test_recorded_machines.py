"""Every recorded machine, every scenario in its machine.json: `llm-doctor scan` replayed on it fires
exactly the expected findings - each with evidence - and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.cli import main
from doctor.core.catalog import is_known
from tests.scan.conftest import MACHINES

SCENARIOS = [(m.name, i, sc) for m in sorted(MACHINES.iterdir()) if (m / "machine.json").is_file()
             for i, sc in enumerate(json.loads((m / "machine.json").read_text()).get("scenarios", []))]


def test_the_machines_the_issue_lists_are_recorded() -> None:
    names = {name for name, _, _ in SCENARIOS}
    assert names >= {"nvme-workstation-rtx4090", "slot-limited-gen3x4", "hdd-server", "nfs-models",
                     "container-quota", "laptop-no-gpu", "vm-virtio"}


def run_scan(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = main(["scan", "--format", "json", "--no-trace", *args])
    out = capsys.readouterr().out
    return code, json.loads(out)


@pytest.mark.parametrize(("name", "index", "scenario"), SCENARIOS, ids=[f"{n}-{i}" for n, i, _ in SCENARIOS])
def test_scenario(name: str, index: int, scenario: dict, model_files, smollm2: Path,
                  capsys: pytest.CaptureFixture[str]) -> None:
    model = smollm2 if scenario["model"] == "smollm2" else model_files(scenario["model"])
    code, report = run_scan(["--replay-machine", str(MACHINES / name), "--model", str(model), *scenario["args"]],
                            capsys)
    fired = sorted(f["id"] for f in report["findings"])
    assert fired == sorted(scenario["expect"]), scenario["name"]
    assert all(is_known(name) for name in report["facts"]["facts"]), "a fact missing from the catalogue"
    for finding in report["findings"]:
        assert finding["evidence"], f"{finding['id']} has no evidence"
        assert "<" not in finding["message"], f"{finding['id']} message has an unfilled placeholder"
    for rule_id, level in scenario.get("confidence", {}).items():
        assert next(f for f in report["findings"] if f["id"] == rule_id)["confidence"] == level
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert code == (1 if errors else 0)


def test_oom_prediction_names_the_largest_settings_that_fit(model_files, capsys) -> None:
    _, report = run_scan(["--replay-machine", str(MACHINES / "nvme-workstation-rtx4090"),
                          "--model", str(model_files("llama-3.1-70b-instruct-q4_k_m"))], capsys)
    finding = next(f for f in report["findings"] if f["id"] == "LD311")
    facts = report["facts"]["facts"]
    best = facts["derived.max_gpu_layers"]["value"]
    assert 30 < best < 81
    assert f"-ngl {best}" in finding["fix"]["by_engine"]["llama.cpp"]
    assert f"n_gpu_layers={best}" in finding["fix"]["command"]  # llama-cpp-python by default
    # re-planning with that many layers fits, and only the partial offload is left to say
    _, again = run_scan(["--replay-machine", str(MACHINES / "nvme-workstation-rtx4090"),
                         "--model", str(model_files("llama-3.1-70b-instruct-q4_k_m")), "--n-gpu-layers", str(best)],
                        capsys)
    assert sorted(f["id"] for f in again["findings"]) == ["LD506"]


def test_the_finding_shows_the_sum_that_does_not_fit(model_files, capsys) -> None:
    """Issue 16 item 4: weights on the GPU (with the output layer) + KV + compute vs free VRAM, and the
    largest n_gpu_layers and n_ctx that fit, in the finding itself."""
    _, report = run_scan(["--replay-machine", str(MACHINES / "nvme-workstation-rtx4090"),
                          "--model", str(model_files("llama-3.1-70b-instruct-q4_k_m"))], capsys)
    finding = next(f for f in report["findings"] if f["id"] == "LD311")
    facts = {k: v.get("value") for k, v in report["facts"]["facts"].items()}
    gib = 1 << 30
    parts = [facts[k] / gib for k in ("derived.weights_gpu_bytes", "derived.kv_gpu_bytes", "derived.compute_gpu_bytes")]
    assert (f"weights {parts[0]:.2f} GiB (output layer {facts['derived.output_gpu_bytes'] / gib:.2f} GiB of it) "
            f"+ KV {parts[1]:.2f} GiB + compute {parts[2]:.2f} GiB = {sum(parts):.2f} GiB on the GPU vs "
            f"{facts['derived.vram_budget'] / gib:.2f} GiB free after the margin: does not fit") in finding["message"]
    assert facts["derived.split_constraint"] == "weights" and facts["derived.output_gpu_bytes"] > 0
    assert f"{facts['derived.max_gpu_layers']} of 81 layers fit" in finding["message"]
    assert f"largest context that fits with these layers is {facts['derived.max_ctx_fit']}" in finding["message"]


def test_kv_prediction_recommends_a_context_that_fits(model_files, capsys) -> None:
    model = model_files("llama-3.1-8b-instruct-q4_k_m")
    args = ["--replay-machine", str(MACHINES / "laptop-no-gpu"), "--model", str(model)]
    _, report = run_scan([*args, "--ctx-size", "32768"], capsys)
    # 4 GiB of KV fits in the 7.5 GiB available, but not beside the 4.6 GiB of mapped weights: paged
    finding = next(f for f in report["findings"] if f["id"] == "LD317")
    fit = report["facts"]["facts"]["derived.ctx_fit_recommended"]["value"]
    assert f"n_ctx={fit}" in finding["fix"]["command"]
    _, again = run_scan([*args, "--ctx-size", str(fit)], capsys)
    assert not {"LD312", "LD317"} & {f["id"] for f in again["findings"]}


def test_the_engine_option_chooses_whose_flags_the_fix_uses(model_files, capsys) -> None:
    _, report = run_scan(["--replay-machine", str(MACHINES / "container-quota"), "--engine", "llama.cpp",
                          "--model", str(model_files("llama-3-8b-instruct-q4_k_m"))], capsys)
    # llama.cpp's own default is one thread per physical core (32 here), still over the 4-CPU quota
    finding = next(f for f in report["findings"] if f["id"] == "LD511")
    assert finding["fix"]["engine"] == "llama.cpp" and finding["fix"]["command"] == "-t 4"
    assert report["facts"]["facts"]["config.n_threads"]["value"] == 32
