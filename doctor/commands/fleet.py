"""`llm-doctor fleet --prometheus URL`: every llama-server, vLLM, TGI and SGLang instance a Prometheus scrapes,
judged by the rule base one instance at a time, reported worst first.

The facts come from doctor/sources/live/metrics/prometheus.py (fleet-wide PromQL over a window, the targets'
health, llama-server's /props); each instance gets its own Report from the same rules `watch
--metrics` uses (mode watch), and doctor/views/render/fleet.py lays them out as text or JSON.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from doctor.commands.options import FAIL_ON, duration
from doctor.commands.output import wants_tui, write_stdout

if TYPE_CHECKING:
    from doctor.judge.rulebase import RuleBase
    from doctor.sources.live.metrics.prometheus import Fleet
    from doctor.views.render.fleet import FleetView

HELP = "diagnose every llama-server / vLLM / TGI / SGLang instance a Prometheus scrapes"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fleet", help=HELP, description=HELP + ". One row per instance, worst first, "
                       "with findings, evidence (the PromQL and its values) and fixes.")
    p.add_argument("--prometheus", required=True, metavar="URL", help="Prometheus base URL, e.g. http://prom:9090")
    p.add_argument("--match", metavar="SELECTOR", default="",
                   help='label matchers every query is limited to, e.g. \'job="llama-server"\' or \'{env=~"prod.*"}\'')
    p.add_argument("--duration", type=duration, default=300.0, metavar="D",
                   help="the window the rates and maxima are taken over (default 5m; e.g. 90s, 10m, 1h)")
    p.add_argument("--no-props", dest="props", action="store_false",
                   help="do not ask llama-server instances for /props (their slot count and size)")
    p.add_argument("--format", choices=("text", "json"), default=None,
                   help="output format (default: the fleet screen on a terminal when textual is installed, else text)")
    tui = p.add_mutually_exclusive_group()
    tui.add_argument("--tui", dest="tui", action="store_true", default=None, help="force the interactive view")
    tui.add_argument("--no-tui", dest="tui", action="store_false", help="never open the interactive view")
    p.add_argument("--fail-on", choices=FAIL_ON, default="error",
                   help="exit 1 when any instance has a finding at or above this severity (default: error)")
    p.add_argument("--rules", action="append", metavar="DIR", default=[],
                   help="extra rule folder (repeatable; also LLM_DOCTOR_RULES)")
    p.add_argument("-v", "--verbose", action="store_true", help="every instance, all evidence, every engine's fix")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour in text output")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from doctor.judge.rulebase import load_rulebase
    from doctor.sources.live.metrics.prometheus import PrometheusClient, collect, parse_selector

    selector = parse_selector(args.match)
    rulebase = load_rulebase(args.rules)
    for note in rulebase.notes:
        print(f"llm-doctor: {note}", file=sys.stderr)
    client = PrometheusClient(args.prometheus)
    fleet = collect(client, duration_s=args.duration, selector=selector, props=args.props)
    view = build_view(fleet, rulebase)
    if wants_tui(args) and _textual_installed():
        from doctor.views.tui.fleet_screen import run_fleet_app

        run_fleet_app(view)
        return 1 if view.fails(args.fail_on) else 0
    if args.format == "json":
        from doctor.views.render.fleet import render_fleet_json

        write_stdout(render_fleet_json(view))
    else:
        from doctor.views.render.fleet import render_fleet_text
        from doctor.views.render.style import choose_style

        style = choose_style(sys.stdout.isatty(), sys.stdout.encoding, args.color)
        write_stdout(render_fleet_text(view, style, verbose=args.verbose))
    return 1 if view.fails(args.fail_on) else 0


def build_view(fleet: Fleet, rulebase: RuleBase) -> FleetView:
    """One Report per instance, through the rule base (mode watch: the rules `watch --metrics` uses)."""
    from doctor.judge.evaluate import diagnose
    from doctor.views.render.fleet import FleetCost, FleetRow, FleetView

    rows = []
    for inst in fleet.instances:
        report = diagnose(inst.facts, rulebase, command="fleet", mode="watch", engine=inst.engine)
        rows.append(FleetRow(inst.instance, inst.job, inst.engine, inst.health, report, list(inst.notes)))
    costs = fleet.costs
    samples = [c.samples for c in costs if c.samples is not None]
    evals = [c.eval_ms for c in costs if c.eval_ms is not None]
    cost = FleetCost(len(costs), sum(c.series for c in costs), sum(samples) if samples else None,
                     sum(evals) if evals else None, sum(c.wall_ms for c in costs))
    return FleetView(fleet.prometheus, fleet.window, fleet.selector, rows, cost, list(fleet.notes))


def _textual_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("textual") is not None
