"""A log full of escape sequences renders inert: it cannot move the cursor, set the title, write the
clipboard, reorder text, or smuggle Textual markup (actions) into a widget."""

from __future__ import annotations

import re
from pathlib import Path

from textual import events

from doctor.commands.analyze import paste_diagnosis
from doctor.core.events import EndEvent, FindingEvent, LogEvent, SettingsEvent, StepEvent
from doctor.views.tui.app import DoctorApp, make_paste_app, make_watch_app
from doctor.views.tui.log_source import LogSource
from doctor.views.tui.log_view import LogView
from doctor.views.tui.paste_screen import PasteArea
from doctor.views.tui.report_screen import ReportScreen

from .conftest import TUI_FIXTURES, run_async, screen_text, settle, terminal_output

# What a hostile (or just badly behaved) log can carry.
OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"  # write "rm -rf ~" to the clipboard
TITLE = "\x1b]0;pwned\x07\x1b]2;pwned\x1b\\"
CURSOR = "\x1b[2J\x1b[H\x1b[10;10H\x1b[1A\x1b7\x1b8\x1bc"
DCS = "\x1bPq#0;2;0;0;0#1;2;100;100;0\x1b\\"
C1 = "\x9b2J\x9d0;c1title\x9c"
BIDI = "\u202egnp.exe\u202c"
MARKUP = "[@click=app.quit]click[/] [bold red]loud[/] [link=https://evil.invalid]x[/link]"
PAYLOAD = OSC52 + TITLE + CURSOR + DCS + C1 + BIDI + MARKUP


def _hostile_log(tmp_path: Path) -> Path:
    """The real KV-OOM log with every evidence-bearing line (and the header) poisoned."""
    lines = (TUI_FIXTURES / "kv-oom.log").read_text().splitlines()
    out = []
    for line in lines:
        if "failed" in line or "n_ctx" in line or line.startswith("llama_model_loader: loaded"):
            line = PAYLOAD + line + PAYLOAD
        out.append(line)
    path = tmp_path / "hostile.log"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def _assert_inert(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text
    assert not re.search("[\x80-\x9f]", text)
    assert "\u202e" not in text and "\u202c" not in text


def _assert_terminal_clean(output: str) -> None:
    """Textual writes its own CSI (cursor moves, colours); nothing else may get through."""
    assert "\x1b]" not in output  # no OSC: title, clipboard, hyperlink
    assert "\x1bP" not in output and "\x1bc" not in output and "\x1b7" not in output
    assert "cm0gLXJmIH4K" not in output and "pwned" not in output
    assert not re.search("[\x80-\x9f]", output)
    without_csi = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output)
    assert "\x1b" not in without_csi


def test_hostile_log_in_the_report_screen(tmp_path: Path, analyze) -> None:
    path = _hostile_log(tmp_path)
    report = analyze(path)
    root = next(f for f in report.findings if f.id == report.assessment.id)
    assert root.id == "LD302"  # the diagnosis survives the noise

    async def body() -> None:
        source = LogSource.from_path(path, report.facts.value("run.log_lines"))
        app = DoctorApp(lambda: ReportScreen(report, source))
        async with app.run_test(size=(160, 48)) as pilot:
            log = app.screen.query_one(LogView)
            await settle(pilot, lambda: bool(log.window))
            assert app.is_running  # [@click=app.quit] did nothing
            for line in log.window:
                _assert_inert(line.text)
            shown = log.line_text(root.lines[0]) or ""
            assert "[@click=app.quit]click[/]" in shown  # markup shown as text
            text = screen_text(app)
            _assert_inert(text)
            assert "[bold red]loud[/]" in text
            _assert_terminal_clean(terminal_output(app))
            await pilot.press("c")
            await settle(pilot)
            _assert_inert(app.clipboard)
            for key in ("n", "n", "down", "down", "up"):
                await pilot.press(key)
                await settle(pilot)
                _assert_terminal_clean(terminal_output(app))
            assert app.is_running

    run_async(body())


def test_hostile_paste(rulebase) -> None:
    text = (TUI_FIXTURES / "kv-oom.log").read_text()
    hostile = "\n".join(PAYLOAD + line for line in text.splitlines())

    async def body() -> None:
        app = make_paste_app(paste_diagnosis(rulebase))
        async with app.run_test(size=(100, 30)) as pilot:
            area = app.screen.query_one(PasteArea)
            area.cursor_blink = False
            app.post_message(events.Paste(hostile))
            await settle(pilot, lambda: area.text != "")
            _assert_inert(area.text)
            _assert_terminal_clean(terminal_output(app))
            await pilot.press("ctrl+r")
            await settle(pilot, lambda: isinstance(app.screen, ReportScreen))
            assert app.screen.report.assessment.id == "LD302"
            log = app.screen.query_one(LogView)
            await settle(pilot, lambda: bool(log.window))
            _assert_inert(screen_text(app))
            _assert_terminal_clean(terminal_output(app))
            assert app.is_running

    run_async(body())


def test_hostile_tokens_and_log_lines_in_watch() -> None:
    finding = {"id": "LD401", "slug": "output-loops", "severity": "warning", "area": "Sampling and output",
               "title": "The output loops" + PAYLOAD, "message": PAYLOAD + "it loops",
               "fix": {"text": PAYLOAD, "engine": "llama.cpp", "command": "--temp 0.7" + OSC52}}
    events_: list = [SettingsEvent(settings={"model": PAYLOAD + "m.gguf", "engine": PAYLOAD, "n_ctx": 64})]
    for i in range(30):
        events_.append(StepEvent(t_ms=i, step=i + 1, ms=5.0, token=PAYLOAD + " tok", kv_used=i + 1, n_ctx=64))
    events_.append(LogEvent(t_ms=31, line=1, text=PAYLOAD))
    events_.append(FindingEvent(t_ms=32, state="fired", finding=finding))
    events_.append(EndEvent(t_ms=33, reason="finished"))

    async def body() -> None:
        app = make_watch_app(iter(events_))
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot, lambda: app.screen.source_done)
            text = screen_text(app)
            _assert_inert(text)
            assert "The output loops" in text and "[@click=app.quit]" in text
            _assert_terminal_clean(terminal_output(app))
            assert app.is_running

    run_async(body())
