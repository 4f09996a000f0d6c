"""A model by the name the user knows: a file path, an Ollama name, a Hugging Face repo id (the Hub
cache or llama.cpp's), or an LM Studio model; and every model on this machine, for `llm-doctor models`.

Room: sources (imports core only). The stores are tried in this order: a file that exists, Ollama
(its names are the shortest: `llama3.2:1b`), the Hub cache, llama.cpp's cache, LM Studio. Nothing
found is a UsageError (exit 2) naming where it looked, with the close names (difflib) when there are.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from doctor.core.errors import UsageError
from doctor.sources.models import hf, lmstudio, ollama
from doctor.sources.models.found import FoundModel, Searched

FINDERS: tuple[Callable[[str, Mapping[str, str]], FoundModel | None], ...] = (ollama.find, hf.find, lmstudio.find)
LISTERS: tuple[Callable[[Mapping[str, str]], list[FoundModel]], ...] = (ollama.list_models, hf.list_models,
                                                                          lmstudio.list_models)


def searched(env: Mapping[str, str]) -> list[Searched]:
    return ollama.searched(env) + hf.searched(env) + lmstudio.searched(env)


def find_all(env: Mapping[str, str] | None = None) -> list[FoundModel]:
    """Every model in every store on this machine (a store's folder that is not there adds nothing)."""
    env = os.environ if env is None else env
    out: list[FoundModel] = []
    for lister in LISTERS:
        out += lister(env)
    return out


def looks_like_path(text: str) -> bool:
    return text.lower().endswith(".gguf") and ("/" not in text or text.startswith(("/", ".", "~")) or
                                                Path(text).expanduser().parent.is_dir())


def resolve(text: str, env: Mapping[str, str] | None = None) -> FoundModel:
    """The model `text` names. A path that exists is taken as it is (a folder is an error)."""
    env = os.environ if env is None else env
    path = Path(text).expanduser()
    if path.is_dir():
        raise UsageError(f"{text} is a directory; give a .gguf file or a model name")
    if path.is_file():
        return FoundModel(name=path.name, store="file", path=str(path), root=str(path.parent),
                          size=path.stat().st_size)
    if looks_like_path(text):
        raise UsageError(f"{text}: no such model file")
    for finder in FINDERS:
        found = finder(text, env)
        if found is not None:
            return found
    raise UsageError(not_found(text, env))


def not_found(text: str, env: Mapping[str, str]) -> str:
    places = searched(env)
    there = [f"{s.store} {s.folder}" for s in places if s.exists]
    absent = sorted({s.store for s in places if not s.exists} - {s.store for s in places if s.exists})
    where = "; ".join(there) if there else "no model store here"
    where += f" (no {', '.join(absent)} folder)" if absent else ""
    known: list[str] = []
    for model in find_all(env):
        known += [model.name, *model.aliases]
    close = difflib.get_close_matches(text, known, n=3, cutoff=0.6)
    if not close:
        close = difflib.get_close_matches(text.lower(), [k.lower() for k in known], n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else ("; `llm-doctor models` lists what is here"
                                                                   if known else "")
    return f"model {text!r}: no such file and no model of that name (looked in {where}){hint}"
