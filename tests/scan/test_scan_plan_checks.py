"""scan judges the plan before anything runs: prompt and reply against one sequence's share of the
context; an oversized context leads as the root cause; words that fit a scan; the summary shows only
what was read; the model file is the one source of the model's size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.cli import main
from doctor.commands.scan import trace_only
from doctor.core.facts import Facts, Source


def scan(args: list[str], capsys: pytest.CaptureFixture[str], fmt: str = "json") -> tuple[int, dict, str]:
    code = main(["scan", "--no-trace", "--format", fmt, *args])
    out = capsys.readouterr().out
    return code, (json.loads(out) if fmt == "json" else {"text": out}), out


@pytest.mark.parametrize("args", [["--ctx-size", "256"], ["--ctx-size", "4096", "--parallel", "64"],
                                  ["-c", "4096", "-np", "64"]])
def test_a_planned_prompt_longer_than_one_sequence_is_found_before_anything_runs(
        args: list[str], capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    code, report, _ = scan(args, capsys)
    ids = {f["id"] for f in report["findings"]}
    assert code == 1 and "LD207" in ids
    assert report["assessment"]["class"] == "context.overflow"
    finding = next(f for f in report["findings"] if f["id"] == "LD207")
    # 4096 over 64 sequences: llama.cpp pads each sequence's share (64) to 256 cells, still short of 512 + 512
    per_seq = 256
    assert f"the {per_seq} tokens each sequence gets" in finding["message"]


def test_a_prompt_that_fits_with_a_reply_that_does_not(capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    code, report, _ = scan(["-c", "768"], capsys)  # 512 + 512 planned in 768
    ids = {f["id"] for f in report["findings"]}
    assert code == 1 and "LD208" in ids and "LD207" not in ids
    message = next(f for f in report["findings"] if f["id"] == "LD208")["message"]
    assert "need 1024 tokens" in message and "stop after 256 tokens" in message
    _, report, _ = scan(["-c", "2048"], capsys)
    assert {c["outcome"] for c in report["checks"] if c["id"] in ("LD207", "LD208")} == {"ok"}


def test_an_oversized_context_is_the_root_cause_not_the_compute_buffer(capsys: pytest.CaptureFixture[str],
                                                                       smollm2: Path) -> None:
    code, report, _ = scan(["--ctx-size", "1000000"], capsys)
    assert code == 1
    assert report["assessment"]["class"] == "context.oversized"
    lead = report["findings"][0]
    assert lead["class"] == "context.oversized" and "n_ubatch" not in lead["fix"]["command"]
    assert "n_ctx=1280" in lead["fix"]["command"]
    checks = {c["id"]: c for c in report["checks"]}
    for symptom in ("LD313", "LD312", "LD205", "LD206"):
        if checks.get(symptom, {}).get("outcome") == "fired":
            assert checks[symptom].get("inhibited_by") == lead["id"], symptom


def test_scan_wording_does_not_claim_a_run(capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    _, report, _ = scan([], capsys)
    for finding in report["findings"]:
        assert "ran on the" not in finding["message"], finding["id"]
    cpu_only = next((f for f in report["findings"] if f["id"] == "LD505"), None)
    if cpu_only is not None:  # a CPU-only engine build here
        assert "will run on the CPU" in cpu_only["message"]


def test_the_model_file_is_checked_when_the_gguf_was_read(capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    _, _, text = scan([], capsys, fmt="text")
    not_checked = next((line for line in text.splitlines() if "Not checked" in line), "")
    assert "Model file" not in not_checked
    assert "] Model file" in text


def test_the_summary_shows_only_what_was_read(capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    _, _, text = scan(["--only", "gguf"], capsys, fmt="text")
    summary = "\n".join(text.splitlines()[1:4])
    assert "None" not in summary and "?" not in summary, summary
    assert "machine: not probed" in summary and "llama, 30 layers" in summary
    _, _, text = scan(["--skip", "gpu"], capsys, fmt="text")
    assert "no GPU" not in text


def test_the_probe_not_the_trace_says_how_big_the_model_file_is() -> None:
    probed, trace = Facts(), Facts()
    probed.set("model.file_bytes", 98362432, Source("probe", "probe.gguf"))
    trace.set("model.file_bytes", 96576768, Source("log", "llama.cpp", 12))  # "file size = 92.10 MiB"
    trace.set("model.n_ctx_train", 8192, Source("log", "llama.cpp", 13))
    trace.set("run.load_ms", 40.0, Source("trace", "llama-cpp-python"))
    kept = trace_only(trace, probed)
    assert not kept.has("model.file_bytes")
    assert kept.value("model.n_ctx_train") == 8192 and kept.value("run.load_ms") == 40.0
    probed.merge(kept)
    assert probed.value("model.file_bytes") == 98362432


def test_on_a_gpu_machine_too_the_oversized_context_leads(model_files, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.scan.conftest import MACHINES

    machine = ["--replay-machine", str(MACHINES / "nvme-workstation-rtx4090"),
               "--model", str(model_files("llama-3-8b-instruct-q4_k_m"))]
    code, report, _ = scan([*machine, "-c", "1000000", "-ngl", "-1"], capsys)
    assert code == 1 and report["assessment"]["class"] == "context.oversized"
    assert report["findings"][0]["fix"]["by_engine"]["llama.cpp"].startswith("--ctx-size ")
    _, _, text = scan([*machine, "--skip", "gpu"], capsys, fmt="text")
    assert "no GPU" not in text and "RTX 4090" not in text.splitlines()[1]
    _, _, text = scan(machine, capsys, fmt="text")
    assert "RTX 4090" in text.splitlines()[1]
