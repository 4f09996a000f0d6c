"""The log pane: a window of the log around a cursor line, with evidence lines marked.

Like a log viewer: line numbers in a gutter, the cursor line and the selected finding's evidence
lines highlighted, a mark in the gutter on every line some finding cites. Only a window of
`WINDOW` lines is held; moving the cursor near its edge loads the next window in a worker
thread (`LogSource` does the bounded reading), so a multi-gigabyte log costs no more memory
than a small one. Text arrives inert from `LogSource` and is drawn as plain segments: nothing in a
log is parsed as markup or reaches the terminal as a control sequence.
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import work
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from doctor.views.tui.log_source import LogSource, SourceLine

WINDOW = 400
EDGE = 30


class LogView(ScrollView, can_focus=True):
    """Shows `source` around `cursor`; `marks` maps line → severity of a finding citing it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown,space", "page(1)", "Page down", show=False),
        Binding("home,g", "first", "First line", show=False),
        Binding("end,G", "last", "Last line", show=False),
        Binding("left,h", "pan(-8)", "Left", show=False),
        Binding("right,l", "pan(8)", "Right", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "log-view--gutter", "log-view--cursor", "log-view--evidence", "log-view--mark-error",
        "log-view--mark-warning", "log-view--mark-info",
    }
    DEFAULT_CSS = """
    LogView { background: $surface; scrollbar-size-horizontal: 0; }
    LogView > .log-view--gutter { color: $text-muted; }
    LogView > .log-view--cursor { background: $accent 40%; text-style: bold; }
    LogView > .log-view--evidence { background: $warning 25%; }
    LogView > .log-view--mark-error { color: $error; text-style: bold; }
    LogView > .log-view--mark-warning { color: $warning; text-style: bold; }
    LogView > .log-view--mark-info { color: $primary; }
    """

    cursor: reactive[int] = reactive(1, always_update=True, layout=False)

    def __init__(self, source: LogSource, marks: dict[int, str] | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.source = source
        self.marks = dict(marks or {})
        self.selected: tuple[int, ...] = ()
        self.window: list[SourceLine] = []
        self.window_first = 1
        self._width = 0
        self._pending: int | None = None  # the line a window is being loaded for
        self._request = 0  # only the newest load may replace the window

    # -- public ------------------------------------------------------------------------------
    def goto(self, line: int, selected: tuple[int, ...] | None = None) -> None:
        """Move the cursor to `line` (loading its window) and highlight `selected` lines."""
        if selected is not None:
            self.selected = selected
        line = max(1, line)
        if self.source.total_lines:
            line = min(line, self.source.total_lines)
        self.cursor = line
        if not self._in_window(line, margin=0) or self._near_edge(line):
            self._request_window(line)
        else:
            self._cancel_pending()
            self._scroll_to_cursor(center=True)
        self._update_title()
        self.refresh()

    def clear_selection(self) -> None:
        """No finding's lines are highlighted (the selected check cites none)."""
        self.selected = ()
        self._update_title()
        self.refresh()

    @property
    def gutter_width(self) -> int:
        last = self.window[-1].number if self.window else self.cursor
        return len(str(max(last, self.source.total_lines or 0))) + 2

    def line_text(self, number: int) -> str | None:
        """The shown text of a line in the current window (tests, and the copy of a line)."""
        index = number - self.window_first
        if 0 <= index < len(self.window):
            return self.window[index].text
        return None

    # -- loading -----------------------------------------------------------------------------
    def _request_window(self, line: int) -> None:
        self._pending = line
        self._request += 1
        self._load(line, self._request)

    def _cancel_pending(self) -> None:
        """The window in hand serves: a load still running for an older position must not land."""
        if self._pending is not None:
            self._request += 1
            self._pending = None

    @work(thread=True, group="log-window")
    def _load(self, line: int, request: int) -> None:
        lines = self.source.read_around(line, WINDOW)
        if not lines and line > 1:  # past the end: show the tail
            lines = self.source.read_tail(WINDOW)
        self.app.call_from_thread(self._set_window, lines, request)

    def _set_window(self, lines: list[SourceLine], request: int) -> None:
        if request != self._request:  # a newer load was asked for meanwhile
            return
        self.window = lines
        self.window_first = lines[0].number if lines else 1
        self._width = max((len(sl.text) for sl in lines), default=0)
        if lines and not self.window_first <= self.cursor <= lines[-1].number:
            self.cursor = min(max(self.cursor, self.window_first), lines[-1].number)
        self.virtual_size = Size(self._width + self.gutter_width, len(lines))
        self._pending = None
        self._update_title()
        self.refresh()
        self.call_after_refresh(self._scroll_to_cursor, True)

    def _in_window(self, line: int, margin: int) -> bool:
        if not self.window:
            return False
        return self.window_first + margin <= line <= self.window[-1].number - margin

    def _near_edge(self, line: int) -> bool:
        if not self.window:
            return True
        at_start = self.window_first == 1
        at_end = self.source.total_lines is not None and self.window[-1].number >= self.source.total_lines
        return ((line < self.window_first + EDGE and not at_start)
                or (line > self.window[-1].number - EDGE and not at_end))

    def _scroll_to_cursor(self, center: bool = False) -> None:
        index = self.cursor - self.window_first
        height = max(1, self.scrollable_content_region.height)
        if center:
            self.scroll_to(y=max(0, index - height // 2), animate=False)
        elif index < self.scroll_offset.y:
            self.scroll_to(y=index, animate=False)
        elif index >= self.scroll_offset.y + height:
            self.scroll_to(y=index - height + 1, animate=False)

    def _update_title(self) -> None:
        total = self.source.total_lines
        of = f" of {total}" if total else ""
        self.border_title = f"{self.source.name} — line {self.cursor}{of}"
        marks = self.selected
        if marks:
            self.border_subtitle = f"evidence: {', '.join(str(n) for n in marks[:6])}{' …' if len(marks) > 6 else ''}"
        else:
            self.border_subtitle = ""

    # -- actions -----------------------------------------------------------------------------
    def _move_to(self, line: int) -> None:
        line = max(1, line)
        if self.source.total_lines:
            line = min(line, self.source.total_lines)
        elif self.window and line > self.window[-1].number and self._pending is None:
            # unknown length: do not run past what the window has until it loads more
            line = min(line, self.window[-1].number + 1)
        self.cursor = line
        if self._near_edge(line) or not self._in_window(line, margin=0):
            self._request_window(line)
        else:
            self._cancel_pending()
            self._scroll_to_cursor()
        self._update_title()
        self.refresh()

    def action_move(self, delta: int) -> None:
        self._move_to(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self._move_to(self.cursor + direction * max(1, self.scrollable_content_region.height - 1))

    def action_first(self) -> None:
        self._move_to(1)

    def action_last(self) -> None:
        self._request += 1
        self._pending = None
        self._last(self._request)

    @work(thread=True, group="log-window")
    def _last(self, request: int) -> None:
        lines = self.source.read_tail(WINDOW)
        if lines:
            self.app.call_from_thread(self._jump_loaded, lines, request)

    def _jump_loaded(self, lines: list[SourceLine], request: int) -> None:
        if request == self._request:
            self.cursor = lines[-1].number
            self._set_window(lines, request)

    def action_pan(self, delta: int) -> None:
        self.scroll_to(x=max(0, self.scroll_offset.x + delta), animate=False)

    # -- rendering ---------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        if index >= len(self.window):
            return Strip.blank(width, base)
        line = self.window[index]
        gutter_w = self.gutter_width
        mark = self.marks.get(line.number)
        gutter_style = base + self.get_component_rich_style("log-view--gutter")
        mark_char, mark_style = " ", gutter_style
        if mark in ("error", "warning", "info"):
            mark_char = "▌"
            mark_style = base + self.get_component_rich_style(f"log-view--mark-{mark}")
        number = str(line.number).rjust(gutter_w - 2)
        text_style: Style = base
        if line.number == self.cursor:
            text_style = base + self.get_component_rich_style("log-view--cursor")
        elif line.number in self.selected:
            text_style = base + self.get_component_rich_style("log-view--evidence")
        body = line.text + (" …" if line.cut else "")
        body_width = max(0, width - gutter_w)
        text = Strip([Segment(body, text_style)]).crop(scroll_x, scroll_x + body_width)
        if line.number == self.cursor or line.number in self.selected:
            text = text.extend_cell_length(body_width, text_style)
        segments = [Segment(number, gutter_style), Segment(mark_char, mark_style), Segment(" ", gutter_style),
                    *text]
        return Strip(segments).crop_extend(0, width, base)
