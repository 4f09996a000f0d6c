"""A big log read on every core: worker processes read its regions ahead, the analysis replays them in order.

The serial path (doctor/sources/logs/entry.py `analyze_stream`) is the reference: it reads the input in
regions (doctor/sources/logs/regions.py) and scans each one, handing candidate lines to the parsers and runs of
hot lines to their folds. Here the same regions are read ahead (doctor/sources/logs/ahead.py): the native
passes and the pure part of each fold (the trigger search, the run matches, the findall passes of a fold:
`LogParser.read_run`) run in worker processes, and in this one while it would otherwise wait; the analysis
takes the records region by region, in order, through the same `_consume` as the serial path (a candidate line)
or the parsers' `take_run` (a run), with the region's line numbers added to the records' own. A record made on
an assumption the state does not meet (a parser capturing the text between candidates, a fold whose parsers
are not ready) is not used: the rest of that region is scanned here, the serial way. So the report is the
serial path's, byte for byte (tests/logs/test_parallel.py compares both on every fixture and corpus log, and on
built logs whose region ends fall inside sessions, runs and start lines).

Used for a regular file of at least `MIN_BYTES` when more than one core is free (`LLM_DOCTOR_WORKERS`: the
workers to use, 0 for the serial path). Workers are forked from this process (the parsers, patterns and
catalogue already made); each reads its regions from the file itself (positional reads of the same
descriptor). One that fails or dies leaves its regions to this process. Memory: each worker holds one region
and its records; this process at most `depth` regions' records ahead of the one it replays; where this process
and its workers together near the memory budget (doctor/sources/logs/memory.py), the workers stop and this
process reads on alone.

Pure apart from reading the given file and its worker processes.
"""

from __future__ import annotations

import gc
import io
import os
import pickle
import queue
import stat
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator
from typing import Any, BinaryIO

from doctor.core.facts import Facts
from doctor.core.lines import SNIFF
from doctor.sources.logs.ahead import LINE, Ahead, Reader, Speculation
from doctor.sources.logs.analyze import LogAnalyzer, read_to_end
from doctor.sources.logs.matcher import compile_triggers, span_finder
from doctor.sources.logs.memory import MEMORY_SHARE, memory_budget, memory_used
from doctor.sources.logs.prose import MAX_PROSE
from doctor.sources.logs.regions import Read, Region, cut, file_regions, pread
from doctor.sources.logs.stream import CHUNK, MAX_GAP, RawLine, cut_line

ENV = "LLM_DOCTOR_WORKERS"
MIN_BYTES = 32 << 20  # smaller inputs are read by the serial path (a worker's start-up costs more than it saves)
MAX_WORKERS = 3  # each worker is a process of its own (memory): more than three rarely pay on one log
WAIT_S = 1.0  # how long this process waits for a result before it checks that its workers still live
MEMORY_EVERY_S = 0.1  # how often the memory is looked at (reading it walks each process's page tables)


def workers_wanted(size: int, min_bytes: int | None = None) -> int:
    """The workers for an input of `size` bytes: LLM_DOCTOR_WORKERS if set (0: none), else one per free core
    but one (this process reads too), at most MAX_WORKERS; none below `min_bytes`."""
    if size < (MIN_BYTES if min_bytes is None else min_bytes):
        return 0
    given = os.environ.get(ENV, "").strip()
    if given:
        try:
            return max(0, int(given))
        except ValueError:
            return 0
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(0, min(cores - 1, MAX_WORKERS))


def regular_file(stream: BinaryIO, at: int = 0) -> tuple[int, int] | None:
    """(descriptor, size) of a stream that reads a regular file as it stands (not a pipe, not gunzipped:
    open_input wraps those in another reader), now at `at`; None otherwise."""
    raw = getattr(stream, "raw", None)
    if not isinstance(stream, io.BufferedReader) or not isinstance(raw, io.FileIO):
        return None
    try:
        fd = stream.fileno()
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or stream.tell() != at:
            return None
    except (OSError, ValueError):
        return None
    return fd, info.st_size


