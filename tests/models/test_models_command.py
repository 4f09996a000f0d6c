"""`llm-doctor models` over real store layouts, `scan -m` with the names it lists, and the TUI list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.cli import main
from tests.models.conftest import Home


def _models(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["models", "--format", "json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_models_lists_every_store_with_verdicts(stores: Home, capsys: pytest.CaptureFixture[str]) -> None:
    stores.ollama("registry.ollama.ai/library/smollm2/135m")
    stores.ollama("registry.ollama.ai/library/smollm2/cpu", params={"num_gpu": 0, "num_ctx": 2048})
    stores.ollama("registry.ollama.ai/library/smollm2/ten", params={"num_gpu": 10})
    stores.hub("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", {"smollm2-135m-instruct-q4_1.gguf": stores.model})
    stores.lmstudio("lmstudio-community", "SmolLM2-GGUF", {"SmolLM2-Q4_1.gguf": stores.model})
    data = _models(capsys, "--vram", "2G", "--ram", "8G")
    rows = {r["name"]: r for r in data["models"]}
    assert set(rows) == {"smollm2:135m", "smollm2:cpu", "smollm2:ten", "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF:Q4_1",
                         "lmstudio-community/SmolLM2-GGUF:Q4_1"}
    plain = rows["smollm2:135m"]
    assert plain["arch"] == "llama" and plain["quant"] == "Q4_1" and plain["n_ctx_train"] == 8192
    assert plain["size"] == stores.model.stat().st_size
    assert plain["verdict"] == "fits on GPU" and plain["max_ctx"] == 8192 and plain["plan_ctx"] == 4096
    # the Modelfile's num_gpu 0 and num_ctx 2048 are the plan
    assert rows["smollm2:cpu"]["verdict"] == "CPU only" and rows["smollm2:cpu"]["plan_ctx"] == 2048
    assert rows["smollm2:ten"]["verdict"] == "partly on GPU" and rows["smollm2:ten"]["gpu_layers"] == 10
    # a GPU too small for every layer: part of them; too little RAM: does not fit
    part = _models(capsys, "--vram", "700M", "--ram", "8G")["models"][0]
    assert part["verdict"] == "partly on GPU" and 0 < part["gpu_layers"] < part["total_layers"] == 31
    assert _models(capsys, "--ram", "200M")["models"][0]["verdict"] == "does not fit"


def test_models_text_and_nothing_found(stores: Home, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert "No models found" in out and str(stores.home / ".ollama" / "models" / "manifests") in out
    stores.ollama("registry.ollama.ai/library/smollm2/135m")
    assert main(["models", "--format", "text", "--ram", "8G"]) == 0
    out = capsys.readouterr().out.splitlines()
    header = next(line for line in out if line.startswith("model"))
    row = next(line for line in out if line.startswith("smollm2:135m"))
    assert "fit here" in header and "ollama" in row and "CPU only" in row and "8k" in row


def test_scan_with_an_ollama_name_scans_its_blob_with_the_modelfile_settings(
        stores: Home, capsys: pytest.CaptureFixture[str]) -> None:
    stores.ollama("registry.ollama.ai/library/smollm2/135m", params={"num_ctx": 1024}, projector=True)
    assert main(["scan", "-m", "smollm2:135m", "--no-trace", "--format", "json", "--ram", "8G"]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    facts = report["facts"]["facts"]
    blob = stores.home / ".ollama" / "models" / "blobs" / f"sha256-{stores.model_sha}"
    assert facts["model.path"]["value"] == str(blob)
    assert facts["config.n_ctx_requested"]["value"] == 1024
    assert "Modelfile of smollm2:135m: PARAMETER num_ctx 1024" in facts["config.n_ctx_requested"]["source"]["text"]
    assert facts["mmproj.projector"]["value"] == "gemma3"  # the manifest's projector layer is charged
    # -c still wins over the Modelfile
    assert main(["scan", "-m", "smollm2:135m", "-c", "512", "--no-trace", "--format", "json", "--ram", "8G"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["facts"]["facts"]["config.n_ctx_requested"]["value"] == 512


def test_scan_with_a_wrong_name_is_one_line_exit_2(stores: Home, capsys: pytest.CaptureFixture[str]) -> None:
    stores.ollama("registry.ollama.ai/library/smollm2/135m")
    assert main(["scan", "-m", "smollm2:136m", "--no-trace", "--format", "json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "did you mean smollm2:135m" in err[0] and "looked in" in err[0]


def test_the_tui_list_scans_the_model_chosen_with_enter(stores: Home) -> None:
    from doctor.commands.models import build_view, scan_target
    from doctor.views.tui.models_screen import make_models_app
    from tests.tui.conftest import run_async, screen_text, settle

    stores.ollama("registry.ollama.ai/library/smollm2/135m")
    stores.hub("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", {"smollm2-135m-instruct-q4_1.gguf": stores.model})
    import argparse

    view = build_view(argparse.Namespace(ram="8G", vram=None))

    async def body() -> None:
        app = make_models_app(view)
        async with app.run_test(size=(160, 20)) as pilot:
            await settle(pilot)
            text = screen_text(app)
            assert "smollm2:135m" in text and "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF:Q4_1" in text
            assert "CPU only" in text
            await pilot.press("down", "enter")
            await settle(pilot, lambda: not app.is_running)
        assert app.return_value is view.rows[1]

    run_async(body())
    assert scan_target(view.rows[0]) == "smollm2:135m"


# -- issue 37, item 6: the default model, folders, clean messages -----------------------------------

def test_the_default_model_llm_doctor_fetched_is_listed_and_named(stores: Home,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from tests.models.conftest import place

    cached = stores.home / ".cache" / "llm-doctor" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    place(stores.model, cached)
    rows = _models(capsys, "--ram", "8G")["models"]
    assert [(r["name"], r["store"], r["path"]) for r in rows] == [("SmolLM2-135M-Instruct", "llm-doctor", str(cached))]
    assert rows[0]["verdict"] == "CPU only"
    assert main(["scan", "-m", "default", "--no-trace", "--format", "json", "--ram", "8G"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["facts"]["facts"]["model.path"]["value"] == str(cached)


def _folder(stores: Home) -> Path:
    """~/models as people keep it: a model at the top, one in org/repo folders with its projector, a
    split model's two shards, and files that are not models."""
    from tests.models.conftest import place

    folder = stores.home / "models"
    place(stores.model, folder / "smollm2-Q4_1.gguf")
    place(stores.model, folder / "org" / "repo" / "vision-Q4_1.gguf")
    place(stores.projector, folder / "org" / "repo" / "mmproj-vision-f16.gguf")
    place(stores.model, folder / "split" / "big-Q8_0-00001-of-00002.gguf")
    place(stores.model, folder / "split" / "big-Q8_0-00002-of-00002.gguf")
    (folder / "notes.txt").write_text("not a model\n")
    return folder


