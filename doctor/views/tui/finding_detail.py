"""One finding's detail as the report screen and the watch screen's finding modal both show it: what,
why, evidence, the fix for this engine, references (`FindingDetail`), and the same as one text
(`detail_content`) for tests and exports. Renders a `doctor.views.tui.view.DetailView`; decides nothing.
All text is built as `Content` from inert strings, never as markup.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from doctor.views.tui.view import MARKS, DetailView

MARK_STYLE = {"error": "bold $text-error", "warning": "bold $text-warning", "info": "bold $text-primary",
              "unknown": "bold $text-secondary", "inhibited": "$text-muted", "ok": "bold $text-success"}


class FindingDetail(VerticalScroll, can_focus=True):
    """The selected check: what, why, evidence, the fix for this engine, references."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "scroll_up", "Scroll up", show=False),
        Binding("down,j", "scroll_down", "Scroll down", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield Static(id="detail-head")
        yield Static(id="fix")
        yield Static(id="detail-body")
        yield Static(id="detail-refs")

    def show(self, view: DetailView) -> None:
        self.query_one("#detail-head", Static).update(head_content(view))
        fix = self.query_one("#fix", Static)
        if view.fix is None:
            fix.display = False
        else:
            fix.display = True
            fix.border_title = f"Fix for {view.fix.engine}" if view.fix.command else "Fix"
            fix.border_subtitle = "c copies"
            fix.update(fix_content(view))
        body = self.query_one("#detail-body", Static)
        body.update(body_content(view))
        body.display = bool(view.evidence or view.explain or (view.fix is not None and view.message))
        refs = self.query_one("#detail-refs", Static)
        refs.update(refs_content(view))
        refs.display = bool(view.references or view.notes)
        self.scroll_home(animate=False)


def head_content(view: DetailView) -> Content:
    """Which check, how bad, and what it is about; the fix box follows it, then the rest."""
    parts: list[str | tuple[str, str] | Content] = [
        (f"{MARKS[view.mark]} {view.heading}", MARK_STYLE[view.mark]), "  ", (view.status, "$text-muted"), "\n",
    ]
    if view.title:
        parts += [(view.title, "bold"), "\n"]
    if view.fix is None and view.message:  # nothing to do: say why right away
        parts += [view.message, "\n"]
    return Content.assemble(*parts).rstrip()


def body_content(view: DetailView) -> Content:
    """The message (when a fix came first), the evidence and the explanation."""
    parts: list[str | tuple[str, str] | Content] = []
    if view.fix is not None and view.message:
        parts += [view.message, "\n"]
    if view.evidence:
        parts += ["\n" if parts else "", ("Evidence", "bold"), "\n"]
        for ev in view.evidence:
            if ev.kind == "log":
                parts += [(f"{ev.where:>10} │ ", "$text-muted"), ev.text, "\n"]
            else:
                parts += ["  ", ev.text, (f"  ({ev.where})" if ev.where else "", "$text-muted"), "\n"]
    if view.explain:
        parts += ["\n" if parts else "", ("Why  ", "bold"), view.explain, "\n"]
    return Content.assemble(*parts).rstrip()


def detail_content(view: DetailView) -> Content:
    """The whole detail as one text (head, fix, evidence, references), for tests and exports."""
    return Content("\n").join([head_content(view), fix_content(view), body_content(view), refs_content(view)])


def fix_content(view: DetailView) -> Content:
    fix = view.fix
    if fix is None:
        return Content("")
    parts: list[str | tuple[str, str]] = [fix.text]
    if fix.command:
        parts += ["\n", ("→ ", "bold $success"), (fix.command, "bold")]
    for engine, command in fix.others:
        parts += ["\n", (f"  {engine}: ", "$text-muted"), (command, "$text-muted" if fix.command else "")]
    if fix.verified is not None:
        outcome, line = fix.verified
        colour = {"resolved": "$success", "made worse": "$error",
                  "not resolved": "$warning"}.get(outcome, "$text-muted")
        parts += ["\n", (f"verified: {outcome}", f"bold {colour}"), f" · {line}"]
    return Content.assemble(*parts)


def refs_content(view: DetailView) -> Content:
    parts: list[str | tuple[str, str]] = []
    for note in view.notes:
        parts += [(note, "$text-muted"), "\n"]
    if view.references:
        parts += [("References", "bold"), "\n"]
        for ref in view.references:
            parts += [f"  {ref}", "\n"]
    return Content.assemble(*parts).rstrip()
