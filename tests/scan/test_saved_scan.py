"""A saved scan read back (`analyze plan.json`) is judged and shown as the scan was; `scan --bench`
shows what it measured in text and Markdown, not only in JSON.

The CLI entry point on a recorded machine (fixtures/machines), which carries recorded bench figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.cli import main
from doctor.judge.rulebase import load_rulebase
from tests.scan.conftest import MACHINES

MACHINE = MACHINES / "nvme-workstation-rtx4090"


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().out


def _scan(fmt: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    return _run(["scan", "--replay-machine", str(MACHINE), "--no-trace", "--format", fmt, *extra], capsys)


def test_analyze_of_a_saved_scan_renders_like_the_scan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "plan.json"
    code, scanned = _scan("text", capsys, "--save", str(saved))
    again_code, again = _run(["analyze", str(saved), "--format", "text"], capsys)
    assert again_code == code
    for label in ("  machine: ", "  model:   ", "  plan:    "):
        assert any(line.startswith(label) for line in again.splitlines()), label
    # everything after the title line is the scan's own report
    assert again.splitlines()[1:] == scanned.splitlines()[1:]


def test_a_saved_scan_gets_the_scan_checks_not_the_serving_ones(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "plan.json"
    _, scanned = _scan("json", capsys, "--save", str(saved))
    _, again = _run(["analyze", str(saved), "--format", "json"], capsys)
    scan_doc, again_doc = json.loads(scanned), json.loads(again)
    serving = {r.id for r in load_rulebase([], env={}).rules if "scan" not in r.modes}
    assert serving, "the rule base has serving-log checks"
    assert serving.isdisjoint(c["id"] for c in again_doc["checks"])
    assert again_doc["mode"] == "scan" and again_doc["summary"] == scan_doc["summary"]
    # a scan's JSON report read back is judged as a scan too
    report = tmp_path / "report.json"
    report.write_text(scanned)
    _, from_report = _run(["analyze", str(report), "--format", "json"], capsys)
    assert json.loads(from_report)["summary"] == scan_doc["summary"]


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_bench_figures_are_shown_in_text_and_markdown(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    recorded = json.loads((MACHINE / "machine.json").read_text())["bench"]  # what --bench measured there
    _, out = _scan(fmt, capsys, "--bench")
    bench = next(line for line in out.splitlines() if "bench:" in line)
    assert f"model file read {recorded['read_mb_s']:.0f} MB/s" in bench
    assert f"RAM copy {recorded['host_gbs']} GB/s" in bench
    assert f"GPU0 PCIe host-to-GPU {recorded['gpus'][0]['h2d_pinned_gbs']} GB/s" in bench
    _, plain = _scan(fmt, capsys)
    assert "bench:" not in plain  # nothing measured, nothing shown
