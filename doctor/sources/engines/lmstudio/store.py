"""LM Studio's models folder: <publisher>/<repo>/<file>.gguf, named `publisher/repo[:quant]` or by file.

Room: sources (imports core only). Read from lmstudio-ai/lms (src/lmstudioPaths.ts: the models folder
is <LM Studio home>/models; src/subcommands/importCmd.ts: settings.json's `downloadsFolder` in the
home overrides it, and an imported file goes to <folder>/<user>/<repo>/<file>). The home is
~/.lmstudio (a `~/.lmstudio-home-pointer` file names another); releases before 0.3 kept the models
in ~/.cache/lm-studio/models.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from doctor.sources.engines.lmstudio.engine import ENGINE
from doctor.sources.models.found import FoundModel, ModelStore, Searched, ggufs, home, pick, projector, repo_entries
from doctor.sources.models.hf import split_name

NAME = ENGINE.name


def lmstudio_home(env: Mapping[str, str]) -> Path:
    pointer = home(env) / ".lmstudio-home-pointer"
    try:
        named = pointer.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        named = ""
    return Path(named) if named else home(env) / ".lmstudio"


def models_dirs(env: Mapping[str, str]) -> list[Path]:
    lm_home = lmstudio_home(env)
    dirs = []
    try:
        settings = json.loads((lm_home / "settings.json").read_text(encoding="utf-8"))
        folder = settings.get("downloadsFolder") if isinstance(settings, dict) else None
        if isinstance(folder, str) and folder:
            dirs.append(Path(folder).expanduser())
    except (OSError, ValueError, UnicodeDecodeError):
        pass
    for d in (lm_home / "models", home(env) / ".cache" / "lm-studio" / "models"):
        if d not in dirs:
            dirs.append(d)
    return dirs


def searched(env: Mapping[str, str]) -> list[Searched]:
    return [Searched(NAME, str(d), d.is_dir()) for d in models_dirs(env)]


def _repos(root: Path) -> dict[str, tuple[Path, list[str]]]:
    """publisher/repo -> (its folder, the GGUF files in it)."""
    out = {}
    try:
        for folder in sorted(root.glob("*/*")):
            if folder.is_dir():
                names = ggufs(p.relative_to(folder).as_posix() for p in folder.rglob("*.gguf") if p.is_file())
                if names:
                    out[f"{folder.parent.name}/{folder.name}"] = (folder, names)
    except OSError:
        return {}
    return out


def find(text: str, env: Mapping[str, str]) -> FoundModel | None:
    parsed = split_name(text)
    if parsed is None:
        return None
    repo_id, tag = parsed
    for root in models_dirs(env):
        repos = _repos(root)
        hit = next((k for k in repos if k.lower() == repo_id.lower()), None)
        if hit is None:
            continue
        folder, names = repos[hit]
        chosen = pick(names, tag)
        if chosen is not None:
            proj = projector(names, chosen)
            return FoundModel(name=f"{hit}:{tag}" if tag else hit, store=NAME, path=str(folder / chosen),
                              root=str(root), size=(folder / chosen).stat().st_size,
                              mmproj=str(folder / proj) if proj else None)
    return None


def list_models(env: Mapping[str, str]) -> list[FoundModel]:
    out = []
    for root in models_dirs(env):
        for repo_id, (folder, names) in _repos(root).items():
            sizes = {n: (folder / n).stat().st_size for n in names}
            out += repo_entries(NAME, root, repo_id, folder, names, sizes)
    return out


STORE = ModelStore(NAME, 40, find, list_models, searched)