def analyze_file(stream: BinaryIO, name: str, chunk: int = CHUNK, workers: int | None = None,
                 min_bytes: int | None = None, seen: dict[str, int] | None = None, first: int = 0,
                 escaped: bool = False) -> Facts | None:
    """The facts of a whole regular file read with workers, as `analyze_stream` reads it (`first`: the bytes it
    read first, as one read, where it read a head that might have been a paste; `escaped`: the analysis's);
    None where this path does not take it (not a regular file, too small, no worker wanted, a head the serial
    path must read). `seen` (tests, the bench): filled with how the regions were read."""
    found = regular_file(stream, first)
    if found is None:
        return None
    fd, size = found
    wanted = workers_wanted(size, min_bytes) if workers is None else workers
    if wanted <= 0:
        return None
    read = pread(fd)
    regions = file_regions(read, size, chunk, first=first)
    if regions is None:
        return None
    analyzer = LogAnalyzer(name, escaped=escaped)
    analyzer.scanner.hold_last = True
    pool = POOL(wanted, name, analyzer.folders is not None, escaped, fd)
    replay = _Replay(analyzer, read, pool)
    try:
        last = replay.run(regions)
    finally:
        pool.close()
    if seen is not None:
        seen.update(replay.stats, adopted=replay.adopted, workers=pool.size)
    # the rest, the serial way: the bytes of the last read past its cut wait in the scanner as they would there
    end, read_end = (last.end, last.buf_end) if last is not None else (0, 0)
    scanner = analyzer.scanner
    scanner._ends.ends = "lf"  # the head had an LF (file_regions)
    scanner._tail = read(end, read_end - end)
    scanner.bytes = read_end
    stream.seek(read_end)
    return _prose(read_to_end(analyzer, stream, chunk), read(0, size) if size <= MAX_PROSE else None)


def analyze_pipe(stream: BinaryIO, name: str, chunk: int, head: list[bytes], first: int = 0, escaped: bool = False,
                 workers: int | None = None, seen: dict[str, int] | None = None) -> Facts | None:
    """The facts of a stream that is not a regular file (standard input, a gunzipped file), read with workers as
    `analyze_stream` reads it: `head`, its reads so far (the first of `first` bytes where it read a head that
    might have been a paste), then reads of `chunk`; this process reads it and hands each region's bytes to a
    worker. None where this path does not take it (no worker wanted, a head the serial path must read): the
    stream is then as it was after `head`."""
    wanted = workers_wanted(1 << 62, 0) if workers is None else workers
    data = b"".join(head)
    if wanted <= 0 or not data or b"\n" not in data[: min(first or chunk, SNIFF)]:
        return None
    held = _Held(head, stream, chunk)
    analyzer = LogAnalyzer(name, escaped=escaped)
    analyzer.scanner.hold_last = True
    pool = POOL(wanted, name, analyzer.folders is not None, escaped, -1)
    pool.payload = held.read
    replay = _Replay(analyzer, held.read, pool, held.drop)
    replay.depth = pool.size  # this process holds each region's bytes until it is replayed: fewer ahead
    replay.ahead_max = replay.depth + 1
    try:
        replay.run(held.regions(first))
    finally:
        pool.close()
    if seen is not None:
        seen.update(replay.stats, adopted=replay.adopted, workers=pool.size)
    scanner = analyzer.scanner
    scanner._ends.ends = "lf"
    scanner._tail, scanner.bytes, pending = held.rest()
    if pending:
        analyzer.feed(pending)
    facts = read_to_end(analyzer, stream, chunk)
    return _prose(facts, held.small if scanner.bytes <= MAX_PROSE else None)


def _prose(facts: Facts, data: bytes | None) -> Facts:
    """The facts of a small input (a pasted post: `data`, None for a bigger one) with its prose read too, as the
    serial path reads it (doctor/sources/logs/prose.py; only where a test makes a small input parallel)."""
    if data is not None:
        from doctor.sources.logs.line import decode
        from doctor.sources.logs.prose import read_prose

        read_prose(facts, decode(data))
    return facts


