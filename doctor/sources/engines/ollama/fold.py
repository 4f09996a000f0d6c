"""The Ollama parser's folded lines: its `[GIN]` access lines, read a run at a time.

A busy Ollama server prints one access line per HTTP request and little else; a long log is nearly all
of them. Runs of these (doctor/sources/logs/fold.py) are read here with native passes over the block:
one findall for the status of each line and whether it served an inference call; only
the run's last counted line is read again as a line (the evidence of `run.requests`). The state left is
the one `OllamaParser._gin` leaves line by line: the votes, the requests, the 5xx errors, the inferences
served and the last access line, for the lines `GIN` reads (a latency `GIN` does not read, Go's `1m12s`,
is taken and not counted, as line by line).

Shapes: gin's default log formatter as Ollama uses it (gin-gonic/gin logger.go `defaultLogFormatter`,
v1.7 to v1.11: `[GIN] %v |%s %3d %s| %13v | %15s |%s %-7s %s %#v\\n%s`; v1.12: the latency as
`|%s %8v %s|`), colours off (journald, files, pipes), bare or behind journald's
`Jan 16 04:28:11 gpu-box ollama[1532]: ` prefix, as the recordings in fixtures/logs/ollama/ show them. A
coloured line (a terminal's), an error message after the line, a client that is not an IP address, a path
with quotes, escapes, brackets or bars, or another prefix end a run: those are read line by line.

Pure.
"""

from __future__ import annotations

import re
from collections import Counter

from doctor.sources.engines.ollama.state import OllamaBase
from doctor.sources.logs.hot import HotLines, HotRun, RunLine, run_line

# bounded everywhere: a hot line is never longer than the scanner's cut (doctor/core/lines.py MAX_LINE)
_JOURNALD = r"(?:[A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [A-Za-z0-9._-]{1,64} ollama\[[0-9]{1,10}\]: )?"
_WHEN = r"[0-9]{4}/[0-9]{2}/[0-9]{2} - [0-9]{2}:[0-9]{2}:[0-9]{2}"
_LATENCY = r"[0-9hmnsuµμ.]{1,32}"  # Go's time.Duration: 1h2m3.5s, 1m12s, 3.9s, 14.6ms, 52.113µs, 100ns
_CLIENT = r"[0-9A-Fa-f:.]{1,45}"  # an IPv4 or IPv6 address
_PATH = r'"[^"\\\[\]|\x00-\x1f\x7f]{0,1000}"'  # Go's %#v of a path without quotes, escapes, brackets or bars
_GIN = (rf"{_JOURNALD}\[GIN\] {_WHEN} \| [0-9]{{3}} \| {{1,32}}{_LATENCY} \| {{1,45}}{_CLIENT} \| "
        rf"[A-Z]{{1,16}} {{2,16}}{_PATH}")

HOT = HotLines(
    line=_GIN,
    samples=(  # fixtures/logs/ollama/*.log, /work/shared/corpus: gin's access lines as Ollama's logs hold them
        b'[GIN] 2025/01/20 - 09:12:54 | 200 |   9.514022871s |       127.0.0.1 | POST     "/api/generate"',
        b'[GIN] 2025/01/28 - 21:04:55 | 500 |   112.538811ms |       127.0.0.1 | POST     "/api/generate"',
        b'[GIN] 2025/02/02 - 18:07:16 | 200 |          1m12s |       127.0.0.1 | POST     "/api/chat"',
        b'Jan 16 04:28:11 gpu-box ollama[1532]: [GIN] 2025/01/16 - 04:29:48 | 200 |       52.113\xc2\xb5s |'
        b'       127.0.0.1 | HEAD     "/"',
        b'Jan 16 04:28:11 gpu-box ollama[1532]: [GIN] 2025/01/16 - 04:29:48 | 200 |    14.602118ms |'
        b'       127.0.0.1 | POST     "/api/show"',
        b'Feb 18 19:17:52 node-20e0 ollama[13693]: [GIN] 2026/02/18 - 19:17:52 | 200 | 38.764625903s |'
        b'       127.0.0.1 | POST     "/api/generate"',
    ),
    kinds=("gin_access",),
    probes=(b"[GIN] ",),  # after at most journald's prefix
    probe_within=len("Jan 16 04:28:11  ollama[1234567890]: [GIN] ") + 64,
)

# inside a run every line has the shape above: GIN (patterns.py) read as bytes finds the lines it reads and their
# status; the second group says whether such a line names an inference path (patterns.py INFERENCE_PATH: in this
# shape only a method ending in POST and the path that ends the line can hold it)
_COUNTED = re.compile(rb"\[GIN\] [0-9/]+ - [0-9:]+ \| *([0-9]{3}) *\| *[0-9.]+(?:\xc2\xb5s|\xce\xbcs|us|ms|s|m) *\|"
                      rb" +[0-9A-Fa-f:.]+ \| (?:[A-Z]*(POST) +\"/(?:api/(?:generate|chat|embed|embeddings)"
                      rb"|v1/(?:chat/)?completions|v1/embeddings)\"\r?$)?", re.MULTILINE)


class AccessFold(OllamaBase):
    """The fold of Ollama's access lines into the parser's state."""

    hot = HOT

    def fold_ready(self, kinds: tuple[str, ...]) -> bool:
        return True  # an access line is read alone: nothing waits for a next line

    def read_run(self, run: HotRun) -> tuple[Counter[tuple[bytes, bytes]], RunLine | None]:
        """The lines GIN reads, by (status, b"POST" where it served an inference call, else b""), and the last
        of them."""
        read = Counter(_COUNTED.findall(run.region, run.start, run.end))
        return read, run.at(self._last_counted(run)) if read else None

    def take_run(self, read: tuple[Counter[tuple[bytes, bytes]], RunLine | None], run: HotRun) -> None:
        counts, last = read
        if last is None:
            return
        s = self.s
        counted = counts.total()
        self.votes["ollama"] += counted
        s.requests += counted
        s.errors_5xx += sum(n for (status, _), n in counts.items() if status.startswith(b"5"))
        s.served += counts[b"200", b"POST"]
        s.gin_line = run_line(run.number, last)

    @staticmethod
    def _last_counted(run: HotRun) -> int:
        """The start of the run's last counted line (read backwards: nearly always its last line)."""
        region, end = run.region, run.end
        while end > run.start:
            begin = region.rfind(b"\n", run.start, end - 1) + 1 or run.start
            if _COUNTED.search(region, begin, end):
                return begin
            end = begin
        raise AssertionError("a counted line not found again")  # cannot happen: findall found one
