"""The JSON view: one document, `schema_version` first, nothing else on stdout."""

from __future__ import annotations

import json

from doctor.report import Report


def render_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2, ensure_ascii=False, default=str) + "\n"
