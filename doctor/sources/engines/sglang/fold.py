"""The SGLang parser's folded lines: the scheduler's `Prefill batch` / `Decode batch` lines, read a run at a time.

A busy SGLang server prints a batch line for each prefill and, every `decode_log_interval` steps, for the
decode; a long log is nearly all of them. Runs of these (doctor/sources/logs/fold.py) are read here with
native passes over the block: one findall for each number the parser keeps (the running and queued
requests, the KV usage, the decode rate), max/min for the extremes; only the extremes' lines and the first
decode rates (kept for the median, parser.py) are read again as lines. The state left is the one
`SglangParser._batch` leaves line by line: the votes, the three extremes and the decode rates. As it,
a line's number is the last of its name in the line (`full token usage: .., swa token usage: ..` gives
the second), a queue is counted on decode lines only.

Shapes: the format strings of SGLang's scheduler, read at 0.4.3 and 0.4.6 (srt/managers/scheduler.py
`log_prefill_stats`, `log_decode_stats`) and 0.5.23 (srt/managers/scheduler_components/metrics_reporter.py,
its pool stats from pool_stats_observer.py `get_prefill_usage_msg_parts` / `get_decode_usage_msg_parts`):
`Prefill batch[(mixed #running-req: M)][ [iter]][.,] ` or `Decode batch[ [iter]][.,] ` and `name: value`
fields joined by `, `, the names those versions print, numbers, `cache hit rate: N%`, `cuda graph: True`;
behind the logger's `[%(asctime)s[.%(msecs)03d][ DPn][ PPn][ ATTN_CPn][ MOE_DPn][ TPn][ EPn]] ` stamp with
its date (srt/utils.py `configure_logger`, scheduler.py's prefix), as fixtures/logs/sglang/ shows them. A
stamp without a date (0.3's `[%H:%M:%S TP0] `: the llama.cpp parser would read such a line with the next,
patterns.py LINE_START), an `inf`, the MFU estimates, another prefix (a container runtime's) end a run:
those are read line by line.

Pure.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

from doctor.sources.engines.sglang.state import GEN_TPS_KEPT, SglangBase
from doctor.sources.logs.base import Extremes
from doctor.sources.logs.hot import HotLines, HotRun

# bounded everywhere: a hot line is never longer than the scanner's cut (doctor/core/lines.py MAX_LINE)
_STAMP = (r"\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{3})?"
          r"(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)[0-9]{1,6}){0,6}\] ")
_NUM = r"[0-9]{1,20}(?:\.[0-9]{1,20})?"
_NAMES = (  # every numeric field of the batch lines at 0.4.3, 0.4.6 and 0.5.23
    "#new-seq", "#new-token", "#cached-token", "token usage", "full token usage", "swa token usage", "mamba usage",
    "#running-req", "#queue-req", "#pending-token", "#replay-token", "#bootstrap-req", "#inflight-req",
    "#optimistic-req", "#unbootstrapped-req", "#transferring-req", "waiting-image-req",
    r"input throughput \(token/s\)", "#token", "#full token", "#swa token", "mamba num", "#gpu token",
    "gpu token usage", "#cpu token", "cpu token usage", "accept len", "accept rate", "cap len", "block accept len",
    "pre-allocated usage", "#prealloc-req", "#transfer-req", "#host-receive-req", "#retracted-req",
    r"gen throughput \(token/s\)",
)
_FIELD = (rf"(?:(?:{'|'.join(_NAMES)}): {_NUM}|cache hit rate: {_NUM}%|(?:cuda|cpu|npu|musa) graph: "
          r"(?:True|False))")
_HEAD = r"(?:Prefill batch(?:\(mixed #running-req: [0-9]{1,9}\))?|Decode batch)(?: \[[0-9]{1,20}\])?[.,] "
# #running-req is in every batch line (what makes the parser take it: one of the numbers it reads)
_BATCH = rf"{_STAMP}{_HEAD}(?:{_FIELD}, ){{0,32}}#running-req: {_NUM}(?:, {_FIELD}){{0,32}}(?:, | )?"

HOT = HotLines(
    line=_BATCH,
    samples=(  # fixtures/logs/sglang/: the 0.4.3 and 0.5.23 lines
        b"[2025-02-14 10:03:32 TP0] Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 1, cache hit rate: "
        b"14.29%, token usage: 0.00, #running-req: 0, #queue-req: 0",
        b"[2025-02-14 10:03:40 TP0] Decode batch. #running-req: 1, #token: 47, token usage: 0.00, gen throughput "
        b"(token/s): 5.94, #queue-req: 0",
        b"[2026-03-11 09:20:02 TP0] Prefill batch, #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: "
        b"0.02, #running-req: 0, #queue-req: 1, #pending-token: 4311, ",
    ),
    kinds=("sglang_batch",),
    probes=(b"Prefill batch", b"Decode batch"),  # after the stamp
    probe_within=len("[2026-03-11 09:20:02.123 DP123456 PP123456 ATTN_CP123456 MOE_DP123456 TP123456 EP123456] ")
    + len("Prefill batch"),
)

# inside a run every line has the shape above, once " batch" (its head): each finds the last value of its name in
# each line that holds it (greedy to the line's end, then back), as the parser's dict of the line's fields keeps it
_RUNNING = re.compile(rb" batch[^\n]*#running-req: ([0-9.]+)")
_USAGE = re.compile(rb" batch[^\n]*token usage: ([0-9.]+)")
_QUEUED = re.compile(rb"Decode batch[^\n]*#queue-req: ([0-9.]+)")
_GEN = re.compile(rb"Decode batch[^\n]*gen throughput \(token/s\): ([0-9.]+)")


def _count(value: bytes) -> float:
    return int(float(value))


def _percent(value: bytes) -> float:
    return round(float(value) * 100.0, 1)


_Spread = tuple[float, float, int] | None  # (low, high, count) of a number over a run's lines


@dataclass(frozen=True, slots=True)
class _Read:
    """What a run of batch lines holds (BatchFold.read_run): from its bytes alone."""

    running: _Spread
    queued: _Spread
    usage: _Spread


class BatchFold(SglangBase):
    """The fold of SGLang's batch lines into the parser's state."""

    hot = HOT

    def fold_ready(self, kinds: tuple[str, ...]) -> bool:
        return True  # a batch line is read alone: nothing waits for a next line

    def read_run(self, run: HotRun) -> _Read:
        return _Read(_spread(_RUNNING, run, _count), _spread(_QUEUED, run, _count), _spread(_USAGE, run, _percent))

    def take_run(self, read: _Read, run: HotRun) -> None:
        s = self.s
        self.votes["sglang"] += run.lines  # every line holds #running-req: the parser takes it
        self._extremes(s.running, read.running, _RUNNING, run, _count)
        self._extremes(s.queued, read.queued, _QUEUED, run, _count)
        self._extremes(s.usage, read.usage, _USAGE, run, _percent)
        room = GEN_TPS_KEPT - len(s.gen_tps)
        if room > 0:  # only the first rates of a log are kept: their lines are looked up here, once
            kept = list(itertools.islice(_GEN.finditer(run.region, run.start, run.end), room))
            lines = run.lines_at(m.start() for m in kept)
            s.gen_tps += [(float(m.group(1)), self.src(line)) for m, line in zip(kept, lines, strict=True)]

    def _extremes(self, extremes: Extremes, spread: _Spread, pattern: re.Pattern[bytes], run: HotRun,
                  read: Callable[[bytes], float]) -> None:
        """Extremes.add for each line's value in line order: the count, and a new low or high from the first
        line that holds it."""
        if spread is None:
            return
        low, high, count = spread
        extremes.count += count
        if extremes.low is None or low < extremes.low:
            extremes.low, extremes.low_source = low, self.src(run.line_at(run.first(pattern, low, read)))
        if extremes.high is None or high > extremes.high:
            extremes.high, extremes.high_source = high, self.src(run.line_at(run.first(pattern, high, read)))


def _spread(pattern: re.Pattern[bytes], run: HotRun, read: Callable[[bytes], float]) -> _Spread:
    """The lowest and highest value of each line's number in a run, and how many lines hold one."""
    values = [read(v) for v in pattern.findall(run.region, run.start, run.end)]
    return (min(values), max(values), len(values)) if values else None
