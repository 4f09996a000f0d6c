"""The report screen driven by keys (Pilot): selection, evidence jumps, copy, export, help, theme."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.message import Message

from doctor.core.report import Report
from doctor.views.tui.app import DoctorApp
from doctor.views.tui.finding_detail import FindingDetail, detail_content
from doctor.views.tui.log_source import LogSource
from doctor.views.tui.log_view import LogView
from doctor.views.tui.messages import CheckSelected, EvidenceShown, FixCopied, ReportExported
from doctor.views.tui.modals import ExportScreen, HelpScreen
from doctor.views.tui.report_screen import ChecksList, ReportScreen
from doctor.views.tui.view import finding_view

from .conftest import LOGS, TUI_FIXTURES, notices, posted, run_async, screen_text, settle

CUT_LOG = LOGS / "llama-cpp-python" / "generation-past-context.log"


def _app(report: Report, log: Path | None) -> DoctorApp:
    source = LogSource.from_path(log, report.facts.value("run.log_lines")) if log else None
    return DoctorApp(lambda: ReportScreen(report, source))


def test_opens_on_the_root_cause_with_its_evidence(analyze) -> None:
    report = analyze(TUI_FIXTURES / "kv-oom.log")
    root = next(f for f in report.findings if f.id == report.assessment.id)
    messages: list[Message] = []

    async def body() -> None:
        app = _app(report, TUI_FIXTURES / "kv-oom.log")
        async with app.run_test(size=(100, 32), message_hook=messages.append) as pilot:
            log = app.screen.query_one(LogView)
            await settle(pilot, lambda: bool(log.window))
            checks = app.screen.query_one(ChecksList)
            assert checks.highlighted_option is not None and checks.highlighted_option.id == root.id
            assert log.cursor == root.lines[0] and log.selected == tuple(root.lines)
            assert log.line_text(root.lines[0]) is not None
            text = screen_text(app)
            assert f"Likely root cause: {report.assessment.title}" in text
            assert root.id in text and f"line {root.lines[0]}" in text
            assert root.fix.command is not None and root.fix.command[:30] in text.replace("\n", "")

    run_async(body())
    selected = posted(messages, CheckSelected)
    assert selected and selected[0].check_id == root.id and selected[0].has_finding
    shown = posted(messages, EvidenceShown)
    assert shown and shown[0].line == root.lines[0]


def test_keys_move_between_checks_and_evidence_lines(analyze) -> None:
    report = analyze(CUT_LOG)
    messages: list[Message] = []

    async def body() -> None:
        app = _app(report, CUT_LOG)
        async with app.run_test(size=(120, 40), message_hook=messages.append) as pilot:
            screen = app.screen
            assert isinstance(screen, ReportScreen)
            log = screen.query_one(LogView)
            await settle(pilot, lambda: bool(log.window))
            first = screen.current
            assert first is not None and first.finding is not None
            await pilot.press("down")
            await settle(pilot)
            assert screen.current is not None and screen.current.id != first.id
            # walk to a finding with several evidence lines and cycle through them with n / N
            target = next(f for f in report.findings if len(f.lines) >= 2)
            screen.query_one(ChecksList).select_row(target.id)
            await settle(pilot, lambda: log.cursor == target.lines[0])
            await pilot.press("n")
            await settle(pilot, lambda: log.cursor == target.lines[1])
            await pilot.press("N")
            await settle(pilot, lambda: log.cursor == target.lines[0])
            assert log.selected == tuple(target.lines)
            # enter moves focus to the detail, tab onwards to the log
            await pilot.press("enter")
            assert isinstance(app.focused, FindingDetail)
            await pilot.press("tab")
            assert app.focused is log
            before = log.cursor
            await pilot.press("down", "down")
            assert log.cursor == before + 2

    run_async(body())
    assert [m.line for m in posted(messages, EvidenceShown)][-3:] == [
        next(f for f in report.findings if len(f.lines) >= 2).lines[i] for i in (0, 1, 0)]


def test_log_pane_pages_through_a_window_bigger_than_memory(analyze, monkeypatch) -> None:
    from doctor.views.tui import log_view

    monkeypatch.setattr(log_view, "WINDOW", 60)
    monkeypatch.setattr(log_view, "EDGE", 10)
    report = analyze(CUT_LOG)
    total = report.facts.value("run.log_lines")

    async def body() -> None:
        app = _app(report, CUT_LOG)
        async with app.run_test(size=(100, 30)) as pilot:
            log = app.screen.query_one(LogView)
            await settle(pilot, lambda: bool(log.window))
            log.focus()
            await pilot.press("home")
            await settle(pilot, lambda: log.window_first == 1)
            assert len(log.window) <= 60
            for _ in range(30):  # page down until the window has moved on
                await pilot.press("pagedown")
                await settle(pilot)
                if log.window_first > 1:
                    break
            assert log.window_first > 1 and log.cursor > 60 - 10
            assert log.window_first <= log.cursor <= log.window[-1].number
            assert len(log.window) <= 60
            await pilot.press("end")
            await settle(pilot, lambda: log.cursor == total)
            assert log.window[-1].number == total

    run_async(body())


def test_copy_puts_the_engine_fix_on_the_clipboard(analyze) -> None:
    report = analyze(TUI_FIXTURES / "kv-oom.log", engine="llama.cpp")
    root = next(f for f in report.findings if f.id == report.assessment.id)
    messages: list[Message] = []

    async def body() -> None:
        app = _app(report, None)
        async with app.run_test(size=(100, 30), message_hook=messages.append) as pilot:
            await settle(pilot)
            await pilot.press("c")
            await settle(pilot)
            assert app.clipboard == root.fix.by_engine["llama.cpp"]
            assert "Fix for llama.cpp" in screen_text(app)

    run_async(body())
    copied = posted(messages, FixCopied)
    assert copied and copied[0].text == root.fix.by_engine["llama.cpp"] and copied[0].engine == "llama.cpp"


def test_copy_on_a_check_without_finding_copies_nothing(analyze) -> None:
    report = analyze(TUI_FIXTURES / "kv-oom.log")
    ok = next(c for c in report.checks if c.outcome == "ok")

    async def body() -> None:
        app = _app(report, None)
        async with app.run_test(size=(100, 30)) as pilot:
            app.screen.query_one(ChecksList).select_row(ok.id)
            await settle(pilot)
            await pilot.press("c")
            await settle(pilot)
            assert app.clipboard == ""
            assert any("did not fire" in n for n in notices(app))

    run_async(body())


@pytest.mark.parametrize(("key", "suffix", "head"), [("m", ".md", "# llm-doctor analyze report"),
                                                     ("j", ".json", "{")])
def test_export_writes_the_report_and_says_where(analyze, tmp_path: Path, monkeypatch, key: str, suffix: str,
                                                 head: str) -> None:
    monkeypatch.chdir(tmp_path)
    report = analyze(TUI_FIXTURES / "kv-oom.log")
    messages: list[Message] = []

    async def body() -> None:
        app = _app(report, None)
        async with app.run_test(size=(100, 30), message_hook=messages.append) as pilot:
            await settle(pilot)
            await pilot.press("e")
            await settle(pilot)
            assert isinstance(app.screen, ExportScreen)
            await pilot.press(key)
            await settle(pilot)
            assert isinstance(app.screen, ReportScreen)
            assert any(n.startswith(f"Saved to {tmp_path}") for n in notices(app))

    run_async(body())
    exported = posted(messages, ReportExported)
    assert len(exported) == 1
    path = exported[0].path
    assert path.parent == tmp_path and path.suffix == suffix
    assert path.read_text().startswith(head)
    assert report.assessment.id in path.read_text()


def test_help_lists_the_keys_and_closes(analyze) -> None:
    report = analyze(TUI_FIXTURES / "kv-oom.log")

    async def body() -> None:
        app = _app(report, TUI_FIXTURES / "kv-oom.log")
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            await pilot.press("question_mark")
            await settle(pilot)
            assert isinstance(app.screen, HelpScreen)
            keys = dict(app.screen.rows)
            assert keys.get("c") == "Copy fix" and keys.get("e") == "Export" and "Next line" in keys.values()
            text = screen_text(app)
            assert "Copy fix" in text and "Export" in text
            await pilot.press("escape")
            await settle(pilot)
            assert isinstance(app.screen, ReportScreen)

    run_async(body())


def test_theme_log_toggle_zoom_and_quit(analyze) -> None:
    report = analyze(TUI_FIXTURES / "kv-oom.log")

    async def body() -> None:
        app = _app(report, TUI_FIXTURES / "kv-oom.log")
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            assert app.theme == "textual-dark"
            await pilot.press("t")
            assert app.theme == "textual-light"
            log = app.screen.query_one(LogView)
            await pilot.press("l")
            assert not log.display
            await pilot.press("l")
            assert log.display and app.focused is log
            await pilot.press("z")
            assert app.screen.maximized is log
            await pilot.press("z")
            assert app.screen.maximized is None
            await pilot.press("q")
            await pilot.pause()
        assert not app.is_running

    run_async(body())


def test_no_log_keys_are_disabled_without_a_log(analyze) -> None:
    report = analyze(TUI_FIXTURES / "kv-oom.log")

    async def body() -> None:
        app = _app(report, None)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            bindings = {b.binding.action for b in app.screen.active_bindings.values()}
            assert "copy_fix" in bindings
            assert "toggle_log" not in bindings and "evidence(1)" not in bindings
            assert not app.screen.query(LogView)

    run_async(body())


def test_no_color_keeps_marks(analyze, monkeypatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    report = analyze(TUI_FIXTURES / "kv-oom.log")

    async def body() -> None:
        app = _app(report, None)
        assert app.no_color
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            text = screen_text(app)
            assert "✗ LD302" in text and "✓ LD" in text and "? LD" in text
            out = _colours(app)
            assert out <= {None, "monochrome"}

    run_async(body())


def _colours(app: DoctorApp) -> set[str | None]:
    """Colour of every cell: None when the default, 'monochrome' when grey (NO_COLOR)."""
    seen: set[str | None] = set()
    for strip in app.screen._compositor.render_strips():
        for segment in strip:
            style = segment.style
            for colour in (style.color, style.bgcolor) if style else ():
                if colour is None:
                    seen.add(None)
                    continue
                r, g, b = colour.get_truecolor()
                seen.add("monochrome" if r == g == b else f"{r},{g},{b}")
    return seen


def test_the_detail_text_is_complete(analyze) -> None:
    report = analyze(TUI_FIXTURES / "kv-oom.log")
    root = next(f for f in report.findings if f.id == report.assessment.id)
    text = detail_content(finding_view(root)).plain
    for piece in (root.message, root.fix.text, *(e.text for e in root.evidence if e.kind == "log")):
        assert " ".join(piece.split())[:50] in " ".join(text.split())


def test_a_slow_window_load_for_an_old_position_does_not_land(analyze) -> None:
    import threading

    report = analyze(CUT_LOG)
    gate = threading.Event()

    class SlowSource(LogSource):
        def read_around(self, line: int, count: int):
            if line == 1500:
                gate.wait(10)
            return super().read_around(line, count)

    async def body() -> None:
        source = SlowSource.from_path(CUT_LOG)
        app = DoctorApp(lambda: ReportScreen(report, source))
        async with app.run_test(size=(100, 30)) as pilot:
            log = app.screen.query_one(LogView)
            await settle(pilot, lambda: bool(log.window))
            near = log.window[len(log.window) // 2].number
            log.goto(1500)  # far away: a load starts and blocks
            await pilot.pause()
            log.goto(near)  # back inside the window in hand
            gate.set()
            await settle(pilot)
            assert log.cursor == near and log.window_first <= near <= log.window[-1].number

    run_async(body())


def test_a_two_session_input_shows_the_earlier_sessions_findings(tmp_path: Path, analyze) -> None:
    both = tmp_path / "two.log"
    both.write_bytes((LOGS / "llama.cpp" / "server-slots-truncated.log").read_bytes()
                     + (LOGS / "llama-server" / "session-slowdown-then-full.log").read_bytes())
    report = analyze(both)
    assert len(report.sessions) == 2

    async def body() -> None:
        app = _app(report, both)
        async with app.run_test(size=(120, 48)) as pilot:
            checks = app.screen.query_one(ChecksList)
            await settle(pilot, lambda: bool(checks.rows))
            assert "s1:LD203" in checks.rows  # the first run's finding has its own row
            assert checks.rows["s1:LD203"].finding is not None and checks.rows["s1:LD203"].finding.session == 1

    run_async(body())
