"""The models list (`models` on a terminal): one line per model with its fit verdict; Enter ends the
list with that model chosen, and the command scans it. Renders doctor.views.render.models' rows;
all text is `Content` built from inert strings, never markup.
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
from doctor.views.render.models import HEADER, ModelRow, ModelsView, columns

_STYLE = {"fits on GPU": "$success", "partly on GPU": "$warning", "CPU only": "$primary",
          "does not fit": "bold $error", "unreadable": "bold $error"}


def row_content(row: ModelRow, widths: list[int]) -> Content:
    cells = columns(row)
    verdict = HEADER.index("fit here")
    parts: list[str | tuple[str, str]] = []
    for i, (cell, width) in enumerate(zip(cells, widths, strict=True)):
        text = cell.ljust(width) + "  "
        parts.append((text, _STYLE.get(row.verdict, "")) if i == verdict else text)
    return Content.assemble(*parts)


class ModelsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "app.quit", "Quit"),
        Binding("question_mark", "app.help", "Keys"),
        Binding("t", "app.toggle_theme", "Theme", show=False),
    ]

    def __init__(self, view: ModelsView) -> None:
        super().__init__()
        self.view = view

    def compose(self) -> ComposeResult:
        cells = [HEADER] + [columns(r) for r in self.view.rows]
        widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
        yield Static(Content.assemble((f"models · {inert(self.view.machine, 200)}", "bold"),
                                      (f" · {len(self.view.rows)} model(s) · Enter scans one", "$text-muted")),
                     id="header")
        yield Static(Content("  ".join(h.ljust(w) for h, w in zip(HEADER, widths, strict=True))), id="columns")
        yield OptionList(*[Option(row_content(row, widths), id=str(i)) for i, row in enumerate(self.view.rows)],
                         id="models")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#models", OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.app.exit(self.view.rows[int(event.option.id or 0)])


def make_models_app(view: ModelsView):  # type: ignore[no-untyped-def]
    from doctor.views.tui.app import DoctorApp

    return DoctorApp(lambda: ModelsScreen(view))


def run_models_app(view: ModelsView) -> ModelRow | None:
    """The list; returns the model chosen with Enter (None when the user quit)."""
    result = make_models_app(view).run()
    return result if isinstance(result, ModelRow) else None
