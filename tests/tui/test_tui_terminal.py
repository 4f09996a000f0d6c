"""The TUI as a user meets it: `llm-doctor analyze LOG` in a real pseudo-terminal, keys sent, the
terminal restored on quit; and the command line does not import Textual unless it shows the TUI."""

from __future__ import annotations

import base64
import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from .conftest import TUI_FIXTURES

ROOT = Path(__file__).resolve().parents[2]


def _no_textual(code: str) -> None:
    script = code + "\nimport sys\nbad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n" \
                    "assert not bad, bad\n"
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_cli_does_not_import_textual() -> None:
    _no_textual("import doctor.cli\ndoctor.cli.build_parser()")


def test_json_and_markdown_output_do_not_import_textual() -> None:
    log = TUI_FIXTURES / "kv-oom.log"
    for fmt in ("json", "markdown", "text"):
        _no_textual("import io, contextlib, doctor.cli\n"
                    "with contextlib.redirect_stdout(io.StringIO()):\n"
                    f"    doctor.cli.main(['analyze', {str(log)!r}, '--format', {fmt!r}])")


def _read_until(fd: int, needle: bytes, buf: bytearray, rounds: int = 600) -> bool:
    for _ in range(rounds):
        if needle in buf:
            return True
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return needle in buf
            if not chunk:
                return needle in buf
            buf.extend(chunk)
    return needle in buf


@pytest.mark.slow
def test_analyze_opens_the_tui_in_a_terminal_and_quits_cleanly() -> None:
    log = TUI_FIXTURES / "kv-oom.log"
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "doctor", "analyze", str(log)], cwd=ROOT, env=env,
                            stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    buf = bytearray()
    try:
        assert _read_until(master, b"Likely root cause", buf), buf[-2000:]
        assert b"\x1b[?1049h" in buf  # the TUI took the alternate screen
        os.write(master, b"c")  # copy the fix: Textual writes it with OSC 52
        assert _read_until(master, b"\x1b]52;c;", buf)
        os.write(master, b"q")
        proc.wait(timeout=30)
        _read_until(master, b"\x00never\x00", buf, rounds=5)  # drain what is left
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.returncode == 1  # the KV cache OOM is an error: --fail-on error
    tail = bytes(buf[buf.rfind(b"\x1b[?1049h"):])
    assert b"\x1b[?1049l" in tail  # back to the normal screen
    assert tail.rfind(b"\x1b[?25h") > tail.rfind(b"\x1b[?25l")  # cursor shown again
    assert b"Traceback" not in buf
    start = buf.index(b"\x1b]52;c;") + len(b"\x1b]52;c;")
    copied = base64.b64decode(bytes(buf[start:buf.index(b"\x07", start)])).decode()
    assert "n_ctx" in copied  # the fix for the detected engine (llama-cpp-python)
