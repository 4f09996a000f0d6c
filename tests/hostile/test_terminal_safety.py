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
    text += (f"\n{bad}ggml_backend_cuda_buffer_type_alloc_buffer: allocating 512.00 MiB on device 0: "
             f"cudaMalloc failed: out of memory{bad}\n")
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


# -- more ways outside text reaches the terminal ------------------------------------------------------

BAD = "".join(HOSTILE)


def doctor(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, cwd=cwd, check=False,
                          env={**os.environ, "NO_COLOR": "1"}, timeout=300)


def assert_inert(data: bytes) -> None:
    found = ESCAPE.search(data) or re.search(rb"\xc2[\x80-\x9f]", data)
    assert found is None, data[max(0, found.start() - 60):found.end() + 60] if found else b""


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_a_saved_scan_with_hostile_names(tmp_path: Path, fmt: str) -> None:
    """A saved facts document (scan --save, or someone's attachment) whose engine, model, units,
    sources and inputs carry escapes: the engine name reached the text header raw before."""
    facts = {"engine.name": BAD, "config.engine": BAD, "model.name": BAD + "m", "model.path": f"/m/{BAD}.gguf",
             "config.n_ctx": 256, "config.prompt_tokens": 300, "config.type_k": BAD,
             "host.gpu[0].name": BAD, "run.output_text": BAD * 3}
    doc = {"llm_doctor": "facts", "version": "0.1.0", "command": "scan", "inputs": [BAD],
           "facts": {name: {"value": value, "unit": BAD if isinstance(value, int) else None,
                            "source": {"kind": "probe", "name": BAD, "text": BAD}} for name, value in facts.items()},
           "events": [{"kind": "prompt_too_long", "text": BAD, "line": 3, "source": BAD,
                       "data": {"n_tokens": 300, "n_ctx": 256, "x": BAD}}]}
    path = tmp_path / "scan.json"
    path.write_text(json.dumps(doc))
    proc = doctor("analyze", str(path), "--format", fmt, "-v")
    assert proc.returncode in (0, 1), proc.stderr
    assert_inert(proc.stdout)
    assert_inert(proc.stderr)


@pytest.mark.parametrize("name", [f"missing{BAD}.log", "\x1b]0;x\x07", "dir\x9b2J"])
def test_error_messages_quoting_a_file_name(tmp_path: Path, name: str) -> None:
    proc = doctor("analyze", str(tmp_path / name), "--format", "json")
    assert proc.returncode == 2
    assert proc.stderr.startswith(b"llm-doctor: error: ") and proc.stderr.count(b"\n") == 1
    assert_inert(proc.stderr)


def test_a_gguf_with_hostile_metadata_in_scan(tmp_path: Path) -> None:
    import numpy as np
    from gguf import GGUFWriter

    path = tmp_path / "evil.gguf"
    w = GGUFWriter(str(path), "llama")
    w.add_name("evil" + BAD)
    w.add_uint32("llama.block_count", 1)
    w.add_string("general.license", BAD)
    w.add_tensor("blk.0.attn_norm.weight", np.zeros(64, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    for fmt in ("text", "markdown", "json"):
        proc = doctor("scan", "--model", str(path), "--no-trace", "--only", "gguf", "--format", fmt, "-v")
        assert proc.returncode in (0, 1), proc.stderr
        assert_inert(proc.stdout)
        assert_inert(proc.stderr)


def test_watch_streams_of_a_hostile_log(tmp_path: Path) -> None:
    """watch --log: the ndjson stream, the text ticker on stderr and the report on stdout."""
    log = hostile_log(tmp_path)
    for fmt in ("ndjson", "text", "json"):
        proc = doctor("watch", "--log", str(log), "--duration", "0.5", "--format", fmt, "--color", "never", "-v")
        assert proc.returncode in (0, 1), proc.stderr
        assert_inert(proc.stdout)
        assert_inert(proc.stderr)
        if fmt == "ndjson":
            assert [json.loads(line)["kind"] for line in proc.stdout.splitlines()][-1] == "end"


def test_watch_a_command_whose_output_is_hostile(tmp_path: Path) -> None:
    """watch -- CMD copies the command's own output through unchanged (to stderr when stdout carries
    JSON), as the terminal would show it without llm-doctor; what llm-doctor itself writes (the
    report) is inert."""
    log = hostile_log(tmp_path)
    code = f"import sys; sys.stdout.buffer.write(open({str(log)!r}, 'rb').read())"
    proc = doctor("watch", "--format", "json", "--", sys.executable, "-c", code)
    assert proc.returncode == 1, proc.stderr
    assert_inert(proc.stdout)
    assert json.loads(proc.stdout)["assessment"]["id"] == "LD201"
    assert b"\x1b]52" in proc.stderr  # the pass-through is the command's own, byte for byte


def test_a_user_rule_with_hostile_text_in_the_rule_commands(tmp_path: Path) -> None:
    """`rules list`, `rules test` and `explain` print a user's rule titles, names and fixes."""
    import yaml

    rule = {"id": "LD998", "slug": "hostile-text", "class": "context.overflow", "severity": "info",
            "title": "Title " + BAD, "when": {"fact": "config.n_ctx", "gt": 0}, "message": "msg " + BAD,
            "explain": "why " + BAD, "fix": {"text": "fix " + BAD, "llama.cpp": "-c 4096 " + BAD},
            "references": ["https://example.org/" + BAD],
            "tests": [{"name": "case " + BAD, "facts": {"config.n_ctx": 1}, "expect": "ok"}]}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump([rule], allow_unicode=True))
    for args in (["rules", "list", "--rules", str(tmp_path)], ["rules", "test", str(tmp_path)],
                 ["explain", "LD998", "--rules", str(tmp_path)]):
        proc = doctor(*args)
        assert b"LD998" in proc.stdout, (args, proc.stderr)
        assert_inert(proc.stdout)
        assert_inert(proc.stderr)
