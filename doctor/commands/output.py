"""Shared output for commands that produce a Report: pick the view, write it, choose the exit code."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from doctor.report import Report

FORMATS = ("text", "json", "markdown")
FAIL_ON = ("error", "warning", "info", "none")


def add_output_options(parser: argparse.ArgumentParser, formats: tuple[str, ...] = FORMATS) -> None:
    parser.add_argument("--format", choices=formats, default=None,
                        help="output format (default: the TUI on a terminal when installed, else text)")
    parser.add_argument("--fail-on", choices=FAIL_ON, default="error",
                        help="exit 1 when a finding is at or above this severity (default: error)")
    parser.add_argument("--engine", choices=("llama.cpp", "llama-cpp-python", "ollama", "vllm", "tgi"),
                        help="whose flags the fixes use (default: the engine detected)")
    parser.add_argument("--rules", action="append", metavar="DIR", default=[],
                        help="extra rule folder (repeatable; also LLM_DOCTOR_RULES)")
    parser.add_argument("-v", "--verbose", action="store_true", help="every check, all evidence, every engine's fix")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour in text output")
    parser.add_argument("--redact", action="store_true",
                        help="remove home paths, user and host names, IP/MAC/e-mail addresses, UUIDs and the "
                             "prompt/output text, so the report can be pasted into a public issue")
    tui = parser.add_mutually_exclusive_group()
    tui.add_argument("--tui", dest="tui", action="store_true", default=None, help="force the interactive view")
    tui.add_argument("--no-tui", dest="tui", action="store_false", help="never open the interactive view")


def wants_tui(args: argparse.Namespace) -> bool:
    if args.tui is False or args.format is not None:
        return False
    if args.tui:
        return True
    return sys.stdout.isatty() and sys.stdin.isatty()


def redacted(report: Report, args: argparse.Namespace) -> Report:
    if not getattr(args, "redact", False):
        return report
    from doctor.redact import for_this_machine

    return for_this_machine().report(report)


def emit(report: Report, args: argparse.Namespace) -> int:
    report = redacted(report, args)
    fmt = args.format or "text"
    if fmt == "json":
        from doctor.render.json import render_json

        text = render_json(report)
    elif fmt == "markdown":
        from doctor.render.markdown import render_markdown

        text = render_markdown(report)
    else:
        from doctor.render.style import choose_style
        from doctor.render.text import render_text

        style = choose_style(sys.stdout.isatty(), sys.stdout.encoding, args.color)
        text = render_text(report, style, verbose=args.verbose)
    write_stdout(text)
    return exit_code(report, args.fail_on)


# exit statuses (README "Exit status"): 0 judged, nothing at or above --fail-on; 1 a finding at or above it;
# 2 usage or input error (one line, no report); 3 internal error; 4 nothing recognised in the input, so
# nothing was judged (a report saying so is printed)
EXIT_NOTHING_RECOGNISED = 4


def exit_code(report: Report, fail_on: str) -> int:
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
    """TUI when wanted and available, else the chosen text view. Returns the exit code."""
    if wants_tui(args):
        report = redacted(report, args)
        try:
            from doctor.tui.app import run_report_app
        except ImportError:
            pass
        else:
            run_report_app(report, log_path=log_path)
            return exit_code(report, args.fail_on)
    return emit(report, args)
