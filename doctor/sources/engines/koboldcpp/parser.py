"""KoboldCpp: identity by evidence (its launcher's and adapter's own lines, patterns.py cites them).
The llama.cpp lines it prints are the llama.cpp parser's; KoboldCpp wraps llama.cpp in the engine table,
so a log with its lines is KoboldCpp's and its fixes are said with its launcher's flags (engine.py).

Pure.
"""

from __future__ import annotations

from doctor.sources.engines.koboldcpp.engine import ENGINE
from doctor.sources.engines.koboldcpp.patterns import GENERATING, IDENTITY_KIND, KINDS, PROCESSING, PROGRESS_KIND
from doctor.sources.logs.base import LogParser, reads
from doctor.sources.logs.line import LogLine


class KoboldCppParser(LogParser):
    name = ENGINE.name
    kinds = KINDS

    def feed(self, line: LogLine) -> None:
        if self.passes_gate(line.text):
            self.dispatch(line)

    @reads(IDENTITY_KIND)
    def _identity(self, line: LogLine) -> bool:
        self.votes[ENGINE.name] += 1
        return True

    @reads(PROGRESS_KIND)
    def _progress(self, line: LogLine) -> bool:
        """A request's prompt processing or generation (a line may hold both, and an error after them)."""
        t = line.text
        prefill, decode = PROCESSING.search(t), GENERATING.search(t)
        if prefill is None and decode is None:
            return False
        self.votes[ENGINE.name] += 1
        self.mark("prefill", line)
        if decode is not None:
            self.mark("decode", line)
        return True
