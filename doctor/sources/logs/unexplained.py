"""Never silent: lines that read as errors which no parser read and no explained failure covers.

A paste of one line nobody catalogued (`Error: something went wrong`), or a healthy-looking log with a stray
`ERROR ... failed to ...`, used to end as "Nothing to judge" or "No problems found". This parser keeps the
candidate lines whose words say error (error, failed, failure, exception, fatal, abort, panic, killed, an exit
status that is not 0, a core dump) and, once every other parser has summarised, quotes the first few that
nothing read - no event or fact came from them, and the catalogue does not list them as benign - as
`run.unexplained_errors` and `run.unexplained_lines`, which an info rule of class engine.unexplained reports.
Where another parser's event already explains the run (an out-of-memory, a crash cause, a failed load, a
refused prompt, a catalogued error), the lines around it are its symptoms and nothing is said.

Cheap by construction: it sees only the lines its triggers select (words every engine's error lines hold,
most of them other parsers' triggers already), keeps at most KEPT of them and counts the rest, and decides at
the summary. Its facts do not make an input recognised as an engine's (`recognises = False`), so one unknown
line is quoted, not judged as a run that went well.

Pure: text in, facts out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from doctor.core.facts import Facts, Source
from doctor.sources.logs.base import LineKind, LineKinds, LogParser, lines_read, reads
from doctor.sources.logs.line import LogLine

KEPT = 64  # candidate lines kept for the summary (the count goes on)
QUOTED = 3  # lines quoted in the finding
QUOTE_CHARS = 200

# the words of an error line (the scan's fragments: RE2 syntax)
FRAGMENTS = (
    r"[Ee]rror|ERROR|[Ff]ailed|FAILED|[Ff]ailure|[Ee]xception|[Ff]atal|FATAL|[Aa]bort|ABORT|[Pp]anic|PANIC",
    r"[Kk]illed|core dumped|[Ee]xit (?:status|code) [1-9-]|[Ss]egmentation fault|Traceback \(most recent",
)
# an error as logs say it: a level (ERROR, level=error, [error]), a message that starts "Error:" or names an
# exception type, or the words of a failure; an "error" in prose (a comment, a sentence) is not one
ERROR_WORDS = re.compile(r"\b(?:ERROR|FATAL|CRITICAL|PANIC|FAILED|FAILURE)\b|\blevel=(?:error|fatal)\b"
                         r"|\[(?:error|fatal|ERROR|FATAL|E)\]|\berror(?:\s+\d+)?:|\bError\b|\b[A-Z]\w*(?:Error|Exception)\b"
                         r"|\b(?:[Ff]ailed|[Ff]ailure|[Ff]atal|[Aa]bort(?:ed|ing)?|[Kk]illed)\b|\bpanic:"
                         r"|core dumped|[Ee]xit (?:status|code) -?[1-9]|[Ss]egmentation fault"
                         r"|Traceback \(most recent call last\)")
# the bare word, as a message says it ("unexpected error in ..."); not after a comment mark (a config file's prose)
LOOSE_ERROR = re.compile(r"\berror\b")


def _reads_as_error(text: str) -> bool:
    if ERROR_WORDS.search(text):
        return True
    m = LOOSE_ERROR.search(text)
    return m is not None and "#" not in text[:m.start()] and "//" not in text[:m.start()]


# words that say no error happened, or name a setting: not an error line
BENIGN = re.compile(r"\b(?:no|0|zero|without|ignore|ignoring|suppress\w*) (?:errors?|failures?|exceptions?)\b"
                    r"|\b(?:errors?|failures?|failed|exceptions?)\s*[=:]\s*(?:0|none|null|nil|false|\[\]|\{\})(?!\.\d)"
                    r"|\berr(?:or)?=<nil>|\b(?:on|ignore|raise|log|handle)_errors?\b|--\w*(?:error|fail)\w*"
                    r"|\berror[-_ ]?(?:rate|handler|handling|correction|bars?|messages? = 0)\b"
                    r"|\b(?:retrying|will retry|retry \d)|[Ff]ailed to (?:import|load) \w+ (?:extension|plugin)"
                    r"|\bwarn(?:ing)?\b.*\bdeprecat", re.IGNORECASE)
# the events that explain a failure: the lines around them are its symptoms
EXPLAINING = ("oom", "alloc_failed", "crash", "crash_cause", "load_failed", "context_failed", "decode_failed",
              "gpu_init_failed", "no_gpu", "prompt_too_long", "ctx_full", "kv_capacity", "preempted",
              "host_oom_kill", "truncation")

ERROR_KIND = LineKind("error", (), FRAGMENTS)
KINDS = LineKinds(ERROR_KIND)


@dataclass(slots=True)
class _State:
    kept: list[tuple[int, str, str]] = field(default_factory=list)  # (line number, text, raw)
    more: int = 0  # candidates past KEPT


class UnexplainedParser(LogParser):
    alone = True  # its lines go to it alone unless another parser's triggers select them too (logs/router.py)
    name = "unexplained"
    kinds = KINDS
    recognises = False  # it says what nothing else read; that alone is no engine's output

    def __init__(self) -> None:
        super().__init__()
        self.s = _State()

    @reads(ERROR_KIND)
    def _error(self, line: LogLine) -> bool:
        s = self.s
        t = line.text
        if not _reads_as_error(t) or BENIGN.search(t):
            return False
        if len(s.kept) >= KEPT:
            s.more += 1
        else:
            s.kept.append((line.number, t, line.raw))
        return True

    def summarize(self, facts: Facts) -> None:
        s = self.s
        if not s.kept or any(facts.event_count(kind) for kind in EXPLAINING) or _catalogued_error(facts):
            return
        read = lines_read(facts, skip_sources=("scanner", "detect"))
        benign = _benign_catalogue()
        unread = [(n, raw) for n, text, raw in s.kept if n not in read and not benign(text)]
        if not unread:
            return
        count = len(unread) + s.more
        quoted = "; ".join(f'line {n}: "{_quote(raw)}"' for n, raw in unread[:QUOTED])
        first = unread[0]
        src = Source("log", self.name, first[0], first[1][:300])
        facts.set("run.unexplained_errors", count, src)
        facts.set("run.unexplained_lines", quoted + (f"; and {count - QUOTED} more" if count > QUOTED else ""), src)


def _quote(raw: str) -> str:
    text = " ".join(raw.split())
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS - 1] + "…"


def _catalogued_error(facts: Facts) -> bool:
    """A catalogued warning or error of an engine another rule reports (doctor/sources/catalogue)."""
    return any(e.data.get("level") in ("error", "warning") and e.data.get("class") not in (None, "", "info")
               for e in facts.events("message"))


def _benign_catalogue() -> Callable[[str], bool]:
    """`test(text)`: a line the message catalogue lists for some engine (an informational or benign message
    that happens to hold an error word: `... (no errors)`, a retry notice)."""
    from doctor.sources.catalogue.parser import catalogue_set

    messages = catalogue_set()
    benign_ids = {i for i, entry in enumerate(messages.entries) if not entry.diagnostic}

    def test(text: str) -> bool:
        return any(i in benign_ids for i in messages.indices(text))

    return test
