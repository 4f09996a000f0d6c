"""Read a watch recording back as LiveEvents, to feed the watch screen without a live engine.

A recording is NDJSON: the first line `{"llm_doctor": "trace", ...settings}`, then one
`LiveEvent.to_json()` per line. `Replay` iterates it either as fast as it can (tests) or paced by
the events' own `t_ms` (a demo of a past run), and can be paused and stopped from the UI thread;
stopping skips the pacing so the final EndEvent (and its report) still arrives.

Reads only the given file; the clock and sleep are parameters.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from doctor.core.errors import InputError
from doctor.core.events import LiveEvent, event_from_json

MAX_LINE = 64 << 20


def read_header(path: str | Path) -> dict[str, Any]:
    """The settings on the first line of a recording; InputError if it is not one."""
    with _open(path) as handle:
        first = handle.readline(MAX_LINE)
    return _parse_header(first, str(path))


def iter_recording(path: str | Path, damaged: list[int] | None = None) -> Iterator[LiveEvent]:
    """Every event in the recording, in order (the header line is checked, not yielded).

    A line that is not a JSON event (a run that crashed mid-write) is skipped, and its number is
    appended to `damaged` when a list is given.
    """
    name = str(path)
    with _open(path) as handle:
        _parse_header(handle.readline(MAX_LINE), name)
        for number, raw in enumerate(handle, start=2):
            raw = raw.strip()
            if not raw:
                continue
            try:
                data = json.loads(raw)
            except (ValueError, RecursionError):
                data = None
            event = event_from_json(data) if isinstance(data, dict) else None
            if event is None:  # damaged, or a kind this version does not know
                if damaged is not None:
                    damaged.append(number)
                continue
            yield event


def _open(path: str | Path):
    try:
        return Path(path).open("r", encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"{path}: cannot open ({exc.strerror or exc})") from None


def _parse_header(first: str, name: str) -> dict[str, Any]:
    try:
        head = json.loads(first)
    except ValueError:
        head = None
    if not isinstance(head, dict) or head.get("llm_doctor") != "trace":
        raise InputError(f"{name}: not an llm-doctor watch recording (first line must say \"llm_doctor\": \"trace\")")
    return head


class Replay:
    """An iterable of a recording's events that the UI can pause, resume and stop."""

    def __init__(self, path: str | Path, speed: float | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.path = Path(path)
        self.header = read_header(path)
        self.speed = speed
        self._clock = clock
        self._sleep = sleep
        self._running = threading.Event()
        self._running.set()
        self._stopped = threading.Event()
        self.damaged: list[int] = []

    def pause(self, paused: bool) -> None:
        if paused:
            self._running.clear()
        else:
            self._running.set()

    def stop(self) -> None:
        self._stopped.set()
        self._running.set()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def __iter__(self) -> Iterator[LiveEvent]:
        start = self._clock()
        paused_for = 0.0
        for event in iter_recording(self.path, self.damaged):
            if not self._running.is_set():
                t0 = self._clock()
                self._running.wait()
                paused_for += self._clock() - t0
            if self.speed and not self._stopped.is_set():
                due = start + paused_for + event.t_ms / 1000.0 / self.speed
                while not self._stopped.is_set():
                    wait = due - self._clock()
                    if wait <= 0:
                        break
                    self._sleep(min(wait, 0.05))
                    if not self._running.is_set():
                        t0 = self._clock()
                        self._running.wait()
                        paused_for += self._clock() - t0
                        due = start + paused_for + event.t_ms / 1000.0 / self.speed
            yield event
