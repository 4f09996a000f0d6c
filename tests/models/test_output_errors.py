"""Output that cannot be written: a full disk is one line and exit 2, a closed pipe a quiet end, for
every command (run as the user runs them: a real process, stdout on /dev/full or a pipe closed early)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "fixtures" / "logs" / "llama.cpp" / "cuda-oom-kv.log"
COMMANDS = [
    ["analyze", str(LOG), "--format", "json"],
    ["analyze", str(LOG), "--format", "text"],
    ["scan", "--no-trace", "--format", "json", "--ram", "8G"],
    ["models", "--format", "json"],
    ["rules", "list"],
    ["explain", "LD505"],
    ["facts"],
    ["--help"],
]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}


def _command(argv: list[str]) -> list[str]:
    """The command as run: scan is given the default model's file (found under the real home, where the
    suite keeps it), so the run under a temporary home does not fetch it first."""
    if argv[0] != "scan":
        return argv
    from doctor.sources.models.default import default_model_path

    return [*argv, "-m", str(default_model_path())]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_full_disk_is_one_line_and_exit_2(argv: list[str], tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "doctor", *_command(argv)], stdout=full, stderr=subprocess.PIPE,
                              env=_env(tmp_path), timeout=120, text=True, check=False)
    errors = [line for line in done.stderr.splitlines() if line.startswith("llm-doctor: ")
              and not line.startswith("llm-doctor scan:")]
    assert done.returncode == 2, done.stderr
    assert errors == ["llm-doctor: error: cannot write the output: No space left on device"]
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_closed_pipe_ends_quietly(argv: list[str], tmp_path: Path) -> None:
    process = subprocess.Popen([sys.executable, "-m", "doctor", *_command(argv)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=_env(tmp_path))
    assert process.stdout is not None and process.stderr is not None
    process.stdout.read(1)  # `| head -c 1`
    process.stdout.close()
    err = process.stderr.read().decode()
    code = process.wait(timeout=120)
    assert code in (0, 1), err  # analyze's findings are exit 1, as on any output
    assert "error" not in err and "Traceback" not in err and "Exception ignored" not in err
