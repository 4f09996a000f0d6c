"""A model by the name the user knows: a file path, or a name one of the model stores knows (an Ollama
name, a Hugging Face repo id in the Hub cache or llama.cpp's, an LM Studio model); and every model on
this machine, for `llm-doctor models`.

Room: sources (imports core only). The stores: those that are no engine's (hf.py) and the
engines' own, each named by its engine row's `store` (doctor/core/engines.py), tried after a file that
exists in their `order`: Ollama (its names are the shortest: `llama3.2:1b`), the Hub cache, llama.cpp's
cache, LM Studio. Nothing found is a UsageError (exit 2) naming where it looked, with the close names
(difflib) when there are.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path

from doctor.core import engines
from doctor.core.errors import InputError, UsageError
from doctor.sources.models import default, folder, hf
from doctor.sources.models.found import FoundModel, ModelStore, Preset, Searched

NEUTRAL = (hf.STORE, default.STORE)  # the stores that are no engine's


def stores() -> tuple[ModelStore, ...]:
    """Every model store, in the order they are tried."""
    found = [*NEUTRAL, *engines.pieces(ModelStore, lambda e: e.store)]
    return tuple(sorted(found, key=lambda s: s.order))


def searched(env: Mapping[str, str]) -> list[Searched]:
    out: list[Searched] = []
    for store in stores():
        out += store.searched(env)
    return out


def preset(found: FoundModel) -> Preset:
    """The settings the model comes with from its store (an Ollama Modelfile's PARAMETERs), as scan
    option dest -> (value, why)."""
    store = next((s for s in stores() if s.name == found.store), None)
    return store.preset(found) if store is not None else {}


def find_all(env: Mapping[str, str] | None = None) -> list[FoundModel]:
    """Every model in every store on this machine (a store's folder that is not there adds nothing)."""
    env = os.environ if env is None else env
    out: list[FoundModel] = []
    for store in stores():
        out += store.list_models(env)
    return out


def looks_like_path(text: str) -> bool:
    return text.lower().endswith(".gguf") and ("/" not in text or text.startswith(("/", ".", "~")) or
                                                Path(text).expanduser().parent.is_dir())


def resolve(text: str, env: Mapping[str, str] | None = None) -> FoundModel:
    """The model `text` names. A file that exists is taken as it is when it is a GGUF file; a folder
    gives the one model in it (doctor/sources/models/folder.py)."""
    env = os.environ if env is None else env
    path = Path(text).expanduser()
    if path.is_dir():
        return folder.the_model_in(path, text)
    if path.is_file():
        problem = folder.gguf_head_problem(path)
        if problem is not None:
            raise InputError(f"{text}: {problem}")
        return FoundModel(name=path.name, store="file", path=str(path), root=str(path.parent),
                          size=path.stat().st_size)
    if looks_like_path(text):
        raise UsageError(f"{text}: no such model file")
    for store in stores():
        found = store.find(text, env)
        if found is not None:
            return found
    raise UsageError(not_found(text, env))


def not_found(text: str, env: Mapping[str, str]) -> str:
    places = searched(env)
    there = [f"{s.store} ({s.folder})" for s in places if s.exists and s.store != default.NAME]
    kinds = sorted({s.store for s in places if s.store != default.NAME})
    where = ("looked in " + ", ".join(there)) if there else \
        f"no model folder of {', '.join(kinds[:-1])} or {kinds[-1]} here to look in"
    known: list[str] = []
    for model in find_all(env):
        known += [model.name, *model.aliases]
    close = difflib.get_close_matches(text, known, n=3, cutoff=0.6)
    if not close:
        close = difflib.get_close_matches(text.lower(), [k.lower() for k in known], n=3, cutoff=0.6)
    hint = (f"; did you mean {' or '.join(close)}?" if close else
            "; `llm-doctor models` lists what is here" if known else "; give a GGUF file, or a folder of them")
    return f"model {text!r}: no such file or folder, and no model of that name; {where}{hint}"


def resolve_model(path: str | None) -> Path:
    """The model to use: the default (doctor/sources/models/default.py, fetched on first use), or the
    one a path, folder or name gives."""
    if path is None:
        return default.default_model_path()
    return Path(resolve(path).path)