class _Held:
    """A stream's bytes kept for its regions until they are replayed: `regions` reads on as the serial path reads
    (the same cuts: regions.cut), `read` gives a region's bytes (or their beginning), `drop` lets them go."""

    def __init__(self, head: list[bytes], stream: BinaryIO, chunk: int) -> None:
        self.head = head
        self.stream = stream
        self.chunk = chunk
        self.kept: dict[int, bytes] = {}  # a region's start -> its buffer
        self.tail = b""
        self.offset = 0  # where `tail` begins in the stream
        self.read_end = 0

    def regions(self, first: int) -> Iterator[Region]:
        """The regions as the serial path cuts its reads (`first`: unused, the head's reads are as they were)."""
        index = 0
        head = self.head
        head.reverse()
        while True:
            data = head.pop() if head else self.stream.read(self.chunk)  # (the head let go as it is read)
            if not data:
                return
            buf = self.tail + data if self.tail else data
            self.read_end += len(data)
            if self.read_end <= MAX_PROSE:
                self.small += data
            found = cut(buf)
            if found is None:  # the serial path's other ways from here: the scanner is fed this read (`rest`)
                self.pending = data
                self.read_end -= len(data)
                return
            start = self.offset
            self.kept[start] = buf
            self.tail, self.offset = buf[found:], start + found
            yield Region(index, start, start + found, self.read_end)
            index += 1

    pending = b""  # a read the parallel path stopped at
    small = b""  # the input while it is no bigger than a post that is read for its prose

    def read(self, offset: int, size: int) -> bytes:
        buf = self.kept[offset]
        return buf if size >= len(buf) else buf[:size]

    def drop(self, region: Region) -> None:
        self.kept.pop(region.start, None)

    def rest(self) -> tuple[bytes, int, bytes]:
        """What the scanner holds after the last region (its `_tail`), the bytes read before, and a read still to
        feed it (where the parallel path stopped)."""
        return self.tail, self.read_end, self.pending


STOPPED = -1  # the index a worker answers with when it stops (the memory budget)


def _serve(name: str, fold: bool, escaped: bool, fd: int, tasks: Any, results: Any, budget: int = 0,
           workers: int = 1) -> None:
    """A worker: regions in (index, start, end, buf_end or the region's bytes, lines before it or None), their
    read ahead out (index, Ahead or None, the worker's CPU seconds). After each region it looks at the memory of
    the analysis and of the workers (as many as it, each taken to use what it uses): where that reaches `budget`,
    it says so (STOPPED) and ends; the analysis reads on alone."""
    reader = Reader(name, fold, escaped)
    read = pread(fd)
    parent = os.getppid()
    while True:
        task = tasks.get()
        if task is None:
            return
        index, start, end, buf_end, lines_before = task
        began = time.process_time()
        try:
            buf = buf_end if isinstance(buf_end, bytes) else read(start, buf_end - start)
            ahead = reader.read(buf, end - start, lines_before)
        except Exception:  # the region is left to the analysis, which reads it itself
            ahead = None
        results.put((index, ahead, time.process_time() - began))
        if budget and memory_used([parent]) + workers * memory_used([os.getpid()]) >= budget:
            results.put((STOPPED, None, 0.0))
            return


