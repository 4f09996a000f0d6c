"""Message templates: `{fact.name}` and `{fact.name|filter}` placeholders filled from Facts.

This is not str.format: a placeholder can only name a fact (or a field of the first matching
event, `{event.n_ctx}`), and the only operations are the fixed filters below. Nothing in a
template can reach attributes, call code or read files. No raw placeholder reaches the user, and no
hole either: a placeholder whose fact is unknown takes its clause with it (doctor/core/clauses.py:
"Lower the context (it was {config.n_ctx})" reads "Lower the context"), and `render_complete` gives
None for a template with such a hole (a fix command is then left out rather than shown without its
number).

Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from doctor.core import clauses
from doctor.core.facts import Event, Facts

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.\[\]]*)(?:\|([a-z0-9_]+))?\}")
# an optional part holds no "[[" (none nest), which also keeps this linear on a line of "[[[[..."
OPTIONAL = re.compile(r"\[\[((?:[^\[\]]|\[(?!\[)|\](?!\]))*)\]\]", re.DOTALL)
# units that read as counts: shown without the unit word (the template says "tokens" itself)
COUNT_UNITS = {"tokens", "layers", "threads", "cores", "sequences", "requests", "GPUs", "steps", "params",
               "lines", "files", "blocks", "count", "lanes", "bits"}
FILTERS = ("raw", "bytes", "mib", "gib", "int", "pct", "ms", "round1", "round2", "lines")
MAX_RENDERED = 2000


@dataclass(frozen=True, slots=True)
class Placeholder:
    name: str
    filter: str | None


def placeholders(template: str) -> list[Placeholder]:
    return [Placeholder(m.group(1), m.group(2)) for m in PLACEHOLDER.finditer(template)]


def render(template: str, facts: Facts, event: Event | None = None) -> str:
    """Fill placeholders. `[[ ... ]]` is an optional part: dropped unless every placeholder in it is known."""
    if "[[" in template:
        template = OPTIONAL.sub(lambda m: m.group(1) if _all_known(m.group(1), facts, event) else "", template)
    template = template.replace(clauses.MARK, "")
    marked = PLACEHOLDER.sub(lambda m: m.group(0) if _all_known(m.group(0), facts, event) else clauses.MARK, template)
    if clauses.MARK in marked:
        template = clauses.drop(marked)
    return _fill(template, facts, event)


def holes(template: str, facts: Facts, event: Event | None = None) -> list[str]:
    """The placeholders outside an optional part whose value is unknown: the clauses `render` drops."""
    required = OPTIONAL.sub("", template) if "[[" in template else template
    return [m.group(1) for m in PLACEHOLDER.finditer(required) if not _all_known(m.group(0), facts, event)]


def describe(template: str) -> str:
    """The template for people with no facts at hand (`explain`): every part shown, values as <name>."""
    return _fill(OPTIONAL.sub(lambda m: m.group(1), template), Facts(), None, describing=True)


def render_complete(template: str, facts: Facts, event: Event | None = None) -> str | None:
    """Like `render`, but None when a placeholder outside an optional part is unknown."""
    required = OPTIONAL.sub("", template) if "[[" in template else template
    if not _all_known(required, facts, event):
        return None
    return render(template, facts, event)


UNKNOWN = "(unknown)"


def _all_known(part: str, facts: Facts, event: Event | None) -> bool:
    for m in PLACEHOLDER.finditer(part):
        name = m.group(1)
        if name.startswith("event."):
            key = name[len("event."):]
            if event is None or (key not in ("line", "text", "phase") and event.data.get(key) is None):
                return False
        elif not facts.has(name):
            return False
    return True


def _fill(template: str, facts: Facts, event: Event | None, describing: bool = False) -> str:
    def repl(match: re.Match[str]) -> str:
        name, filt = match.group(1), match.group(2)
        if name.startswith("event."):
            key = name[len("event."):]
            if event is None:
                return f"<{key}>" if describing else UNKNOWN
            if key == "line":
                value: Any = event.line
            elif key == "text":
                value = event.text
            elif key == "phase":
                value = event.phase
            else:
                value = event.data.get(key)
            if value is None:
                return f"<{key}>" if describing else UNKNOWN
            return _once(format_value(value, None, filt), value, match)
        fact = facts.get(name)
        if fact is None or not fact.known:
            return f"<{name.rsplit('.', 1)[-1]}>" if describing else UNKNOWN
        return _once(format_value(fact.value, fact.unit, filt), fact.value, match)

    out = PLACEHOLDER.sub(repl, template)
    return out if len(out) <= MAX_RENDERED else out[: MAX_RENDERED - 1] + "…"


# the unit after the number: no digits in it, so the decimals of "0.5%" are not taken for its unit ".5%"
_TRAILING_UNIT = re.compile(r"(?<=[\d\s])([^\s\d.,][^\s\d]*)$")


def _once(text: str, value: Any, match: re.Match[str]) -> str:
    """A number's unit is written once: when the template itself goes on with the unit the value
    carries ("{model.storage.read_mb_s} MB/s", "{x}%"), the value gives it up."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return text
    unit = _TRAILING_UNIT.search(text)
    if unit is None:
        return text
    word = unit.group(1)
    follows = re.match(r"\s*" + re.escape(word) + r"(?![\w/])", match.string[match.end():])
    return text[: unit.start()].rstrip() if follows else text


def format_value(value: Any, unit: str | None, filt: str | None = None) -> str:
    """Render a fact value for people: bytes as MiB/GiB, ms as ms or s, ratios as given."""
    if filt == "raw":
        return str(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        shown = ", ".join(format_value(v, unit, filt) for v in value[:8])
        return shown + (f", … ({len(value)} in all)" if len(value) > 8 else "")
    if isinstance(value, int | float):
        if filt == "int":
            return str(round(value))
        if filt == "pct":
            return f"{value * 100:.0f}%"
        if filt == "round1":
            return f"{value:.1f}"
        if filt == "round2":
            return f"{value:.2f}"
        if filt == "mib":
            return f"{value / 2**20:.2f} MiB"
        if filt == "gib":
            return f"{value / 2**30:.2f} GiB"
        if filt == "ms" or (unit == "ms" and filt is None):
            return human_ms(float(value))
        if filt == "bytes" or (unit == "bytes" and filt is None):
            return human_bytes(value)
        text = _number(value)
        if unit and unit not in COUNT_UNITS:
            return f"{text} {unit}" if unit != "%" else f"{text}%"
        return text
    return str(value)


def human_bytes(value: float) -> str:
    sign = "-" if value < 0 else ""
    n = abs(float(value))
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{sign}{n / size:.2f} {unit}"
    return f"{sign}{int(n)} B"


def human_ms(ms: float) -> str:
    if abs(ms) >= 10_000:
        return f"{ms / 1000:.1f} s"
    if abs(ms) >= 1000:
        return f"{ms / 1000:.2f} s"
    if abs(ms) >= 10:
        return f"{ms:.0f} ms"
    return f"{ms:.2f} ms"


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"
