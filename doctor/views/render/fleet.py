"""The fleet view: one row per instance (worst first), then each unhealthy instance's findings.

Text for a terminal or a pipe, JSON with one report per instance. The per-instance reports are the
ordinary Report objects the rule base produced; this module only orders and lays them out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from doctor import __version__
from doctor.core.report import SCHEMA_VERSION, SEVERITY_RANK, Report
from doctor.core.sanitize import inert
from doctor.core.vocab import FailOn
from doctor.views.render.json import _UNSAFE, _escape
from doctor.views.render.style import Style
from doctor.views.render.text import _finding_lines


@dataclass(slots=True)
class FleetRow:
    instance: str
    job: str | None
    engine: str | None
    health: str | None
    report: Report
    notes: list[str] = field(default_factory=list)

    @property
    def worst(self) -> str:
        return self.report.worst() or "ok"

    def rank(self) -> tuple[int, int, str]:
        return (-SEVERITY_RANK.get(self.worst, 0), -len(self.report.findings), self.instance)


@dataclass(slots=True)
class FleetCost:
    queries: int
    series: int
    samples: int | None
    eval_ms: float | None
    wall_ms: float

    def to_json(self) -> dict[str, Any]:
        return {"queries": self.queries, "series_returned": self.series, "samples_read": self.samples,
                "eval_ms": None if self.eval_ms is None else round(self.eval_ms, 3),
                "wall_ms": round(self.wall_ms, 1)}


@dataclass(slots=True)
class FleetView:
    prometheus: str
    window: str
    selector: str
    rows: list[FleetRow]
    cost: FleetCost
    notes: list[str] = field(default_factory=list)

    def ordered(self) -> list[FleetRow]:
        return sorted(self.rows, key=FleetRow.rank)

    def fails(self, threshold: FailOn) -> bool:
        return any(row.report.fails(threshold) for row in self.rows)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "llm-doctor", "version": __version__},
            "command": "fleet",
            "prometheus": self.prometheus,
            "window": self.window,
            "match": self.selector,
            "cost": self.cost.to_json(),
            "instances": [
                {"instance": row.instance, "job": row.job, "engine": row.engine, "health": row.health,
                 "worst": row.worst, "notes": row.notes, "report": row.report.to_json()}
                for row in self.ordered()
            ],
            "notes": self.notes,
        }


def render_fleet_json(view: FleetView) -> str:
    return _UNSAFE.sub(_escape, json.dumps(view.to_json(), indent=2, ensure_ascii=False, default=str)) + "\n"


def render_fleet_text(view: FleetView, style: Style, verbose: bool = False) -> str:
    rows = view.ordered()
    out = [style.paint("bold", f"llm-doctor {__version__} · fleet · {inert(view.prometheus)}")
           + style.paint("dim", f" · {len(rows)} instance{'s' if len(rows) != 1 else ''} · window {view.window}"
                         + (f" · match {{{inert(view.selector)}}}" if view.selector else "")), ""]
    if not rows:
        out.append("No llama-server, vLLM or TGI targets found in this Prometheus (metric families "
                   "llamacpp:*, vllm:*, tgi_*).")
    width = max([len("instance")] + [len(inert(r.instance)) for r in rows])
    if rows:
        out.append(style.paint("dim", f"  {'instance':<{width}}  {'engine':<9}  {'target':<6}  {'worst':<7}  findings"))
    for row in rows:
        kind = row.worst if row.worst in ("error", "warning", "info") else "ok"
        ids = ", ".join(f"{f.id} {f.slug}" for f in row.report.findings) or "-"
        out.append(f"  {inert(row.instance):<{width}}  {row.engine or '?':<9}  {row.health or 'gone':<6}  "
                   f"{style.paint(kind, f'{row.worst:<7}')}  {ids}")
    for row in rows:
        if not row.report.findings and not verbose:
            continue
        out.append("")
        job = f", job {inert(row.job)}" if row.job else ""
        out.append(style.paint("bold", f"{inert(row.instance)}") + style.paint("dim", f" ({row.engine or '?'}{job})"))
        for finding in row.report.findings:
            out.extend(_finding_lines(finding, row.report, style, verbose))
        for note in row.notes:
            out.append(style.paint("dim", f"    note: {inert(note, 300)}"))
    for note in view.notes:
        out.append(style.paint("dim", f"note: {inert(note, 300)}"))
    c = view.cost
    samples = f", {c.samples} samples read" if c.samples is not None else ""
    evaluated = f", {c.eval_ms:.1f} ms evaluating" if c.eval_ms is not None else ""
    out.append("")
    out.append(style.paint("dim", f"Prometheus: {c.queries} queries, {c.series} series returned{samples}{evaluated} "
                                  f"({c.wall_ms:.0f} ms wall)."))
    return "\n".join(out) + "\n"
