"""Small screens over the others: the key list (`?`), the export choice (`e`), and one finding's
detail opened from the watch screen's feed."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from doctor.core.report import Finding
from doctor.views.tui.finding_detail import FindingDetail
from doctor.views.tui.view import finding_view


class HelpScreen(ModalScreen[None]):
    """Every key the screen below answers to, with what it does."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close"),
        Binding("down,j", "scroll('down')", "Scroll", show=False),
        Binding("up,k", "scroll('up')", "Scroll", show=False),
    ]

    def __init__(self, title: str, rows: list[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text = title
        self.rows = rows

    def action_scroll(self, direction: str) -> None:
        box = self.query_one("#help-box", VerticalScroll)
        if direction == "down":
            box.scroll_down(animate=False)
        else:
            box.scroll_up(animate=False)

    def compose(self) -> ComposeResult:
        width = max((len(k) for k, _ in self.rows), default=4)
        parts: list[str | tuple[str, str]] = []
        for key, what in self.rows:
            parts += [(key.rjust(width), "bold $accent"), "  ", what, "\n"]
        parts += ["\n", ("escape or ? closes this", "$text-muted")]
        with VerticalScroll(id="help-box") as box:
            box.border_title = f"Keys — {self.title_text}"
            yield Static(Content.assemble(*parts), id="help-text")


class ExportScreen(ModalScreen[str | None]):
    """Pick a format; the report screen writes the file."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("m", "pick('markdown')", "Markdown"),
        Binding("j", "pick('json')", "JSON"),
        Binding("escape,q", "dismiss", "Cancel"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box") as box:
            box.border_title = "Export the report"
            yield Static(Content.assemble(
                ("m", "bold $accent"), "  Markdown (to paste into an issue)\n",
                ("j", "bold $accent"), "  JSON (the same document as --format json)\n\n",
                ("The file goes in the current directory. escape cancels.", "$text-muted")))

    def action_pick(self, fmt: str) -> None:
        self.dismiss(fmt)


class FindingScreen(ModalScreen[None]):
    """One finding from the watch feed, shown with the report screen's detail pane."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,enter", "dismiss", "Close"),
        Binding("c", "copy_fix", "Copy fix"),
    ]

    def __init__(self, finding: Finding, state: str) -> None:
        super().__init__()
        self.finding = finding
        self.state = state

    def compose(self) -> ComposeResult:
        with Vertical(id="finding-box") as box:
            box.border_title = f"{self.finding.id} — {self.state}"
            yield FindingDetail(id="finding-detail")

    def on_mount(self) -> None:
        detail = self.query_one(FindingDetail)
        detail.show(finding_view(self.finding))
        detail.focus()

    def action_copy_fix(self) -> None:
        view = finding_view(self.finding)
        if view.fix is not None:
            self.app.copy_to_clipboard(view.fix.copy_text)
            self.notify(f"Copied: {view.fix.copy_text[:120]}", title="Fix copied", markup=False)
