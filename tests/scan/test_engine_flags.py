"""Fix flags checked against the user's own llama.cpp build (doctor/sources/probes/engine_flags.py).

The help texts are recorded from real binaries (fixtures/engine_help/README.md): the llama-server the
suite builds and llama.cpp b4000. The live test reads the suite's build itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.commands.flag_check import check_report_flags
from doctor.core.report import Finding, Fix
from doctor.sources.probes.engine_flags import check_command, parse_help, read_flags

HELP = Path(__file__).resolve().parents[2] / "fixtures" / "engine_help"


def _flags(name: str):
    return parse_help((HELP / f"{name}.help.txt").read_text(), "llama-server",
                      (HELP / f"{name}.version.txt").read_text())


NEW, OLD = "llama-server-0.5.0-dev", "llama-server-b4000"


def test_help_is_indexed_in_both_layouts() -> None:
    new, old = _flags(NEW), _flags(OLD)
    assert new.version == "0.5.0-dev" and old.version is None  # b4000 built without git metadata: "0 (unknown)"
    for flags in (new, old):
        assert {"-ngl", "--n-gpu-layers", "--gpu-layers", "-c", "--ctx-size", "-fa", "--flash-attn"} <= flags.spellings
    assert new.choices["-fa"] == {"on", "off", "auto"} and "-fa" not in old.takes_value
    assert {"auto", "all"} <= new.choices["--n-gpu-layers"]
    assert "--fit" in new.spellings and "--fit" not in old.spellings
    assert "--no-mmap" in old.spellings and "--no-mmap" not in new.spellings


@pytest.mark.parametrize(("command", "name", "said", "missing"), [
    # a new build's spellings said to an old build
    ("-ctk q8_0 -ctv q8_0 -fa on", OLD, "-ctk q8_0 -ctv q8_0 -fa", ()),
    ("-ngl auto", OLD, "-ngl 999", ()),
    ("--load-mode none", OLD, "--no-mmap", ()),
    ("-ngl 20, or --fit on --fit-target 1024", OLD, "-ngl 20, or --fit on --fit-target 1024",
     ("--fit on", "--fit-target 1024")),
    # an old build's spellings said to a new one
    ("--no-mmap", NEW, "--load-mode none", ()),
    ("--mlock", NEW, "--load-mode mlock", ()),
    ("--ctx-size 8192 -fa on", NEW, "--ctx-size 8192 -fa on", ()),
    ("-ngl two below the layers offloaded now", NEW, "-ngl two below the layers offloaded now", ()),
])
def test_commands_said_in_the_builds_spelling(command: str, name: str, said: str, missing: tuple[str, ...]) -> None:
    checked = check_command(command, _flags(name))
    assert checked.command == said
    assert checked.missing == missing


def test_note_says_a_newer_build_is_needed() -> None:
    flags = _flags(OLD)
    checked = check_command("--fit on", flags)
    assert "needs a newer llama.cpp build" in checked.note(flags)
    assert check_command("--ctx-size 4096", flags).note(flags) == ""


def _finding(command: str) -> Finding:
    return Finding(id="LD000", slug="x", cls="offload.none", area="x", severity="warning", confidence="high",
                   title="t", message="m", explain="e", evidence=[],
                   fix=Fix(text="Offload.", engine="llama.cpp", command=command,
                           by_engine={"llama.cpp": command, "ollama": "PARAMETER num_gpu 99"}), references=[])


def test_report_fixes_respelled_for_the_build() -> None:
    from doctor.core.report import Report

    report = Report.__new__(Report)
    report.findings = [_finding("-ngl all --no-mmap")]
    check_report_flags(report, flags=_flags(NEW))
    fix = report.findings[0].fix
    assert fix.command == fix.by_engine["llama.cpp"] == "-ngl all --load-mode none"
    assert "--no-mmap as --load-mode none" in fix.text
    assert fix.by_engine["ollama"] == "PARAMETER num_gpu 99"  # other engines' words untouched


def test_the_suites_llama_server_is_read() -> None:
    from tests.server.harness import llama_server_binary

    binary = llama_server_binary()
    if binary is None:
        pytest.skip("the suite's llama-server is not built (tests/server harness)")
    flags = read_flags(binary)
    assert flags is not None and {"--ctx-size", "-ngl", "-fa"} <= flags.spellings
    assert check_command("--no-mmap", flags).command in ("--no-mmap", "--load-mode none")


ARCH_LOG = (Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "llama-cpp-python" / "arch"
            / "gemma-2-9b__c4096.log")


def _old_build(tmp_path: Path) -> Path:
    """A stand-in for an old llama-server: prints b4000's recorded --help and --version."""
    binary = tmp_path / "bin" / "llama-server"
    binary.parent.mkdir()
    binary.write_text(f"#!/bin/sh\nif [ \"$1\" = --version ]; then cat '{HELP / (OLD + '.version.txt')}'; "
                      f"else cat '{HELP / (OLD + '.help.txt')}'; fi\n")
    binary.chmod(0o755)
    return binary


def _analyze(*args: str) -> dict:
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(root)}
    env.pop("LLM_DOCTOR_LLAMA_SERVER", None)
    done = subprocess.run([sys.executable, "-m", "doctor", "analyze", *args, "--format", "json"], capture_output=True,
                          env=env, cwd=root, timeout=120, check=False)
    return json.loads(done.stdout)


def _fix(doc: dict, rule: str) -> dict:
    return next(f["fix"] for f in doc["findings"] if f["id"] == rule)


def test_analyze_spells_fixes_for_the_binary_given(tmp_path: Path) -> None:
    plain = _fix(_analyze(str(ARCH_LOG)), "LD102")
    assert "--load-mode mmap" in plain["by_engine"]["llama.cpp"]
    fix = _fix(_analyze(str(ARCH_LOG), "--engine-binary", str(_old_build(tmp_path))), "LD102")
    assert "--load-mode" not in fix["by_engine"]["llama.cpp"]  # b4000 has no --load-mode
    assert "the default (mmap)" in fix["by_engine"]["llama.cpp"] and "llama-server" in fix["text"]


def test_analyze_reads_the_binary_the_log_started(tmp_path: Path) -> None:
    binary = _old_build(tmp_path)
    log = tmp_path / "run.log"
    log.write_text(f"$ {binary} -m /models/gemma-2-9b-it-Q4_K_M.gguf -c 4096 --no-mmap\n" + ARCH_LOG.read_text())
    fix = _fix(_analyze(str(log)), "LD102")
    assert "--load-mode" not in fix["by_engine"]["llama.cpp"]
