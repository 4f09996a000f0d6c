"""llama.cpp's download cache (`llama-server -hf org/repo:quant`): its models by repo id or file name.

Room: sources (imports core and the Hub spelling of doctor/sources/models/hf.py). Read from llama.cpp's
common/common.cpp (fs_get_cache_directory: LLAMA_CACHE, else XDG_CACHE_HOME or ~/.cache, then
llama.cpp/) and common/hf-cache.cpp (newer builds: the Hub layout, in LLAMA_CACHE when set, else the Hub
cache itself, which the huggingface store reads). Older builds keep flat files named <org>_<repo>_<file>
(the repo and file joined by '_', every '/' made '_'), beside the answer that chose the file:
manifest=<repo>=<tag>.json (the tag "latest" when none was given; '/' made '_'), whose
ggufFile.rfilename and mmprojFile.rfilename name the model and projector files (common/arg.cpp
common_get_hf_file, as vendored by Ollama in 2025).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from doctor.sources.engines.llamacpp.engine import ENGINE
from doctor.sources.models.found import FoundModel, ModelStore, Searched, home, is_projector, pick, projector
from doctor.sources.models.hf import find_in, hub_cache, list_in, split_name

NAME = ENGINE.name


def llama_cache(env: Mapping[str, str]) -> Path:
    if env.get("LLAMA_CACHE"):
        return Path(env["LLAMA_CACHE"]).expanduser()
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else home(env) / ".cache"
    return base / "llama.cpp"


def searched(env: Mapping[str, str]) -> list[Searched]:
    llama = llama_cache(env)
    return [Searched(NAME, str(llama), llama.is_dir())]


def _own(env: Mapping[str, str]) -> Path | None:
    """The cache, unless it is the Hub cache itself (then the huggingface store reads it)."""
    llama = llama_cache(env)
    return llama if llama != hub_cache(env) else None


def _flat(cache: Path) -> list[Path]:
    """Older llama.cpp: <org>_<repo>_<file>.gguf right in its cache folder."""
    try:
        return sorted(p for p in cache.iterdir() if p.is_file() and p.name.lower().endswith(".gguf"))
    except OSError:
        return []


def _flat_manifest(cache: Path, repo_id: str, tag: str | None) -> tuple[Path, Path | None] | None:
    """(model file, projector file) an older llama.cpp's cached manifest names for `repo:tag`, when both
    the manifest and the model file are there."""
    name = f"manifest={repo_id}={tag or 'latest'}.json".replace("/", "_")
    try:
        data = json.loads((cache / name).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    files = []
    for key in ("ggufFile", "mmprojFile"):
        entry = data.get(key) if isinstance(data, dict) else None
        rfilename = entry.get("rfilename") if isinstance(entry, dict) else None
        files.append(cache / f"{repo_id}_{rfilename}".replace("/", "_") if isinstance(rfilename, str) else None)
    model, proj = files
    if model is None or not model.is_file():
        return None
    return model, proj if proj is not None and proj.is_file() else None


def find(text: str, env: Mapping[str, str]) -> FoundModel | None:
    llama = llama_cache(env)
    for path in _flat(llama):  # a flat file by the name `llm-doctor models` lists it under
        if path.name in (text, text + ".gguf"):
            return FoundModel(name=path.name[:-len(".gguf")], store=NAME, path=str(path), root=str(llama),
                              size=path.stat().st_size)
    parsed, cache = split_name(text), _own(env)
    if parsed is None or cache is None:
        return None
    repo_id, tag = parsed
    found = find_in(NAME, cache, repo_id, tag)
    if found is not None:
        return found
    named = _flat_manifest(cache, repo_id, tag)
    if named is not None:
        return FoundModel(name=f"{repo_id}:{tag}" if tag else repo_id, store=NAME, path=str(named[0]),
                          root=str(cache), size=named[0].stat().st_size, mmproj=str(named[1]) if named[1] else None)
    prefix = repo_id.replace("/", "_").lower() + "_"
    files = {p.name[len(prefix):]: p for p in _flat(cache) if p.name.lower().startswith(prefix)}
    chosen = pick(list(files), tag)
    if chosen is None:
        return None
    proj = projector(list(files), chosen)
    return FoundModel(name=f"{repo_id}:{tag}" if tag else repo_id, store=NAME, path=str(files[chosen]),
                      root=str(cache), size=files[chosen].stat().st_size, mmproj=str(files[proj]) if proj else None)


def list_models(env: Mapping[str, str]) -> list[FoundModel]:
    cache = _own(env)
    if cache is None:
        return []
    out = list_in(NAME, cache)
    for path in _flat(cache):  # which repo a flat file came from is not kept: no projector here
        if not is_projector(path.name):
            out.append(FoundModel(name=path.name[:-len(".gguf")], store=NAME, path=str(path), root=str(cache),
                                  size=path.stat().st_size))
    return out


STORE = ModelStore(NAME, 30, find, list_models, searched)
