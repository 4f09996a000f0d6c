"""--redact keeps its promise in every view (issue 37, item 4): the host names a log's prefixes carry
(journald, docker compose, kubectl), host names given as settings or in URLs, user names (home
folders), the prompt a request log quotes and API keys are gone from the JSON document - facts and
their sources included - and from Markdown, text, the TUI's log pane and its exports.

The logs are the repo's real fixtures, with the prefixes the tools write put in front of their lines
(`docker compose logs`: `NAME  | `, `kubectl logs --prefix`: `[pod/NAME/CONTAINER] `) and personal
values put where the engines print them (Ollama's server config, vLLM's `args: Namespace(...)`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from doctor.core.paste import PASTE_MAX
from doctor.core.redact import Redactor

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "fixtures" / "logs"


def _journald(tmp: Path) -> Path:
    """Ollama under systemd (journald's `Mon DD HH:MM:SS HOST ollama[PID]:`), its models in a home folder."""
    text = (LOGS / "ollama/healthy-v0.5.7-journald.log").read_text(encoding="utf-8")
    path = tmp / "journald.log"
    path.write_text(text.replace("/usr/share/ollama", "/home/ana"), encoding="utf-8")
    return path


def _compose(tmp: Path, filler: int = 0) -> Path:
    """vLLM under docker compose: every line behind `vllm-1  | `, a host name in its args, a prompt quoted."""
    lines = (LOGS / "vllm/request-max-tokens-over-v0.8.5.log").read_text(encoding="utf-8").splitlines()
    lines = [line.replace("host=None", "host='llm.lab.acme.net'") for line in lines] + _health(filler)
    text = "\n".join("vllm-1  | " + line for line in lines)
    path = tmp / "compose.log"
    path.write_text(text + "\n", encoding="utf-8")
    return path


def _kubectl(tmp: Path, filler: int = 0) -> Path:
    lines = (LOGS / "tgi/healthy-v2.0.log").read_text(encoding="utf-8").splitlines()
    path = tmp / "kubectl.log"
    path.write_text("".join(f"[pod/tgi-7d9c6b5f4-x2x9k/tgi] {line}\n" for line in [*lines, *_health(filler)]),
                    encoding="utf-8")
    return path


def _health(count: int) -> list[str]:
    """A server's health checks, as uvicorn's access log writes them (`%s - "%s %s HTTP/%s" %d`): what fills
    a container's log between requests."""
    return [f'INFO:     10.0.0.{i % 250 + 1}:{40000 + i % 20000} - "GET /health HTTP/1.1" 200 OK' for i in range(count)]


# A pasted log (at most doctor/core/paste.py PASTE_MAX) loses the tools' prefixes before it is read, so
# nothing of them reaches a report; a container's log of a long-running server is read as it is, prefixes
# and all: these are that large (health checks after the real lines).
FILLER = PASTE_MAX // 60 + 1000


# each case: the log, and what must be in the plain report and never in the redacted one
CASES = {
    "journald": (_journald, ("gpu-box", "/home/ana", "ana")),
    "compose": (_compose, ("llm.lab.acme.net",)),  # pasted: the prefixes are gone, the prompt read as lines
    "compose-server": (lambda tmp: _compose(tmp, FILLER),
                       ("vllm-1", "llm.lab.acme.net", "Cutting Knowledge Date", "Today Date: 07 May")),
    "kubectl-server": (lambda tmp: _kubectl(tmp, FILLER), ("tgi-7d9c6b5f4-x2x9k",)),
}


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "NO_COLOR": "1"}, check=False, timeout=300)


def strings(doc: Any) -> list[str]:
    if isinstance(doc, dict):
        return [s for k, v in doc.items() for s in (k, *strings(v))]
    if isinstance(doc, list):
        return [s for v in doc for s in strings(v)]
    return [doc] if isinstance(doc, str) else []


def word_in(secret: str, text: str) -> bool:
    """A name as a word (`ana`, not `banana`); a phrase anywhere."""
    import re

    if " " in secret:
        return secret in text
    return re.search(r"(?<![\w-])" + re.escape(secret) + r"(?![\w-])", text) is not None


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_json_document_holds_no_host_user_or_prompt(case: str, tmp_path: Path) -> None:
    make, secrets = CASES[case]
    log = make(tmp_path)
    plain = doctor("analyze", str(log), "--format", "json")
    red = doctor("analyze", str(log), "--format", "json", "--redact")
    for secret in secrets:
        assert word_in(secret, plain.stdout), f"the fixture no longer shows {secret!r}: nothing to redact"
    doc = json.loads(red.stdout)
    every = "\n".join(strings(doc))
    leaks = [s for s in secrets if word_in(s, every) or word_in(s, red.stdout)]
    assert not leaks, leaks
    # the facts' sources are part of the document: the prompt's line is still there, its text is not
    sources = [f["source"].get("text") or "" for f in doc["facts"]["facts"].values()]
    assert not any(word_in(s, t) for s in secrets for t in sources)
    # the diagnosis stays
    a = json.loads(plain.stdout)
    assert [f["id"] for f in a["findings"]] == [f["id"] for f in doc["findings"]]
    assert red.returncode == plain.returncode


