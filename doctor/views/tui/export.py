"""The export key: write the shown report as Markdown or JSON to a new file and say where.

The file goes in the given folder (the current directory from the app) under a name that says
what and when, `llm-doctor-analyze-20260102-150405.md`; an existing file is never overwritten.
Writes one file; the time is a parameter.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from doctor.core.report import Report

FORMATS = {"markdown": "md", "json": "json"}


def render(report: Report, fmt: str) -> str:
    if fmt == "json":
        from doctor.views.render.json import render_json

        return render_json(report)
    if fmt == "markdown":
        from doctor.views.render.markdown import render_markdown

        return render_markdown(report)
    raise ValueError(f"unknown export format {fmt!r}")


def export_name(report: Report, fmt: str, now: datetime) -> str:
    return f"llm-doctor-{report.command}-{now:%Y%m%d-%H%M%S}.{FORMATS[fmt]}"


def export_report(report: Report, fmt: str, directory: Path, now: datetime) -> Path:
    """Write the report; returns the absolute path. Raises OSError when the folder is not writable."""
    text = render(report, fmt)
    base = export_name(report, fmt, now)
    stem, dot, ext = base.rpartition(".")
    for n in range(1000):
        name = base if n == 0 else f"{stem}-{n}{dot}{ext}"
        path = (directory / name).absolute()
        try:
            with path.open("x", encoding="utf-8") as handle:
                handle.write(text)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"too many exports named {base} in {directory}")
