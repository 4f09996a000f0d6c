"""The GGUF probe's disk cache: a second read of an unchanged file comes from the cache with the same
result; a changed file, a damaged or foreign entry, or a disabled cache all mean a real read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import doctor.sources.probes.gguf_model as gm
from doctor.sources.probes.gguf_model import cache_folder, collect_model, read_model
from tests.scan.conftest import build_gguf, load_spec


@pytest.fixture
def small_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(gm, "CACHE_MIN_ITEMS", 0)  # the fixture files have no tokenizer arrays
    gm._read_remembered.cache_clear()
    return build_gguf(load_spec("llama-3-8b-instruct-q4_k_m"), tmp_path / "model.gguf")


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def _no_real_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: str, shards: list[str]) -> gm.ModelFile:
        raise AssertionError("read the file although the cache holds it")

    monkeypatch.setattr(gm, "_read", refuse)


def test_second_read_comes_from_the_cache_with_the_same_model(small_model: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "cache"
    first = read_model(str(small_model), cache_dir=str(folder))
    assert len(_entries(folder)) == 1
    gm._read_remembered.cache_clear()
    _no_real_read(monkeypatch)
    second = read_model(str(small_model), cache_dir=str(folder))
    assert second == first
    assert second.layer_bytes and second.tensor_bytes == first.tensor_bytes


def test_the_facts_are_the_same_from_the_cache(small_model: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("LLM_DOCTOR_NO_CACHE", raising=False)
    fresh = collect_model(str(small_model)).to_json()
    assert _entries(tmp_path / "xdg" / "llm-doctor" / "gguf"), "XDG_CACHE_HOME is where entries go"
    gm._read_remembered.cache_clear()
    _no_real_read(monkeypatch)
    assert collect_model(str(small_model)).to_json() == fresh


@pytest.mark.parametrize("damage", ["not json {", json.dumps({"key": "other", "model": {}}),
                                    "wrong-types", "truncated"])
def test_a_damaged_entry_is_ignored_and_rewritten(small_model: Path, tmp_path: Path, damage: str) -> None:
    folder = tmp_path / "cache"
    good = read_model(str(small_model), cache_dir=str(folder))
    (entry,) = _entries(folder)
    text = entry.read_text(encoding="utf-8")
    if damage == "wrong-types":
        data = json.loads(text)
        data["model"]["layer_bytes"] = ["1", None]
        damage = json.dumps(data)
    elif damage == "truncated":
        damage = text[: len(text) // 2]
    entry.write_text(damage, encoding="utf-8")
    gm._read_remembered.cache_clear()
    assert read_model(str(small_model), cache_dir=str(folder)) == good
    assert json.loads(entry.read_text(encoding="utf-8"))["model"]["layer_bytes"] == good.layer_bytes


def test_a_changed_file_is_read_again(small_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "cache"
    read_model(str(small_model), cache_dir=str(folder))
    st = small_model.stat()
    os.utime(small_model, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    gm._read_remembered.cache_clear()
    calls = []
    real = gm._read
    monkeypatch.setattr(gm, "_read", lambda path, shards: calls.append(path) or real(path, shards))
    read_model(str(small_model), cache_dir=str(folder))
    assert calls == [str(small_model)]
    assert len(_entries(folder)) == 2  # the new stamp is a new entry


def test_files_with_small_metadata_arrays_are_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gm._read_remembered.cache_clear()
    path = build_gguf(load_spec("mamba-130m-f16"), tmp_path / "m.gguf")
    folder = tmp_path / "cache"
    model = read_model(str(path), cache_dir=str(folder))
    assert gm.array_items(model) < gm.CACHE_MIN_ITEMS
    assert _entries(folder) == []


def test_the_cache_can_be_turned_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("LLM_DOCTOR_NO_CACHE", "1")
    assert cache_folder() is None
    monkeypatch.setenv("LLM_DOCTOR_NO_CACHE", "0")
    assert cache_folder() == str(tmp_path / "llm-doctor" / "gguf")


def test_the_folder_keeps_the_newest_entries(small_model: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gm, "CACHE_KEEP", 3)
    folder = tmp_path / "cache"
    model = read_model(str(small_model), cache_dir=str(tmp_path / "elsewhere"))
    past = (int(os.path.getmtime(small_model)) - 1000) * 10**9
    for i in range(6):
        key = {"code": "x", "path": f"/m{i}", "shards": []}
        gm.store_cached(str(folder), key, model)
        os.utime(gm._entry_path(str(folder), key), ns=(past + i, past + i))  # an explicit order of age
    assert len(_entries(folder)) == 3
    kept = {json.loads(p.read_text(encoding="utf-8"))["key"]["path"] for p in _entries(folder)}
    assert kept == {"/m3", "/m4", "/m5"}


def test_an_unwritable_cache_folder_is_no_error(small_model: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be", encoding="utf-8")
    model = read_model(str(small_model), cache_dir=str(blocker / "gguf"))
    assert model.layer_bytes


@pytest.mark.parametrize("cached", [False, True])
def test_a_scan_reads_the_model_file_once_and_not_at_all_when_cached(
        small_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], cached: bool) -> None:
    from doctor.cli import main
    from doctor.sources.probes import gguf_header

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("LLM_DOCTOR_NO_CACHE", "" if cached else "1")
    if cached:
        read_model(str(small_model))  # a scan before this one
        gm._read_remembered.cache_clear()
    gguf_header._check_cached.cache_clear()
    walks = []
    real_walk = gguf_header._Walker.walk
    monkeypatch.setattr(gguf_header._Walker, "walk", lambda self: walks.append(self.path) or real_walk(self))
    code = main(["scan", "--no-trace", "--only", "gguf,memory", "--format", "json", "-m", str(small_model)])
    facts = json.loads(capsys.readouterr().out)["facts"]["facts"]
    assert code in (0, 1) and facts["model.n_layer"]["value"] == 32
    assert facts["config.n_ctx"]["value"] == 4096  # the plan read the training context (8192, capped)
    assert walks == ([] if cached else [str(small_model)])
