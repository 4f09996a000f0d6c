"""The paste screen: paste a log, press ctrl+r, get the same diagnosis as `analyze FILE`."""

from __future__ import annotations

from textual import events
from textual.message import Message

from doctor.commands.analyze import paste_diagnosis
from doctor.commands.output import exit_code
from doctor.views.tui import app as app_module
from doctor.views.tui.app import make_paste_app, run_paste_app
from doctor.views.tui.log_view import LogView
from doctor.views.tui.messages import PasteDiagnosed
from doctor.views.tui.paste_screen import PasteArea, PasteScreen, clean_paste
from doctor.views.tui.report_screen import ReportScreen

from .conftest import TUI_FIXTURES, notices, posted, run_async, settle


def test_pasted_log_is_diagnosed_like_a_file(rulebase, analyze) -> None:
    path = TUI_FIXTURES / "kv-oom.log"
    expected = analyze(path)
    text = path.read_text()
    messages: list[Message] = []

    async def body() -> None:
        app = make_paste_app(paste_diagnosis(rulebase))
        async with app.run_test(size=(100, 30), message_hook=messages.append) as pilot:
            paste = app.screen
            assert isinstance(paste, PasteScreen)
            area = paste.query_one(PasteArea)
            area.cursor_blink = False
            app.post_message(events.Paste(text))  # as the terminal sends it: to the app, which forwards it
            await settle(pilot, lambda: area.text != "")
            await pilot.press("ctrl+r")
            await settle(pilot, lambda: isinstance(app.screen, ReportScreen))
            report = app.screen.report
            assert [f.id for f in report.findings] == [f.id for f in expected.findings]
            assert report.assessment is not None and report.assessment.id == expected.assessment.id
            log = app.screen.query_one(LogView)
            await settle(pilot, lambda: bool(log.window))
            root = next(f for f in report.findings if f.id == report.assessment.id)
            assert log.cursor == root.lines[0] and log.source.name == "pasted log"
            assert log.line_text(root.lines[0]) == text.splitlines()[root.lines[0] - 1]
            await pilot.press("escape")  # back to edit the paste
            await settle(pilot, lambda: isinstance(app.screen, PasteScreen))
            assert app.screen.query_one(PasteArea).text == clean_paste(text)  # the paste is still there
            assert paste.report is report

    run_async(body())
    done = posted(messages, PasteDiagnosed)
    assert len(done) == 1 and done[0].findings == len(expected.findings)


def test_nothing_pasted_says_so(rulebase) -> None:
    async def body() -> None:
        app = make_paste_app(paste_diagnosis(rulebase))
        async with app.run_test(size=(80, 24)) as pilot:
            app.screen.query_one(PasteArea).cursor_blink = False
            await pilot.press("ctrl+r")
            await settle(pilot)
            assert isinstance(app.screen, PasteScreen)
            assert any("paste a log first" in n for n in notices(app))
            await pilot.press("ctrl+q")
            await pilot.pause()
        assert not app.is_running

    run_async(body())


def test_binary_paste_is_refused_in_one_line(rulebase) -> None:
    async def body() -> None:
        app = make_paste_app(paste_diagnosis(rulebase))
        async with app.run_test(size=(80, 24)) as pilot:
            area = app.screen.query_one(PasteArea)
            area.cursor_blink = False
            area.load_text("GGUF\x03\x00\x00\x00" + "x" * 64)
            await pilot.press("ctrl+r")
            await settle(pilot)
            assert isinstance(app.screen, PasteScreen)
            assert any("GGUF model file" in n for n in notices(app))

    run_async(body())


def test_clean_paste_keeps_lines_and_drops_controls() -> None:
    raw = "a\x1b[31mred\x1b[0m\r\nb\x1b]52;c;ZXZpbA==\x07\rc\x1b]0;t\x07\n\u202ed"
    assert clean_paste(raw) == "ared\nb\nc\nd"


def test_run_paste_app_returns_the_report_for_the_exit_code(rulebase, monkeypatch) -> None:
    text = (TUI_FIXTURES / "kv-oom.log").read_text()

    def fake_run(self) -> None:
        async def drive() -> None:
            async with self.run_test(size=(80, 24)) as pilot:
                area = self.screen.query_one(PasteArea)
                area.cursor_blink = False
                self.post_message(events.Paste(text))
                await settle(pilot, lambda: area.text != "")
                await pilot.press("ctrl+r")
                await settle(pilot, lambda: isinstance(self.screen, ReportScreen))
                await pilot.press("q")

        run_async(drive())

    monkeypatch.setattr(app_module.DoctorApp, "run", fake_run)
    report = run_paste_app(paste_diagnosis(rulebase))
    assert report is not None and "oom.kv_cache" in {f.cls for f in report.findings}
    # the command decides the exit code from the report the TUI returns
    assert exit_code(report, "error") == 1  # the KV cache OOM is an error
    assert exit_code(report, "none") == 0
