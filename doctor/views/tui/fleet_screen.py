"""The fleet screen (`fleet` on a terminal): one line per instance, worst first; Enter opens that
instance's report (the ordinary report screen, `b` comes back). Renders what doctor.views.render.fleet
ordered; all text is `Content` built from inert strings, never markup.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from doctor.core.sanitize import inert
from doctor.views.render.fleet import FleetRow, FleetView

_STYLE = {"error": "bold $error", "warning": "bold $warning", "info": "$primary", "ok": "$success"}


def row_content(row: FleetRow, width: int) -> Content:
    ids = ", ".join(f"{f.id} {f.slug}" for f in row.report.findings) or "no findings"
    return Content.assemble((f"{row.worst:<8}", _STYLE.get(row.worst, "")), f"{inert(row.instance):<{width}}  ",
                            (f"{row.engine or '?':<10}{row.health or 'gone':<6} ", "$text-muted"), inert(ids))


class FleetScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "app.quit", "Quit"),
        Binding("question_mark", "app.help", "Keys"),
        Binding("t", "app.toggle_theme", "Theme", show=False),
    ]

    def __init__(self, view: FleetView) -> None:
        super().__init__()
        self.view = view
        self.rows = view.ordered()

    def compose(self) -> ComposeResult:
        c = self.view.cost
        yield Static(Content.assemble((f"fleet · {inert(self.view.prometheus)}", "bold"),
                                      (f" · {len(self.rows)} instance(s) · window {self.view.window} · "
                                       f"{c.queries} queries, {c.series} series", "$text-muted")), id="header")
        width = max([8] + [len(inert(r.instance)) for r in self.rows])
        yield OptionList(*[Option(row_content(row, width), id=str(i)) for i, row in enumerate(self.rows)],
                         id="instances")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#instances", OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        from doctor.views.tui.report_screen import ReportScreen

        row = self.rows[int(event.option.id or 0)]
        self.app.push_screen(ReportScreen(row.report, back=True))


def run_fleet_app(view: FleetView) -> None:
    from doctor.views.tui.app import DoctorApp

    DoctorApp(lambda: FleetScreen(view)).run()
