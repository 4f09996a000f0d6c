"""Shared output for commands that produce a Report: pick the view, write it, choose the exit code."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from doctor.core.redact import Redactor
    from doctor.core.report import Report
    from doctor.core.vocab import FailOn


def add_output_options(parser: argparse.ArgumentParser, command: str = "analyze") -> None:
    """The output and selection options of the shared table (doctor/commands/options.py)."""
    from doctor.commands.options import add_options

    add_options(parser, command, groups=("selection", "output"))


def wants_tui(args: argparse.Namespace) -> bool:
    if args.tui is False or args.format is not None:
        return False
    if args.tui:
        return True
    return sys.stdout.isatty() and sys.stdin.isatty()


def check_writable(path: str, option: str) -> None:
    """A file the command will write (--save, --record): refused before any work when it cannot be."""
    from pathlib import Path

    from doctor.core.errors import UsageError

    p = Path(path).expanduser()
    if p.is_dir():
        raise UsageError(f"{option} {path}: is a directory")
    if not p.parent.is_dir():
        raise UsageError(f"{option} {path}: folder {p.parent} does not exist")
    if not os.access(p.parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"{option} {path}: cannot write there (permission denied)")


def redactor(args: argparse.Namespace) -> Redactor | None:
    """`--redact`: one redactor for the command (watch's, which learned the run's prompt and output,
    when there is one), so that the report, the log pane and the exports lose the same names."""
    if not getattr(args, "redact", False):
        return None
    if getattr(args, "redactor", None) is None:
        from doctor.core.redact import for_this_machine

        args.redactor = for_this_machine()
    made: Redactor = args.redactor
    return made


def redacted(report: Report, args: argparse.Namespace) -> Report:
    r = redactor(args)
    return report if r is None else r.report(report)


def emit(report: Report, args: argparse.Namespace) -> int:
    return _emit(redacted(report, args), args)


def _emit(report: Report, args: argparse.Namespace) -> int:
    fmt = args.format or "text"
    if fmt == "json":
        from doctor.views.render.json import render_json

        text = render_json(report)
    elif fmt == "markdown":
        from doctor.views.render.markdown import render_markdown

        text = render_markdown(report)
    else:
        from doctor.views.render.style import choose_style
        from doctor.views.render.text import render_text

        style = choose_style(sys.stdout.isatty(), sys.stdout.encoding, args.color)
        text = render_text(report, style, verbose=args.verbose)
    write_stdout(text)
    return exit_code(report, args.fail_on)


# exit statuses (README "Exit status"): 0 judged, nothing at or above --fail-on; 1 a finding at or above it;
# 2 usage or input error (one line, no report); 3 internal error; 4 nothing recognised in the input, so
# nothing was judged (a report saying so is printed)
EXIT_NOTHING_RECOGNISED = 4


def exit_code(report: Report, fail_on: FailOn) -> int:
    if report.fails(fail_on):
        return 1
    return EXIT_NOTHING_RECOGNISED if report.verdict() == "nothing_recognised" else 0


def write_stdout(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader went away (| head); that is not an error of ours
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115


def show_report(report: Report, args: argparse.Namespace, log_path: str | None = None) -> int:
    """TUI when wanted and available, else the chosen text view. Returns the exit code.

    When the TUI closes, the text report is printed (`after_tui`): a full-screen app leaves nothing on
    the terminal, and the report is what the user came for. A report opened from a list (`models`:
    args.back) that the user left with Esc prints nothing and sets args.went_back (the list comes again)."""
    if wants_tui(args):
        report = redacted(report, args)
        r = redactor(args)
        try:
            from doctor.views.tui.app import run_report_app
        except ImportError:
            return _emit(report, args)
        if run_report_app(report, log_path=log_path, redact_line=None if r is None else r.text,
                          back=getattr(args, "back", False)):
            args.went_back = True
        else:
            after_tui(report, args)
        return exit_code(report, args.fail_on)
    return emit(report, args)


def after_tui(report: Report, args: argparse.Namespace) -> None:
    """What stays on the terminal once a TUI is gone: the report as the text view shows it (not -v).
    Printed, not Textual's inline mode: the report screen needs the whole terminal, and printed text
    can be scrolled back, searched and copied (commands whole) like any other output."""
    from doctor.views.render.style import choose_style
    from doctor.views.render.text import render_text

    style = choose_style(sys.stdout.isatty(), sys.stdout.encoding, getattr(args, "color", "auto"))
    write_stdout(render_text(report, style, verbose=False))
