"""The terminal around the TUIs (issue 37, item 7): what stays on the screen once an app has quit,
Esc from a report opened in `models` going back to the list, `z` showing the check names whole and
the models list keeping its header on one line whatever the names.

The apps run headless (Textual's own `headless`/`auto_pilot`), started by the commands as a user's
terminal would start them (`--tui`), each driven by the keys a user would press.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from doctor.cli import main
from doctor.views.render.models import ModelRow, ModelsView
from doctor.views.tui.app import DoctorApp

from .conftest import LOGS, run_async, screen_text, settle

Pilot = Callable[[Any], Coroutine[Any, Any, None]]


def drive(monkeypatch: pytest.MonkeyPatch, *pilots: Pilot, size: tuple[int, int] = (120, 36)) -> list[str]:
    """Each app the command starts runs headless under the next pilot; returns each app's first screen name."""
    original = DoctorApp.run
    queue = list(pilots)
    screens: list[str] = []

    def run(self: DoctorApp, **kwargs: Any) -> Any:
        pilot = queue.pop(0)

        async def wrapped(p: Any) -> None:
            for _ in range(400):
                await p.pause()
                if self.main_screen is not None and self.main_screen.is_mounted:
                    break
            await settle(p)
            screens.append(type(self.screen).__name__)
            await pilot(p)

        return original(self, headless=True, size=size, auto_pilot=wrapped)

    monkeypatch.setattr(DoctorApp, "run", run)
    return screens


def keys(*pressed: str) -> Pilot:
    async def pilot(p: Any) -> None:
        for key in pressed:
            await p.press(key)
            await p.pause()

    return pilot


