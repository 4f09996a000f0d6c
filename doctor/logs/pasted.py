"""Settings and output pasted beside a log: greedy sampling settings, and the text the model wrote.

People report a loop by pasting their call (`llm(prompt, temperature=0)`, a JSON request with
`"temperature": 0`, `--temp 0`, `PARAMETER temperature 0`, `do_sample=False`) next to the answer
that repeats one paragraph. No engine printed that answer, so no engine parser reads it. Once a
greedy setting is seen, this parser keeps the prose between the candidate lines (lines that look
like log records - timestamps, levels, key=value - are left out) as the output, which the
repetition check (doctor/repetition.py, through run.output_text) then reads. It casts no engine vote
and never overrides output or settings an engine parser read.

Pure.
"""

from __future__ import annotations

import re

from doctor.facts import Facts, Source
from doctor.logs.base import LogParser
from doctor.logs.line import LogLine
from doctor.logs.matcher import gated

TEMPERATURE = gated(r"""(?:\btemperature['"]?\s*[=:]\s*|--temp(?:erature)?[ =]|PARAMETER temperature |"""
                    r"""parameter temperature )(-?\d+(?:\.\d+)?)""")
TOP_K = gated(r"""\btop_k['"]?\s*[=:]\s*(\d+)|--top-k[ =](\d+)""")
GREEDY_FLAG = gated(r"""\bdo_sample['"]?\s*[=:]\s*(?:False|false)\b|\bgreedy\b""")
PENALTY = gated(r"""\b(?:repeat_penalty|repetition_penalty)['"]?\s*[=:]\s*(\d+(?:\.\d+)?)"""
                r"""|--repeat-penalty[ =](\d+(?:\.\d+)?)""")
# a physical line that is a log record rather than prose a model wrote
LOG_RECORD = re.compile(r"^\s*(?:\S+\s+\|\s|\[?\d{4}[-/]\d\d[-/]\d\d|\d\d-\d\d \d\d:|[A-Z][a-z]{2} +\d+ \d\d:\d\d|"
                        r"time=|level=|\[GIN\]|(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE)\b|\w+(?:\.\w+)*: |"
                        r"File \"|Traceback|\{|>>>|\$ )")
TRIGGERS: tuple[str, ...] = (
    r"temperature['\"]?\s*[=:]|--temp|PARAMETER temperature|parameter temperature",
    r"do_sample['\"]?\s*[=:]|\bgreedy\b", r"top_k['\"]?\s*[=:]|--top-k",
    r"repeat_penalty|repetition_penalty|--repeat-penalty",
)
MAX_OUTPUT = 64 * 1024
MAX_SCANNED = 256 * 1024  # a paste is short: past this much text between candidates, stop looking


class PastedParser(LogParser):
    name = "pasted"
    triggers = TRIGGERS
    gate = TRIGGERS

    def __init__(self) -> None:
        super().__init__()
        self.greedy_line: LogLine | None = None
        self.settings: dict[str, tuple[float, LogLine]] = {}
        self.output: list[str] = []
        self.output_line: int | None = None
        self.size = 0
        self.scanned = 0

    def feed(self, line: LogLine) -> None:
        t = line.text
        if not self.passes_gate(t):
            return
        m = TEMPERATURE.search(t)
        if m:
            value = float(m.group(1))
            self.settings.setdefault("temperature", (value, line))
            if value <= 0.1:
                self.greedy_line = self.greedy_line or line
        m = TOP_K.search(t)
        if m:
            value = float(m.group(1) or m.group(2))
            self.settings.setdefault("top_k", (value, line))
            if value == 1:
                self.greedy_line = self.greedy_line or line
        if GREEDY_FLAG.search(t):
            self.greedy_line = self.greedy_line or line
            self.settings.setdefault("temperature", (0.0, line))  # greedy decoding: temperature 0 in effect
        m = PENALTY.search(t)
        if m:
            self.settings.setdefault("repeat_penalty", (float(m.group(1) or m.group(2)), line))

    def wants_capture(self) -> bool:
        return self.greedy_line is not None and self.size < MAX_OUTPUT and self.scanned < MAX_SCANNED

    def feed_gap(self, number: int, text: str) -> None:
        self.scanned += len(text)
        kept = [ln for ln in text.splitlines() if ln.strip() and not LOG_RECORD.match(ln)]
        if not kept:
            return
        if self.output_line is None:
            self.output_line = number
        chunk = "\n".join(kept) + "\n"
        self.output.append(chunk)
        self.size += len(chunk)

    def summarize(self, facts: Facts) -> None:
        if self.greedy_line is None:
            return
        for key, (value, line) in self.settings.items():
            name = f"sampling.{key}"
            if not facts.has(name):
                facts.set(name, int(value) if key == "top_k" else value, self.src(line))
        if self.output and not facts.has("run.output_text"):
            facts.set("run.output_text", "".join(self.output)[-8192:],
                      Source("log", self.name, self.output_line, "pasted output"))
