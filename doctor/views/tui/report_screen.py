"""The report screen (analyze, scan, and watch's final report): header, assessment banner, checks
by area on the left, the selected check's finding on the right, and the log below it when there is
one. Keys: arrows move through checks, `c` copies the fix, `n`/`N` walk the evidence lines, `e`
exports, `l` shows or hides the log, `z` maximises the focused pane, `?` lists every key.

Renders what `doctor.views.tui.view` decided; computes nothing about the report itself. All text is
built as `Content` from inert strings, never as markup, so no log text is interpreted.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from doctor.core.report import Report
from doctor.views.tui.finding_detail import MARK_STYLE, FindingDetail
from doctor.views.tui.log_source import LogSource
from doctor.views.tui.log_view import LogView
from doctor.views.tui.messages import CheckSelected, EvidenceShown, FixCopied, ReportExported
from doctor.views.tui.view import (
    BAR_WIDTH,
    MARKS,
    AreaGroup,
    BannerInfo,
    CheckRow,
    HeaderInfo,
    SpeedBar,
    banner_info,
    detail_view,
    first_row,
    group_checks,
    header_info,
    speed_bars,
)


class HeaderBar(Static):
    """Two lines: what ran on what model and engine; the machine it ran on."""

    def __init__(self, info: HeaderInfo, *, id: str | None = None) -> None:
        super().__init__(header_content(info), id=id)


def header_content(info: HeaderInfo) -> Content:
    first = [(info.title, "bold"), "  ", (info.engine, "$accent"), " · ", info.model]
    if info.source:
        first += [" · ", (info.source, "$text-muted")]
    return Content.assemble(*first, "\n", ("machine ", "$text-muted"), info.machine)


class Banner(Static):
    """The likely root cause and its confidence, or that nothing was found."""

    def __init__(self, info: BannerInfo, *, id: str | None = None) -> None:
        super().__init__(banner_content(info), id=id, classes=f"-{info.kind}")


def banner_content(info: BannerInfo) -> Content:
    mark = MARKS.get(info.kind, "✓")
    return Content.assemble((f"{mark} {info.headline}", "bold"), "\n", info.detail)


class SpeedBars(Static):
    """Per phase, a bar of measured tok/s against this machine's ceiling (shown when a speed was judged)."""

    def __init__(self, bars: list[SpeedBar], *, id: str | None = None) -> None:
        super().__init__(speed_content(bars), id=id)


def speed_content(bars: list[SpeedBar]) -> Content:
    parts: list[Content | str | tuple[str, str]] = []
    for i, bar in enumerate(bars):
        style = {"ok": "$success", "warning": "$warning"}.get(bar.kind, "$text-muted")
        parts += ["\n" if i else "", (f"{bar.phase:<8}", "bold"), ("█" * bar.filled, style),
                  ("░" * (BAR_WIDTH - bar.filled), "$text-muted"), (f" {bar.percent:>4} ", "bold"), bar.text]
    return Content.assemble(*parts)


BACK = "back"  # what the app returns when Esc leaves its first report screen (run_report_app)


class ChecksList(OptionList):
    """Every check with its mark, grouped by area, worst first."""

    def __init__(self, groups: list[AreaGroup], *, id: str | None = None) -> None:
        self.rows: dict[str, CheckRow] = {}
        options: list[Option] = []
        for group in groups:
            header = Content.assemble((f"{MARKS[group.mark]} {group.area}", f"bold {_area_style(group.mark)}"),
                                      (f"  {group.note}" if group.note else "", "$text-muted"))
            options.append(Option(header, id=f"area:{group.area}", disabled=True))
            for row in group.rows:
                self.rows[row.id] = row
                prompt = Content.assemble("  ", (MARKS[row.mark], MARK_STYLE[row.mark]), f" {row.id} ",
                                          (row.slug, "" if row.finding else "$text-muted"))
                options.append(Option(prompt, id=row.id))
        super().__init__(*options, id=id)

    def select_row(self, check_id: str) -> None:
        try:
            self.highlighted = self.get_option_index(check_id)
        except Exception:
            return


def _area_style(mark: str) -> str:
    return MARK_STYLE.get(mark, "").replace("bold ", "")


