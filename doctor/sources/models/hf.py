"""Hugging Face repo ids (`org/repo:Q4_K_M`, `org/repo/file.gguf`) in the Hub cache.

Room: sources (imports core only; huggingface_hub lazily). The Hub cache is read with huggingface_hub's
own scanner (scan_cache_dir: models--org--repo/{refs,snapshots,blobs}); its folder follows
huggingface_hub's constants (HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub,
else ~/.cache/huggingface/hub; HUGGINGFACE_HUB_CACHE is the old spelling). The repo-id spelling and
the Hub layout are shared with the stores that keep it too (llama.cpp's download cache:
doctor/sources/engines/llamacpp/store.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from doctor.sources.models.found import FoundModel, ModelStore, Searched, ggufs, home, pick, projector, repo_entries

NAME = "huggingface"
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


def searched(env: Mapping[str, str]) -> list[Searched]:
    hub = hub_cache(env)
    return [Searched(NAME, str(hub), hub.is_dir())]


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


def hub_repos(cache: Path) -> dict[str, tuple[Path, list[str], dict[str, int]]]:
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


def find_in(store: str, cache: Path, repo_id: str, tag: str | None) -> FoundModel | None:
    """The model `repo_id[:tag]` names in a cache of the Hub's layout, or None."""
    repos = hub_repos(cache)
    hit = next((k for k in repos if k.lower() == repo_id.lower()), None)
    if hit is None:
        return None
    snapshot, names, sizes = repos[hit]
    chosen = pick(names, tag)
    if chosen is None:
        return None
    proj = projector(names, chosen)
    return FoundModel(name=f"{hit}:{tag}" if tag else hit, store=store, path=str(snapshot / chosen),
                      root=str(cache), size=sizes.get(chosen, 0), mmproj=str(snapshot / proj) if proj else None)


def list_in(store: str, cache: Path) -> list[FoundModel]:
    """Every model of a cache of the Hub's layout."""
    out: list[FoundModel] = []
    for repo_id, (snapshot, names, sizes) in sorted(hub_repos(cache).items()):
        out += repo_entries(store, cache, repo_id, snapshot, names, sizes)
    return out


def find(text: str, env: Mapping[str, str]) -> FoundModel | None:
    parsed = split_name(text)
    return find_in(NAME, hub_cache(env), *parsed) if parsed is not None else None


def list_models(env: Mapping[str, str]) -> list[FoundModel]:
    return list_in(NAME, hub_cache(env))


STORE = ModelStore(NAME, 20, find, list_models, searched)
