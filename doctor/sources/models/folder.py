"""A folder of GGUF files the user keeps themselves (`~/models`): `llm-doctor models DIR…` lists them,
`scan -m DIR` and `watch -m DIR` take the one model in it (and say which there are when there are several).

Room: sources (imports core only). What a GGUF file is: its first four bytes are `GGUF` (ggml's
gguf.c, GGUF_MAGIC); a split model is listed once, by its first shard (llama.cpp's
`-00001-of-0000N.gguf` names, see found.py), its size the sum of its shards; a projector (mmproj) is
no model of its own but goes with the model beside it.
"""

from __future__ import annotations

import os
from pathlib import Path

from doctor.core.errors import UsageError
from doctor.sources.models.found import SHARD, FoundModel, ggufs, is_projector, projector

STORE = "folder"
GGUF_MAGIC = b"GGUF"
MAX_DEPTH = 4  # folders below the one given that are looked into (org/repo/quant/file.gguf)
MAX_FILES = 20000  # names read at most, so a folder such as / cannot keep the command busy
SHOWN = 6  # model names an error lists before "…"


def gguf_head_problem(path: Path) -> str | None:
    """Why a file is not a GGUF file (None when it starts as one, or is a GGUF cut short: the scan
    reports that as a corrupt model)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(GGUF_MAGIC))
    except OSError as exc:
        return f"cannot read ({exc.strerror or exc})"
    if GGUF_MAGIC.startswith(head):
        return None
    shown = head.decode("ascii", "replace") if head.isascii() and head.decode("ascii").isprintable() else head.hex()
    return f"not a GGUF file (a GGUF file starts with the bytes GGUF; this one with {shown!r})"


def models_in(folder: Path) -> list[FoundModel]:
    """Every model file under `folder` (MAX_DEPTH levels down), named by its path relative to it."""
    names: list[str] = []
    seen = 0
    root = folder.expanduser()
    for current, dirs, files in os.walk(root, followlinks=True):
        depth = len(Path(current).relative_to(root).parts)
        if depth >= MAX_DEPTH:
            dirs[:] = []
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        rel = Path(current).relative_to(root)
        for name in files:
            seen += 1
            if name.lower().endswith(".gguf"):
                names.append((rel / name).as_posix())
        if seen > MAX_FILES:
            break
    all_ggufs = ggufs(names)
    out = []
    for name in all_ggufs:
        if is_projector(name):
            continue
        path = root / name
        proj = projector(all_ggufs, name)
        out.append(FoundModel(name=name, store=STORE, path=str(path), root=str(root), size=_size(path),
                              mmproj=str(root / proj) if proj else None))
    return out


def _size(path: Path) -> int:
    shard = SHARD.search(path.name)
    try:
        if shard is None:
            return path.stat().st_size
        stem = path.name[:shard.start()]
        return sum(p.stat().st_size for p in path.parent.glob(f"{stem}-*-of-{shard.group(2)}.gguf"))
    except OSError:
        return 0


def the_model_in(folder: Path, text: str) -> FoundModel:
    """The one model a folder holds; a UsageError naming them (or saying there is none) otherwise."""
    found = models_in(folder)
    if len(found) == 1:
        return found[0]
    if not found:
        raise UsageError(f"{text}: no GGUF file in this folder (nor {MAX_DEPTH} folders down)")
    names = ", ".join(m.name for m in found[:SHOWN]) + (", …" if len(found) > SHOWN else "")
    raise UsageError(f"{text}: {len(found)} GGUF models in this folder ({names}); give one with -m "
                     f"{os.path.join(text, found[0].name)}, or compare them: llm-doctor models {text}")
