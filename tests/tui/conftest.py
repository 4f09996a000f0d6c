"""Helpers for the TUI tests: run an app headless, wait for it to settle, read what it shows."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

TUI_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "traces" / "tui"
LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run one async test body (no pytest-asyncio needed)."""
    return asyncio.run(coro)


async def settle(pilot: Any, until: Callable[[], bool] | None = None, rounds: int = 400) -> None:
    """Let messages, workers and (optionally) a condition settle; fails if `until` never holds."""
    for _ in range(rounds):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        if until is None or until():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the app did not reach the expected state")


def posted(messages: list[Any], kind: type) -> list[Any]:
    """Messages of one kind, each once (the hook sees a message at every node it bubbles through)."""
    return list({id(m): m for m in messages if isinstance(m, kind)}.values())


def notices(app: Any) -> list[str]:
    """The notifications the app has shown (and not yet expired)."""
    return [n.message for n in app._notifications]


def screen_text(app: Any) -> str:
    """Every cell of the current screen as plain text, one line per row."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def terminal_output(app: Any) -> str:
    """What a full redraw would write to the terminal, escape codes and all."""
    from rich.console import Console

    update = app.screen._compositor.render_full_update()
    return update.render_segments(Console(force_terminal=True, color_system="truecolor", width=app.size.width))


@pytest.fixture(scope="session")
def tui_fixtures() -> Path:
    return TUI_FIXTURES


@pytest.fixture(scope="session")
def recording(tui_fixtures: Path) -> Path:
    return tui_fixtures / "smollm2-loop.ndjson"
