"""The paste screen: `llm-doctor analyze` with no file on a terminal. Paste a log into the text
area, press ctrl+r, get the report screen (escape comes back to edit and run again).

Pasted text is stripped of escape sequences and control characters line by line before it
enters the text area, so a pasted log cannot drive the terminal; the analyzer would strip the
same codes anyway, so the diagnosis does not change. The diagnosis runs in a worker thread with
the same calls as `analyze FILE`: `analyze_bytes` then `diagnose`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static, TextArea

from doctor.core import engines
from doctor.core.errors import DoctorError
from doctor.core.report import Report
from doctor.core.sanitize import strip_controls
from doctor.views.tui.log_source import LogSource
from doctor.views.tui.messages import PasteDiagnosed


def clean_paste(text: str) -> str:
    """Pasted text without escape sequences or controls; line ends kept (CRLF and CR become LF)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(strip_controls(line) for line in lines)


class PasteArea(TextArea):
    """A TextArea whose pastes are made inert first.

    Textual calls the paste handler of every class in the MRO, this one first: cleaning the
    event's text here is enough for TextArea's own handler to insert the clean text.
    """

    async def _on_paste(self, event: events.Paste) -> None:
        event.text = clean_paste(event.text)


class PasteScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r,f5", "diagnose", "Diagnose", priority=True),
        Binding("ctrl+l", "clear", "Clear"),
        Binding("f1", "app.help", "Keys"),
        Binding("ctrl+q", "app.quit", "Quit"),
    ]

    def __init__(self, make_report: Callable[[bytes], Report], redact_line: Callable[[str], str] | None = None) -> None:
        super().__init__()
        self.make_report = make_report
        self.redact_line = redact_line  # --redact: the log pane's lines as the report's evidence
        self.report: Report | None = None

    def compose(self) -> ComposeResult:
        yield Static(Content.assemble(
            ("Paste a log", "bold"), f" ({', '.join(engines.labels())}), then press ",
            ("ctrl+r", "bold $accent"), " to diagnose it. ", ("ctrl+q", "bold $accent"), " quits."),
            id="paste-help")
        yield PasteArea(id="paste", soft_wrap=False, show_line_numbers=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(PasteArea).focus()

    def action_clear(self) -> None:
        self.query_one(PasteArea).clear()

    def action_diagnose(self) -> None:
        text = self.query_one(PasteArea).text
        if not text.strip():
            self.notify("Nothing to diagnose yet: paste a log first.", severity="warning")
            return
        self.notify("Diagnosing…", timeout=2)
        self._diagnose(text)

    @work(thread=True, exclusive=True, group="paste")
    def _diagnose(self, text: str) -> None:
        data = text.encode("utf-8")
        try:
            report = self.make_report(data)
        except DoctorError as exc:
            self.app.call_from_thread(self.notify, exc.one_line(), severity="error", markup=False)
            return
        self.app.call_from_thread(self._show, report, data)

    def _show(self, report: Report, data: bytes) -> None:
        from doctor.views.tui.report_screen import ReportScreen

        self.report = report
        lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
        self.post_message(PasteDiagnosed(lines, len(report.findings)))
        self.app.push_screen(ReportScreen(report, LogSource.from_bytes(data, "pasted log", lines, self.redact_line),
                                           back=True))
