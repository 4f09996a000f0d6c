"""`llm-doctor scan` on this machine: the plan, the probes, the real trace, --save into analyze,
selection, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from doctor.cli import main
from tests.conftest import worked_around
from tests.scan.conftest import ROOT, build_gguf, load_spec


def scan(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    code = main(["scan", "--format", "json", *args])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else {}, captured.err


def facts_of(report: dict) -> dict:
    return {name: fact.get("value") for name, fact in report["facts"]["facts"].items()}


def test_no_trace_scan_states_its_plan(capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    code, report, err = scan(["--no-trace"], capsys)
    facts = facts_of(report)
    assert code == 0 and report["command"] == "scan"
    assert facts["model.path"] == str(smollm2) and facts["model.n_layer"] == 30
    assert facts["config.n_ctx"] == 4096  # SmolLM2's 8192 training context, capped for the check
    plan_source = report["facts"]["facts"]["config.n_ctx"]["source"]
    assert plan_source["name"] == "scan plan" and "capped at 4096" in plan_source["text"]
    assert facts["derived.kv_bytes"] == 4096 * 23040  # 30 layers x 3 KV heads x 64 x 2 (K+V) x f16
    assert facts["host.cpu.logical_cores"] >= 1 and "model.storage.kind" in facts
    assert not any(k.startswith("run.decode") for k in facts)  # no trace, no decode steps
    assert "probing this machine" in err and "done in" in err


@pytest.mark.engine
def test_the_trace_runs_the_planned_settings_and_agrees_with_the_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = scan(["--ctx-size", "1000", "--type-k", "q8_0", "--type-v", "q8_0", "--flash-attn", "on",
                            "--prompt-tokens", "64", "--max-new-tokens", "900"], capsys)
    facts = facts_of(report)
    assert code == (1 if worked_around(report) else 0), report.get("errors")  # 1: an AMX Xeon's crash, triaged
    assert 20 <= len(facts["run.decode_ms"]) <= 40 and facts["run.prefill_ms"] > 0 and facts["run.load_ms"] > 0
    # the engine's own KV allocation, parsed from its log, equals the estimate to the byte
    assert facts["run.kv_bytes"] == facts["derived.kv_bytes"] or \
        round(facts["run.kv_bytes"] / 2**20, 2) == round(facts["derived.kv_bytes"] / 2**20, 2)
    assert facts["run.kv_cells"] == facts["derived.kv_cells"] == 1024
    assert abs(facts["run.compute_bytes"] - facts["derived.compute_bytes"]) / facts["run.compute_bytes"] < 0.1
    # the plan is not replaced by the trace's short run
    assert facts["config.max_new_tokens"] == 900 and facts["config.prompt_tokens"] == 64
    assert not any(k.startswith("sampling.") for k in facts)


def test_save_then_analyze_rejudges_the_same_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "scan.json"
    code, report, _ = scan(["--no-trace", "--threads", "64", "--save", str(saved)], capsys)
    assert code == 0 and saved.is_file()
    fired = sorted(f["id"] for f in report["findings"])
    assert "LD512" in fired  # 64 threads on this machine's few CPUs
    assert main(["analyze", str(saved), "--format", "json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert sorted(f["id"] for f in again["findings"]) == fired


def test_only_and_skip(capsys: pytest.CaptureFixture[str]) -> None:
    _, report, err = scan(["--no-trace", "--only", "cpu,memory", "--threads", "64"], capsys)
    facts = facts_of(report)
    assert "probing this machine (cpu, memory)" in err
    assert "host.cpu.logical_cores" in facts and "model.n_layer" not in facts and "engine.version" not in facts
    _, report, _ = scan(["--no-trace", "--skip", "LD511,threads-above-logical-cpus", "--threads", "64"], capsys)
    assert {c["id"] for c in report["checks"]}.isdisjoint({"LD511", "LD512"})
    _, report, err = scan(["--no-trace", "--only", "trace"], capsys)
    assert "probing this machine (no probes)" in err
    _, report, _ = scan(["--no-trace", "--only", "pcie.degraded"], capsys)
    assert {c["class"] for c in report["checks"]} == {"pcie.degraded"}


@pytest.mark.parametrize(("args", "message"), [
    (["--model", "/nonexistent/model.gguf"], "no such model file"),
    (["--ctx-size", "0"], "--ctx-size must be positive"),
    (["--threads", "-2"], "--threads must be positive"),
    (["-b", "0"], "--batch-size must be positive (got 0)"),
    (["-ub", "0"], "--ubatch-size must be positive (got 0)"),
    (["-np", "0"], "--parallel must be positive (got 0)"),
    (["--only", "nothing-like-this"], "--only nothing-like-this: no such check or probe"),
    (["--replay-machine", "/nonexistent/machine"], "--replay-machine"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["scan", "--no-trace", "--format", "json", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("llm-doctor: error:") and message in err[-1]
    assert not any("Traceback" in line for line in err)


def test_settings_and_the_save_path_are_refused_before_the_machine_is_probed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "no" / "such" / "folder" / "x.json")
    for args in (["-b", "0"], ["--save", missing], ["--save", str(tmp_path)]):
        assert main(["scan", "--no-trace", "--format", "json", *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("llm-doctor: error:"), err  # no "probing this machine" first
    assert "--save" in err[0] and "is a directory" in err[0]


def test_a_text_file_given_as_the_model_is_not_a_gguf_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "x.log"
    log.write_text("llama_model_load: error loading model\n")
    assert main(["scan", "-m", str(log), "--no-trace", "--format", "json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{log}: not a GGUF file" in err[0] and "pip install" not in err[0]
    # a GGUF cut short is still the scan's corrupt-model finding, not a usage error
    (tmp_path / "cut.gguf").write_bytes(b"GGU")
    assert main(["scan", "-m", str(tmp_path / "cut.gguf"), "--no-trace", "--format", "json"]) == 1


def test_a_corrupt_model_is_reported_not_crashed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = build_gguf(load_spec("llama-3-8b-instruct-q4_k_m"), tmp_path / "half.gguf", corrupt="truncated")
    code, report, _ = scan(["--model", str(bad)], capsys)  # the trace is skipped for a refused file
    assert code == 1
    assert [f["id"] for f in report["findings"] if f["severity"] == "error"] == ["LD901"]
    assert any("trace skipped: the model file was refused" in e for e in report["errors"])


def test_the_console_script_and_text_view() -> None:
    command = [sys.executable, "-m", "doctor", "scan", "--no-trace", "--format", "text", "--color", "never"]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("llm-doctor") and " · scan · " in lines[0]
    assert lines[1].startswith("  machine: ") and lines[2].startswith("  model:   ")
    # a bench line (RAM read bandwidth, decode floor) comes before the plan where a kept measurement exists
    bench = [line for line in lines[3:4] if line.startswith("  bench:   ")]
    assert all("RAM read" in line and "decode floor" in line for line in bench)
    assert lines[3 + len(bench)].startswith("  plan:    n_ctx 4096")
    assert "\x1b" not in proc.stdout


@pytest.mark.engine
def test_a_trace_whose_engine_crashes_is_triaged_and_finished(smollm2: Path) -> None:
    """The engine child segfaults while weight repacking is on (as on an AMX Xeon): the scan still
    ends with prefill and decode figures, and names the setting it changed."""
    env = {**os.environ, "LLM_DOCTOR_ENGINE_CHILD": f"{sys.executable} -m tests.watch.crashing_child"}
    proc = subprocess.run([sys.executable, "-m", "doctor", "scan", "--format", "json", "--prompt-tokens", "16"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=400)
    assert proc.returncode == 1, proc.stderr  # LD951: an error for this plan
    report = json.loads(proc.stdout)
    facts = facts_of(report)
    assert 20 <= len(facts["run.decode_ms"]) <= 40 and facts["run.prefill_ms"] > 0
    assert facts["run.triage_status"] == "fixed" and facts["run.triage_change"] == "repack_off"
    assert report["assessment"]["id"] == "LD951"
    assert "scan: triage: run 2: weight repacking off" in proc.stderr and "done in" in proc.stderr


def test_the_planned_context_is_padded_per_sequence(capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    """--ctx-size 300 --parallel 4: llama.cpp pads 300 to 512, gives each of 4 streams pad256(128) = 256 cells,
    so the context is 1024 cells; the batch is clamped to the 300 asked for."""
    _, report, _ = scan(["--no-trace", "--ctx-size", "300", "--parallel", "4"], capsys)
    facts = facts_of(report)
    assert facts["config.n_ctx_requested"] == 300 and facts["config.n_ctx"] == 1024
    assert facts["derived.kv_cells"] == 1024 and facts["derived.n_ctx_seq"] == 256
    assert facts["derived.kv_bytes"] == 1024 * 23040


@pytest.mark.engine
def test_the_text_report_shows_the_trace_figures(smollm2: Path) -> None:
    """scan's text header says what the short real run measured, beside the plan."""
    proc = subprocess.run([sys.executable, "-m", "doctor", "scan", "--format", "text", "--prompt-tokens", "16",
                           "-n", "8"], capture_output=True, text=True, cwd=ROOT, timeout=400)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("  trace:")), "")
    if "prefill " not in line and "The engine process aborted or was killed" in proc.stdout:
        pytest.skip("the engine died on this host (llama.cpp on AMX under load), so the trace has no figures")
    assert "load " in line and "prefill " in line and "tokens/s" in line, proc.stdout[:800]
