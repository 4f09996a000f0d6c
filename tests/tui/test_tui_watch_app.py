"""The watch screen fed a recorded run (no live engine): timeline, findings, pause, stop, report."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

from textual.message import Message

from doctor.core.events import EndEvent, FindingEvent, LiveEvent, StepEvent
from doctor.views.tui import app as app_module
from doctor.views.tui.app import make_watch_app, run_watch_app
from doctor.views.tui.messages import FindingChanged, RunEnded, WatchPaused
from doctor.views.tui.modals import FindingScreen
from doctor.views.tui.replay import Replay, iter_recording
from doctor.views.tui.report_screen import ReportScreen
from doctor.views.tui.watch_screen import FindingsFeed, WatchScreen, gauges_content, timeline_content

from .conftest import posted, run_async, screen_text, settle


class Gated:
    """The recording's events, holding back everything after `hold_at` until released (a live run)."""

    def __init__(self, path: Path, hold_at: int) -> None:
        self.events = list(iter_recording(path))
        self.hold_at = hold_at
        self.gate = threading.Event()
        self.paused: list[bool] = []
        self.stops = 0

    def __iter__(self) -> Iterator[LiveEvent]:
        for i, event in enumerate(self.events):
            if i == self.hold_at:
                self.gate.wait(30)
            yield event

    def stop(self) -> None:
        self.stops += 1
        self.gate.set()

    def pause(self, paused: bool) -> None:
        self.paused.append(paused)


def test_a_recorded_run_fills_the_screen(recording: Path) -> None:
    events = list(iter_recording(recording))
    fired = [e.finding["id"] for e in events if isinstance(e, FindingEvent) and e.state == "fired"]
    resolved = [e.finding["id"] for e in events if isinstance(e, FindingEvent) and e.state == "resolved"]
    steps = sum(isinstance(e, StepEvent) for e in events)
    messages: list[Message] = []

    async def body() -> None:
        app = make_watch_app(Replay(recording))
        async with app.run_test(size=(100, 32), message_hook=messages.append) as pilot:
            screen = app.screen
            assert isinstance(screen, WatchScreen)
            await settle(pilot, lambda: screen.source_done)
            state = screen.state
            assert state.step_count == steps
            text = screen_text(app)
            assert f"{steps} steps" in text and "■ ended (finished)" in text
            assert "load" in text and "prefill" in text and "decode" in text
            assert f"{state.kv_used}/256" in text
            assert "spikes (>3× p50)" in text
            feed = screen.query_one(FindingsFeed)
            ids = [feed.get_option_at_index(i).id for i in range(feed.option_count)]
            assert set(fired) <= {i for i in ids if i}
            worst = state.worst_active()
            assert worst is not None and f"{worst.finding.id} {worst.finding.title}" in text

    run_async(body())
    changes = [(m.finding_id, m.state) for m in posted(messages, FindingChanged)]
    assert [fid for fid, st in changes if st == "fired"] == fired
    assert [fid for fid, st in changes if st == "resolved"] == resolved
    ended = posted(messages, RunEnded)
    assert len(ended) == 1 and ended[0].reason == "finished" and ended[0].has_report


def test_report_key_opens_the_final_report_and_back(recording: Path) -> None:
    final = [e for e in iter_recording(recording) if isinstance(e, EndEvent)][-1]

    async def body() -> None:
        app = make_watch_app(Replay(recording))
        async with app.run_test(size=(100, 32)) as pilot:
            watch = app.screen
            await settle(pilot, lambda: watch.source_done)
            await pilot.press("r")
            await settle(pilot, lambda: isinstance(app.screen, ReportScreen))
            report = app.screen.report
            assert [f.id for f in report.findings] == [f["id"] for f in final.report["findings"]]
            assert "Likely root cause" in screen_text(app)
            await pilot.press("escape")
            await settle(pilot, lambda: app.screen is watch)

    run_async(body())


def test_enter_on_a_finding_shows_it(recording: Path) -> None:
    async def body() -> None:
        app = make_watch_app(Replay(recording))
        async with app.run_test(size=(100, 32)) as pilot:
            watch = app.screen
            await settle(pilot, lambda: watch.source_done)
            feed = watch.query_one(FindingsFeed)
            feed.focus()
            feed.highlighted = 0
            await pilot.press("enter")
            await settle(pilot, lambda: isinstance(app.screen, FindingScreen))
            shown = app.screen.finding
            assert shown.id == feed.get_option_at_index(0).id
            assert shown.title in screen_text(app)
            await pilot.press("escape")
            await settle(pilot, lambda: app.screen is watch)

    run_async(body())


def test_pause_holds_the_display_and_stop_ends_with_the_report(recording: Path) -> None:
    source = Gated(recording, hold_at=150)
    messages: list[Message] = []

    async def body() -> None:
        app = make_watch_app(source, on_stop=source.stop, on_pause=source.pause)
        async with app.run_test(size=(100, 32), message_hook=messages.append) as pilot:
            watch = app.screen
            assert isinstance(watch, WatchScreen)
            await settle(pilot, lambda: watch.state.events == 150)
            assert "● running" in screen_text(app)
            await pilot.press("p")
            assert watch.paused and source.paused == [True]
            assert "‖ paused" in screen_text(app)
            await pilot.press("p")
            assert not watch.paused and source.paused == [True, False]
            assert not watch.source_done  # the run goes on until stopped
            await pilot.press("s")
            assert source.stops == 1
            await settle(pilot, lambda: isinstance(app.screen, ReportScreen))
            assert watch.outcome.stopped and watch.outcome.report is not None

    run_async(body())
    assert [m.paused for m in posted(messages, WatchPaused)] == [True, False]


