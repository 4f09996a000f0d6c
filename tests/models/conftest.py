"""Model stores made in a temporary home the way their tools make them, with the default SmolLM2 as the
model file (hard-linked where the file system allows, so no copy of 98 MB per test).

- Ollama (ollama/ollama: manifest/layer.go NewLayer names a blob blobs/sha256-<hex of its bytes>;
  manifest/manifest.go WriteManifest writes {schemaVersion 2, the docker v2 media type, config,
  layers} to manifests/<host>/<namespace>/<model>/<tag>; server/create.go setParameters writes the
  PARAMETERs as one JSON object in an application/vnd.ollama.image.params layer).
- The Hugging Face Hub cache (huggingface_hub's layout: models--<org>--<repo>/blobs/<etag>,
  snapshots/<commit>/<file> a relative symlink to ../../blobs/<etag>, refs/main holding the commit);
  huggingface_hub.try_to_load_from_cache is asked to find the file, so the layout is its own.
- llama.cpp's older flat cache (<org>_<repo>_<file>.gguf) and LM Studio (<publisher>/<repo>/<file>).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "fixtures" / "gguf"))

from make_arch_gguf import build, load_arch_spec  # noqa: E402

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def place(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        dst.write_bytes(src.read_bytes())


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class Home:
    home: Path
    env: dict[str, str]
    model: Path
    model_sha: str
    projector: Path

    # -- Ollama ---------------------------------------------------------------------------------
    def ollama_blob(self, src: Path | None = None, data: bytes | None = None) -> tuple[str, int]:
        blobs = self.home / ".ollama" / "models" / "blobs"
        if data is not None:
            hexd = hashlib.sha256(data).hexdigest()
            blobs.mkdir(parents=True, exist_ok=True)
            (blobs / f"sha256-{hexd}").write_bytes(data)
            return f"sha256:{hexd}", len(data)
        assert src is not None
        hexd = self.model_sha if src == self.model else sha256_of(src)
        place(src, blobs / f"sha256-{hexd}")
        return f"sha256:{hexd}", src.stat().st_size

    def ollama(self, name: str, params: dict | None = None, projector: bool = False) -> Path:
        """`ollama pull`/`create` of the default model under `name` (host/namespace/model/tag)."""
        host, namespace, model, tag = name.split("/")
        layers = []
        digest, size = self.ollama_blob(self.model)
        layers.append({"mediaType": "application/vnd.ollama.image.model", "digest": digest, "size": size})
        if projector:
            digest, size = self.ollama_blob(self.projector)
            layers.append({"mediaType": "application/vnd.ollama.image.projector", "digest": digest, "size": size})
        if params is not None:
            digest, size = self.ollama_blob(data=(json.dumps(params) + "\n").encode())
            layers.append({"mediaType": "application/vnd.ollama.image.params", "digest": digest, "size": size})
        config = json.dumps({"model_format": "gguf", "model_family": "llama", "file_type": "Q4_1"}).encode()
        cdigest, csize = self.ollama_blob(data=config)
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                    "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": cdigest,
                               "size": csize},
                    "layers": layers}
        path = self.home / ".ollama" / "models" / "manifests" / host / namespace / model / tag
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(manifest) + "\n")
        return path

    # -- Hugging Face Hub cache ------------------------------------------------------------------
    def hub(self, repo_id: str, files: dict[str, Path], cache: Path | None = None) -> Path:
        from huggingface_hub.file_download import repo_folder_name

        cache = cache or self.home / ".cache" / "huggingface" / "hub"
        repo = cache / repo_folder_name(repo_id=repo_id, repo_type="model")
        for name, src in files.items():
            etag = self.model_sha if src == self.model else sha256_of(src)
            place(src, repo / "blobs" / etag)
            link = repo / "snapshots" / COMMIT / name
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(repo / "blobs" / etag, link.parent))
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / "main").write_text(COMMIT)
        return repo / "snapshots" / COMMIT

    # -- llama.cpp's flat cache and LM Studio --------------------------------------------------
    def llama_flat(self, repo_id: str, file: str) -> Path:
        path = self.home / ".cache" / "llama.cpp" / f"{repo_id}_{file}".replace("/", "_")
        place(self.model, path)
        return path

    def lmstudio(self, publisher: str, repo: str, files: dict[str, Path]) -> Path:
        folder = self.home / ".lmstudio" / "models" / publisher / repo
        for name, src in files.items():
            place(src, folder / name)
        return folder


@pytest.fixture(scope="session")
def model_sha(smollm2: Path) -> str:
    return sha256_of(smollm2)


@pytest.fixture(scope="session")
def projector_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(load_arch_spec("gemma-3-4b-mmproj"), tmp_path_factory.mktemp("mmproj") / "mmproj.gguf")


@pytest.fixture
def stores(tmp_path: Path, smollm2: Path, model_sha: str, projector_file: Path,
           monkeypatch: pytest.MonkeyPatch) -> Home:
    """An empty home (HOME, no store variables), into which a test puts what it needs."""
    home = tmp_path / "home"
    home.mkdir()
    for var in ("OLLAMA_MODELS", "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME",
                "LLAMA_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    from doctor.sources.engines.ollama import store as ollama

    monkeypatch.setattr(ollama, "SERVICE_MODELS", str(tmp_path / "no-service"))
    from doctor.sources.models import default

    monkeypatch.setattr(default, "installed_model", lambda: None)  # the default model: only HOME's cache
    return Home(home, {"HOME": str(home)}, smollm2, model_sha, projector_file)