def test_the_report_stays_on_the_terminal_after_the_tui_quits(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    log = LOGS / "llama-cpp-python" / "generation-past-context.log"
    screens = drive(monkeypatch, keys("q"))
    code = main(["analyze", str(log), "--tui", "--color", "never"])
    out = capsys.readouterr().out
    assert screens == ["ReportScreen"] and code == 1
    assert "Likely root cause:" in out and "LD202" in out and "Details: -v" in out


def test_the_watch_report_stays_too(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from doctor.commands import watch

    class Tui:
        @staticmethod
        def run_watch_app(events: Any, **kwargs: Any) -> Any:
            for _ in events:
                pass
            from doctor.views.tui.watch_screen import WatchOutcome

            return WatchOutcome(None, "finished", False)

    monkeypatch.setattr(watch, "_tui", lambda: Tui)
    log = LOGS / "llama-server" / "real-context-end-no-shift.log"
    code = main(["watch", "--log", str(log), "--duration", "0.5", "--tui", "--color", "never"])
    out = capsys.readouterr().out
    assert code == 1 and "Likely root cause:" in out and "LD202" in out


def _stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, smollm2: Path) -> Path:
    """A folder of two models (the default SmolLM2 under two names) and no model store."""
    from tests.models.conftest import place

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    for var in ("OLLAMA_MODELS", "HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME", "LLAMA_CACHE"):
        monkeypatch.delenv(var, raising=False)
    from doctor.sources.engines.ollama import store as ollama
    from doctor.sources.models import default

    monkeypatch.setattr(ollama, "SERVICE_MODELS", str(tmp_path / "no-service"))
    monkeypatch.setattr(default, "installed_model", lambda: None)
    folder = home / "models"
    place(smollm2, folder / "a-Q4_1.gguf")
    place(smollm2, folder / "b-Q4_1.gguf")
    return folder


def test_esc_on_a_scan_opened_from_models_goes_back_to_the_list(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    folder = _stores(tmp_path, monkeypatch, smollm2)
    from doctor.commands import scan

    monkeypatch.setattr(scan, "run_trace", lambda *a, **k: (_ for _ in ()).throw(AssertionError("no trace")))
    highlighted: list[int | None] = []

    async def back_in_list(p: Any) -> None:
        from textual.widgets import OptionList

        highlighted.append(p.app.screen.query_one("#models", OptionList).highlighted)
        await p.press("q")

    screens = drive(monkeypatch, keys("down", "enter"), keys("escape"), back_in_list)
    code = main(["models", str(folder), "--tui", "--ram", "8G"])
    out = capsys.readouterr().out
    assert screens == ["ModelsScreen", "ReportScreen", "ModelsScreen"]
    assert highlighted == [1]  # the list comes back on the model scanned
    assert code in (0, 1)
    # what stays on the terminal: the list (no report: the user went back from it)
    assert "a-Q4_1.gguf" in out and "b-Q4_1.gguf" in out and "Likely root cause" not in out


def test_q_on_that_report_quits_with_the_report_on_the_terminal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    folder = _stores(tmp_path, monkeypatch, smollm2)
    screens = drive(monkeypatch, keys("enter"), keys("q"))
    main(["scan", "-m", str(folder), "--tui", "--no-trace", "--ram", "8G", "--color", "never"])
    out = capsys.readouterr().out
    assert screens == ["ModelsScreen", "ReportScreen"]
    head = out.splitlines()[0]
    assert head.startswith("llm-doctor ") and " · scan · " in head and ("Found " in out or "No findings." in out)
    assert "fit here" not in out  # the report the user quit from stays, not the list


def test_quitting_a_folders_list_leaves_the_list(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], smollm2: Path) -> None:
    folder = _stores(tmp_path, monkeypatch, smollm2)
    screens = drive(monkeypatch, keys("q"))
    assert main(["scan", "-m", str(folder), "--tui", "--no-trace", "--ram", "8G"]) == 0
    out = capsys.readouterr().out
    assert screens == ["ModelsScreen"] and "a-Q4_1.gguf" in out and "fit here" in out


def test_zoom_shows_the_check_names_whole(analyze) -> None:
    from doctor.views.tui.report_screen import ChecksList, ReportScreen

    report = analyze(LOGS / "llama-cpp-python" / "generation-past-context.log")

    async def body() -> None:
        app = DoctorApp(lambda: ReportScreen(report, None))
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            assert "generation-will-overflow-context" not in screen_text(app)  # cut beside the detail
            await pilot.press("z")
            await settle(pilot)
            checks = app.screen.query_one(ChecksList)
            assert checks.size.width >= 70
            assert "LD211 generation-will-overflow-context" in screen_text(app)

    run_async(body())


LONG = "bartowski/Meta-Llama-3.1-70B-Instruct-abliterated-GGUF/Meta-Llama-3.1-70B-Instruct-abliterated-Q4_K_M.gguf"


@pytest.mark.parametrize("width", [160, 80, 50])
def test_the_models_header_stays_on_one_line_with_a_long_name(width: int) -> None:
    from doctor.views.tui.models_screen import make_models_app

    rows = [ModelRow(name=LONG, store="huggingface", path="/m/x.gguf", size=40 << 30, arch="llama", quant="Q4_K_M",
                     n_ctx_train=131072, verdict="does not fit"),
            ModelRow(name="smollm2:135m", store="ollama", path="/m/y", size=98 << 20, arch="llama", quant="Q4_1",
                     n_ctx_train=8192, verdict="CPU only", max_ctx=8192)]
    view = ModelsView("RAM 22 GiB available, no GPU", rows, [])

    async def body() -> None:
        app = make_models_app(view)
        async with app.run_test(size=(width, 12)) as pilot:
            await settle(pilot)
            lines = screen_text(app).splitlines()
            header = next(i for i, line in enumerate(lines) if line.strip().startswith("model "))
            assert "fit here" in lines[header]  # the header's last needed column on its own line
            assert lines[header + 1].strip().startswith("▊▔")  # and the list right under it: nothing wrapped
            row = next(line for line in lines if "smollm2:135m" in line)
            assert "CPU only" in row and "does not fit" in next(line for line in lines if "bartowski/" in line)
            # the columns line up: the verdict starts where its header does
            assert row.index("CPU only") == lines[header].index("fit here")

    run_async(body())


def test_a_list_chosen_row_is_the_one_highlighted() -> None:
    from doctor.views.tui.models_screen import make_models_app

    rows = [ModelRow(name=f"m{i}", store="folder", path=f"/m/{i}.gguf", size=1) for i in range(3)]
    view = ModelsView("RAM ?", rows, [])

    async def body() -> None:
        app = make_models_app(view, 2)
        async with app.run_test(size=(80, 12)) as pilot:
            await settle(pilot)
            await pilot.press("enter")
            await settle(pilot, lambda: not app.is_running)
        assert app.return_value is rows[2]

    run_async(body())



