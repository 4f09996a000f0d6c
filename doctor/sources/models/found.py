"""What a model store is (ModelStore) and answers: one model found on this machine (FoundModel), and how
a file is picked from a repository's files by the name's tag (a quant such as Q4_K_M, or a file name).

Room: sources (imports core only). The tag rules follow llama.cpp's `-hf org/repo:quant` (common/
download.cpp and common/hf-cache.cpp in the llama.cpp vendored by llama-cpp-python: the tag is matched
against the GGUF file names, case-insensitively; no tag means Q4_K_M, else the first file) and LM
Studio's <publisher>/<repo>/<file>.gguf folders.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_QUANT = "Q4_K_M"  # llama.cpp: `-hf org/repo` without a tag asks for this quant first
QUANT = re.compile(r"(?:^|[-._])((?:I?Q\d(?:_[A-Z0-9]+)*)|BF16|F16|F32|MXFP4(?:_MOE)?)(?=$|[-._])", re.IGNORECASE)
SHARD = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)


@dataclass(frozen=True)
class FoundModel:
    """One model: the name the user knows, the store it is in, its GGUF file and what comes with it."""

    name: str
    store: str  # "ollama", "huggingface", "llama.cpp", "lmstudio", "file"
    path: str  # the GGUF file (the first shard of a split model)
    root: str  # the store's folder it was found under
    size: int = 0  # bytes on disk of the model file(s)
    mmproj: str | None = None  # the vision projector's GGUF, where the store has one
    params: Mapping[str, Any] = field(default_factory=dict)  # Ollama's Modelfile PARAMETERs
    aliases: tuple[str, ...] = ()  # other spellings that name the same model


@dataclass(frozen=True)
class Searched:
    """A store and the folder it was looked for in (for the error that names where it looked)."""

    store: str
    folder: str
    exists: bool


Env = Mapping[str, str]
Preset = dict[str, tuple[Any, str]]  # scan option dest -> (value, why)


def no_preset(found: FoundModel) -> Preset:
    return {}


@dataclass(frozen=True)
class ModelStore:
    """One place models are kept: the stores that are no engine's live in doctor/sources/models/, an
    engine's own in its folder (named by its row's `store`). doctor/sources/models/resolve.py tries
    them in `order`, lowest first (the store with the shortest names first)."""

    name: str  # FoundModel.store and Searched.store of what it finds
    order: int
    find: Callable[[str, Env], FoundModel | None]  # the model a name names here, or None
    list_models: Callable[[Env], list[FoundModel]]  # every model here
    searched: Callable[[Env], list[Searched]]  # the folders it looks in
    preset: Callable[[FoundModel], Preset] = no_preset  # the settings a model of it comes with


def home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home())


def is_projector(name: str) -> bool:
    return "mmproj" in name.lower()


def ggufs(names: Iterable[str]) -> list[str]:
    """The GGUF files among `names` (relative paths), model files first, later shards left out."""
    out = []
    for name in sorted(names):
        if not name.lower().endswith(".gguf"):
            continue
        shard = SHARD.search(name)
        if shard and int(shard.group(1)) != 1:
            continue
        out.append(name)
    return out


def pick(files: list[str], tag: str | None) -> str | None:
    """The model file a tag names among a repository's GGUF files (projectors excluded), or None."""
    models = [f for f in ggufs(files) if not is_projector(f)]
    if not models:
        return None
    if tag is None:
        chosen = pick(files, DEFAULT_QUANT)
        return chosen if chosen is not None else models[0]
    want = tag.lower()
    for f in models:  # a file name, with or without its folder
        if f.lower() == want or Path(f).name.lower() == want or Path(f).name.lower() == want + ".gguf":
            return f
    for f in models:  # a quant: matched as a whole word of the file name (Q4_K_M, not Q4_K_M_L)
        stem = Path(f).name.lower()[:-len(".gguf")]
        if re.search(rf"(^|[-._]){re.escape(want)}($|[-._])", stem):
            return f
    return None


def projector(files: list[str], chosen: str) -> str | None:
    """The projector beside a model file: the first mmproj GGUF in the same folder."""
    folder = str(Path(chosen).parent)
    beside = [f for f in ggufs(files) if is_projector(f) and str(Path(f).parent) == folder]
    return beside[0] if beside else None


def quant_of(file_name: str) -> str | None:
    """The quant a file name carries (the last one: `Llama-3.2-1B-Instruct-Q4_K_M.gguf` -> Q4_K_M)."""
    stem = Path(file_name).name
    stem = stem[:-len(".gguf")] if stem.lower().endswith(".gguf") else stem
    found = QUANT.findall(stem)
    return found[-1].upper() if found else None


def repo_entries(store: str, root: Path, repo_id: str, folder: Path, names: list[str],
                 sizes: Mapping[str, int]) -> list[FoundModel]:
    """One entry per model file of a repository folder: named `repo:QUANT` where the quant names one
    file, else `repo/file.gguf` (both spellings find it)."""
    models = [n for n in names if not is_projector(n)]
    quants = [quant_of(n) for n in models]
    out = []
    for name, quant in zip(models, quants, strict=True):
        by_file = f"{repo_id}/{name}"
        by_quant = f"{repo_id}:{quant}" if quant and quants.count(quant) == 1 else None
        proj = projector(names, name)
        out.append(FoundModel(name=by_quant or by_file, store=store, path=str(folder / name), root=str(root),
                              size=sizes.get(name, 0), mmproj=str(folder / proj) if proj else None,
                              aliases=(by_file,) if by_quant else ()))
    return out
