"""Ollama's models by the names `ollama run` takes: manifests resolved to the model and projector blobs.

Room: sources (imports core and doctor/sources/models/found.py). Layout read from ollama/ollama's
source: envconfig.Models() (OLLAMA_MODELS, else ~/.ollama/models; the Linux service's user keeps
/usr/share/ollama/.ollama/models), manifest/paths.go (manifests/<host>/<namespace>/<model>/<tag>,
blobs/sha256-<hex>), types/model/name.go (ParseNameBare: the tag after the last ':' past the last '/',
then model, namespace, host; defaults registry.ollama.ai, library, latest; DisplayShortest drops the
default host and namespace), manifest/manifest.go (the JSON: schemaVersion, mediaType, config, layers
of mediaType/digest/size) and server/images.go (application/vnd.ollama.image.model is the GGUF,
.projector the vision projector, .params the Modelfile PARAMETERs as one JSON object). The
PARAMETERs that are scan settings (num_ctx, num_gpu, num_thread, num_batch) come with the model as its
preset; the server reader (server.py) reads the same from /api/show.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doctor.sources.engines.ollama.engine import ENGINE
from doctor.sources.models.found import FoundModel, ModelStore, Preset, Searched, home

NAME = ENGINE.name
DEFAULT_HOST = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"
SERVICE_MODELS = "/usr/share/ollama/.ollama/models"  # the Linux install script's `ollama` user home
MODEL = "application/vnd.ollama.image.model"
PROJECTOR = "application/vnd.ollama.image.projector"
PARAMS = "application/vnd.ollama.image.params"
DIGEST = re.compile(r"^sha256[:-]([0-9a-fA-F]{64})$")
MAX_MANIFEST = 1 << 20


@dataclass(frozen=True)
class Name:
    host: str
    namespace: str
    model: str
    tag: str

    def shortest(self) -> str:
        """As `ollama list` shows it (DisplayShortest)."""
        if self.host.lower() != DEFAULT_HOST:
            return f"{self.host}/{self.namespace}/{self.model}:{self.tag}"
        if self.namespace.lower() != DEFAULT_NAMESPACE:
            return f"{self.namespace}/{self.model}:{self.tag}"
        return f"{self.model}:{self.tag}"

    def parts(self) -> tuple[str, str, str, str]:
        return self.host, self.namespace, self.model, self.tag


PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,79}$")
HOST = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:\-]{0,349}$")


def parse_name(text: str) -> Name | None:
    """Ollama's ParseName: [host/][namespace/]model[:tag], defaults filled; None when not valid."""
    s = text.strip()
    if "@" in s:
        s = s.split("@", 1)[0]
    tag = ""
    if s.rfind(":") > s.rfind("/"):
        s, tag = s.rsplit(":", 1)
    parts = s.split("/")
    if len(parts) > 3 or not all(parts):
        return None
    host, namespace = DEFAULT_HOST, DEFAULT_NAMESPACE
    if len(parts) == 3:
        host, namespace, model = parts
        host = host.split("://", 1)[-1]
    elif len(parts) == 2:
        namespace, model = parts
    else:
        model = parts[0]
    name = Name(host, namespace, model, tag or DEFAULT_TAG)
    if not HOST.match(name.host) or not all(PART.match(p) for p in (name.namespace, name.model, name.tag)):
        return None
    if "." in name.namespace:
        return None
    return name


def models_dirs(env: Mapping[str, str]) -> list[Path]:
    """Where Ollama keeps models: OLLAMA_MODELS when set, else the user's and the service's folders."""
    if env.get("OLLAMA_MODELS"):
        return [Path(env["OLLAMA_MODELS"]).expanduser()]
    return [home(env) / ".ollama" / "models", Path(SERVICE_MODELS)]


def searched(env: Mapping[str, str]) -> list[Searched]:
    return [Searched(NAME, str(d / "manifests"), (d / "manifests").is_dir()) for d in models_dirs(env)]


def blob_path(root: Path, digest: str) -> Path | None:
    m = DIGEST.match(digest or "")
    return root / "blobs" / f"sha256-{m.group(1)}" if m else None


def read_manifest(root: Path, name: Name, path: Path) -> FoundModel | None:
    """The model a manifest file describes, or None when it has no GGUF model layer here."""
    try:
        if path.stat().st_size > MAX_MANIFEST:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, list):
        return None
    model = projector = None
    size = 0
    params: dict[str, Any] = {}
    for layer in layers:
        if not isinstance(layer, dict):
            continue
        blob = blob_path(root, str(layer.get("digest", "")))
        media = layer.get("mediaType")
        if blob is None:
            continue
        if media == MODEL and model is None:
            model = blob
            size = int(layer.get("size") or 0)
        elif media == PROJECTOR and projector is None:
            projector = blob
        elif media == PARAMS:
            params = _params(blob)
    if model is None or not model.is_file():
        return None
    short = name.shortest()
    full = "/".join(name.parts()[:3]) + ":" + name.tag
    return FoundModel(name=short, store=NAME, path=str(model), root=str(root),
                      size=size or model.stat().st_size,
                      mmproj=str(projector) if projector is not None and projector.is_file() else None,
                      params=params, aliases=(full,))


def _params(blob: Path) -> dict[str, Any]:
    try:
        data = json.loads(blob.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def find(text: str, env: Mapping[str, str]) -> FoundModel | None:
    """The model `text` names in Ollama's manifests, or None. Case is ignored where the exact path is
    not there (Ollama's names compare case-insensitively)."""
    name = parse_name(text)
    if name is None:
        return None
    for root in models_dirs(env):
        manifests = root / "manifests"
        exact = manifests.joinpath(*name.parts())
        if exact.is_file():
            return read_manifest(root, name, exact)
        for found_name, path in _walk(manifests):
            if [p.lower() for p in found_name.parts()] == [p.lower() for p in name.parts()]:
                return read_manifest(root, found_name, path)
    return None


def _walk(manifests: Path) -> list[tuple[Name, Path]]:
    """Every manifest file: manifests/*/*/*/* (manifest.Manifests' glob)."""
    out = []
    try:
        for path in sorted(manifests.glob("*/*/*/*")):
            if path.is_file():
                rel = path.relative_to(manifests).parts
                out.append((Name(*rel), path))
    except OSError:
        return []
    return out


def list_models(env: Mapping[str, str]) -> list[FoundModel]:
    out: list[FoundModel] = []
    seen: set[str] = set()
    for root in models_dirs(env):
        if not os.access(root / "manifests", os.R_OK):
            continue
        for name, path in _walk(root / "manifests"):
            found = read_manifest(root, name, path)
            if found is not None and found.path + found.name not in seen:
                seen.add(found.path + found.name)
                out.append(found)
    return out


def ollama_settings(params: Mapping[str, Any], where: str) -> Preset:
    """Modelfile PARAMETERs (or an /api/show answer's) as scan settings: num_ctx, num_gpu (-1 = Ollama
    decides, left to the plan), num_thread, num_batch."""
    out: Preset = {}
    for param, dest in (("num_ctx", "ctx_size"), ("num_gpu", "n_gpu_layers"), ("num_thread", "threads"),
                        ("num_batch", "batch_size")):
        value = params.get(param)
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        if (param == "num_gpu" and value < 0) or (param != "num_gpu" and value <= 0):
            continue
        out[dest] = (value, f"{where}: PARAMETER {param} {value}")
    return out


def preset(found: FoundModel) -> Preset:
    return ollama_settings(found.params, f"the Modelfile of {found.name}")


STORE = ModelStore(NAME, 10, find, list_models, searched, preset)
