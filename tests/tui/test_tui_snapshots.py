"""Screenshots at 80×24 and 160×48 (pytest-textual-snapshot). The report screen renders a frozen
report (fixtures/traces/tui/kv-oom.report.json, made by record.py from the real KV-OOM log), so
rule wording changed elsewhere does not move these pictures; the watch screen replays a real
recording, and every time it shows comes from the recording, not from the clock.

Update after a deliberate change: pytest tests/tui/test_tui_snapshots.py --snapshot-update
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from doctor.commands.analyze import paste_diagnosis
from doctor.core.report import Report
from doctor.views.tui.app import DoctorApp, make_paste_app, make_watch_app
from doctor.views.tui.log_source import LogSource
from doctor.views.tui.log_view import LogView
from doctor.views.tui.paste_screen import PasteArea
from doctor.views.tui.replay import Replay
from doctor.views.tui.report_screen import ReportScreen

from .conftest import TUI_FIXTURES, settle

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]


def _report_app() -> DoctorApp:
    report = Report.from_json(json.loads((TUI_FIXTURES / "kv-oom.report.json").read_text()))
    source = LogSource.from_path(TUI_FIXTURES / "kv-oom.log")
    return DoctorApp(lambda: ReportScreen(report, source), theme="dark")


async def _log_loaded(pilot: Any) -> None:
    def loaded() -> bool:
        logs = pilot.app.screen.query(LogView)
        return bool(logs) and bool(logs.first().window)

    await settle(pilot, loaded)


@pytest.mark.parametrize("size", SIZES)
def test_report_screen(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(_report_app(), terminal_size=size, run_before=_log_loaded)


def test_report_screen_next_check_light_theme(snap_compare) -> None:
    async def before(pilot: Any) -> None:
        await _log_loaded(pilot)
        await pilot.press("down", "down", "t")
        await settle(pilot)

    assert snap_compare(_report_app(), terminal_size=(80, 24), run_before=before)


def test_help_screen(snap_compare) -> None:
    async def before(pilot: Any) -> None:
        await _log_loaded(pilot)
        await pilot.press("question_mark")
        await settle(pilot)

    assert snap_compare(_report_app(), terminal_size=(80, 24), run_before=before)


@pytest.mark.parametrize("size", SIZES)
def test_watch_screen(snap_compare, size: tuple[int, int]) -> None:
    async def finished(pilot: Any) -> None:
        await settle(pilot, lambda: pilot.app.screen.source_done)

    app = make_watch_app(Replay(TUI_FIXTURES / "smollm2-loop.ndjson"))
    assert snap_compare(app, terminal_size=size, run_before=finished)


def test_paste_screen(snap_compare, rulebase) -> None:
    async def before(pilot: Any) -> None:
        area = pilot.app.screen.query_one(PasteArea)
        area.cursor_blink = False
        area.load_text("llama_init_from_model: failed to initialize the context: "
                       "failed to allocate buffer for kv cache")
        await settle(pilot)

    assert snap_compare(make_paste_app(paste_diagnosis(rulebase)), terminal_size=(80, 24), run_before=before)


def test_report_screen_with_speed_bars(snap_compare, rulebase) -> None:
    """A scan's report with both phases judged: the bars under the banner (decode held by shared cores)."""
    from doctor.core.facts import Facts
    from doctor.judge.evaluate import diagnose

    facts = Facts.from_values({
        "speed.decode.tok_s": 11.6, "speed.decode.ceiling_tok_s": 40.6, "speed.decode.fraction": 0.286,
        "speed.decode.bound": "contention", "speed.decode.ceiling_source": "measured",
        "speed.decode.expected_tok_s": 13.5, "speed.prefill.tok_s": 120.0, "speed.prefill.ceiling_tok_s": 240.0,
        "speed.prefill.fraction": 0.5, "speed.prefill.bound": "compute:cpu", "speed.prefill.ceiling_source": "measured",
        "host.cpu.other_busy": 0.85})
    report = diagnose(facts, rulebase, command="scan", mode="scan", engine="llama-cpp-python")
    assert snap_compare(DoctorApp(lambda: ReportScreen(report), theme="dark"), terminal_size=(80, 24))
