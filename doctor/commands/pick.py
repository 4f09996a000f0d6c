"""The front doors of `models` and `scan`, where a list of models comes before a scan: `models` (the
list, on a terminal: Enter scans one, Esc on its report comes back to the list) and `scan -m DIR`
with several models in the folder (the same list of that folder). Otherwise `models` prints its list
and `scan` scans.

Room: commands, above doctor/commands/models.py (the list and its verdicts, which plan as scan does)
and doctor/commands/scan.py; their parsers name these functions as "doctor.commands.pick:…", which
the CLI imports when the command runs.
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from doctor.commands import models, scan


def browse(view: Any, scan_for: Callable[[Any], argparse.Namespace]) -> int | None:
    """The models list on a terminal; Enter scans the model (`scan_for(row)`: the scan's arguments) and
    shows its report, Esc there comes back to the list (on the model scanned), q quits. Returns the
    exit code of the last scan (0 when none ran), or None when there is no TUI here. What stays on the
    terminal: the list when the user quit it, else the report of the scan they quit from."""
    try:
        from doctor.views.tui.models_screen import run_models_app
    except ImportError:
        return None
    from doctor.commands.output import write_stdout
    from doctor.views.render.models import render_models_text

    code, at = 0, 0
    while True:
        chosen = run_models_app(view, at)
        if chosen is None:
            write_stdout(render_models_text(view))
            return code
        at = view.rows.index(chosen)
        args = scan_for(chosen)
        args.back = True  # Esc on its report comes back here (doctor/commands/output.py show_report)
        code = scan.run(args)
        if not getattr(args, "went_back", False):
            return code


def scan_args(argv: list[str]) -> argparse.Namespace:
    """`llm-doctor scan ARGV` parsed as the command line would be."""
    from doctor.cli import build_parser

    return build_parser(["scan", *argv]).parse_args(["scan", *argv])


def run_models(args: argparse.Namespace) -> int:
    from doctor.commands.output import wants_tui, write_stdout
    from doctor.views.render.models import render_models_json, render_models_text

    view = models.build_view(args)
    if wants_tui(args) and view.rows:
        code = browse(view, lambda row: scan_args(["-m", models.scan_target(row), "--tui"]))
        if code is not None:
            return code
    if args.format == "json":
        write_stdout(render_models_json(view))
    else:
        write_stdout(render_models_text(view, verbose=args.verbose))
    return 0


def run_scan(args: argparse.Namespace) -> int:
    """`scan`: with -m DIR holding several models, on a terminal, the list of that folder first."""
    scan.check_settings(args)
    picked = browse_folder(args)
    return picked if picked is not None else scan.run(args)


def browse_folder(args: argparse.Namespace) -> int | None:
    """`scan -m DIR` with several models in it, on a terminal: the models list of that folder, each
    model scanned with the other options given. None when this is not that case (resolve() then takes
    the one model in the folder, or says which there are, in one line)."""
    from doctor.sources.models.folder import models_in

    if args.model is None or getattr(args, "url", None) or not Path(args.model).expanduser().is_dir():
        return None
    # a choice to make, not a view: a terminal to ask on is enough (the report may still go to a pipe as JSON)
    if not (args.tui is True or (args.tui is None and sys.stdin.isatty() and sys.stderr.isatty())):
        return None
    if len(models_in(Path(args.model))) < 2:
        return None
    if args.save:
        from doctor.commands.output import check_writable

        check_writable(args.save, "--save")
    view = models.build_view(argparse.Namespace(folders=[args.model], ram=getattr(args, "ram", None),
                                                vram=getattr(args, "vram", None)))

    def scan_for(row: Any) -> argparse.Namespace:
        chosen = copy.copy(args)
        chosen.model = row.path
        return chosen

    return browse(view, scan_for)
