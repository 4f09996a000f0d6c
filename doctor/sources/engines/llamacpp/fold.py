"""The llama.cpp parser's folded lines: llama-server's per-request slot lines, read a run at a time.

A busy llama-server prints, per request, a slot pick and launch (not candidates: "quiet" lines of a
run), its timings (`print_timing`: prompt eval, eval, total, graphs reused, one call so the lines come
together) and the slot release; while generating, `n_gen = .., tg = .. t/s` progress lines. Runs of
these (doctor/sources/logs/fold.py) are read here with native passes over the block: counts for the
votes, findall for the numbers, max/min for the extremes; only the few evidence lines (the last of each
kind, a new extreme's line) are read again as lines. The state left is the one `feed` leaves line by
line (parser.py `_timings`, `_vote_server`, context.py's `stop processing`), facts included: a run is
folded only while the parser is between requests (no open timing, no pending OOM, no output being
captured, in its run stage).

Shapes: the recordings in fixtures/logs/llama-server/ (real-queueing.log, session-slowdown-then-full.log:
llama-server's `slot print_timing` / `slot release` / `get_availabl` / `launch_slot_` lines as its
tools/server/server-context.cpp prints them, with and without the `0.01.269.691 I ` prefix of its log).
A release that truncated (`truncated = 1`), an `inf`/`nan` rate, the JSON log mode or the older split
`print_timing` lines are not in these shapes: they end a run and are read line by line.

Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from doctor.sources.engines.llamacpp.patterns import INDEX, TIMING
from doctor.sources.engines.llamacpp.state import LlamaCppBase, Timing, keep_timings, num
from doctor.sources.logs.hot import FedLine, HotLines, HotRun, RunLine, run_line
from doctor.sources.logs.line import LogLine
from doctor.sources.logs.shapes import shape_finder

# bounded everywhere: a hot line is never longer than the scanner's cut (doctor/core/lines.py MAX_LINE)
_INT = r"[0-9]{1,15}"
_NUM = rf"{_INT}(?:\.[0-9]{{1,15}})?"
_PREFIX = r"(?:[0-9]{1,9}\.[0-9]{2}\.[0-9]{3}\.[0-9]{3} [IWED] )?slot "
_PREFIX_MAX = len("123456789.12.123.123 I ")  # the longest timestamp prefix _PREFIX allows
_ID = rf": id {{1,24}}{_INT} \| task -?{_INT} \| "
_RATE = rf" ms / {{1,24}}{_INT} tokens \( {{0,24}}{_NUM} ms per token, {{1,24}}{_NUM} tokens per second\)"
_PE = rf"{_PREFIX}print_timing{_ID}prompt eval time = {{1,24}}{_NUM}{_RATE}"
_EV = rf"{_PREFIX}print_timing{_ID} {{1,24}}eval time = {{1,24}}{_NUM}{_RATE}"
_TOTAL = rf"{_PREFIX}print_timing{_ID} {{1,24}}total time = {{1,24}}{_NUM} ms / {{1,24}}{_INT} tokens"
_GRAPHS = rf"{_PREFIX}print_timing{_ID} {{1,24}}graphs reused = {{1,24}}{_INT}"
_NGEN = (rf"{_PREFIX}print_timing{_ID}n_gen = {{1,24}}{_INT}, tg = {{1,24}}{_NUM} t/s, "
         rf"tg_[0-9]{{1,4}}s = {{1,24}}{_NUM} t/s")
_RELEASE = rf"{_PREFIX} {{0,24}}release{_ID}stop processing: n_(?:tokens|past) = {_INT}, truncated = 0"
_PICK = (rf"{_PREFIX}get_availabl{_ID}selected slot by (?:LRU, t_last = -?{_INT}|LCP similarity, "
         rf"f_sim_best = {_NUM} \(> {_NUM} thold\), f_keep = {_NUM})")
_LAUNCH = rf"{_PREFIX}launch_slot_{_ID}processing task(?:, is_child = {_INT})?"
# the builds of early 2025: quiet progress lines, print_timing's numbers on lines of their own after a
# header, an idle line between requests (their `new prompt` line is read line by line: the client parser
# reads its n_prompt_tokens too)
_PROGRESS = (rf"{_PREFIX}update_slots{_ID}(?:kv cache rm \[{_INT}, end\)|prompt processing progress, n_past = "
             rf"{_INT}, n_tokens = {_INT}, progress = {_NUM}|prompt done, n_past = {_INT}, n_tokens = {_INT})")
_IDLE = r"(?:[0-9]{1,9}\.[0-9]{2}\.[0-9]{3}\.[0-9]{3} [IWED] )?srv {1,24}update_slots: all slots are idle"
_HEADER = rf"{_PREFIX}print_timing: id {{1,24}}{_INT} \| task -?{_INT} \| ?"
_BARE = (rf"prompt eval time = {{1,24}}{_NUM}{_RATE}\r?\n {{1,24}}eval time = {{1,24}}{_NUM}{_RATE}\r?\n"
         rf" {{1,24}}total time = {{1,24}}{_NUM} ms / {{1,24}}{_INT} tokens")
# one unit of a run: a whole print_timing group (its lines come from one call), or one other line
_GROUP = rf"{_PE}\r?\n{_EV}\r?\n{_TOTAL}(?:\r?\n{_GRAPHS})?"
_OLD_GROUP = rf"{_HEADER}\r?\n{_BARE}"

HOT = HotLines(
    line="|".join((_GROUP, _NGEN, _RELEASE, _PICK, _LAUNCH, _PROGRESS, _IDLE, _OLD_GROUP)),
    samples=(  # fixtures/logs/llama-server/real-queueing.log, session-slowdown-then-full.log
        b"0.03.852.715 I slot print_timing: id  0 | task 0 | prompt eval time =     731.61 ms /    37 tokens"
        b" (   19.77 ms per token,    50.57 tokens per second)\n"
        b"0.03.852.779 I slot print_timing: id  0 | task 0 |        eval time =    1851.23 ms /    41 tokens"
        b" (   46.28 ms per token,    21.61 tokens per second)\n"
        b"0.03.852.797 I slot print_timing: id  0 | task 0 |       total time =    2582.84 ms /    78 tokens\n"
        b"0.03.852.815 I slot print_timing: id  0 | task 0 |    graphs reused =         40",
        b"0.44.310.518 I slot print_timing: id  0 | task 0 | n_gen =    102, tg =  58.41 t/s, tg_3s =  58.40 t/s",
        b"0.03.853.212 I slot      release: id  0 | task 0 | stop processing: n_tokens = 77, truncated = 0",
        # fixtures/logs/llama.cpp/server-slots-truncated.log
        b"srv  update_slots: all slots are idle",
        b"slot print_timing: id  0 | task 0 | \n"
        b"prompt eval time =     412.71 ms /   895 tokens (    0.46 ms per token,  2168.59 tokens per second)\n"
        b"       eval time =    4811.20 ms /   233 tokens (   20.65 ms per token,    48.43 tokens per second)\n"
        b"      total time =    5223.91 ms /  1128 tokens",
        b"slot      release: id  0 | task 0 | stop processing: n_past = 1127, truncated = 0",
    ),
    quiet=(
        b"0.01.269.691 I slot get_availabl: id  0 | task -1 | selected slot by LRU, t_last = -1",
        b"0.03.853.247 I slot get_availabl: id  0 | task -1 | selected slot by LCP similarity, f_sim_best = 0.676"
        b" (> 0.100 thold), f_keep = 0.325",
        b"0.01.269.827 I slot launch_slot_: id  0 | task 0 | processing task, is_child = 0",
        b"slot launch_slot_: id  0 | task 0 | processing task",
        b"slot update_slots: id  0 | task 0 | kv cache rm [0, end)",
        b"slot update_slots: id  0 | task 0 | prompt processing progress, n_past = 895, n_tokens = 895, "
        b"progress = 1.000000",
        b"slot update_slots: id  0 | task 0 | prompt done, n_past = 895, n_tokens = 895",
    ),
    kinds=("server_signature", "timings", "context"),
    probes=(b"slot ", b"srv "),  # after at most the timestamp prefix
    probe_within=_PREFIX_MAX + len("slot "),
)

# inside a run every line has one of the shapes above: these loose patterns find exactly its lines
_PE_TOKENS = re.compile(rb"prompt eval time = +[0-9.]+ ms / +([0-9]+) tokens")
_EV_RATE = re.compile(rb"  eval time = +[0-9.]+ ms / +0*(?:[2-9]|[1-9][0-9]+) tokens \( *[0-9.]+ ms per token, "
                      rb"+([0-9.]+) tokens per second")  # the rates the decode extremes take (more than 1 token)
_TG = re.compile(rb"n_gen = +[0-9]+, tg = +([0-9.]+) t/s")
_RATES = re.compile(_EV_RATE.pattern + rb"|" + _TG.pattern)
_TOTAL_TOKENS = re.compile(rb"total time = +[0-9.]+ ms / +([0-9]+) tokens")
_RELEASED = re.compile(rb"stop processing: n_(?:tokens|past) = ([0-9]+), truncated = 0")
_INDEX_PATTERNS = tuple(INDEX.patterns) if INDEX is not None else ()  # what another engine's run is searched for
_USED = re.compile(_TOTAL_TOKENS.pattern + rb"|" + _RELEASED.pattern)


def _last_eval(region: bytes, start: int, end: int) -> int:
    """The start of the last `eval time` (not `prompt eval time`) text in region[start:end], or -1."""
    pos = region.rfind(b" eval time = ", start, end)
    while pos >= 0 and region.endswith(b"prompt", start, pos):
        pos = region.rfind(b" eval time = ", start, pos)
    return pos


@dataclass(frozen=True, slots=True)
class _Read:
    """What a run of llama-server's request lines holds (FoldLines.read_run): from its bytes alone."""

    prompt_top: int | None  # the longest prompt of the run
    used_top: int | None  # the most tokens a request used (total or released)
    rates: tuple[float, float, int] | None  # the decode rates' (low, high, count)
    closed: int  # requests closed (total lines)
    opened: int  # the index of the prompt line of the last closed request's group
    values: tuple[tuple[str, float | None, int | None, float | None, RunLine], ...]  # the last timing of each kind
    open_group: bool  # the run ends inside a group: its prompt line (and eval line) stay open
    open_eval: bool
    signature: int  # server signature lines


