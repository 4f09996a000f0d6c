"""Messages the TUI posts when something a user (or a test) cares about happens.

Screens post them to themselves, so they bubble to the app; tests collect them with
`App.run_test(message_hook=...)` and assert on what happened rather than on pixels.
"""

from __future__ import annotations

from pathlib import Path

from textual.message import Message


class CheckSelected(Message):
    """A check (and its finding, when it fired) is now shown in the detail pane."""

    def __init__(self, check_id: str, has_finding: bool) -> None:
        super().__init__()
        self.check_id = check_id
        self.has_finding = has_finding


class EvidenceShown(Message):
    """The log pane moved to an evidence line of the selected finding."""

    def __init__(self, line: int, lines: tuple[int, ...]) -> None:
        super().__init__()
        self.line = line
        self.lines = lines


class FixCopied(Message):
    def __init__(self, text: str, engine: str | None) -> None:
        super().__init__()
        self.text = text
        self.engine = engine


class ReportExported(Message):
    def __init__(self, path: Path, fmt: str) -> None:
        super().__init__()
        self.path = path
        self.fmt = fmt


class PasteDiagnosed(Message):
    """The paste screen turned the pasted text into a report."""

    def __init__(self, lines: int, findings: int) -> None:
        super().__init__()
        self.lines = lines
        self.findings = findings


class FindingChanged(Message):
    """In watch: a finding fired or resolved."""

    def __init__(self, finding_id: str, state: str) -> None:
        super().__init__()
        self.finding_id = finding_id
        self.state = state


class RunEnded(Message):
    """In watch: the run ended (EndEvent), or the event source ran dry without one."""

    def __init__(self, reason: str, has_report: bool) -> None:
        super().__init__()
        self.reason = reason
        self.has_report = has_report


class WatchPaused(Message):
    def __init__(self, paused: bool) -> None:
        super().__init__()
        self.paused = paused
