"""The watch command's hand-off to the TUI: events flow from the source thread, stop reaches the source."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from doctor.commands import watch
from doctor.core.events import EndEvent, LiveEvent, LogEvent
from doctor.core.report import Report

SERVER_LOG = (Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "llama-server"
              / "session-slowdown-then-full.log")


@dataclass
class Outcome:
    report: Report | None
    end_reason: str | None
    stopped: bool


class RecordingTui:
    """Stands in for doctor.views.tui.app: drains the events like the watch screen's worker does."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.events: list[LiveEvent] = []
        self.stop_after = stop_after

    def run_watch_app(self, events: Iterable[LiveEvent], *, on_stop=None, on_pause=None, title="watch", redact=None):
        for event in events:
            self.events.append(event)
            if self.stop_after is not None and len(self.events) == self.stop_after and on_stop is not None:
                on_stop()
        end = next((e for e in reversed(self.events) if isinstance(e, EndEvent)), None)
        return Outcome(None, end.reason if end else None, False)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    watch.add_parser(sub)
    return parser.parse_args(["watch", *argv])


def test_events_reach_the_tui_and_the_exit_code_follows_the_report(monkeypatch) -> None:
    tui = RecordingTui()
    monkeypatch.setattr(watch, "_tui", lambda: tui)
    code = watch.run(_args("--log", str(SERVER_LOG), "--duration", "0.5", "--tui"))
    assert code == 1  # LD202 is an error
    assert isinstance(tui.events[-1], EndEvent)
    assert sum(isinstance(e, LogEvent) for e in tui.events) == len(SERVER_LOG.read_bytes().splitlines())
    assert {f["id"] for f in tui.events[-1].report["findings"]} >= {"LD202", "LD802"}


def test_stop_from_the_tui_ends_the_source(monkeypatch, tmp_path: Path) -> None:
    log = tmp_path / "growing.log"
    log.write_bytes(SERVER_LOG.read_bytes())
    tui = RecordingTui(stop_after=5)
    monkeypatch.setattr(watch, "_tui", lambda: tui)
    watch.run(_args("--log", str(log), "--tui"))  # no --duration: only the stop can end it
    end = tui.events[-1]
    assert isinstance(end, EndEvent) and end.reason == "interrupted"
