"""How little a pasted input held: only a launch command, only llama.cpp's system-info line, or one line.

A finding read from a command line alone is an inference from the settings, not an observation of the run:
`derived.input_thin` says what the input was and `derived.input_missing` what would confirm a finding; the
judge (doctor/judge/evaluate.py) caps such findings' confidence and says both. Decided from where the facts
and events came from: every log line they were read from is a launch command (facts of the launch reader,
doctor/sources/logs/launch.py, and the program's --version lines) or the system-info line; or the input had a
single line.

Derive floor, pure. The strings are written here.
"""

from __future__ import annotations

import re

from doctor.core.facts import Facts, Source

COMMAND = "a launch command"
SYSTEM_INFO = "llama.cpp's system-info line"
ONE_LINE = "one line"
MISSING = {
    COMMAND: "the engine's own start-up lines - the devices it found, the layers it placed, the memory it "
             "allocated - would confirm it",
    SYSTEM_INFO: "the CPU's physical cores from lscpu and the run's timings would confirm it",
    ONE_LINE: "the lines before it - the load, the request that failed - would confirm it",
}
# what a `--version` pasted with the command prints (llama.cpp common/common.cpp: "version: %d (%s)", "built with
# %s for %s"; the tools' "build: %d (%s) with %s for %s"): still only the command and its program
VERSION_LINE = re.compile(r"^\s*(?:version: \d+ \(|build: \d+ \(|built with )")
# parsers whose facts are bookkeeping, not something read from the input's lines
_BOOKKEEPING = ("scanner", "detect", "unexplained")


def derive_thin(facts: Facts) -> None:
    if facts.has("derived.input_thin") or facts.value("run.recognised") is False:
        return
    lines: dict[int, str] = {}
    launch: set[int] = set()
    for fact in facts:
        src = fact.source
        if src.kind != "log" or src.line is None or src.name in _BOOKKEEPING:
            continue
        lines.setdefault(src.line, src.text or "")
        if src.name == "launch":
            span = facts.value("engine.launch_lines")
            launch.update(range(src.line, src.line + (span if isinstance(span, int) and 0 < span < 64 else 1)))
    for event in facts.events():
        if event.line is not None:
            lines.setdefault(event.line, event.text)
    if not lines:
        return
    kind: str | None = None
    if launch and all(n in launch or VERSION_LINE.search(text) for n, text in lines.items()):
        kind = COMMAND
    elif all(n in launch or "system_info" in text for n, text in lines.items()):
        kind = SYSTEM_INFO
    elif facts.value("run.log_lines") == 1:
        kind = ONE_LINE
    if kind is None:
        return
    src = Source("estimate", "thin", text=f"facts read from line(s) {sorted(lines)[:8]}")
    facts.set("derived.input_thin", kind, src)
    facts.set("derived.input_missing", MISSING[kind], src)
