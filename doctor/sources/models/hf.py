"""Hugging Face repo ids (`org/repo:Q4_K_M`, `org/repo/file.gguf`) in the Hub cache and llama.cpp's cache.

Room: sources (imports core only; huggingface_hub lazily). The Hub cache is read with huggingface_hub's
own scanner (scan_cache_dir: models--org--repo/{refs,snapshots,blobs}); its folder follows
huggingface_hub's constants (HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub,
else ~/.cache/huggingface/hub; HUGGINGFACE_HUB_CACHE is the old spelling). llama.cpp's `-hf` cache,
read from common/common.cpp (fs_get_cache_directory: LLAMA_CACHE, else XDG_CACHE_HOME or ~/.cache,
then llama.cpp/) and common/hf-cache.cpp (newer builds: the Hub layout, in LLAMA_CACHE when set, else
the Hub cache itself), holds in older builds flat files named <org>_<repo>_<file> (the repo and file
joined by '_', every '/' made '_'), beside the answer that chose the file: manifest=<repo>=<tag>.json
(the tag "latest" when none was given; '/' made '_'), whose ggufFile.rfilename and mmprojFile.rfilename
name the model and projector files (common/arg.cpp common_get_hf_file, as vendored by Ollama in 2025).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from doctor.sources.models.found import FoundModel, Searched, ggufs, home, is_projector, pick, projector, repo_entries

PREFIXES = ("https://huggingface.co/", "http://huggingface.co/", "huggingface.co/", "hf.co/")
REPO = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*/[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def hub_cache(env: Mapping[str, str]) -> Path:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(var):
            return Path(env[var]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "huggingface" / "hub"
    return home(env) / ".cache" / "huggingface" / "hub"


def llama_cache(env: Mapping[str, str]) -> Path:
    if env.get("LLAMA_CACHE"):
        return Path(env["LLAMA_CACHE"]).expanduser()
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else home(env) / ".cache"
    return base / "llama.cpp"


def searched(env: Mapping[str, str]) -> list[Searched]:
    hub, llama = hub_cache(env), llama_cache(env)
    return [Searched("huggingface", str(hub), hub.is_dir()), Searched("llama.cpp", str(llama), llama.is_dir())]


def split_name(text: str) -> tuple[str, str | None] | None:
    """(repo id, tag or file) for `org/repo`, `org/repo:tag`, `org/repo/file.gguf`; None otherwise."""
    s = text.strip()
    for prefix in PREFIXES:
        if s.lower().startswith(prefix):
            s = s[len(prefix):]
            break
    tag: str | None = None
    parts = s.split("/")
    if len(parts) > 2 and parts[-1].lower().endswith(".gguf"):
        s, tag = "/".join(parts[:2]), "/".join(parts[2:])
    elif ":" in s:
        s, tag = s.rsplit(":", 1)
    if not REPO.match(s):
        return None
    return s, tag or None


def _hub_repos(cache: Path) -> dict[str, tuple[Path, list[str], dict[str, int]]]:
    """repo id -> (snapshot folder, GGUF files in it (relative), their sizes): the revision `main`
    points at, else the newest one. Read with huggingface_hub.scan_cache_dir."""
    if not cache.is_dir():
        return {}
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.utils import CacheNotFound

    try:
        info = scan_cache_dir(cache)
    except (CacheNotFound, OSError):
        return {}
    out = {}
    for repo in info.repos:
        if repo.repo_type != "model" or not repo.revisions:
            continue
        revisions = sorted(repo.revisions, key=lambda r: ("main" in r.refs, r.last_modified), reverse=True)
        rev = revisions[0]
        files = {f.file_path.relative_to(rev.snapshot_path).as_posix(): f.size_on_disk for f in rev.files}
        names = ggufs(files)
        if names:
            out[repo.repo_id] = (rev.snapshot_path, names, files)
    return out


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


def _caches(env: Mapping[str, str]) -> list[tuple[str, Path]]:
    hub, llama = hub_cache(env), llama_cache(env)
    return [("huggingface", hub)] + ([("llama.cpp", llama)] if llama != hub else [])


def find(text: str, env: Mapping[str, str]) -> FoundModel | None:
    llama = llama_cache(env)
    for path in _flat(llama):  # a flat file by the name `llm-doctor models` lists it under
        if path.name in (text, text + ".gguf"):
            return FoundModel(name=path.name[:-len(".gguf")], store="llama.cpp", path=str(path), root=str(llama),
                              size=path.stat().st_size)
    parsed = split_name(text)
    if parsed is None:
        return None
    repo_id, tag = parsed
    for store, cache in _caches(env):
        repos = _hub_repos(cache)
        hit = next((k for k in repos if k.lower() == repo_id.lower()), None)
        if hit is not None:
            snapshot, names, sizes = repos[hit]
            chosen = pick(names, tag)
            if chosen is not None:
                proj = projector(names, chosen)
                return FoundModel(name=f"{hit}:{tag}" if tag else hit, store=store, path=str(snapshot / chosen),
                                  root=str(cache), size=sizes.get(chosen, 0),
                                  mmproj=str(snapshot / proj) if proj else None)
        if store == "llama.cpp":
            named = _flat_manifest(cache, repo_id, tag)
            if named is not None:
                return FoundModel(name=f"{repo_id}:{tag}" if tag else repo_id, store=store, path=str(named[0]),
                                  root=str(cache), size=named[0].stat().st_size,
                                  mmproj=str(named[1]) if named[1] else None)
            prefix = repo_id.replace("/", "_").lower() + "_"
            files = {p.name[len(prefix):]: p for p in _flat(cache) if p.name.lower().startswith(prefix)}
            chosen = pick(list(files), tag)
            if chosen is not None:
                proj = projector(list(files), chosen)
                return FoundModel(name=f"{repo_id}:{tag}" if tag else repo_id, store=store, path=str(files[chosen]),
                                  root=str(cache), size=files[chosen].stat().st_size,
                                  mmproj=str(files[proj]) if proj else None)
    return None


def list_models(env: Mapping[str, str]) -> list[FoundModel]:
    out: list[FoundModel] = []
    for store, cache in _caches(env):
        for repo_id, (snapshot, names, sizes) in sorted(_hub_repos(cache).items()):
            out += repo_entries(store, cache, repo_id, snapshot, names, sizes)
        if store == "llama.cpp":
            for path in _flat(cache):  # which repo a flat file came from is not kept: no projector here
                if not is_projector(path.name):
                    out.append(FoundModel(name=path.name[:-len(".gguf")], store=store, path=str(path),
                                          root=str(cache), size=path.stat().st_size))
    return out