def test_quit_mid_run_stops_the_source_and_returns_the_outcome(recording: Path, monkeypatch) -> None:
    source = Gated(recording, hold_at=100)

    def fake_run(self) -> None:
        async def drive() -> None:
            async with self.run_test(size=(80, 24)) as pilot:
                await settle(pilot, lambda: self.screen.state.events == 100)
                await pilot.press("q")

        run_async(drive())

    monkeypatch.setattr(app_module.DoctorApp, "run", fake_run)
    outcome = run_watch_app(source, on_stop=source.stop, on_pause=source.pause)
    assert source.stops == 1
    assert outcome.stopped


def test_a_source_that_fails_is_reported_not_raised() -> None:
    def broken() -> Iterator[LiveEvent]:
        yield StepEvent(t_ms=1, step=1, ms=5.0, token="a")
        raise OSError("engine pipe closed")

    messages: list[Message] = []

    async def body() -> None:
        app = make_watch_app(broken())
        async with app.run_test(size=(80, 24), message_hook=messages.append) as pilot:
            watch = app.screen
            await settle(pilot, lambda: watch.source_done)
            assert watch.outcome.error == "OSError: engine pipe closed"
            assert watch.outcome.report is None and watch.outcome.end_reason is None
            assert "source ended" in screen_text(app)
            await pilot.press("r")
            await settle(pilot)
            assert isinstance(app.screen, WatchScreen)  # no report to open

    run_async(body())
    assert [m.has_report for m in posted(messages, RunEnded)] == [False]


def test_charts_fit_the_width(recording: Path) -> None:
    from doctor.views.tui.watch_state import WatchState

    state = WatchState()
    for event in iter_recording(recording):
        state.apply(event)
    for width in (78, 158):
        for content in (timeline_content(state, width), gauges_content(state, width)):
            for line in content.plain.split("\n"):
                assert len(line) <= width, (width, line)


def test_a_callback_source_through_the_event_queue(recording: Path) -> None:
    from doctor.views.tui.event_queue import EventQueue

    events = list(iter_recording(recording))
    queue = EventQueue()
    stop = threading.Event()

    def produce() -> None:  # like run_embedded(..., on_event=queue.put, stop=stop)
        try:
            for event in events:
                if stop.is_set() and not isinstance(event, EndEvent):
                    continue
                queue.put(event)
        finally:
            queue.close()

    async def body() -> None:
        app = make_watch_app(queue, on_stop=stop.set)
        async with app.run_test(size=(80, 24)) as pilot:
            threading.Thread(target=produce, daemon=True).start()
            await settle(pilot, lambda: app.screen.source_done)
            assert app.screen.state.step_count == sum(isinstance(e, StepEvent) for e in events)
            assert app.screen.outcome.end_reason == "finished"

    run_async(body())
    assert queue.closed
    assert list(_closed_queue()) == []


def _closed_queue():
    from doctor.views.tui.event_queue import EventQueue

    q = EventQueue()
    q.close()
    q.close()  # closing twice is harmless
    return q


def test_output_pane_shows_the_tail_with_the_loop_marked() -> None:
    from doctor.views.tui.watch_screen import output_content
    from doctor.views.tui.watch_state import WatchState

    state = WatchState()
    words = ("Once upon a time there was a robot who painted. " + "The sea is blue and deep. " * 40).split(" ")
    for i, word in enumerate(words):
        state.apply(StepEvent(t_ms=i, step=i + 1, ms=5.0, token=word + " "))
    state.apply(StepEvent(t_ms=999, step=999, ms=5.0, token="\x1b[2Jend\x07"))
    content = output_content(state, shown=200)
    plain = content.plain
    assert plain.startswith("…") and len(plain) <= 201 + 8
    assert plain.endswith("end\\x07")  # the ESC sequence dropped, BEL shown as text
    assert "\x1b" not in plain
    marked = [plain[s.start:s.end] for s in content.spans if "reverse" in str(s.style)]
    assert marked and all("sea" in m or "blue" in m or "deep" in m for m in marked)
    full = output_content(state)
    assert full.plain.startswith("Once upon a time")


def test_output_pane_shows_the_log_tail_until_there_is_output() -> None:
    """watch --log / watch -- CMD: no generated text, so the pane shows the newest log lines, numbered
    and inert; once tokens arrive it shows them instead."""
    from doctor.core.events import LogEvent
    from doctor.views.tui.watch_screen import output_content
    from doctor.views.tui.watch_state import LOG_KEPT, WatchState

    state = WatchState()
    assert output_content(state).plain == "(no output yet)"
    for n in range(1, LOG_KEPT + 11):
        state.apply(LogEvent(t_ms=n, line=n, text=f"srv  update_slots: line {n}", stream="file"))
    state.apply(LogEvent(t_ms=1, line=LOG_KEPT + 11, text="title \x1b]0;pwned\x07 done", stream="file"))
    lines = output_content(state).plain.split("\n")
    assert LOG_KEPT == 500 and len(lines) == 500
    assert lines[0] == " 12 srv  update_slots: line 12"  # numbers right-aligned to the widest (511)
    assert lines[-1].startswith(f"{LOG_KEPT + 11} title") and "\x1b" not in lines[-1]
    state.apply(StepEvent(t_ms=2, step=1, ms=5.0, token="Hello"))
    assert output_content(state).plain == "Hello"
