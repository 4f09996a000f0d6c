"""The toy engine's log parser (its row: engine.py; its rules: rules/), for tests/logs/test_engine_table.py
only.

"toyd" is not a real engine and its three line shapes are made up for this test: what is tested is
the plumbing an engine goes through (table -> analyzer -> detection -> rules -> --engine), not the
reading of any real log. Real engines' parsers are tested on real logs (fixtures/logs/).

    toyd 0.3.1 listening on :9000
    toyd: context window 2048 tokens
    toyd: request 7: prompt of 3100 tokens cut to the window of 2048
"""

from __future__ import annotations

import re

from doctor.sources.logs.base import LogParser
from doctor.sources.logs.line import LogLine

START = re.compile(r"^toyd (\d+\.\d+\.\d+) listening on ")
WINDOW = re.compile(r"^toyd: context window (\d+) tokens")
CUT = re.compile(r"^toyd: request \d+: prompt of (\d+) tokens cut to the window of (\d+)")


class ToyParser(LogParser):
    name = "toy"
    triggers = (r"toyd[: ]",)
    gate = triggers

    def feed(self, line: LogLine) -> None:
        text = line.text
        if m := START.match(text):
            self.votes["toy"] += 1
            self.set("engine.version", m.group(1), line)
        elif m := WINDOW.match(text):
            self.votes["toy"] += 1
            self.set("config.n_ctx", int(m.group(1)), line)
        elif m := CUT.match(text):
            self.votes["toy"] += 1
            self.event("truncation", line, n_tokens=int(m.group(1)), n_ctx=int(m.group(2)), engine="toy",
                       limit="toy_window")
