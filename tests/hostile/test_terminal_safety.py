"""No byte of log content reaches the terminal as a control sequence, in any output format."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = [
    "\x1b]52;c;cm0gLXJmIH4=\x07",  # OSC 52: write to the clipboard
    "\x1b]0;pwned\x07",  # set the window title
    "\x1b[2J\x1b[H",  # clear the screen, home the cursor
    "\x1b[6n",  # ask the terminal to report (answers land on stdin)
    "\x9b31m\x9d0;t\x9c",  # 8-bit CSI / OSC
    "\x1bP+q544e\x1b\\",  # DCS
    "\u202eevil\u202c",  # bidi override
    "\x07\x08\x7f",
]
ESCAPE = re.compile(rb"\x1b|\x9b|\x9d|\x90|\x07|\x08|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def hostile_log(tmp_path: Path) -> Path:
    base = (ROOT / "fixtures/logs/llama-cpp-python/prompt-too-long.log").read_text()
    bad = "".join(HOSTILE)
    text = base.replace("Requested tokens", bad + "Requested tokens").replace("general.name          = ",
                                                                                "general.name          = " + bad)
    text += f"\n{bad}ggml_backend_cuda_buffer_type_alloc_buffer: allocating 512.00 MiB on device 0: cudaMalloc failed: out of memory{bad}\n"
    path = tmp_path / "hostile.log"
    path.write_text(text)
    return path


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_output_is_inert(tmp_path: Path, fmt: str) -> None:
    log = hostile_log(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "doctor", "analyze", str(log), "--format", fmt, "-v"],
                          capture_output=True, cwd=ROOT, env={**os.environ, "NO_COLOR": "1"}, check=False)
    assert proc.returncode == 1, proc.stderr
    assert not ESCAPE.search(proc.stdout), ESCAPE.search(proc.stdout)
    assert not ESCAPE.search(proc.stderr)
    if fmt == "json":
        doc = json.loads(proc.stdout)
        assert doc["assessment"]["id"] == "LD201"
