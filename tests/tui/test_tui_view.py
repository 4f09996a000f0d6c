"""What the report screen decides to show, without Textual: grouping, marks, header, banner, detail."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from doctor.core.facts import Facts, Source
from doctor.core.report import Assessment, Check, Evidence, Finding, Fix, Report
from doctor.views.tui.export import export_report
from doctor.views.tui.view import (
    MARK_RANK,
    banner_info,
    detail_view,
    finding_view,
    first_row,
    group_checks,
    header_info,
    machine_text,
)


def _finding(fid: str, area: str, severity: str, *, command: str | None = "--ctx-size 4096",
             lines: tuple[int, ...] = ()) -> Finding:
    evidence = [Evidence("log", f"log line {n}", n) for n in lines]
    evidence.append(Evidence("fact", "config.n_ctx = 2048 (log line 3)", 3, "config.n_ctx", 2048, "tokens",
                             "log line 3"))
    return Finding(fid, f"slug-{fid}", "context.overflow", area, severity, "high", f"title {fid}",
                   f"message {fid}", "why it happens", evidence,
                   Fix("Give it more context.", "llama.cpp", command,
                       {"llama.cpp": command or "", "ollama": "PARAMETER num_ctx 4096",
                        "vllm": "--max-model-len 4096"}),
                   ["https://example.invalid/ref"])


def _report() -> Report:
    facts = Facts()
    facts.inputs.append("run.log")
    findings = [_finding("LD202", "Context", "error", lines=(40, 41)), _finding("LD801", "Decode timing", "warning"),
                _finding("LD505", "GPU offload", "info")]
    checks = [
        Check("LD101", "slow-model-load", "io.slow_load", "Storage and load", "warning", "t", "ok"),
        Check("LD201", "prompt-exceeds-context", "context.overflow", "Context", "error", "t", "unknown",
              ["run.prompt_tokens_max"]),
        Check("LD202", "slug-LD202", "context.overflow", "Context", "error", "t", "fired"),
        Check("LD204", "context-far-larger", "context.oversized", "Context", "info", "t", "fired",
              inhibited_by="LD202"),
        Check("LD801", "slug-LD801", "decode.jitter", "Decode timing", "warning", "t", "fired"),
        Check("LD505", "slug-LD505", "offload.none", "GPU offload", "info", "t", "fired"),
        Check("LD511", "threads", "cpu.threads", "CPU threads", "warning", "t", "unknown", ["config.n_threads"]),
    ]
    return Report("analyze", "llama.cpp", facts, findings, checks,
                  Assessment("LD202", "context.overflow", "error", "high", "title LD202", "message LD202"))


def test_areas_and_rows_are_worst_first() -> None:
    groups = group_checks(_report())
    assert [g.area for g in groups] == ["Context", "Decode timing", "GPU offload", "CPU threads", "Storage and load"]
    assert [g.mark for g in groups] == ["error", "warning", "info", "unknown", "ok"]
    context = groups[0]
    assert [r.id for r in context.rows] == ["LD202", "LD201", "LD204"]
    assert [r.mark for r in context.rows] == ["error", "unknown", "inhibited"]
    assert context.note == "1 finding, 1 unknown, 1 explained"
    for group in groups:
        ranks = [MARK_RANK[r.mark] for r in group.rows]
        assert ranks == sorted(ranks)


def test_rows_carry_their_finding_and_the_first_row_is_the_root_cause() -> None:
    report = _report()
    groups = group_checks(report)
    row = first_row(groups, report)
    assert row is not None and row.id == "LD202" and row.finding is report.findings[0]
    assert groups[0].rows[2].finding is None  # inhibited: no finding shown for it
    assert row.label == "✗ LD202 slug-LD202"


def test_findings_without_checks_still_listed() -> None:
    report = _report()
    report.checks = []
    rows = [r.id for g in group_checks(report) for r in g.rows]
    assert sorted(rows) == ["LD202", "LD505", "LD801"]


def test_detail_of_a_finding_has_evidence_fix_and_lines() -> None:
    view = finding_view(_report().findings[0])
    assert view.heading == "LD202 slug-LD202"
    assert view.status == "error · high confidence"
    assert view.notes == ("class context.overflow",)
    assert view.lines == (3, 40, 41)  # a fact read from log line 3 is evidence there too
    assert [(e.kind, e.where) for e in view.evidence] == [("log", "line 40"), ("log", "line 41"),
                                                         ("fact", "log line 3")]
    assert view.evidence[2].text == "config.n_ctx = 2048"
    assert view.fix is not None
    assert view.fix.copy_text == "--ctx-size 4096"
    assert [e for e, _ in view.fix.others] == ["ollama", "vllm"]


def test_fix_without_engine_command_copies_the_text() -> None:
    finding = _finding("LD202", "Context", "error", command=None)
    finding.fix.engine = None
    view = finding_view(finding)
    assert view.fix is not None and view.fix.copy_text == "Give it more context."
    assert [e for e, _ in view.fix.others] == ["llama.cpp", "ollama", "vllm"]


def test_detail_of_checks_that_did_not_fire() -> None:
    groups = group_checks(_report())
    unknown = next(r for g in groups for r in g.rows if r.id == "LD201")
    inhibited = next(r for g in groups for r in g.rows if r.id == "LD204")
    ok = next(r for g in groups for r in g.rows if r.id == "LD101")
    assert detail_view(unknown).notes == ("needs: run.prompt_tokens_max",)
    assert "LD202" in detail_view(inhibited).message and detail_view(inhibited).status == "explained by LD202"
    assert detail_view(ok).message.startswith("OK") and detail_view(ok).fix is None


def test_outside_text_is_made_inert() -> None:
    finding = _finding("LD202", "Context", "error", command="--ctx-size 4096\x1b]52;c;ZXZpbA==\x07\x1b[2J")
    finding.evidence.insert(0, Evidence("log", "boom \x1b]0;pwned\x07\x1b[31mred\x1b[0m \u202eevil", 7))
    finding.message = "\x1b[1Amoved"
    view = finding_view(finding)
    texts = [view.message, view.fix.copy_text, view.evidence[0].text]
    for text in texts:
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert view.fix.copy_text == "--ctx-size 4096"
    assert view.evidence[0].text == "boom red evil"


def test_header_describes_machine_model_engine() -> None:
    facts = Facts()
    src = Source("probe", "test")
    for name, value in {
        "host.gpu.count": 1, "host.gpu[0].name": "NVIDIA GeForce RTX 3090", "host.gpu[0].vram_total": 24 * 2**30,
        "host.gpu[0].pcie.gen_current": 3, "host.gpu[0].pcie.width_current": 8, "host.gpu[0].pcie.gen_max": 4,
        "host.gpu[0].pcie.width_max": 16, "model.storage.kind": "nvme", "model.storage.fs_type": "ext4",
        "model.storage.read_mb_s": 2450.0, "host.ram.total": 64 * 2**30, "model.name": "Qwen2.5 7B Instruct",
        "model.file_type": "Q4_K_M", "model.file_bytes": 4683074048, "engine.version": "b5432",
    }.items():
        facts.set(name, value, src)
    report = Report("scan", "llama.cpp", facts)
    info = header_info(report)
    assert info.machine == ("NVIDIA GeForce RTX 3090 24.00 GiB · PCIe gen3 x8 (max gen4 x16) · "
                            "model on nvme (ext4, 2450 MB/s) · RAM 64.00 GiB")
    assert info.model == "Qwen2.5 7B Instruct (Q4_K_M, 4.36 GiB)"
    assert info.engine == "llama.cpp b5432"
    assert info.title.endswith("· scan")


def test_machine_unknowns_say_so() -> None:
    facts = Facts()
    assert machine_text(facts, "analyze") == "not probed (this report is from a log)"
    facts.set("host.gpu.count", 0, Source("probe", "nvml"))
    assert machine_text(facts, "scan") == "no GPU · storage ?"


def test_banner() -> None:
    report = _report()
    banner = banner_info(report)
    assert banner.kind == "error" and banner.headline == "Likely root cause: title LD202"
    assert "confidence high" in banner.detail
    report.assessment = None
    report.findings = [f for f in report.findings if f.severity == "info"]
    assert banner_info(report).headline == "No problems found"
    report.checks = [Check("LD1", "a", "c", "Area", "error", "t", "unknown", ["x"])]
    report.findings = []
    assert banner_info(report).kind == "unknown"


def test_report_round_trips_through_json() -> None:
    report = _report()
    again = Report.from_json(json.loads(json.dumps(report.to_json())))
    assert again.to_json() == report.to_json()


def test_report_from_json_is_lenient() -> None:
    report = Report.from_json({"findings": [{"id": "LD1", "severity": "loud", "evidence": "x", "fix": 3}],
                               "checks": "nope", "facts": {"facts": []}})
    assert report.findings[0].severity == "info" and report.findings[0].evidence == []
    assert report.checks == [] and len(report.facts) == 0


def test_export_writes_new_files(tmp_path: Path) -> None:
    report = _report()
    now = datetime(2026, 1, 2, 15, 4, 5)
    first = export_report(report, "markdown", tmp_path, now)
    second = export_report(report, "markdown", tmp_path, now)
    assert first.name == "llm-doctor-analyze-20260102-150405.md"
    assert second.name == "llm-doctor-analyze-20260102-150405-1.md"
    assert first.read_text().startswith("# llm-doctor analyze report")
    doc = json.loads(export_report(report, "json", tmp_path, now).read_text())
    assert doc["findings"][0]["id"] == "LD202"


def test_export_to_unwritable_folder_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        export_report(_report(), "json", tmp_path / "missing", datetime(2026, 1, 1))


SPEED_FACTS = {"speed.decode.tok_s": 11.6, "speed.decode.ceiling_tok_s": 40.6, "speed.decode.fraction": 0.286,
               "speed.decode.bound": "contention", "speed.decode.ceiling_source": "measured",
               "speed.decode.expected_tok_s": 13.5, "speed.prefill.tok_s": 9.0,
               "speed.prefill.ceiling_source": "unknown", "speed.prefill.bound": "unknown",
               "speed.prefill.settle": "the machine's matrix-multiply throughput", "host.cpu.other_busy": 0.85}


def test_a_speed_bar_per_phase_against_the_ceiling() -> None:
    from doctor.views.render.speed import phase_rows, shared_note
    from doctor.views.tui.view import BAR_WIDTH, speed_bars

    report = Report("scan", "llama-cpp-python", Facts.from_values(SPEED_FACTS))
    bars = {b.phase: b for b in speed_bars(report)}
    assert bars["decode"].filled == round(0.286 * BAR_WIDTH) and bars["decode"].percent == "29%"
    assert bars["decode"].kind == "warning"  # contention bound it
    assert bars["decode"].text == "11.6/40.6 tok/s, contention (measured)"
    assert bars["prefill"].percent == "?" and "needs the machine's matrix-multiply" in bars["prefill"].text
    lines = [row.line() for row in phase_rows(report.facts)]
    assert lines == ["prefill  9.0 tok/s, ceiling unknown: needs the machine's matrix-multiply throughput",
                     "decode   11.6 tok/s = 29% of 40.6 (contention, measured; usually ~13.5)"]
    assert shared_note(report.facts) == "cores shared with other processes (they used 85% of them)"
    assert speed_bars(Report("analyze", None, Facts())) == []
