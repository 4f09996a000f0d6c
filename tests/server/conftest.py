"""The real llama-server and Prometheus for `server` tests: skipped (with the reason) only when the
binary is absent; CI builds llama-server (scripts/build_llama_server.sh) and installs Prometheus."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.harness import llama_server_binary, prometheus_binary


@pytest.fixture(scope="session")
def server_bin() -> Path:
    path = llama_server_binary()
    if path is None:
        pytest.skip("llama-server is not built: run scripts/build_llama_server.sh (CI does)")
    return path


@pytest.fixture(scope="session")
def prometheus_bin() -> Path:
    path = prometheus_binary()
    if path is None:
        pytest.skip("prometheus is not installed: apt-get install prometheus (CI does)")
    return path


@pytest.fixture(scope="session")
def model() -> Path:
    from doctor.sources.models.default import default_model_path

    return default_model_path()
