"""LM Studio: identity by evidence (its paths in llama.cpp's lines, `lms load`'s own lines) and the
settings `lms load` prints. The llama.cpp lines themselves are the llama.cpp parser's; LM Studio wraps
llama.cpp in the engine table, so a log with its evidence is LM Studio's and its fixes are said in
LM Studio's words (patterns.py cites the strings).

Pure.
"""

from __future__ import annotations

from doctor.sources.engines.lmstudio.engine import ENGINE
from doctor.sources.engines.lmstudio.patterns import (
    CONTEXT_LENGTH,
    GPU_OFFLOAD,
    GUARDRAIL,
    KINDS,
    LOAD_KIND,
    PATH,
    PATH_KIND,
)
from doctor.sources.logs.base import LogParser, reads
from doctor.sources.logs.line import LogLine


class LmStudioParser(LogParser):
    name = ENGINE.name
    kinds = KINDS

    def feed(self, line: LogLine) -> None:
        if self.passes_gate(line.text):
            self.dispatch(line)

    @reads(PATH_KIND)
    def _path(self, line: LogLine) -> bool:
        if PATH.search(line.text):
            self.votes[ENGINE.name] += 1
        return False  # the llama.cpp line is read for its own facts too

    @reads(LOAD_KIND)
    def _load(self, line: LogLine) -> bool:
        t = line.text
        m = CONTEXT_LENGTH.search(t)
        if m:
            self.votes[ENGINE.name] += 1
            self.set("config.n_ctx", int(m.group(1).replace(",", "")), line)
            return True
        m = GPU_OFFLOAD.search(t)
        if m:
            self.votes[ENGINE.name] += 1
            return True
        if GUARDRAIL.search(t):
            self.votes[ENGINE.name] += 1
            return True
        return False
