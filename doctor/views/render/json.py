"""The JSON view: one document, `schema_version` first, nothing else on stdout."""

from __future__ import annotations

import json
import re

from doctor.core.report import Report

# Characters json.dumps(ensure_ascii=False) leaves raw that a terminal obeys or that reorder text:
# DEL, C1 controls (8-bit CSI / OSC / ST), bidi overrides and isolates, zero-width and line/paragraph
# separators. JSON syntax outside strings is ASCII, so escaping them as \uXXXX is lossless.
_UNSAFE = re.compile("[\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def render_json(report: Report) -> str:
    return _UNSAFE.sub(_escape, json.dumps(report.to_json(), indent=2, ensure_ascii=False, default=str)) + "\n"
