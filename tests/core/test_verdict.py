"""No clean bill of health without evidence: `analyze` of an input with nothing an engine wrote.

The real CLI in a subprocess, on inputs a new user tries: a system file, an empty file, an empty
stdin. Each must say it saw nothing, exit 4 (README, "Exit status") and never print "No problems
found" in any format; a real healthy log still gets the all-clear and exit 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from doctor.core.facts import Facts
from doctor.judge.evaluate import diagnose
from doctor.judge.rulebase import load_rulebase
from doctor.sources.logs.entry import analyze_bytes

ROOT = Path(__file__).resolve().parents[2]
HEALTHY = ROOT / "fixtures" / "logs" / "llama-cpp-python" / "healthy.log"
NOT_A_LOG = ROOT / "pyproject.toml"  # real text, not an engine's


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "doctor", *args], input=stdin.decode() if stdin is not None else None,
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"})


def _inputs(tmp_path: Path) -> list[tuple[list[str], bytes | None]]:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    cases: list[tuple[list[str], bytes | None]] = [([str(NOT_A_LOG)], None), ([str(empty)], None), (["-"], b"")]
    if Path("/etc/passwd").is_file():
        cases.append((["/etc/passwd"], None))
    return cases


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_nothing_recognised_is_said_and_exits_4_in_every_format(tmp_path: Path, fmt: str) -> None:
    for args, stdin in _inputs(tmp_path):
        run = _cli("analyze", *args, "--format", fmt, stdin=stdin)
        assert run.returncode == 4, (args, run.stdout, run.stderr)
        assert "No problems found" not in run.stdout, args
        assert "Nothing to judge" in run.stdout, args
        if fmt == "json":
            doc = json.loads(run.stdout)
            assert doc["verdict"]["kind"] == "nothing_recognised"
            assert doc["summary"]["ok"] == 0  # no check passed on evidence it never had


def test_the_verdict_names_what_was_read(tmp_path: Path) -> None:
    run = _cli("analyze", str(NOT_A_LOG), "--format", "text")
    lines = len(NOT_A_LOG.read_text().splitlines())
    assert f"none of the {lines} line(s) of pyproject.toml is an engine's log line" in run.stdout
    empty = _cli("analyze", "-", "--format", "text", stdin=b"")
    assert "stdin is empty" in empty.stdout


def test_fail_on_none_does_not_turn_nothing_into_a_pass(tmp_path: Path) -> None:
    assert _cli("analyze", str(NOT_A_LOG), "--format", "json", "--fail-on", "none").returncode == 4


def test_a_healthy_log_still_gets_the_all_clear() -> None:
    run = _cli("analyze", str(HEALTHY), "--format", "text")
    assert run.returncode == 0, run.stdout
    assert "No problems found." in run.stdout
    doc = json.loads(_cli("analyze", str(HEALTHY), "--format", "json").stdout)
    assert doc["verdict"] == {"kind": "no_problems", "text": "No problems found.", "complete": True}
    assert doc["summary"]["ok"] > 0
    markdown = _cli("analyze", str(HEALTHY), "--format", "markdown").stdout
    assert "**No problems found.**" in markdown


def test_ok_counts_only_checks_that_read_something() -> None:
    """A rule that is false only because its facts are absent (`exists`, a `not` over nothing) is
    unknown, not ok: an empty snapshot with events observed passes no fact-only check."""
    rules = load_rulebase([], env={})
    report = diagnose(Facts(), rules, command="analyze", mode="analyze")
    fact_only = [c for c in report.checks if c.outcome == "ok"]
    assert fact_only == [], [c.id for c in fact_only]


def test_event_checks_are_unknown_where_no_engine_line_was_read() -> None:
    facts = analyze_bytes(NOT_A_LOG.read_bytes(), "pyproject.toml")
    assert facts.value("run.recognised") is False and facts.events_observed is False
    report = diagnose(facts, load_rulebase([], env={}), command="analyze", mode="analyze")
    oom = next(c for c in report.checks if c.id == "LD302")
    assert oom.outcome == "unknown" and "events" in oom.missing
    # one engine line is enough to judge the events of the log it is in
    line = b"llama_kv_cache:        CPU KV buffer size =    45.00 MiB\n"
    assert analyze_bytes(NOT_A_LOG.read_bytes() + line, "x.log").value("run.recognised") is True


def test_check_lists_follow_the_engine() -> None:
    """Another engine's checks add no unknowns: an Ollama or vLLM check is not listed for a
    llama-cpp-python log, but one that fired on a log holding that engine's lines too stays."""
    rules = load_rulebase([], env={})
    scoped = {r.id: r.engines for r in rules.rules if r.engines}
    assert {"LD252", "LD550", "LD750", "LD350"} <= set(scoped)
    lcp = diagnose(analyze_bytes(HEALTHY.read_bytes(), "healthy.log"), rules, command="analyze", mode="analyze")
    assert lcp.engine == "llama-cpp-python"
    assert not {c.id for c in lcp.checks} & set(scoped)
    ollama = ROOT / "fixtures" / "logs" / "ollama" / "truncation-v0.5.7.log"
    report = diagnose(analyze_bytes(ollama.read_bytes(), "o.log"), rules, command="analyze", mode="analyze")
    listed = {c.id for c in report.checks}
    assert {"LD252", "LD550"} <= listed and not listed & {i for i, e in scoped.items() if "ollama" not in e}
    mixed = ROOT / "fixtures" / "logs" / "mixed" / "llamacpp-and-vllm-comparison.md"
    both = diagnose(analyze_bytes(mixed.read_bytes(), "m.md"), rules, command="analyze", mode="analyze")
    assert both.engine == "llama.cpp" and "LD750" in {f.id for f in both.findings}  # vLLM's, and it fired


def test_the_tui_banner_says_the_same() -> None:
    from doctor.views.tui.view import banner_info

    rules = load_rulebase([], env={})
    nothing = banner_info(diagnose(analyze_bytes(b"", "empty.log"), rules, command="analyze", mode="analyze"))
    assert nothing.headline == "Nothing to judge" and "empty.log is empty" in nothing.detail
    healthy = diagnose(analyze_bytes(HEALTHY.read_bytes(), "h.log"), rules, command="analyze", mode="analyze")
    assert banner_info(healthy).headline == "No problems found"
