"""Names resolved through real store layouts in a temporary home (tests/models/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.core.errors import UsageError
from doctor.sources.engines.ollama import store as ollama
from doctor.sources.models.found import pick, quant_of
from doctor.sources.models.resolve import find_all, resolve
from tests.models.conftest import Home


@pytest.mark.parametrize(("text", "parts"), [
    ("llama3.2:1b", ("registry.ollama.ai", "library", "llama3.2", "1b")),
    ("llama3.2", ("registry.ollama.ai", "library", "llama3.2", "latest")),
    ("user/model:tag", ("registry.ollama.ai", "user", "model", "tag")),
    ("hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M",
     ("hf.co", "bartowski", "Llama-3.2-1B-Instruct-GGUF", "Q4_K_M")),
    ("localhost:5000/ns/m:v1", ("localhost:5000", "ns", "m", "v1")),
])
def test_ollama_names_parse_as_ollama_parses_them(text: str, parts: tuple[str, ...]) -> None:
    name = ollama.parse_name(text)
    assert name is not None and name.parts() == parts


@pytest.mark.parametrize("text", ["a/b/c/d", "/abs", "has space", "ns.dot/model"])
def test_what_ollama_refuses_is_not_an_ollama_name(text: str) -> None:
    assert ollama.parse_name(text) is None


def test_an_ollama_name_gives_the_model_blob_the_projector_and_the_parameters(stores: Home) -> None:
    stores.ollama("registry.ollama.ai/library/smollm2/135m", params={"num_ctx": 8192, "num_gpu": 12},
                  projector=True)
    found = resolve("smollm2:135m", stores.env)
    blobs = stores.home / ".ollama" / "models" / "blobs"
    assert found.store == "ollama" and found.name == "smollm2:135m"
    assert Path(found.path) == blobs / f"sha256-{stores.model_sha}"
    assert found.mmproj is not None and Path(found.mmproj).parent == blobs and found.mmproj != found.path
    assert dict(found.params) == {"num_ctx": 8192, "num_gpu": 12}
    assert found.size == stores.model.stat().st_size
    # the same through OLLAMA_MODELS, a namespace, a host, and case
    stores.ollama("hf.co/bartowski/SmolLM2-135M-Instruct-GGUF/Q4_1")
    moved = {"HOME": "/nonexistent", "OLLAMA_MODELS": str(stores.home / ".ollama" / "models")}
    hf = resolve("hf.co/bartowski/SmolLM2-135M-Instruct-GGUF:Q4_1", moved)
    assert hf.name == "hf.co/bartowski/SmolLM2-135M-Instruct-GGUF:Q4_1" and hf.params == {}
    assert resolve("hf.co/bartowski/smollm2-135m-instruct-gguf:q4_1", moved).path == hf.path


def test_a_default_tag_is_latest(stores: Home) -> None:
    stores.ollama("registry.ollama.ai/myuser/tiny/latest")
    assert resolve("myuser/tiny", stores.env).name == "myuser/tiny:latest"


def test_a_hub_repo_id_with_a_quant_or_a_file(stores: Home) -> None:
    snapshot = stores.hub("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", {
        "smollm2-135m-instruct-q4_1.gguf": stores.model,
        "smollm2-135m-instruct-q8_0.gguf": stores.model,
        "mmproj-smollm2-f16.gguf": stores.projector})
    from huggingface_hub import try_to_load_from_cache

    own = try_to_load_from_cache("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", "smollm2-135m-instruct-q4_1.gguf",
                                 cache_dir=str(stores.home / ".cache" / "huggingface" / "hub"))
    assert own == str(snapshot / "smollm2-135m-instruct-q4_1.gguf")  # huggingface_hub finds it: its layout
    by_quant = resolve("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF:Q4_1", stores.env)
    assert by_quant.store == "huggingface" and by_quant.path == own
    assert by_quant.mmproj == str(snapshot / "mmproj-smollm2-f16.gguf")
    by_file = resolve("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/smollm2-135m-instruct-q8_0.gguf", stores.env)
    assert by_file.path == str(snapshot / "smollm2-135m-instruct-q8_0.gguf")
    # HF_HOME moves the cache: hub/ under it
    stores.hub("org/other", {"other-Q4_K_M.gguf": stores.model}, cache=stores.home / "hfhome" / "hub")
    with pytest.raises(UsageError):
        resolve("org/other", stores.env)
    assert resolve("org/other", {**stores.env, "HF_HOME": str(stores.home / "hfhome")}).path.endswith(
        "other-Q4_K_M.gguf")


def test_llama_cpp_caches_old_flat_and_new_hub_layout(stores: Home) -> None:
    flat = stores.llama_flat("bartowski/SmolLM2-135M-Instruct-GGUF", "SmolLM2-135M-Instruct-Q4_K_M.gguf")
    found = resolve("bartowski/SmolLM2-135M-Instruct-GGUF", stores.env)  # no tag: Q4_K_M, llama.cpp's default
    assert found.store == "llama.cpp" and found.path == str(flat)
    # the manifest older llama.cpp kept beside the file names the file a tag chose, and the projector
    chosen = stores.llama_flat("ggml-org/SmolVLM-GGUF", "SmolVLM-Q8_0.gguf")
    stores.llama_flat("ggml-org/SmolVLM-GGUF", "SmolVLM-Q4_K_M.gguf")
    proj = stores.llama_flat("ggml-org/SmolVLM-GGUF", "mmproj-SmolVLM-f16.gguf")
    (chosen.parent / "manifest=ggml-org_SmolVLM-GGUF=latest.json").write_text(json.dumps(
        {"ggufFile": {"rfilename": "SmolVLM-Q8_0.gguf"}, "mmprojFile": {"rfilename": "mmproj-SmolVLM-f16.gguf"}}))
    found = resolve("ggml-org/SmolVLM-GGUF", stores.env)  # no tag: "latest", which the manifest says is Q8_0
    assert found.path == str(chosen) and found.mmproj == str(proj)
    cache = stores.home / "llcache"
    snap = stores.hub("ggml-org/SmolLM2-GGUF", {"SmolLM2-Q8_0.gguf": stores.model}, cache=cache)
    found = resolve("ggml-org/SmolLM2-GGUF:q8_0", {**stores.env, "LLAMA_CACHE": str(cache)})
    assert found.store == "llama.cpp" and found.path == str(snap / "SmolLM2-Q8_0.gguf")


def test_lm_studio_models_folder_and_its_settings(stores: Home) -> None:
    folder = stores.lmstudio("lmstudio-community", "SmolLM2-135M-Instruct-GGUF",
                             {"SmolLM2-135M-Instruct-Q4_1.gguf": stores.model,
                              "mmproj-SmolLM2-F16.gguf": stores.projector})
    found = resolve("lmstudio-community/SmolLM2-135M-Instruct-GGUF:Q4_1", stores.env)
    assert found.store == "lmstudio" and found.path == str(folder / "SmolLM2-135M-Instruct-Q4_1.gguf")
    assert found.mmproj == str(folder / "mmproj-SmolLM2-F16.gguf")
    other = stores.home / "Models"
    moved = other / "pub" / "repo"
    moved.mkdir(parents=True)
    (moved / "repo-Q4_1.gguf").symlink_to(stores.model)
    (stores.home / ".lmstudio" / "settings.json").write_text(f'{{"downloadsFolder": "{other}"}}')
    assert resolve("pub/repo", stores.env).path == str(moved / "repo-Q4_1.gguf")


def test_nothing_found_names_where_it_looked_and_the_close_names(stores: Home) -> None:
    stores.ollama("registry.ollama.ai/library/smollm2/135m")
    with pytest.raises(UsageError) as info:
        resolve("smollm2:136m", stores.env)
    message = info.value.one_line()
    assert "smollm2:136m" in message and str(stores.home / ".ollama" / "models" / "manifests") in message
    assert "did you mean smollm2:135m" in message and "\n" not in message
    with pytest.raises(UsageError, match="no such model file"):
        resolve(str(stores.home / "missing.gguf"), stores.env)
    with pytest.raises(UsageError, match="no GGUF file in this folder"):
        resolve(str(stores.home), stores.env)


def test_every_store_listed(stores: Home) -> None:
    stores.ollama("registry.ollama.ai/library/smollm2/135m", params={"num_ctx": 4096})
    stores.hub("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", {"smollm2-135m-instruct-q4_1.gguf": stores.model})
    stores.llama_flat("bartowski/SmolLM2-GGUF", "SmolLM2-Q4_K_M.gguf")
    stores.lmstudio("lmstudio-community", "SmolLM2-GGUF", {"SmolLM2-Q4_1.gguf": stores.model})
    listed = {(m.store, m.name) for m in find_all(stores.env)}
    assert listed == {("ollama", "smollm2:135m"), ("huggingface", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF:Q4_1"),
                      ("llama.cpp", "bartowski_SmolLM2-GGUF_SmolLM2-Q4_K_M"),
                      ("lmstudio", "lmstudio-community/SmolLM2-GGUF:Q4_1")}
    for model in find_all(stores.env):  # every listed name resolves to the same file
        assert resolve(model.name, stores.env).path == model.path


@pytest.mark.parametrize(("files", "tag", "chosen"), [
    (["m-Q4_K_M.gguf", "m-Q4_K_M_L.gguf"], "q4_k_m", "m-Q4_K_M.gguf"),
    (["m-Q8_0.gguf", "m-Q4_K_M.gguf"], None, "m-Q4_K_M.gguf"),
    (["m-Q8_0.gguf", "mmproj-m-f16.gguf"], None, "m-Q8_0.gguf"),
    (["m-Q8_0-00001-of-00002.gguf", "m-Q8_0-00002-of-00002.gguf"], "Q8_0", "m-Q8_0-00001-of-00002.gguf"),
    (["m-Q8_0.gguf"], "Q2_K", None),
])
def test_a_tag_picks_a_file_as_llama_cpp_does(files: list[str], tag: str | None, chosen: str | None) -> None:
    assert pick(files, tag) == chosen


def test_quant_in_a_file_name() -> None:
    assert quant_of("Llama-3.2-1B-Instruct-Q4_K_M.gguf") == "Q4_K_M"
    assert quant_of("smollm2-135m-instruct-q8_0.gguf") == "Q8_0"
    assert quant_of("gemma-IQ4_XS.gguf") == "IQ4_XS" and quant_of("model.gguf") is None
