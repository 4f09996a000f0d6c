"""Folding runs of hot lines (doctor/sources/logs/fold.py, doctor/sources/engines/llamacpp/fold.py) gives
the same facts, events, sessions and findings as the per-line path, and really folds.

The built logs use llama-server's own line formats as the real recordings in fixtures/logs/llama-server/
show them (real-queueing.log: the start-up, `get_availabl`, `launch_slot_`, the four `print_timing`
lines, `release`; session-slowdown-then-full.log: `n_gen = .., tg = ..` progress lines): several slots
interleaved, planted extremes and ties, one-token evals, a truncating release, lines that end a run (an
idle line, an `inf` rate, an over-long line), a restart of the server (a second session inside a run),
more than 1 000 requests (the bounded timing list), CRLF, and runs cut by the scanner's region ends.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import TypeVar

import pytest

from doctor.judge.evaluate import diagnose
from doctor.sources.engines.llamacpp.fold import HOT
from doctor.sources.engines.llamacpp.parser import LlamaCppParser
from doctor.sources.logs.analyze import LogAnalyzer
from doctor.sources.logs.base import LogParser
from doctor.sources.logs.fold import ENV, Folder, Folders
from doctor.sources.logs.hot import HotRun
from doctor.sources.logs.stream import open_input, rewindable
from doctor.views.render.json import render_json

P = TypeVar("P", bound=LogParser)

ROOT = Path(__file__).resolve().parents[2]
QUEUE = ROOT / "fixtures" / "logs" / "llama-server" / "real-queueing.log"
HEAD = b"".join(QUEUE.read_bytes().splitlines(keepends=True)[:11])  # the real start-up, 11 lines
# a start-up that begins an engine run (its `build:` line): the server restarting into the same log
RESTART = b"".join((ROOT / "fixtures" / "logs" / "llama-server" / "session-slowdown-then-full.log")
                   .read_bytes().splitlines(keepends=True)[:45])
CORPUS = Path("/work/shared/corpus")


class _Clock:
    def __init__(self) -> None:
        self.us = 1_269_691

    def __call__(self) -> str:
        self.us += 37_123
        s, us = divmod(self.us, 1_000_000)
        m, s = divmod(s, 60)
        return f"{m}.{s:02d}.{us // 1000:03d}.{us % 1000:03d} I"


def _slot(ts: str, fn: str, slot: int, task: int, text: str) -> str:
    return f"{ts} slot {fn:>12}: id {slot:2d} | task {task} | {text}"


def _timings(ts: str, slot: int, task: int, prompt: int, gen: int, tps: float) -> list[str]:
    pe_ms = prompt * 19.77
    ev_ms = gen * 1000 / tps
    return [
        _slot(ts, "print_timing", slot, task, f"prompt eval time = {pe_ms:10.2f} ms / {prompt:5d} tokens "
              f"({pe_ms / prompt:8.2f} ms per token, {1000 / 19.77:8.2f} tokens per second)"),
        _slot(ts, "print_timing", slot, task, f"       eval time = {ev_ms:10.2f} ms / {gen:5d} tokens "
              f"({ev_ms / gen:8.2f} ms per token, {tps:8.2f} tokens per second)"),
        _slot(ts, "print_timing", slot, task,
              f"      total time = {pe_ms + ev_ms:10.2f} ms / {prompt + gen:5d} tokens"),
        _slot(ts, "print_timing", slot, task, f"   graphs reused = {task * 3:10d}"),
    ]


def server_log(requests: int = 1300, seed: int = 7, slots: int = 3, restart_at: int | None = 700,
               crlf: bool = False) -> bytes:
    """A long llama-server log: `slots` slots taking requests in turn, their lines interleaved."""
    rng = random.Random(seed)
    clock = _Clock()
    out: list[str] = [HEAD.decode().rstrip("\n")]
    task = 0
    pending: list[tuple[int, int]] = []  # (slot, task) launched, not yet timed
    for n in range(requests):
        slot = n % slots
        ts = clock()
        out.append(_slot(ts, "get_availabl", slot, -1, "selected slot by LCP similarity, f_sim_best = 0.676 "
                                                       f"(> 0.100 thold), f_keep = 0.{rng.randrange(100, 999)}"
                         if n % 2 else "selected slot by LRU, t_last = -1"))
        out.append(_slot(ts, "launch_slot_", slot, task, "processing task, is_child = 0"))
        pending.append((slot, task))
        task += rng.choice((1, 2))
        if len(pending) < slots and n < requests - 1:
            continue  # the slots fill up before the first of them finishes
        done_slot, done_task = pending.pop(0)
        prompt = rng.randrange(20, 400)
        gen = rng.choice((1, 1, *range(2, 300)))  # some one-token answers: no decode rate from them
        tps = round(rng.uniform(15, 25), 2)
        if n in (400, 750, 900):
            tps = 3.25  # the slowest, three times (the first of a session is its evidence)
            gen = max(gen, 2)
        if n in (500, 800, 1000):
            tps = 99.5  # the fastest, three times
            gen = max(gen, 2)
        if n == 950:
            prompt = 4000  # the longest prompt
        if n % 97 == 5:
            out.append(_slot(clock(), "print_timing", done_slot, done_task,
                             f"n_gen = {gen + 100:6d}, tg = {tps + 1:6.2f} t/s, tg_3s = {tps:6.2f} t/s"))
        timed = _timings(clock(), done_slot, done_task, prompt, gen, tps)
        out += timed if n % 5 else timed[:3]  # builds before the graphs line, mixed in
        truncated = 1 if n == 300 else 0
        out.append(_slot(clock(), "release", done_slot, done_task,
                         f"stop processing: n_tokens = {prompt + gen - 1}, truncated = {truncated}"))
        if n == 200:
            out.append(f"{clock()} srv  update_slots: all slots are idle")  # a candidate no fold takes
        if n == 600:  # a rate no build prints as a number: read line by line
            out.append(_slot(clock(), "print_timing", done_slot, done_task,
                             "prompt eval time =       0.00 ms /     0 tokens (    -nan ms per token,      inf "
                             "tokens per second)"))
        if n == 650:
            out.append(_slot(clock(), "print_timing", done_slot, done_task, "n_gen = 1, " + "x" * 20_000))
        if n == 660:  # a timing line of a hot shape but for its padding, longer than the scanner's cut: its
            # rate, the fastest of all, is beyond the cut (line by line it is not read)
            out += _timings(clock(), done_slot, done_task, prompt, max(gen, 2), 150.0)
            out[-3] = out[-3].replace("eval time = ", "eval time = " + " " * 17_000)
        if restart_at is not None and n == restart_at:
            out.append(RESTART.decode().rstrip("\n"))  # the server restarted, appending to the same log
    text = "\n".join(out) + "\n"
    return text.replace("\n", "\r\n").encode() if crlf else text.encode()


def server_log_2025(requests: int = 400, seed: int = 5, slots: int = 2, idle_every: int = 3) -> bytes:
    """The early-2025 server's lines, as fixtures/logs/llama.cpp/server-slots-truncated.log holds them: no
    timestamps, a `new prompt` line and progress lines per request, print_timing's numbers on lines of
    their own after its header, an idle line when the slots are empty."""
    rng = random.Random(seed)
    out = [line.decode() for line in RESTART.splitlines()]
    task = 0
    for n in range(requests):
        slot = n % slots
        prompt, gen = rng.randrange(10, 3000), rng.choice((1, *range(2, 400)))
        tps = 7.5 if n in (90, 250) else round(rng.uniform(20, 60), 2)
        pe_ms, ev_ms = prompt * 0.46, gen * 1000 / tps
        out += [
            f"slot launch_slot_: id {slot:2d} | task {task} | processing task",
            f"slot update_slots: id {slot:2d} | task {task} | new prompt, n_ctx_slot = 2048, n_keep = 0, "
            f"n_prompt_tokens = {prompt}",
            f"slot update_slots: id {slot:2d} | task {task} | kv cache rm [0, end)",
            f"slot update_slots: id {slot:2d} | task {task} | prompt processing progress, n_past = {prompt}, "
            f"n_tokens = {prompt}, progress = 1.000000",
            f"slot update_slots: id {slot:2d} | task {task} | prompt done, n_past = {prompt}, n_tokens = {prompt}",
            f"slot      release: id {slot:2d} | task {task} | stop processing: n_past = {prompt + gen - 1}, "
            f"truncated = {int(n == 120)}",
            f"slot print_timing: id {slot:2d} | task {task} | ",
            f"prompt eval time = {pe_ms:10.2f} ms / {prompt:5d} tokens ({0.46:8.2f} ms per token, "
            f"{1000 / 0.46:8.2f} tokens per second)",
            f"       eval time = {ev_ms:10.2f} ms / {gen:5d} tokens ({ev_ms / gen:8.2f} ms per token, "
            f"{tps:8.2f} tokens per second)",
            f"      total time = {pe_ms + ev_ms:10.2f} ms / {prompt + gen:5d} tokens",
        ]
        if n % idle_every == 0:
            out.append("srv  update_slots: all slots are idle")
        task += gen + 1
    return ("\n".join(out) + "\n").encode()


def _analyze(data: bytes, fold: bool, chunk: int = 1 << 22) -> tuple[LogAnalyzer, str]:
    analyzer = LogAnalyzer("server.log", fold=fold)
    analyzer.scanner.hold_last = True
    stream = open_input(rewindable(io.BytesIO(data)))
    while True:
        block = stream.read(chunk)
        if not block:
            break
        analyzer.feed(block)
    facts = analyzer.finish()
    return analyzer, json.dumps(facts.to_json(), sort_keys=True)


def _both(data: bytes, chunk: int = 1 << 22) -> tuple[LogAnalyzer, LogAnalyzer]:
    """`data` read folded and line by line, their facts the same: (folded, line by line)."""
    folded, with_fold = _analyze(data, True, chunk)
    line_by_line, per_line = _analyze(data, False, chunk)
    assert with_fold == per_line
    return folded, line_by_line


def _parser(analyzer: LogAnalyzer, cls: type[P]) -> P:
    """The analyzer's parser of class `cls` (its current session's)."""
    return next(p for p in analyzer.parsers if isinstance(p, cls))


def _same(data: bytes, chunk: int = 1 << 22) -> LogAnalyzer:
    return _both(data, chunk)[0]


@pytest.fixture(scope="module")
def long_log() -> bytes:
    return server_log()


def test_a_long_multi_slot_log_folds_to_the_same_facts_and_findings(long_log: bytes, rulebase) -> None:
    folded = _same(long_log)
    assert folded.folders is not None and folded.folders.runs >= 5
    lines = long_log.count(b"\n")
    assert folded.scanner.folded > 0.9 * lines  # nearly every line went through the fold
    reports = []
    for fold in (True, False):
        analyzer, _ = _analyze(long_log, fold)
        facts = analyzer.snapshot()
        reports.append(render_json(diagnose(facts, rulebase, command="analyze", mode="analyze")))
    assert reports[0] == reports[1]


def test_what_the_fold_reads_is_right(long_log: bytes) -> None:
    analyzer, _ = _analyze(long_log, True)
    facts = analyzer.finish()
    text = long_log.decode().splitlines()
    sessions = facts.sessions
    assert len(sessions) == 2 and sessions[1].first_line > 1000  # the restart split a run
    first = sessions[1].first_line

    def line_of(value: str, after: int = 0) -> int:
        return next(i for i, t in enumerate(text, 1) if i > after and value in t)

    slowest = facts.get("run.decode_tps_min")
    assert slowest is not None and slowest.value == 3.25
    assert slowest.source.line == line_of("3.25 tokens per second", first)  # the first of the two, n=750
    fastest = facts.get("run.decode_tps_max")
    assert fastest is not None and fastest.value == 99.5
    assert fastest.source.line == line_of("99.50 tokens per second", first)
    longest = facts.get("run.prompt_tokens_max")
    assert longest is not None and longest.value == 4000 and longest.source.line == line_of("/  4000 tokens", first)
    # the requests of the second session: 599 closed ones (n = 701..1299, less the slot fill-up), kept as
    # the bounded list keeps them: past 1 000 the oldest 500 go
    closed = sum(1 for i, t in enumerate(text, 1) if i > first and "prompt eval time" in t)
    assert facts.value("run.requests") == (closed if closed <= 1000 else 501 + (closed - 1001) % 500)
    # the truncating release of the first session is an event there, read line by line
    assert sessions[0].facts is not None and sessions[0].facts.event_count("ctx_full") == 1


def test_the_bounded_request_list_counts_as_line_by_line() -> None:
    data = server_log(requests=2600, slots=2, restart_at=None, seed=3)
    folded = _same(data)
    analyzer, _ = _analyze(data, True)
    assert folded.folders is not None and folded.folders.runs >= 1
    closed = data.count(b"prompt eval time")  # each opens a request (the `inf` one too, closed by the next)
    assert analyzer.finish().value("run.requests") == 501 + (closed - 1001) % 500


@pytest.mark.parametrize("chunk", [997, 4096, 65_536, 1_000_003])
def test_runs_cut_by_region_ends(long_log: bytes, chunk: int) -> None:
    """Every chunk the scanner is fed ends a region: runs are cut there, mid-group too."""
    folded = _same(long_log[: 600_000], chunk)
    assert folded.folders is not None and folded.folders.runs > 0


def test_crlf_lines_fold_the_same() -> None:
    data = server_log(requests=500, crlf=True, restart_at=250)
    folded = _same(data)
    assert folded.scanner.folded > 0.9 * data.count(b"\n")
    facts = folded.finish()
    assert "\r" not in (facts.get("run.decode_tps_min").source.text or "")  # type: ignore[union-attr]


def test_cr_only_lines_fold_the_same() -> None:
    """A log with CR line ends (the scanner turns them into LF before it scans)."""
    data = server_log(requests=300, restart_at=None).replace(b"\n", b"\r")
    folded = _same(data, chunk=65_536)
    assert folded.scanner.folded > 0.9 * data.count(b"\r")


@pytest.mark.parametrize("seed", range(6))
def test_random_logs_fold_the_same(seed: int) -> None:
    rng = random.Random(seed)
    data = server_log(requests=rng.randrange(5, 400), seed=seed, slots=rng.randrange(1, 5),
                      restart_at=rng.choice((None, 3, 100)))
    lines = data.split(b"\n")
    for _ in range(rng.randrange(0, 6)):  # a line dropped anywhere: a group broken, a run ended early
        del lines[rng.randrange(len(lines) - 1)]
    _same(b"\n".join(lines), chunk=rng.choice((4096, 50_000, 1 << 22)))


def test_the_longest_timestamps_fold() -> None:
    """The cheap probe before the run match looks as far as the longest timestamp prefix reaches."""
    data = server_log(requests=200, restart_at=None)
    lines = [b"123456789.59.999.999 I" + line[line.index(b" I ") + 2:] if b" I slot " in line else line
             for line in data.split(b"\n")]
    folded = _same(b"\n".join(lines))
    assert folded.folders is not None and folded.scanner.folded > 0.9 * len(lines)


@pytest.mark.parametrize("seed", range(3))
def test_early_2025_server_lines_fold_the_same(seed: int) -> None:
    data = server_log_2025(seed=seed, idle_every=1 + seed)
    folded = _same(data, chunk=(1 << 22, 5000, 777)[seed])
    assert folded.folders is not None and folded.folders.runs > 50  # a run per request: from its release on
    facts = folded.finish()
    assert facts.value("run.decode_tps_min") == 7.5
    lines = data.decode().splitlines()
    first = next(i for i, t in enumerate(lines, 1) if "    7.50 tokens per second" in t)
    assert facts.get("run.decode_tps_min").source.line == first  # type: ignore[union-attr]
    assert facts.event_count("ctx_full") == 1  # the truncating release, read line by line


def test_fixture_and_corpus_logs_fold_the_same() -> None:
    logs = sorted((ROOT / "fixtures" / "logs").rglob("*.log")) + sorted(CORPUS.glob("*.log"))
    folded_any = 0
    for path in logs:
        folded = _same(path.read_bytes())
        folded_any += bool(folded.folders is not None and folded.folders.runs)
    assert folded_any >= 5  # the real llama-server recordings hold runs


def test_a_second_reader_of_the_hot_lines_turns_the_fold_off() -> None:
    """A parser (a catalogue's, say) that reads print_timing lines too must see them: no fold then."""

    class Reader(LogParser):
        name = "reader"
        triggers = gate = (r"print_timing",)

        def feed(self, line: object) -> None:
            self.votes["reader"] += 1

    base = LogAnalyzer("x", fold=True)
    assert base.folders is not None and base.folders.of(LlamaCppParser) is not None
    analyzer = LogAnalyzer("x", parsers=[*(type(p)() for p in base.parsers), Reader()], fold=True)
    assert analyzer.folders is None or analyzer.folders.of(LlamaCppParser) is None


def test_a_second_reader_that_absorbs_the_runs_gets_them() -> None:
    """One that declares it folds the kinds keeps folding on, and is handed every run."""
    seen: list[tuple[int, int, tuple[str, ...]]] = []

    class Counter(LogParser):
        name = "counter"
        triggers = gate = (r"print_timing",)
        absorbs = frozenset(HOT.kinds)

        def feed(self, line: object) -> None:
            self.votes["counter"] += 1

        def fold_ready(self, kinds: tuple[str, ...]) -> bool:
            return True

        def fold(self, run: HotRun) -> None:
            seen.append((run.number, run.lines, run.kinds))
            self.votes["counter"] += run.region.count(b"print_timing", run.start, run.end)

    base = LogAnalyzer("x", fold=True)
    data = server_log(requests=300, restart_at=None)
    counted = []
    for fold in (True, False):
        analyzer = LogAnalyzer("x", parsers=[*(type(p)() for p in base.parsers), Counter()], fold=fold)
        analyzer.feed(data)
        analyzer.finish()
        counted.append(analyzer.parsers[-1].votes["counter"])
    assert seen and all(kinds == HOT.kinds for _, _, kinds in seen) and sum(n for _, n, _ in seen) > 1000
    assert counted[0] == counted[1] == data.count(b"print_timing")


def test_a_parser_not_ready_costs_no_run_match(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the owner is not ready (an OOM waiting for its phase, an open request), its hot lines are
    read line by line without a run match at each of them (each would read the rest of the run: the
    whole region, at every line)."""
    analyzer = LogAnalyzer("x", fold=True)
    assert analyzer.folders is not None
    folder = analyzer.folders.of(LlamaCppParser)
    assert folder is not None
    calls = []
    run_end = folder.run_end
    folder.run_end = lambda *a: calls.append(a) or run_end(*a)  # type: ignore[method-assign]
    monkeypatch.setattr(type(folder.parsers[0]), "fold_ready", lambda self, kinds: False)
    analyzer.feed(server_log(requests=200, restart_at=None))
    analyzer.finish()
    assert folder.runs == 0 and calls == []


def test_the_switch_turns_folding_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "0")
    assert LogAnalyzer("x").folders is None
    monkeypatch.setenv(ENV, "1")
    folders = LogAnalyzer("x").folders
    assert isinstance(folders, Folders) and isinstance(folders.of(LlamaCppParser), Folder)


def test_the_catalogue_absorbs_the_runs() -> None:
    """The message catalogue's parser reads some lines the runs may hold: it folds the runs (folding stays
    on for llama-server logs), and a run none of its triggers is found in is one search."""
    from doctor.sources.catalogue.parser import CatalogueParser

    assert set(HOT.kinds) <= CatalogueParser.absorbs
    analyzer = LogAnalyzer("x", fold=True)
    folder = analyzer.folders.of(LlamaCppParser) if analyzer.folders is not None else None
    assert folder is not None
    assert any(isinstance(p, CatalogueParser) for p in folder.parsers)


def _catalogue_with(*entries: tuple[str, str, dict[str, str]]) -> type[LogParser]:
    """A catalogue parser whose active entries are these (pattern, level, facts): entries that match lines
    inside the runs, as a later catalogue might hold."""
    from doctor.sources.catalogue.loader import Entry
    from doctor.sources.catalogue.matcher import MessageSet
    from doctor.sources.catalogue.parser import CatalogueParser

    made = MessageSet(Entry(id=f"T{i}", engine="llama.cpp", level=level, pattern=pattern,
                            numbers={g: "count" for g in facts}, sample="", meaning="ctx.full" if i else "perf.slow",
                            first=None, last=None, source="test", fix="", facts=facts)
                      for i, (pattern, level, facts) in enumerate(entries))

    class Catalogue(CatalogueParser):
        triggers = made.fragments

        def __init__(self) -> None:
            super().__init__()
            self.messages = made
            self.literal_index = made.index
            self._counts = [0] * len(made.entries)

    return Catalogue


@pytest.mark.parametrize("chunk", [4096, 1 << 22])
def test_catalogue_entries_inside_the_runs_read_the_same(chunk: int) -> None:
    """Entries that match hot lines (a release that truncates, a slot's timing header, a fact from a
    graphs line) give the same messages, counts and facts folded as line by line."""
    catalogue = _catalogue_with(
        (r"stop processing: n_tokens = \d+, truncated = 1", "warning", {}),
        (r"print_timing: id +2 \| task \d+ \| +graphs reused = +(?P<graphs>\d+)", "warning",
         {"graphs": "run.requests"}),
        (r"slot print_timing: id +1 \| task \d+ \|\s*$", "warning", {}))
    base = LogAnalyzer("x", fold=True)
    for data in (server_log(requests=400, restart_at=200), server_log_2025(requests=120)):
        results = []
        for fold in (True, False):
            analyzer = LogAnalyzer("x", parsers=[*(type(p)() for p in base.parsers[:-1]), catalogue()], fold=fold)
            analyzer.scanner.hold_last = True
            for at in range(0, len(data), chunk):
                analyzer.feed(data[at:at + chunk])
            facts = analyzer.finish()
            assert fold is False or (analyzer.folders is not None and analyzer.scanner.folded > data.count(b"\n") / 3)
            seen = analyzer.parsers[-1].seen  # type: ignore[attr-defined]
            results.append((json.dumps(facts.to_json(), sort_keys=True), seen))
        assert results[0] == results[1]
        assert results[0][1] and sum(results[0][1].values()) >= 3
