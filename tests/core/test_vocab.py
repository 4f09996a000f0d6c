"""The closed vocabularies (doctor/core/vocab.py): one list each, and values read back from report JSON are
checked against it (a report from another version, or a damaged one, never carries a severity the views
cannot rank)."""

from __future__ import annotations

from doctor.core.report import CONFIDENCE_RANK, SEVERITY_RANK, Report
from doctor.core.vocab import CONFIDENCES, MODES, SEVERITIES, is_mode, is_severity


def test_each_vocabulary_is_listed_once_and_ranked() -> None:
    assert SEVERITIES == ("error", "warning", "info") and set(SEVERITY_RANK) == set(SEVERITIES)
    assert CONFIDENCES == ("high", "medium", "low") and set(CONFIDENCE_RANK) == set(CONFIDENCES)
    assert MODES == ("scan", "watch", "analyze")
    assert is_severity("warning") and not is_severity("fatal") and not is_severity(["error"])
    assert is_mode("scan") and not is_mode("fleet")


def test_report_json_with_values_outside_the_vocabularies_reads_back_as_defaults() -> None:
    finding = {"id": "LD201", "severity": "fatal", "confidence": "sure", "title": "t",
               "fix": {"text": "x", "verified": {"outcome": "fixed?", "line": "l"}}}
    data = {"command": "watch", "mode": "replay", "findings": [finding],
            "checks": [{"id": "LD201", "severity": "loud", "outcome": "maybe"},
                       {"id": "LD202", "severity": "error", "outcome": "fired"}],
            "assessment": {"id": "LD201", "severity": "bad", "confidence": 3}}
    report = Report.from_json(data)
    [read] = report.findings
    assert (read.severity, read.confidence, read.fix.verified) == ("info", "low", None)
    assert [(c.severity, c.outcome) for c in report.checks] == [("info", "unknown"), ("error", "fired")]
    assert report.assessment is not None
    assert (report.assessment.severity, report.assessment.confidence) == ("warning", "low")
    assert report.mode == "watch"  # not a mode: judged as its command says
    finding["fix"] = {"text": "x", "verified": {"outcome": "resolved", "line": "l"}}
    assert Report.from_json(data).findings[0].fix.verified.outcome == "resolved"