class _Pool:
    """The worker processes (forked from this one) and their two queues."""

    def __init__(self, workers: int, name: str, fold: bool, escaped: bool, fd: int) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        self.tasks = ctx.Queue()
        self.results = ctx.Queue()
        budget = int(memory_budget() * MEMORY_SHARE)
        args = (name, fold, escaped, fd, self.tasks, self.results, budget, workers)
        self.procs = [ctx.Process(target=_serve, args=args, daemon=True) for _ in range(workers)]
        # what this process made so far (modules, patterns, the catalogue) is left out of the workers' collections:
        # their garbage collector would otherwise write to every object's page and copy the lot into each worker
        gc.freeze()
        try:
            for proc in self.procs:
                proc.start()
        finally:
            gc.unfreeze()
        self.broken = False

    @property
    def size(self) -> int:
        return 0 if self.broken else len(self.procs)

    payload: Read | None = None  # where set, a region's bytes go with it (a stream: the workers cannot read it)

    def give(self, region: Region, lines_before: int | None) -> None:
        payload = self.payload
        buf_end = payload(region.start, region.buf_end - region.start) if payload is not None else region.buf_end
        self.tasks.put((region.index, region.start, region.end, buf_end, lines_before))

    def take(self) -> tuple[int, Ahead | None, float] | None:
        """The next result in (index, records or None where the worker failed, the worker's CPU seconds on it), or
        None once a worker died (the regions given out are then this process's to read)."""
        while True:
            try:
                index, ahead, cpu = self.results.get(timeout=WAIT_S)
                return index, ahead, cpu
            except queue.Empty:
                if not all(proc.is_alive() for proc in self.procs):
                    self.broken = True
                    return None

    @property
    def pids(self) -> list[int]:
        """This process and its workers (while they work)."""
        return [os.getpid(), *(p.pid for p in self.procs if p.pid is not None and not self.broken)]

    def stop(self) -> None:
        """End the workers now (the memory budget): the regions given out are this process's to read."""
        self.broken = True
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()

    def close(self) -> None:
        if not self.broken:
            for _ in self.procs:
                self.tasks.put(None)
        for proc in self.procs:
            proc.join(timeout=0.5 if not self.broken else 0)
            if proc.is_alive():
                proc.terminate()
                proc.join()
        for q in (self.tasks, self.results):
            q.close()
            q.cancel_join_thread()


POOL = _Pool  # the workers (tests put one in this process in its place)