class ReportScreen(Screen[None]):
    """One report, interactive. With `log`, the log pane follows the selected finding."""

    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-short"), (36, "-tall")]
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "app.quit", "Quit"),
        Binding("question_mark", "app.help", "Keys"),
        Binding("c", "copy_fix", "Copy fix"),
        Binding("e", "export", "Export"),
        Binding("n", "evidence(1)", "Next line"),
        Binding("N,p", "evidence(-1)", "Prev line", show=False),
        Binding("l", "toggle_log", "Log"),
        Binding("z", "zoom", "Zoom", show=False),
        Binding("t", "app.toggle_theme", "Theme", show=False),
        Binding("escape,b", "back", "Back"),
    ]

    def __init__(self, report: Report, log: LogSource | None = None, *, back: bool = False,
                 name: str | None = None) -> None:
        super().__init__(name=name)
        self.report = report
        self.log_source = log
        self.can_go_back = back
        self.groups = group_checks(report)
        self.current: CheckRow | None = None
        self._evidence_index = 0

    def compose(self) -> ComposeResult:
        yield HeaderBar(header_info(self.report), id="header")
        yield Banner(banner_info(self.report), id="banner")
        bars = speed_bars(self.report)
        if bars:
            yield SpeedBars(bars, id="speed")
        with Horizontal(id="body"):
            yield ChecksList(self.groups, id="checks")
            with Vertical(id="right"):
                yield FindingDetail(id="detail")
                if self.log_source is not None:
                    yield LogView(self.log_source, _evidence_marks(self.report), id="log")
        yield Footer()

    def on_mount(self) -> None:
        checks = self.query_one(ChecksList)
        checks.focus()
        row = first_row(self.groups, self.report)
        if row is not None:
            checks.select_row(row.id)
            self.show_row(row)
        elif self.log_source is not None:
            self.query_one(LogView).goto(1)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("toggle_log", "evidence") and self.log_source is None:
            return False
        return not (action == "back" and not self.can_go_back)

    # -- selection ---------------------------------------------------------------------------
    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id != "checks" or event.option_id is None:
            return
        row = self.query_one(ChecksList).rows.get(event.option_id)
        if row is not None and row is not self.current:
            self.show_row(row)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id == "checks":
            self.query_one(FindingDetail).focus()

    def show_row(self, row: CheckRow) -> None:
        self.current = row
        view = detail_view(row)
        self.query_one(FindingDetail).show(view)
        self._evidence_index = 0
        if self.log_source is not None:
            log = self.query_one(LogView)
            if view.lines:
                log.goto(view.lines[0], selected=view.lines)
                self.post_message(EvidenceShown(view.lines[0], view.lines))
            else:
                log.clear_selection()
                if not log.window:
                    log.goto(1)
        self.post_message(CheckSelected(row.id, row.finding is not None))

    # -- actions -----------------------------------------------------------------------------
    def action_evidence(self, step: int) -> None:
        if self.current is None or self.current.finding is None or not self.current.finding.lines:
            self.notify("The selected check cites no log line.", severity="warning")
            return
        lines = tuple(self.current.finding.lines)
        self._evidence_index = (self._evidence_index + step) % len(lines)
        line = lines[self._evidence_index]
        log = self.query_one(LogView)
        log.display = True
        log.goto(line, selected=lines)
        self.post_message(EvidenceShown(line, lines))

    def action_copy_fix(self) -> None:
        finding = self.current.finding if self.current else None
        if finding is None:
            self.notify("This check did not fire, so there is no fix to copy.", severity="warning")
            return
        view = detail_view(self.current)
        assert view.fix is not None
        self.app.copy_to_clipboard(view.fix.copy_text)
        self.notify(f"Copied: {view.fix.copy_text[:120]}\n(via OSC 52; if your terminal blocks it, "
                    "select the command in the Fix box)", title="Fix copied", markup=False)
        self.post_message(FixCopied(view.fix.copy_text, view.fix.engine))

    def action_export(self) -> None:
        from doctor.views.tui.modals import ExportScreen

        self.app.push_screen(ExportScreen(), self._export)

    def _export(self, fmt: str | None) -> None:
        if fmt is None:
            return
        from doctor.views.tui.export import export_report

        try:
            path = export_report(self.report, fmt, Path.cwd(), datetime.now())
        except OSError as exc:
            self.notify(f"Could not write the report: {exc.strerror or exc}", severity="error", markup=False)
            return
        self.notify(f"Saved to {path}", title=f"Report exported ({fmt})", markup=False)
        self.post_message(ReportExported(path, fmt))

    def action_toggle_log(self) -> None:
        log = self.query_one(LogView)
        log.display = not log.display
        if log.display:
            log.focus()

    def action_zoom(self) -> None:
        if self.maximized is not None:
            self.minimize()
        elif self.focused is not None:
            self.maximize(self.focused)

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        else:  # the app's first screen, opened from a list (`models`): the command shows the list again
            self.app.exit(BACK)


def _evidence_marks(report: Report) -> dict[int, str]:
    marks: dict[int, str] = {}
    rank = {"error": 3, "warning": 2, "info": 1}
    for finding in report.findings:
        for line in finding.lines:
            if rank.get(finding.severity, 0) > rank.get(marks.get(line, ""), 0):
                marks[line] = finding.severity
    return marks
