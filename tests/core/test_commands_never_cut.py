"""Commands and paths the user is told to copy are printed whole, in any terminal width, with and
without -v (issue 37: `run: llm-doctor watch --model ./models/mistral-7b… --type-k f16 --ty…`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "fixtures/logs/llama.cpp/cuda-oom-kv.log"
# the command `analyze --verify` prints when the model the log names is not on this machine
WATCH = ("llm-doctor watch --model /data/models/mistral-7b-instruct-v0.2.Q5_K_M.gguf --ctx-size 32768 "
         "--batch-size 2048 --ubatch-size 512 --type-k f16 --type-v f16 -p '<a prompt like yours>' --verify")


def doctor(*args: str, columns: str) -> str:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": columns}
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, check=False, timeout=120).stdout


@pytest.mark.parametrize("columns", ["40", "250"])
@pytest.mark.parametrize("verbose", [[], ["-v"]])
def test_the_command_to_run_is_whole_on_its_own_line(columns: str, verbose: list[str]) -> None:
    out = doctor("analyze", str(LOG), "--verify", "--format", "text", *verbose, columns=columns)
    assert "  " + WATCH in out.splitlines(), out[-800:]
    assert "…" not in "\n".join(line for line in out.splitlines() if "llm-doctor watch" in line)


def test_markdown_gives_the_command_whole_as_code() -> None:
    out = doctor("analyze", str(LOG), "--verify", "--format", "markdown", columns="40")
    assert f"- `{WATCH}`" in out.splitlines()


def test_a_long_fix_command_is_never_cut() -> None:
    from doctor.core.report import Fix
    from doctor.judge.evaluate import diagnose
    from doctor.judge.rulebase import load_rulebase
    from doctor.sources.logs.entry import analyze_bytes
    from doctor.views.render.markdown import render_markdown
    from doctor.views.render.style import choose_style
    from doctor.views.render.text import render_text

    report = diagnose(analyze_bytes(LOG.read_bytes(), LOG.name), load_rulebase([]), command="analyze",
                      mode="analyze")
    long = "llama-server -m " + "/very/long/folder/name" * 20 + "/model.gguf -c 4096 --n-gpu-layers 20"
    report.findings[0].fix = Fix("Use fewer layers", "llama.cpp", long, {"llama.cpp": long})
    assert long in render_text(report, choose_style(False, "utf-8", "never"), verbose=False)
    assert long in render_markdown(report)
