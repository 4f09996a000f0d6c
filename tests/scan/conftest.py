"""Scan test helpers: the fixture model builder and recorded machines (the default model: tests/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GGUF_DIR = ROOT / "fixtures" / "gguf"
MACHINES = ROOT / "fixtures" / "machines"
sys.path.insert(0, str(GGUF_DIR))

from make_gguf import build_gguf, load_spec  # noqa: E402


@pytest.fixture(scope="session")
def model_files(tmp_path_factory: pytest.TempPathFactory):
    """model_files(spec_name) -> a sparse GGUF built from fixtures/gguf/<spec_name>.json (cached)."""
    folder = tmp_path_factory.mktemp("gguf")
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = build_gguf(load_spec(name), folder / f"{name}.gguf")
        return built[name]

    return get


__all__ = ["GGUF_DIR", "MACHINES", "ROOT", "build_gguf", "load_spec"]