class _Replay:
    """Regions handed out, read ahead (by the workers, or here while waiting) and replayed in order.

    Once a session has closed (a log of many engine runs), regions are given out with the lines before them,
    so that each is also read on from its first start line by a whole analysis (ahead.py `Speculation`): where
    that line does begin a session here, this analysis takes that state at the region's end instead of reading
    the rest of the region itself. The lines before a region not yet replayed are counted here (a count of
    line ends: cheap next to reading a log of many sessions)."""

    def __init__(self, analyzer: LogAnalyzer, read: Read, pool: Any,
                 replayed: Callable[[Region], None] | None = None) -> None:
        self.analyzer = analyzer
        self.read = read
        self.pool = pool
        self.replayed = replayed  # told of each region replayed (a stream's bytes are let go)
        self.local = Reader(analyzer.name, analyzer.folders is not None, analyzer.escaped)
        self.depth = 2 * pool.size  # regions given out and not yet back
        self.ahead_max = self.depth + 1  # regions read ahead of the one replayed, at most
        self.regions: dict[int, Region] = {}  # pulled from the grid, not yet replayed
        self.counts: dict[int, int] = {}  # their line counts, where known
        self.speculate = False
        self.busy = 0.0  # CPU seconds this process spent reading ahead and replaying
        self.worker_busy = 0.0  # and the workers, on the regions they read
        self.adopted = 0  # regions whose speculation was taken
        self.budget = int(memory_budget() * MEMORY_SHARE)  # the workers stop where the memory summed reaches it
        self.looked = 0.0  # when the memory was last looked at
        # regions read here, by a worker; parts scanned here; whether the workers were stopped (the memory budget)
        self.stats = {"local": 0, "worker": 0, "scanned": 0, "stopped": 0}

    def starts_often(self, region: Region) -> bool:
        """Whether a region (the first) holds two engine start lines or more: a log of many sessions, read with
        speculations from the start."""
        find = span_finder(compile_triggers(list(self.analyzer.starts.fragments)))
        data = self.read(region.start, region.end - region.start)
        first = find(data, 0, len(data))
        if first is None:
            return False
        line_end = data.find(b"\n", first[1])
        return line_end >= 0 and find(data, line_end, len(data)) is not None

    def run(self, regions: Iterator[Region]) -> Region | None:
        """Replay every region; the last one (None: none)."""
        waiting: deque[Region] = deque()  # taken from the grid, not given out
        given: set[int] = set()
        done: dict[int, Ahead | None] = {}
        more = True
        last: Region | None = None
        while True:
            while more and len(self.regions) < self.ahead_max:
                region = next(regions, None)
                if region is None:
                    more = False
                else:
                    waiting.append(region)
                    self.regions[region.index] = region
                    if region.index == 0 and self.analyzer.starts.fragments:
                        self.speculate = self.starts_often(region)
            turn = last.index + 1 if last is not None else 0
            if self._over_budget():
                self._stop(given, done)
            while waiting and len(given) < self.depth and self.pool.size:
                region = waiting.popleft()
                given.add(region.index)
                self.pool.give(region, self._lines_before(region, turn))
            if turn in done:
                last = self.regions.pop(turn)
                given.discard(turn)
                self._replay(last, done.pop(turn))
                continue
            if waiting and waiting[0].index == turn:  # not given out: read it here, now
                last = waiting.popleft()
                del self.regions[turn]
                self._replay(last, self._ahead(last, self._lines_before(last, turn)))
                continue
            if turn in given:
                # while the workers read it, read the next one here, as long as this process has done no more
                # than its share (its replays count: where they are long, the workers read more)
                if waiting and self.busy <= self.worker_busy / self.pool.size:
                    region = waiting.popleft()
                    given.add(region.index)
                    done[region.index] = self._ahead(region, self._lines_before(region, turn))
                    continue
                got = self.pool.take()
                if got is None:  # a worker died: what was given out is read here
                    for index in given:
                        done.setdefault(index, None)
                    continue
                index, ahead, cpu = got
                if index == STOPPED:  # a worker stopped for the memory budget: the others too
                    self._stop(given, done)
                    continue
                self.worker_busy += cpu
                if index in given and index not in done:
                    done[index] = ahead
                    self.stats["worker"] += ahead is not None
                    if ahead is not None:
                        self.counts[index] = ahead.lines
                continue
            return last

    def _stop(self, given: set[int], done: dict[int, Ahead | None]) -> None:
        """Stop the workers (the memory budget): the regions given out and not read are read here."""
        self.pool.stop()
        self.stats["stopped"] = 1
        for index in given:
            done.setdefault(index, None)

    def _over_budget(self) -> bool:
        """Whether the memory of this process and its workers, summed, reached the budget (looked at every
        MEMORY_EVERY_S at most, while workers work)."""
        if not self.budget or not self.pool.size:
            return False
        now = time.monotonic()
        if now < self.looked + MEMORY_EVERY_S:
            return False
        self.looked = now
        return memory_used(getattr(self.pool, "pids", [os.getpid()])) >= self.budget

    def _lines_before(self, region: Region, turn: int) -> int | None:
        """The lines before `region`, where regions are read with speculations (None: they are not); `turn`:
        the region replayed next (the scanner's count is the lines before it)."""
        if not self.speculate:
            return None
        lines = self.analyzer.scanner.lines
        for index in range(turn, region.index):
            count = self.counts.get(index)
            if count is None:
                between = self.regions[index]
                count = self.counts[index] = self.read(between.start, between.end - between.start).count(b"\n")
            lines += count
        return lines

    def _ahead(self, region: Region, lines_before: int | None) -> Ahead:
        self.stats["local"] += 1
        began = time.process_time()
        ahead = self.local.read(self.read(region.start, region.buf_end - region.start), region.end - region.start,
                                lines_before)
        self.counts[region.index] = ahead.lines
        self.busy += time.process_time() - began
        return ahead

    def _replay(self, region: Region, ahead: Ahead | None) -> None:
        """The region's records through the analysis, as the serial scan would hand them (or the region scanned
        here, where its reading ahead failed)."""
        analyzer = self.analyzer
        scanner = analyzer.scanner
        base = scanner.lines  # lines before the region: the scanner's count all through it, as in the serial path
        if ahead is None:
            ahead = self._ahead(region, None)
        self.counts.pop(region.index, None)
        buf: list[bytes] = []

        def load() -> bytes:
            if not buf:
                buf.append(self.read(region.start, region.buf_end - region.start))
            return buf[0]

        began = time.process_time()
        analyzer.replay(self._items(ahead, load, base, region.end - region.start))
        self.busy += time.process_time() - began
        scanner.lines = base + ahead.lines
        scanner.bytes = region.buf_end
        if self.replayed is not None:
            self.replayed(region)
        if analyzer.sessions_closed:
            self.speculate = True

    def _items(self, ahead: Ahead, load: Callable[[], bytes], base: int, end: int) -> Iterator[RawLine]:
        """The candidate lines of a region read ahead, numbered from `base`, its runs folded as they come (the
        analysis takes the lines as it would take them from the scanner: lazily, so each record meets the state
        the ones before it left), with the text between them while a parser captures it. A run the state does
        not let fold is scanned here, the serial way, up to the next candidate line the records hold (from there
        on they hold what the scan would meet). At the first line where both the speculation and this analysis
        began a session, the speculation's state is taken and the region is done."""
        analyzer = self.analyzer
        scanner = analyzer.scanner
        folders = analyzer.folders
        spec = ahead.spec
        starts = spec.starts if spec is not None else {}
        items = ahead.items
        pos = 0  # where the serial scan is in the region
        counted = 0  # lines before `pos`, from the region's start
        at: dict[int, int] | None = None  # the candidate lines' items by where they start (made on first need)
        i = 0
        while i < len(items):
            item = items[i]
            i += 1
            if item[0] == LINE:
                _, stop, number, start = item
                region = load()
                if scanner.capture and start > pos:
                    yield RawLine(base + number, None, region[max(pos, start - MAX_GAP):start])
                text, nxt = cut_line(region, start, stop - 1)
                closed = analyzer.sessions_closed
                yield RawLine(base + number, text, None, nxt, stop, start)
                pos, counted = stop, number
                if base + number in starts and self._took(spec, base + number, closed):
                    return
                continue
            _, run_end, number, lines, owner, reads, start, ends = item
            folder = folders._folder(owner) if folders is not None and not scanner.capture else None
            if folder is not None and folder.ready() and not (ends and folder.ends_now()):
                run = folder.run(None, start, run_end, base + number, lines, load)
                for parser, read in zip(folder.parsers, reads, strict=True):
                    parser.take_run(read, run)
                folder.runs += 1
                scanner.folded += lines
                pos, counted = run_end, number - 1 + lines
                continue
            if at is None:
                at = {it[3]: k for k, it in enumerate(items) if it[0] == LINE}
            back = yield from self._scan(load, pos, end, base + counted, spec, at, i)  # from the previous item on
            if back is None:
                return
            i = back + 1
            pos, counted = items[back][1], items[back][2]
        if scanner.capture and pos < end:  # the text after the last candidate
            yield RawLine(base + counted + 1, gap=load()[max(pos, end - MAX_GAP):end])

    def _scan(self, load: Callable[[], bytes], pos: int, end: int, line_base: int, spec: Speculation | None,
              at: dict[int, int], after: int) -> Generator[RawLine, None, int | None]:
        """The region scanned here from `pos` (`line_base` lines before it), until a candidate line the records
        hold (its item `at` its start, past `after`: returned), a line where the speculation's state is taken,
        or the region's end (None)."""
        self.stats["scanned"] += 1
        analyzer = self.analyzer
        starts = spec.starts if spec is not None else {}
        for raw in analyzer.scanner._scan(load(), pos, end, line_base=line_base):
            if raw.text is None:
                yield raw
                continue
            closed = analyzer.sessions_closed
            yield raw
            if raw.number in starts and self._took(spec, raw.number, closed):
                return None
            k = at.get(raw.start, -1)
            if k >= after:
                return k
        return None

    def _took(self, spec: Speculation | None, number: int, closed: int) -> bool:
        """Take the speculation's state where this analysis began a session at line `number` (`closed`: its
        sessions closed before that line) and the speculation began one there too."""
        analyzer = self.analyzer
        since = spec.starts.get(number) if spec is not None else None
        if spec is None or since is None or analyzer.sessions_closed <= closed or analyzer.open.first_line != number:
            return False
        analyzer.adopt(pickle.loads(spec.state), since)
        analyzer.scanner.folded += spec.folded
        self.adopted += 1
        return True