@dataclass(frozen=True, slots=True)
class _Foreign:
    """Another engine's run: whether a line of it may be this parser's (then its lines are fed one by one), or,
    for a run of free text of any length (HotLines.unbounded), the lines that may be (fed one by one)."""

    found: bool
    lines: tuple[FedLine, ...] = ()


# another engine's runs read by the lines a handler may take, not all lines where one may (HotLines.unbounded)
_BY_HITS = frozenset({"vllm_request"})
# a line whose text ends as a terminal cuts one (patterns.py looks_cut): this parser may read it with its next
_CUT_END = r"[A-Za-z0-9(,=/:-][ \t]*\r?\n"


class FoldLines(LlamaCppBase):
    """The fold of llama-server's per-request lines into the parser's state."""

    hot = HOT
    # this parser has no gate: every routed line reaches it, the other engines' folded lines too (their kinds,
    # HotLines.kinds: doctor/sources/engines/<engine>/fold.py); it reads those runs as `_fold_foreign` says
    absorbs = frozenset({"gin_access", "sglang_batch", *_BY_HITS})

    def fold_patterns(self, kinds: tuple[str, ...]) -> tuple[str, ...]:
        """In another engine's run of free text: its handlers' own patterns, and a line that ends as a cut one."""
        if not set(kinds) <= _BY_HITS:
            return ()
        return (*type(self).kinds.sources, _CUT_END)  # type: ignore[union-attr]

    def fold_ready(self, kinds: tuple[str, ...]) -> bool:
        s = self.s
        if kinds != HOT.kinds:  # another engine's lines: they do nothing here but flush an OOM left pending
            return not s.pending
        # the timeline has reached its last step (a request was served): the runs' requests move it no further
        return (s.current is None and not s.pending and not s.capture and s.stage == "run"
                and self.timeline.current == "decode")

    def read_run(self, run: HotRun) -> _Read | _Foreign:
        if set(run.kinds) <= _BY_HITS:
            return _Foreign(False, tuple(run.wanted_lines(shape_finder(self.fold_patterns(run.kinds), run.shape))))
        if run.kinds != HOT.kinds:
            return _Foreign(self._foreign_found(run))
        region, start, end = run.region, run.start, run.end
        prompts = _PE_TOKENS.findall(region, start, end)
        totals = _TOTAL_TOKENS.findall(region, start, end)
        released = _RELEASED.findall(region, start, end)
        used = [*totals, *released]
        rates = [*map(float, _EV_RATE.findall(region, start, end)), *map(float, _TG.findall(region, start, end))]
        last_total = region.rfind(b"total time = ", start, end)
        last_prompt = region.rfind(b"prompt eval time = ", start, end)
        last_eval = _last_eval(region, start, end)
        values = []
        for kind, pos in (("prompt eval", last_prompt), ("eval", last_eval), ("total", last_total)):
            if pos >= 0:
                item = run.at(pos)
                m = TIMING.search(run_line(0, item).text)
                assert m is not None  # the run's shape says so
                count = m.group(3)
                values.append((kind, num(m.group(2)), int(count) if count else None, num(m.group(6)), item))
        opened = run.index_at(region.rfind(b"prompt eval time = ", start, last_total)) if totals else 0
        # votes: every slot and srv line that is a candidate is a server signature line (_vote_server): each
        # print_timing line (an early-2025 header too, not the numbers on lines of their own after it),
        # each release, each idle line
        signature = (region.count(b"print_timing: id", start, end) + len(released)
                     + region.count(b"all slots are idle", start, end))
        return _Read(max(map(int, prompts)) if prompts else None, max(map(int, used)) if used else None,
                     (min(rates), max(rates), len(rates)) if rates else None, len(totals), opened, tuple(values),
                     last_prompt > last_total, last_eval > last_prompt, signature)

    def take_run(self, read: _Read | _Foreign, run: HotRun) -> None:
        if isinstance(read, _Foreign):
            if read.found:
                for line in run.each_line():
                    self.feed(line)
            elif read.lines:
                run.feed(self, read.lines, run.kinds)
            return
        s = self.s
        top = read.prompt_top
        if top is not None and top > s.prompt_tokens_max:
            s.prompt_tokens_max, s.prompt_line = top, run.line_at(run.first(_PE_TOKENS, top))
        top = read.used_top
        if top is not None and top > s.used_max:
            s.used_max, s.used_line = top, run.line_at(run.first(_USED, top))
        self._take_facts(read, run)
        self._take_rates(read, run)
        if read.signature:
            self.votes["llama.cpp"] += read.signature
            self.votes["llama-server"] += read.signature

    @staticmethod
    def _foreign_found(run: HotRun) -> bool:
        """Another engine's run (its access lines, say): a line that holds none of the literals of this parser's
        kinds (parser.py INDEX) is one no handler takes (its plan is empty; it ends in no cut word, the shapes
        say so), and one that ends no OOM (none pending: fold_ready). So a run is searched once for those
        literals that can occur in its shape; only where one is found are its lines fed one by one."""
        find = shape_finder(_INDEX_PATTERNS, run.shape)
        return find is not None and find(run.region, run.start, run.end) is not None

    def _take_rates(self, read: _Read, run: HotRun) -> None:
        """The decode extremes: eval rates of more than one token and `tg` rates, in line order."""
        if read.rates is None:
            return
        rates = self.s.decode_rates
        low, high, count = read.rates
        if rates.low is None or low < rates.low:
            rates.low, rates.low_source = low, self.src(run.line_at(run.first(_RATES, low)))
        if rates.high is None or high > rates.high:
            rates.high, rates.high_source = high, self.src(run.line_at(run.first(_RATES, high)))
        rates.count += count

    def _take_facts(self, read: _Read, run: HotRun) -> None:
        """The facts of the last timing lines, the requests closed and a group the run ends inside."""
        s = self.s
        values: dict[str, tuple[float | None, int | None, float | None, LogLine]] = {}
        for kind, ms, count, tps, item in read.values:
            values[kind] = (ms, count, tps, run_line(run.number, item))
            self._set_timing(kind, values[kind])
        if read.closed:  # the last closed request: the group of the last total line, begun by its prompt line
            keep_timings(s.timings, read.closed, Timing(line=run.number + read.opened))
        if read.open_group:  # the run ends inside a group: it stays open, as line by line
            ms, count, tps, line = values["prompt eval"]
            cur = s.current = Timing(line=line.number, prompt_ms=ms, prompt_tokens=count, prompt_tps=tps,
                                     used_line=line)
            if read.open_eval:
                ms, count, tps, line = values["eval"]
                cur.eval_ms, cur.eval_tokens, cur.eval_tps, cur.used_line = ms, count, tps, line

    def _set_timing(self, kind: str, value: tuple[float | None, int | None, float | None, LogLine]) -> None:
        ms, count, tps, line = value
        names: Iterable[str]
        if kind == "prompt eval":
            names = ("run.prefill_ms", "run.prompt_tokens", "run.prefill_tps")
        elif kind == "eval":
            names = ("run.decode_ms_total", "run.decode_tokens", "run.decode_tps")
        else:
            names = ("run.total_ms",)
        for name, found in zip(names, (ms, count, tps), strict=False):
            if found is not None:
                self.set(name, found, line)
