"""The models list (`models` on a terminal): one line per model with its fit verdict; Enter ends the
list with that model chosen, and the command scans it. Renders doctor.views.render.models' rows;
all text is `Content` built from inert strings, never markup.
"""

from __future__ import annotations

from typing import ClassVar

from textual import events
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


NAME = HEADER.index("model")
MIN_NAME = 16  # the name column never gets narrower than this
# the columns left out first where the terminal is narrow: the verdict and the name stay
DROPPED_FIRST = [HEADER.index(h) for h in ("arch", "train ctx", "store", "size", "quant", "max ctx")]

Columns = list[tuple[int, int]]  # (column index in HEADER, width), in the order shown


def fit_columns(cells: list[list[str]], width: int) -> Columns:
    """The columns shown in `width` cells and their widths: every column as wide as its longest cell,
    the name what the others leave (at least MIN_NAME: a long name is cut, never wrapped); where even
    that does not fit, the least needed columns go first (DROPPED_FIRST)."""
    full = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    shown = list(range(len(HEADER)))
    for drop in [None, *DROPPED_FIRST]:
        if drop is not None:
            shown.remove(drop)
        others = sum(full[i] + 2 for i in shown if i != NAME)
        if others + MIN_NAME <= width or drop == DROPPED_FIRST[-1]:
            break
    name = max(MIN_NAME, min(full[NAME], width - others))
    return [(i, name if i == NAME else full[i]) for i in shown]


def cut(text: str, width: int) -> str:
    """A name cut in the middle to `width` (its end - the quant, the file - stays)."""
    if len(text) <= width:
        return text.ljust(width)
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def row_content(row: ModelRow, shown: Columns) -> Content:
    cells = columns(row)
    verdict = HEADER.index("fit here")
    parts: list[str | tuple[str, str]] = []
    for n, (i, width) in enumerate(shown):
        if n:
            parts.append("  ")
        text = cut(cells[i], width)
        parts.append((text, _STYLE.get(row.verdict, "")) if i == verdict else text)
    return Content.assemble(*parts)


def header_content(shown: Columns) -> Content:
    return Content("  ".join(HEADER[i].ljust(w) for i, w in shown))


class ModelsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q,escape", "app.quit", "Quit", key_display="q"),
        Binding("question_mark", "app.help", "Keys"),
        Binding("t", "app.toggle_theme", "Theme", show=False),
    ]

    def __init__(self, view: ModelsView, highlight: int = 0) -> None:
        super().__init__()
        self.view = view
        self.start_at = highlight
        self.cells = [HEADER] + [columns(r) for r in view.rows]
        self.shown: Columns = []

    def compose(self) -> ComposeResult:
        yield Static(Content.assemble((f"models · {inert(self.view.machine, 200)}", "bold"),
                                      (f" · {len(self.view.rows)} model(s) · Enter scans one", "$text-muted")),
                     id="header")
        yield Static(id="columns")
        yield OptionList(id="models")
        yield Footer()

    def on_mount(self) -> None:
        models = self.query_one("#models", OptionList)
        models.focus()
        self._layout(self.size.width)
        if 0 <= self.start_at < len(self.view.rows):
            models.highlighted = self.start_at

    def on_resize(self, event: events.Resize) -> None:
        self._layout(event.size.width)

    def _layout(self, width: int) -> None:
        """Columns that fit the terminal: the header and the rows on one line each, whatever the names."""
        shown = fit_columns(self.cells, width - 4)  # the list's border and padding
        if shown == self.shown:
            return
        self.shown = shown
        self.query_one("#columns", Static).update(header_content(shown))
        models = self.query_one("#models", OptionList)
        at = models.highlighted
        models.clear_options()
        models.add_options([Option(row_content(row, shown), id=str(i)) for i, row in enumerate(self.view.rows)])
        if at is not None:
            models.highlighted = at

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.app.exit(self.view.rows[int(event.option.id or 0)])


def make_models_app(view: ModelsView, highlight: int = 0):  # type: ignore[no-untyped-def]
    from doctor.views.tui.app import DoctorApp

    return DoctorApp(lambda: ModelsScreen(view, highlight))


def run_models_app(view: ModelsView, highlight: int = 0) -> ModelRow | None:
    """The list; returns the model chosen with Enter (None when the user quit). `highlight`: the row
    the cursor starts on (the model scanned last, when the user came back from its report)."""
    result = make_models_app(view, highlight).run()
    return result if isinstance(result, ModelRow) else None
