"""`scan --url`: a running server's model and settings as the plan. Against the real llama-server the
suite builds, and against recorded Ollama / vLLM / SGLang answers (fixtures/servers/, built from their
response types) served over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from doctor.cli import main
from doctor.sources.engines.ollama.server import parse_parameters
from doctor.sources.live.metrics.server_plan import base_url
from tests.models.conftest import Home

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ROOT / "fixtures" / "servers"


@contextmanager
def recorded(answers: dict[tuple[str, str], str]) -> Iterator[str]:
    """A loopback HTTP server answering (method, path) with the given JSON text, 404 otherwise."""
    seen: list[tuple[str, str, bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, method: str) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else b""
            seen.append((method, self.path, body))
            text = answers.get((method, self.path))
            self.send_response(200 if text is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write((text or '{"error":"not found"}').encode())

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _fixture(name: str, model: str, size: int = 0) -> str:
    return (SERVERS / name).read_text().replace("{MODEL}", model).replace("{SIZE}", str(size))


def _scan(capsys: pytest.CaptureFixture[str], url: str, *extra: str) -> dict:
    assert main(["scan", "--url", url, "--format", "json", "--ram", "8G", *extra]) in (0, 1)
    return json.loads(capsys.readouterr().out)


def _value(report: dict, name: str) -> object:
    return report["facts"]["facts"].get(name, {}).get("value")


def test_ollama_ps_and_show_become_the_plan(stores: Home, capsys: pytest.CaptureFixture[str]) -> None:
    stores.ollama("registry.ollama.ai/library/smollm2/135m")
    blob = stores.home / ".ollama" / "models" / "blobs" / f"sha256-{stores.model_sha}"
    size = stores.model.stat().st_size + (300 << 20)
    answers = {("GET", "/api/ps"): _fixture("ollama-ps.json", str(blob), size),
               ("POST", "/api/show"): _fixture("ollama-show.json", str(blob))}
    with recorded(answers) as url:
        report = _scan(capsys, url)
    assert report["engine"] == "ollama"
    assert _value(report, "model.path") == str(blob)  # the loaded model's blob, found through the manifests
    assert _value(report, "config.n_ctx_requested") == 3072 and _value(report, "server.ollama.num_ctx") == 3072
    assert _value(report, "config.n_gpu_layers") == 0  # `ollama ps`: size_vram 0
    assert _value(report, "config.n_threads") == 2  # PARAMETER num_thread 2 (/api/show)
    why = report["facts"]["facts"]["config.n_gpu_layers"]["source"]["text"]
    assert "size_vram 0" in why and "0.00 of" in why
    assert _value(report, "server.ollama.ps_vram_bytes") == 0 and _value(report, "server.ollama.ps_size_bytes") == size
    assert any(n.startswith("`ollama ps` claims 0.00 of") and "estimate puts" in n for n in report["notes"])
    assert any(url in note for note in report["notes"]) and not any(
        i.startswith("trace") for i in report["facts"]["inputs"])


def test_vllm_and_sglang_model_lists(stores: Home, capsys: pytest.CaptureFixture[str]) -> None:
    for name, engine, ctx in (("vllm-models.json", "vllm", 2048), ("sglang-models.json", "sglang", 8192)):
        with recorded({("GET", "/v1/models"): _fixture(name, str(stores.model))}) as url:
            report = _scan(capsys, url + "/v1/models")
        assert report["engine"] == engine and _value(report, "model.path") == str(stores.model)
        assert _value(report, "config.n_ctx_requested") == ctx and _value(report, "config.max_model_len") == ctx


def test_a_server_model_that_is_not_here_and_no_server(stores: Home, capsys: pytest.CaptureFixture[str]) -> None:
    with recorded({("GET", "/v1/models"): _fixture("vllm-models.json", "meta-llama/Llama-3.1-8B-Instruct")}) as url:
        assert main(["scan", "--url", url, "--format", "json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "meta-llama/Llama-3.1-8B-Instruct" in err[0] and "-m" in err[0]
    with recorded({}) as url:
        assert main(["scan", "--url", url, "--format", "json"]) == 2
    assert "no llama-server /props, Ollama /api/ps or /v1/models" in capsys.readouterr().err
    assert main(["scan", "--url", "http://127.0.0.1:9", "--format", "json"]) == 2
    assert "cannot reach the server" in capsys.readouterr().err


def test_urls_and_parameters() -> None:
    assert base_url("localhost:8080/metrics") == "http://localhost:8080"
    assert base_url("http://h:11434/api/ps") == "http://h:11434"
    params = parse_parameters('num_ctx                        3072\nstop                           "<|im_end|>"\n'
                              'stop                           "<|endoftext|>"\ntemperature                    0.2')
    assert params == {"num_ctx": 3072, "stop": ["<|im_end|>", "<|endoftext|>"], "temperature": 0.2}


@pytest.mark.server
def test_the_real_llama_server_gives_its_settings_as_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) \
        -> None:
    from doctor.sources.models.default import default_model_path
    from tests.server.harness import llama_server, llama_server_binary

    binary = llama_server_binary()
    if binary is None:
        pytest.skip("llama-server is not built: run scripts/build_llama_server.sh (CI does)")
    model = default_model_path()
    with llama_server(binary, model, tmp_path / "server.log", "-c", "2048", "-np", "2") as server:
        report = _scan(capsys, server.base + "/metrics")
    assert report["engine"] == "llama.cpp"
    assert _value(report, "model.path") == str(model)
    assert _value(report, "config.n_parallel") == 2 and _value(report, "config.n_ctx_seq") == 1024
    assert _value(report, "config.n_ctx_requested") == 2048
    assert "total_slots = 2" in report["facts"]["facts"]["config.n_parallel"]["source"]["text"]
    assert any("llama-server build" in note for note in report["notes"])
