"""The command line as a user meets it: exit codes, one-line errors, stdin, formats, fast start."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LCP = ROOT / "fixtures" / "logs" / "llama-cpp-python"


def cli(*args: str, stdin: bytes | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "doctor", *args], input=stdin, capture_output=True,
                          env=full_env, cwd=ROOT, timeout=120, check=False)


def test_healthy_log_exits_0_and_error_exits_1() -> None:
    assert cli("analyze", str(LCP / "healthy.log"), "--no-tui").returncode == 0
    bad = cli("analyze", str(LCP / "prompt-too-long.log"), "--no-tui")
    assert bad.returncode == 1 and b"LD201" in bad.stdout


def test_fail_on_threshold() -> None:
    assert cli("analyze", str(LCP / "kv-f32.log"), "--no-tui").returncode == 0
    assert cli("analyze", str(LCP / "kv-f32.log"), "--no-tui", "--fail-on", "warning").returncode == 1
    assert cli("analyze", str(LCP / "prompt-too-long.log"), "--no-tui", "--fail-on", "none").returncode == 0


@pytest.mark.parametrize(("args", "needle"), [
    (["analyze", "/nonexistent/run.log"], b"no such file"),
    (["analyze", str(ROOT / "fixtures")], b"is a directory"),
    (["analyze", "--format", "yaml", "x"], b"invalid choice"),
    (["explain", "LD000"], b"no rule"),
    (["analyze", str(LCP / "healthy.log"), "--rules", "/nonexistent/rules"], b"does not exist"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: bytes) -> None:
    proc = cli(*args)
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert needle in err and b"Traceback" not in err and len(err.splitlines()) == 1


def test_binary_input_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "model.bin"
    model.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(range(256)) * 64)
    proc = cli("analyze", str(model))
    assert proc.returncode == 2 and b"GGUF model file" in proc.stderr
    noise = tmp_path / "noise.log"
    noise.write_bytes(bytes(range(32)) * 4000)
    assert cli("analyze", str(noise)).returncode == 2


def test_gzip_and_stdin_and_non_utf8(tmp_path: Path) -> None:
    data = (LCP / "prompt-too-long.log").read_bytes()
    gz = tmp_path / "run.log.gz"
    gz.write_bytes(gzip.compress(data))
    assert b"LD201" in cli("analyze", str(gz), "--no-tui").stdout
    piped = cli("analyze", "-", "--format", "json", stdin=data.replace(b"Traceback", b"Trace\xff\xfeback\x00"))
    doc = json.loads(piped.stdout)
    assert piped.returncode == 1 and doc["assessment"]["id"] == "LD201"


def test_json_is_the_only_thing_on_stdout() -> None:
    proc = cli("analyze", str(LCP / "generation-past-context.log"), "--format", "json")
    doc = json.loads(proc.stdout)
    assert doc["schema_version"] == "1" and doc["command"] == "analyze"
    finding = next(f for f in doc["findings"] if f["id"] == "LD202")
    assert finding["class"] == "context.overflow" and 2120 in finding["lines"]
    assert {c["outcome"] for c in doc["checks"]} <= {"fired", "ok", "unknown"}
    assert doc["facts"]["facts"]["config.n_ctx"]["value"] == 256


def test_markdown_report() -> None:
    out = cli("analyze", str(LCP / "kv-f32.log"), "--format", "markdown").stdout.decode()
    assert out.startswith("# llm-doctor analyze report") and "### LD701 kv-cache-f32" in out
    assert "| llama-cpp-python (detected) |" in out


def test_colour_only_for_terminals_and_never_with_no_color() -> None:
    plain = cli("analyze", str(LCP / "kv-f32.log"), "--no-tui", "--color", "always", env={"NO_COLOR": "1"})
    assert b"\x1b[" in plain.stdout  # --color always wins over NO_COLOR
    none = cli("analyze", str(LCP / "kv-f32.log"), "--no-tui")
    assert b"\x1b[" not in none.stdout


def test_rules_commands() -> None:
    listed = cli("rules", "list", "--format", "json")
    assert any(r["id"] == "LD201" for r in json.loads(listed.stdout))
    tested = cli("rules", "test")
    assert tested.returncode == 0 and b"rule test cases passed" in tested.stdout
    explained = cli("explain", "context-overflow") if False else cli("explain", "LD202")
    assert explained.returncode == 0 and b"context.overflow" in explained.stdout and b"--ctx-size" in explained.stdout


def test_rules_without_a_subcommand_is_one_line_and_exit_2() -> None:
    proc = cli("rules")
    err = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and proc.stdout == b""
    assert err == ["llm-doctor: error: rules: say which: `llm-doctor rules list` or `llm-doctor rules test [DIR]`"]


def test_rules_test_shows_expected_vs_actual(tmp_path: Path) -> None:
    (tmp_path / "wrong.yaml").write_text(
        "- id: LD990\n  slug: wrong-case\n  class: kv.dtype\n  severity: info\n  title: t\n"
        "  when: {fact: config.type_k, eq: f32}\n  fix: {text: x, llama.cpp: y}\n"
        "  tests:\n    - name: mislabelled\n      facts: {config.type_k: f16}\n      expect: fired\n")
    proc = cli("rules", "test", str(tmp_path))
    assert proc.returncode == 1
    assert b"LD990 wrong-case" in proc.stdout and b"expected fired, got ok" in proc.stdout


def _loaded_after(code: str, modules: tuple[str, ...]) -> list[str]:
    """Which of `modules` a fresh interpreter has imported once it ran `code`."""
    probe = f"import sys; {code}; print(','.join(m for m in {modules!r} if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, cwd=ROOT, check=True)
    return [m for m in proc.stdout.decode().strip().split(",") if m]


def test_startup_does_not_import_heavy_parts() -> None:
    code = ("import doctor.cli; doctor.cli.build_parser(); "
            "import doctor.commands.analyze, doctor.views.render.json, doctor.sources.logs.entry; "
            "import doctor.judge.evaluate")
    assert _loaded_after(code, ("textual", "torch", "llama_cpp", "numpy", "gguf", "rich")) == []


def test_the_argument_parsers_load_no_judge_derivation_or_log_reader() -> None:
    """`--help`, and the parser of every command, stay light: the judge, the derivations and the log
    readers are the runs' to import (the engine table's entry points come from importlib.metadata)."""
    code = ("import doctor.cli; doctor.cli.build_parser(); doctor.cli.build_parser(['analyze', 'x']); "
            "from doctor.core import engines; engines.labels()")
    assert _loaded_after(code, ("doctor.judge.evaluate", "doctor.judge.rulebase", "doctor.derive",
                                "doctor.sources.logs.analyze", "doctor.sources.inputs", "doctor.core.report")) == []


def test_help_lists_the_commands() -> None:
    out = cli("--help").stdout
    for command in (b"analyze", b"rules", b"explain", b"facts"):
        assert command in out