@pytest.mark.parametrize("fmt", ["markdown", "text"])
def test_markdown_and_text_hold_none_of_it_either(fmt: str, tmp_path: Path) -> None:
    for case in ("compose", "journald"):
        make, secrets = CASES[case]
        log = make(tmp_path)
        out = doctor("analyze", str(log), "--format", fmt, "-v", "--redact").stdout
        assert out.strip() and not [s for s in secrets if word_in(s, out)]


def test_the_shapes_logs_and_tools_write() -> None:
    r = Redactor()
    red = r.text
    assert red("Jan 16 04:28:11 gpu-box ollama[1532]: listening") == "Jan 16 04:28:11 <host> ollama[1532]: listening"
    assert red("2025-01-16T04:28:11+0000 gpu-box ollama[1532]: x") == "2025-01-16T04:28:11+0000 <host> ollama[1532]: x"
    assert red("<34>1 2003-10-11T22:14:15.003Z box.lan.acme.org su - ID47 - m") == \
        "<34>1 2003-10-11T22:14:15.003Z <host> su - ID47 - m"
    assert red("ana@gpu-box:~/llama.cpp$ ./llama-server -m m.gguf") == \
        "<user>@<host>:~/llama.cpp$ ./llama-server -m m.gguf"
    assert red("[pod/vllm-7d8f9-abc12/vllm] INFO ok") == "[pod/<pod>] INFO ok"
    assert red("curl http://bob:hunter2@llm.corp.acme.com:8000/v1") == "curl http://<credentials>@<host>:8000/v1"
    # the names seen in a prefix go wherever else they appear
    assert "gpu-box" not in red("then it connected to gpu-box:11434")
    secrets = ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789 --api-key sk-abc123def456ghi789jkl000 "
               "Authorization: Bearer abcdefgh12345 api_key='zzzyyyxxx1' ghp_abcdefghijklmnopqrstuvwxyz0123456789")
    out = red(secrets)
    for secret in ("hf_abc", "sk-abc", "abcdefgh12345", "zzzyyyxxx1", "ghp_"):
        assert secret not in out, secret
    assert red('msg="chat request" images=0 prompt="<|user|>my plan<|end|>"') == \
        'msg="chat request" images=0 prompt="<22 characters of prompt or output removed>"'
    assert red("prompt_token_ids: [128000, 9125, 271]") == "prompt_token_ids: [<token ids removed>]"
    # what is not personal stays: levels, settings that are counts, public hosts, placeholders
    for keep in ("2024-05-01 12:00:00 INFO worker: started", "INFO     | ready", "max_tokens=128 n_tokens: 4096",
                 "token: 1234", "https://huggingface.co/bartowski/x-GGUF", "curl http://HOST:PORT/metrics",
                 "prompt: None, params: SamplingParams(n=1)", "host=None"):
        assert red(keep) == keep, keep
    # redacting twice changes nothing (the TUI's log pane redacts lines the report already redacted)
    once = red('vllm-1  | prompt: \'hello there\', host=\'llm.lab.acme.net\'')
    assert red(once) == once


def test_the_tui_log_pane_and_export_are_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """analyze --redact on a terminal: the log pane shows redacted lines and `e` `j` writes a redacted file."""
    from doctor import cli
    from doctor.views.tui.app import DoctorApp
    from doctor.views.tui.log_view import LogView

    make, secrets = CASES["compose"]
    log = make(tmp_path)
    monkeypatch.chdir(tmp_path)
    shown: list[str] = []
    original = DoctorApp.run

    async def pilot(p: Any) -> None:
        app = p.app
        for _ in range(400):
            await p.pause()
            views = app.screen.query(LogView)
            if views and views.first().window:
                break
        shown.extend(line.text for line in app.screen.query_one(LogView).window)
        await p.press("e")
        await p.pause()
        await p.press("j")
        await p.pause()
        await p.press("q")

    def run_headless(self: DoctorApp, **kwargs: Any) -> Any:
        return original(self, headless=True, size=(140, 40), auto_pilot=pilot)

    monkeypatch.setattr(DoctorApp, "run", run_headless)
    code = cli.main(["analyze", str(log), "--tui", "--redact"])
    assert code in (0, 1)
    assert shown and any("<container>" in line for line in shown)
    assert not [s for s in secrets for line in shown if word_in(s, line)]
    exported = list(tmp_path.glob("llm-doctor-analyze-*.json"))
    assert len(exported) == 1
    text = exported[0].read_text(encoding="utf-8")
    assert not [s for s in secrets if word_in(s, text)]
