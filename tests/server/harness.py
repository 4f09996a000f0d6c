"""Start a real llama-server (built by scripts/build_llama_server.sh) and a real Prometheus on
127.0.0.1, and drive them with bounded requests. Used by the `server` tests and by
fixtures/record_llama_server.py.

Every wait is bounded in time, every load in count; servers listen on loopback only, on a free port.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import host_has_amx

HOST = "127.0.0.1"
START_TIMEOUT_S = 90.0
REQUEST_TIMEOUT_S = 120.0


def llama_server_binary() -> Path | None:
    """$LLAMA_SERVER_BIN, else the cached build for the installed llama-cpp-python's version."""
    env = os.environ.get("LLAMA_SERVER_BIN")
    if env:
        return Path(env) if Path(env).is_file() else None
    try:
        version = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        version = "0.3.36"
    cache = Path(os.environ.get("LLM_DOCTOR_CACHE", Path.home() / ".cache" / "llm-doctor"))
    path = cache / f"llama-server-{version}" / "bin" / "llama-server"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def prometheus_binary() -> Path | None:
    found = shutil.which("prometheus")
    return Path(found) if found else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def http_json(url: str, body: dict | None = None, timeout_s: float = REQUEST_TIMEOUT_S) -> tuple[int, dict]:
    """GET (or POST `body`) and the decoded JSON answer; HTTP errors are returned, not raised."""
    assert url.startswith(f"http://{HOST}:"), url  # loopback only
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, json.loads(response.read(8 << 20) or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read(1 << 20) or b"{}")
        except ValueError:
            return exc.code, {}


def http_text(url: str, timeout_s: float = 10.0) -> str:
    assert url.startswith(f"http://{HOST}:"), url
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return response.read(8 << 20).decode("utf-8", "replace")


@dataclass
class LlamaServer:
    """A running llama-server; its combined stdout+stderr goes to `log`."""

    port: int
    log: Path | None = None
    process: subprocess.Popen[bytes] | None = None  # None: started by someone else (watch -- llama-server)
    argv: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://{HOST}:{self.port}"

    def complete(self, prompt: str, n_predict: int, **extra: object) -> tuple[int, dict]:
        """One chat completion (the model's chat template applies), greedy, at most `n_predict` tokens."""
        body: dict[str, object] = {"messages": [{"role": "user", "content": prompt}], "max_tokens": n_predict,
                                   "temperature": 0, "seed": 1, "cache_prompt": False}
        body.update(extra)
        return http_json(f"{self.base}/v1/chat/completions", body)

    def metrics(self) -> str:
        return http_text(f"{self.base}/metrics")

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)


def server_argv(binary: Path, model: Path, port: int, *extra: str) -> list[str]:
    # on a Xeon with AMX this llama.cpp's AMX weight-repacking kernel kills llama-server (SIGILL,
    # rules/LD9-model-engine.yaml LD951): there the servers run with its documented switch, -nr
    no_repack = ["-nr"] if host_has_amx() else []
    return [str(binary), "-m", str(model), "--host", HOST, "--port", str(port), "--metrics", "--slots",
            "-t", "1", "-tb", "1", "--no-webui", *no_repack, *extra]


def wait_healthy(base: str, process: subprocess.Popen[bytes] | None, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"llama-server exited with {process.returncode} before it was ready")
        try:
            status, _ = http_json(f"{base}/health", timeout_s=2.0)
            if status == 200:
                return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{base} not healthy after {timeout_s:.0f} s")


@contextlib.contextmanager
def llama_server(binary: Path, model: Path, log: Path, *extra: str) -> Iterator[LlamaServer]:
    port = free_port()
    argv = server_argv(binary, model, port, *extra)
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    server = LlamaServer(port, log, process, argv)
    try:
        wait_healthy(server.base, process)
        yield server
    finally:
        server.stop()


def stop_process(process: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout_s)


@dataclass
class Load:
    """A bounded load: `requests` completions from `concurrency` threads; results kept."""

    results: list[tuple[int, dict]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def join(self, timeout_s: float = 300.0) -> None:
        deadline = time.monotonic() + timeout_s
        for t in self.threads:
            t.join(max(0.1, deadline - time.monotonic()))


def start_load(server: LlamaServer, prompts: list[str], n_predict: int, concurrency: int, **extra: object) -> Load:
    """Send every prompt once, `concurrency` at a time, in background threads."""
    load = Load()
    lock = threading.Lock()
    queue = list(prompts)

    def worker() -> None:
        while True:
            with lock:
                if not queue:
                    return
                prompt = queue.pop(0)
            try:
                result = server.complete(prompt, n_predict, **extra)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                with lock:
                    load.errors.append(str(exc))
                continue
            with lock:
                load.results.append(result)

    for _ in range(concurrency):
        t = threading.Thread(target=worker, daemon=True)
        t.start()
        load.threads.append(t)
    return load


@dataclass
class Prometheus:
    port: int
    process: subprocess.Popen[bytes]
    workdir: Path

    @property
    def base(self) -> str:
        return f"http://{HOST}:{self.port}"

    def stop(self) -> None:
        stop_process(self.process)


def prometheus_config(targets: dict[str, list[str]], interval_s: int = 1) -> str:
    """A scrape config: one job per key, its targets host:port; short interval for a short test."""
    lines = ["global:", f"  scrape_interval: {interval_s}s", f"  scrape_timeout: {interval_s}s",
             f"  evaluation_interval: {interval_s}s", "scrape_configs:"]
    for job, addrs in targets.items():
        lines += [f"  - job_name: {json.dumps(job)}", "    static_configs:",
                  f"      - targets: {json.dumps(addrs)}"]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def prometheus(binary: Path, workdir: Path, targets: dict[str, list[str]], interval_s: int = 1) -> Iterator[Prometheus]:
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(prometheus_config(targets, interval_s))
    port = free_port()
    argv = [str(binary), f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address={HOST}:{port}", "--log.level=warn",
            f"--web.console.templates={workdir}", f"--web.console.libraries={workdir}"]
    with open(workdir / "prometheus.log", "wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    prom = Prometheus(port, process, workdir)
    try:
        deadline = time.monotonic() + 60.0
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {process.returncode}: "
                                   f"{(workdir / 'prometheus.log').read_text()[-2000:]}")
            try:
                if http_text(f"{prom.base}/-/ready", timeout_s=2.0):
                    break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("prometheus not ready after 60 s")
            time.sleep(0.2)
        yield prom
    finally:
        prom.stop()


def wait_scraped(prom: Prometheus, instances: list[str], timeout_s: float = 30.0) -> None:
    """Until every instance has `up == 1` in Prometheus."""
    deadline = time.monotonic() + timeout_s
    want = set(instances)
    while time.monotonic() < deadline:
        status, data = http_json(f"{prom.base}/api/v1/query?query=up", timeout_s=5.0)
        if status == 200:
            up = {r["metric"].get("instance") for r in data.get("data", {}).get("result", [])
                  if r.get("value", [0, "0"])[1] == "1"}
            if want <= up:
                return
        time.sleep(0.5)
    raise TimeoutError(f"Prometheus did not scrape {sorted(want)} within {timeout_s:.0f} s")