def test_models_takes_folders(stores: Home, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(stores)
    rows = {r["name"]: r for r in _models(capsys, str(folder), "--ram", "8G")["models"]}
    assert set(rows) == {"smollm2-Q4_1.gguf", "org/repo/vision-Q4_1.gguf", "split/big-Q8_0-00001-of-00002.gguf"}
    assert rows["org/repo/vision-Q4_1.gguf"]["mmproj"] == str(folder / "org" / "repo" / "mmproj-vision-f16.gguf")
    assert rows["split/big-Q8_0-00001-of-00002.gguf"]["size"] == 2 * stores.model.stat().st_size
    assert all(r["store"] == "folder" and r["verdict"] == "CPU only" for r in rows.values())
    # a folder that is not there: one line, exit 2
    assert main(["models", str(folder / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such folder" in err[0]


def test_scan_takes_a_folder(stores: Home, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.models.conftest import place

    one = stores.home / "one"
    place(stores.model, one / "only-Q4_1.gguf")
    assert main(["scan", "-m", str(one), "--no-trace", "--format", "json", "--ram", "8G"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["facts"]["facts"]["model.path"]["value"] == str(one / "only-Q4_1.gguf")
    # several: one line naming them and the command that compares them
    folder = _folder(stores)
    assert main(["scan", "-m", str(folder), "--no-trace", "--format", "json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "3 GGUF models" in err[0] and "smollm2-Q4_1.gguf" in err[0]
    assert f"llm-doctor models {folder}" in err[0]


def test_scan_of_a_folder_on_a_terminal_lets_the_user_pick(stores: Home, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from doctor.views.tui import models_screen

    folder = _folder(stores)
    shown: list[list[str]] = []

    def pick_second(view, highlight=0):  # type: ignore[no-untyped-def]
        shown.append([r.name for r in view.rows])
        return view.rows[1]

    monkeypatch.setattr(models_screen, "run_models_app", pick_second)
    assert main(["scan", "-m", str(folder), "--tui", "--no-trace", "--format", "json", "--ram", "8G"]) in (0, 1)
    assert shown == [["org/repo/vision-Q4_1.gguf", "smollm2-Q4_1.gguf", "split/big-Q8_0-00001-of-00002.gguf"]]
    facts = json.loads(capsys.readouterr().out)["facts"]["facts"]
    assert facts["model.path"]["value"] == str(folder / "smollm2-Q4_1.gguf")


def test_no_model_and_no_store_reads_cleanly(stores: Home, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", "-m", "mistral", "--no-trace"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "((" not in err and "))" not in err and "no model store here" not in err
    assert err == ("llm-doctor: error: model 'mistral': no such file or folder, and no model of that name; no model "
                   "folder of huggingface, llama.cpp, lmstudio or ollama here to look in; give a GGUF file, or a "
                   "folder of them")
