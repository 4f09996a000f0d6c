"""`llm-doctor analyze FILE|-`: a saved or pasted log (or a saved scan / recording) → findings."""

from __future__ import annotations

import argparse
import sys

from doctor.commands.output import add_output_options, show_report
from doctor.errors import UsageError
from doctor.evaluate import diagnose
from doctor.inputs import read_input
from doctor.rulebase import load_rulebase

HELP = "diagnose a saved or pasted log, a saved scan, or a watch recording"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("analyze", help=HELP, description=HELP + ". Use - to read standard input (paste a log).")
    p.add_argument("file", nargs="?", help="log file, scan --save file, watch --record file, or - for stdin")
    p.add_argument("--verify", action="store_true",
                   help="try each fix that is a setting on this machine with the embedded engine, when the model "
                        "file the log names is here (or --model); otherwise say which command checks it")
    p.add_argument("--model", metavar="PATH", help="with --verify: the GGUF file to re-run (default: the log's)")
    p.add_argument("--verify-budget", type=float, default=None, metavar="SECONDS",
                   help="time for all of --verify's runs together (default 120)")
    add_output_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    rulebase = load_rulebase(args.rules)
    for note in rulebase.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.file is None:
        if sys.stdin.isatty():
            # the paste workflow: the TUI offers a paste screen; without it, say how
            if args.tui is not False and args.format is None:
                try:
                    from doctor.tui.app import run_paste_app
                except ImportError:
                    pass
                else:
                    return run_paste_app(rulebase, args)
            raise UsageError("give a log file, or - and paste the log (end with Ctrl-D)")
        args.file = "-"
    if (args.model or args.verify_budget is not None) and not args.verify:
        raise UsageError("--model and --verify-budget go with --verify")
    if args.verify_budget is not None and args.verify_budget <= 0:
        raise UsageError(f"--verify-budget must be positive (got {args.verify_budget:g})")
    facts = read_input(args.file)
    report = diagnose(facts, rulebase, command="analyze", mode="analyze", engine=args.engine)
    if args.verify:
        from doctor.commands.verify_log import verify_log

        verify_log(report, rulebase, args.model, args.verify_budget)
    return show_report(report, args, log_path=None if args.file == "-" else args.file)
