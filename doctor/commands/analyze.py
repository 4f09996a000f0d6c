"""`llm-doctor analyze FILE|-`: a saved or pasted log (or a saved scan / recording) → findings."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from doctor.commands.options import add_options
from doctor.core.errors import UsageError

if TYPE_CHECKING:
    from doctor.core.report import Report
    from doctor.core.vocab import Mode
    from doctor.judge.rulebase import RuleBase

HELP = "diagnose a saved or pasted log, a saved scan, or a watch recording"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help=HELP, description=HELP + ". Use - to read standard input (paste a log).")
    p.add_argument("file", nargs="?", help="log file, scan --save file, watch --record file, or - for stdin")
    add_options(p, "analyze")
    p.set_defaults(run=run)


def paste_diagnosis(rulebase: RuleBase, engine: str | None = None,
                    redact: Callable[[Report], Report] | None = None) -> Callable[[bytes], Report]:
    """What the paste screen runs on ctrl+r: the pasted bytes judged as `analyze FILE` judges a log
    (and redacted, with --redact)."""
    from doctor.judge.evaluate import diagnose
    from doctor.sources.logs.entry import analyze_bytes

    def make_report(data: bytes) -> Report:
        facts = analyze_bytes(data, "pasted log")
        report = diagnose(facts, rulebase, command="analyze", mode="analyze", engine=engine)
        return report if redact is None else redact(report)

    return make_report


def run(args: argparse.Namespace) -> int:
    # the judge, the derivations and the log readers are imported here, not with the parser: `--help`
    # and the other commands' runs do not pay for them
    from doctor.commands.flag_check import ENGINES, check_report_flags
    from doctor.commands.output import after_tui, exit_code, redactor, show_report
    from doctor.commands.selection import select_rules
    from doctor.judge.evaluate import diagnose
    from doctor.judge.rulebase import load_rulebase
    from doctor.sources.inputs import load_input

    rulebase = select_rules(args, load_rulebase(args.rules), "analyze")
    for note in rulebase.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.file is None:
        if sys.stdin.isatty():
            # the paste workflow: the TUI offers a paste screen; without it, say how
            if args.tui is not False and args.format is None:
                try:
                    from doctor.views.tui.app import run_paste_app
                except ImportError:
                    pass
                else:
                    r = redactor(args)
                    pasted = run_paste_app(paste_diagnosis(rulebase, args.engine, None if r is None else r.report),
                                           None if r is None else r.text)
                    if pasted is None:
                        return 0
                    after_tui(pasted, args)
                    return exit_code(pasted, args.fail_on)
            raise UsageError("give a log file, or - and paste the log (end with Ctrl-D)")
        args.file = "-"
    if (args.model or args.verify_budget is not None) and not args.verify:
        raise UsageError("--model and --verify-budget go with --verify")
    if args.verify_budget is not None and args.verify_budget <= 0:
        raise UsageError(f"--verify-budget must be positive (got {args.verify_budget:g})")
    loaded = load_input(args.file)
    if args.hardware:
        from doctor.sources.hardware_text import apply as apply_hardware

        apply_hardware(loaded.facts, args.hardware)
    # a saved scan is judged as the scan was (scan checks, no serving-log checks) and shown with its header
    mode: Mode = "scan" if loaded.saved_by == "scan" else "analyze"
    report = diagnose(loaded.facts, rulebase, command="analyze", mode=mode, engine=args.engine)
    if args.engine_binary or report.engine in ENGINES:
        check_report_flags(report, args.engine_binary, loaded.facts.value("engine.binary"))
    if args.verify:
        from doctor.commands.verify_log import verify_log

        verify_log(report, rulebase, args.model, args.verify_budget)
    return show_report(report, args, log_path=None if args.file == "-" else args.file)
