"""A log read with worker processes (doctor/sources/logs/parallel.py) gives the serial path's facts, byte for byte.

The serial path (`analyze_stream`) is the reference. Both read the same file in reads of the same size, so the
regions (doctor/sources/logs/regions.py) are the same; the reads are made small here so that every log is cut
into several regions, whose ends fall inside sessions, inside folded runs, at start lines and inside a
captured transcript. Every fixture and corpus log, the mixed log of all of them, long built server logs of
every folded engine; the ways a read ahead is not used (a run whose parsers are not ready, a capture, a
speculation whose start line begins no session here, a worker that fails or dies) are each shown to happen.
"""

from __future__ import annotations

import io
import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from doctor.sources.logs import ahead as ahead_module
from doctor.sources.logs import entry as entry_module
from doctor.sources.logs import memory as memory_module
from doctor.sources.logs import parallel
from doctor.sources.logs.analyze import LogAnalyzer
from doctor.sources.logs.entry import analyze_stream
from doctor.sources.logs.matcher import compile_triggers
from doctor.sources.logs.regions import Region, file_regions, pread
from doctor.sources.logs.stream import LineScanner
from tests.logs.test_fold import server_log, server_log_2025

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("LLM_DOCTOR_CORPUS") or "/work/shared/corpus")
LOGS = sorted((ROOT / "fixtures" / "logs").rglob("*.log")) + sorted(CORPUS.glob("*.log")) + \
    sorted((ROOT / "corpus").glob("*.log"))


class _InProcess:
    """The workers' part read in this process (each record pickled and read back, as between processes): the same
    records and replay for hundreds of small logs without starting processes for each."""

    def __init__(self, workers: int, name: str, fold: bool, escaped: bool, fd: int) -> None:
        self.reader = ahead_module.Reader(name, fold, escaped)
        self.read = pread(fd)
        self.size = workers
        self.broken = False
        self.out: list[tuple[int, object, float]] = []

    def give(self, region: Region, lines_before: int | None) -> None:
        ahead = self.reader.read(self.read(region.start, region.buf_end - region.start), region.end - region.start,
                                 lines_before)
        self.out.append((region.index, pickle.loads(pickle.dumps(ahead)), 0.0))

    def take(self) -> tuple[int, object, float]:
        return self.out.pop(0)

    def close(self) -> None:
        pass


def _serial(path: Path, chunk: int) -> str:
    """`analyze_stream`'s facts with no worker (LLM_DOCTOR_WORKERS=0): the reference."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(parallel.ENV, "0")
        with path.open("rb", buffering=1 << 20) as f:
            return json.dumps(analyze_stream(f, path.name, chunk).to_json(), sort_keys=True)


def _parallel(path: Path, chunk: int, workers: int = 1) -> tuple[str, dict[str, int]]:
    """`analyze_stream`'s facts with `workers`, whatever the file's size; `seen`: how its regions were read
    (empty where the parallel path did not take the file: a paste, a head without a line end)."""
    seen: dict[str, int] = {}
    original = parallel.analyze_file

    def spy(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs, seen=seen)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(entry_module, "PARALLEL_MIN", 0)
        patch.setattr(parallel, "MIN_BYTES", 0)
        patch.setenv(parallel.ENV, str(workers))
        patch.setattr(parallel, "analyze_file", spy)
        with path.open("rb", buffering=1 << 20) as f:
            facts = analyze_stream(f, path.name, chunk)
    return json.dumps(facts.to_json(), sort_keys=True), seen


def _same(path: Path, chunk: int, workers: int = 1, taken: bool = True) -> dict[str, int]:
    facts, seen = _parallel(path, chunk, workers)
    serial = _serial(path, chunk)
    if facts != serial:  # say where, not a diff of two megabytes of JSON (pytest's differ takes minutes on it)
        at = next((i for i, (a, b) in enumerate(zip(facts, serial, strict=False)) if a != b),
                  min(len(facts), len(serial)))
        near = slice(max(0, at - 200), at + 200)
        pytest.fail(f"{path.name}, reads of {chunk} bytes: the reports differ at character {at}: "
                    f"parallel ...{facts[near]}... serial ...{serial[near]}...")
    assert seen or not taken, f"{path.name}: the parallel path did not take it"
    return seen


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every fixture and corpus log, concatenated: every engine, hundreds of sessions."""
    path = tmp_path_factory.mktemp("parallel") / "mixed.log"
    with path.open("wb") as out:
        for log in LOGS:
            data = log.read_bytes()
            out.write(data if data.endswith(b"\n") else data + b"\n")
    return path


def test_every_fixture_and_corpus_log_reads_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each log cut into about five regions (the workers' part in this process: `_InProcess`)."""
    monkeypatch.setattr(parallel, "POOL", _InProcess)
    given = 0
    for log in LOGS:
        data = log.read_bytes()
        head = data.find(b"\n") + 1 or len(data)  # the first read must hold a line end (else: the serial path)
        seen = _same(log, max(256, len(data) // 5, head), taken=False)
        given += seen.get("worker", 0)
    assert len(LOGS) > 500 and given > 500


def test_fixture_logs_read_the_same_with_a_worker_process() -> None:
    """The same with a real worker process, on the fixture logs of some size."""
    from doctor.core.paste import looks_pasted

    # a head that looks pasted is read as one piece (a paste, or the largest paste read at once)
    taken = [log for log in LOGS if log.stat().st_size > 50_000 and "corpus" not in log.parts
             and not looks_pasted(log.read_bytes()[: 64 << 10])][:10]
    assert len(taken) == 10
    for log in taken:
        seen = _same(log, log.stat().st_size // 5)
        assert seen["worker"] > 0


def test_the_mixed_log_reads_the_same(mixed: Path) -> None:
    total: dict[str, int] = {}
    for chunk in (65_536, 333_333, 1 << 20):
        seen = _same(mixed, chunk)
        assert seen["worker"] > 0 and seen["local"] > 0  # the regions were read by both processes
        assert seen["adopted"] > 0  # sessions read by a speculation were taken
        for key, value in seen.items():
            total[key] = total.get(key, 0) + value
    assert total["scanned"] > 0  # and some records could not be used as they were (a run not ready, say)


def test_a_big_log_whose_head_looks_pasted_reads_the_same(mixed: Path, tmp_path: Path) -> None:
    """A head quoted as in a mail and holding escaped quotes: analyze_stream reads it in one read of a paste's
    largest size (too big to be one), then reads on in reads of `chunk`, its triggers tolerant of escaped
    quotes; the regions follow."""
    from doctor.core.paste import PASTE_MAX, looks_pasted

    data = mixed.read_bytes()
    head = b'app: engine said {\\"error\\": \\"CUDA out of memory\\"}\n' + b"".join(
        b"> " + line for line in data[:20_000].splitlines(keepends=True))
    path = tmp_path / "quoted.log"
    path.write_bytes(head + data)
    assert looks_pasted(head) and len(head + data) > PASTE_MAX + (1 << 20)
    seen = _same(path, 1 << 20)
    assert seen["worker"] > 0


@pytest.mark.parametrize("chunk", [65_536, 1 << 20])
def test_a_stream_that_is_no_file_reads_the_same(mixed: Path, tmp_path: Path, chunk: int) -> None:
    """A gunzipped file (as standard input, read by this process, each region's bytes handed to the worker)."""
    import gzip

    path = tmp_path / "mixed.log.gz"
    path.write_bytes(gzip.compress(mixed.read_bytes(), compresslevel=1))
    seen: dict[str, int] = {}
    original = parallel.analyze_pipe

    def spy(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs, seen=seen)

    reports = []
    for workers in ("1", "0"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(parallel.ENV, workers)
            patch.setattr(parallel, "analyze_pipe", spy)
            patch.setattr(entry_module, "PIPE_READS", 3)  # a few reads: the log here is some MB
            with path.open("rb") as f:
                reports.append(json.dumps(analyze_stream(f, "mixed.log", chunk).to_json(), sort_keys=True))
        if workers == "1":
            assert seen["worker"] > 0  # the worker read regions handed to it as bytes
    assert reports[0] == reports[1]


def test_two_workers_read_the_same(mixed: Path) -> None:
    seen = _same(mixed, 250_000, workers=2)
    assert seen["workers"] == 2 and seen["worker"] > 0


@pytest.mark.parametrize("chunk", [997, 4096, 65_536, 1_000_003])
def test_a_long_server_log_with_a_restart_reads_the_same(tmp_path: Path, chunk: int) -> None:
    """Runs of llama-server's request lines cut by region ends (mid-group too), a restart inside a run."""
    path = tmp_path / "server.log"
    path.write_bytes(server_log()[: 600_000 if chunk < 4096 else None])
    _same(path, chunk)


@pytest.mark.parametrize("seed", range(3))
def test_early_2025_server_lines_read_the_same(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(server_log_2025(seed=seed, idle_every=1 + seed))
    _same(path, (5000, 20_000, 777)[seed])


@pytest.mark.parametrize("name", ["queue", "ollama", "vllm", "sglang"])
def test_every_engine_s_request_lines_read_the_same(tmp_path: Path, name: str) -> None:
    """The bench's server logs (bench/analyze_real.py), small: each engine's folded lines, regions in runs."""
    from bench.analyze_real import BUILDERS

    path = tmp_path / f"{name}.log"
    BUILDERS[name](path, 1_500_000)
    _same(path, 100_000)


def test_region_ends_at_every_start_line(tmp_path: Path) -> None:
    """Reads whose regions end just before, at and just after engine start lines."""
    from bench.analyze_real import queue_parts
    from doctor.core.paste import looks_pasted
    from doctor.sources.logs.sessions import start_lines

    logs = [p for p in LOGS if "vllm" in p.parts or "ollama" in p.parts][:6] + LOGS[:6]
    head, block, _ = queue_parts()  # a head that does not look pasted (else the input is read as a paste)
    data = head + block * (70_000 // len(block) + 1) + b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in logs)
    assert not looks_pasted(data[: 64 << 10])
    path = tmp_path / "starts.log"
    path.write_bytes(data)
    starts = start_lines()
    offsets = []
    pos = 0
    for line in data.splitlines(keepends=True):
        if starts.marker(line.rstrip(b"\r\n")) is not None:
            offsets.append(pos)
        pos += len(line)
    assert len(offsets) > 5
    for offset in offsets[1:6]:
        for shift in (-200, 0, 1, 300):
            _same(path, max(4096, offset + shift))


def test_a_worker_that_fails_leaves_its_regions_here(mixed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = ahead_module.Reader.read
    main = os.getpid()

    def failing(self: ahead_module.Reader, buf: bytes, end: int, lines_before: int | None = None) -> object:
        if os.getpid() != main:
            raise ValueError("a worker failing")
        return original(self, buf, end, lines_before)

    monkeypatch.setattr(ahead_module.Reader, "read", failing)
    _same(mixed, 500_000)


def test_a_worker_that_dies_leaves_its_regions_here(mixed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    main = os.getpid()
    original = ahead_module.Reader.read

    def dying(self: ahead_module.Reader, buf: bytes, end: int, lines_before: int | None = None) -> object:
        if os.getpid() != main:
            os._exit(9)
        return original(self, buf, end, lines_before)

    monkeypatch.setattr(ahead_module.Reader, "read", dying)
    monkeypatch.setattr(parallel, "WAIT_S", 0.05)
    seen = _same(mixed, 500_000)
    assert seen["worker"] == 0


def test_workers_stop_at_the_memory_budget(mixed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the analysis and its workers, summed, reach the budget (LLM_DOCTOR_MEMORY_MB: here 1 MB, reached at
    once), the worker says so after its region and ends; the analysis reads on alone, to the same report."""
    monkeypatch.setenv(memory_module.MEMORY_ENV, "1")
    seen = _same(mixed, 500_000)
    assert seen["stopped"] == 1 and seen["local"] > 0


def test_the_memory_used_is_read_from_proc() -> None:
    """The memory summed over processes: this one's, more than nothing; a process that is gone, nothing."""
    own = memory_module.memory_used([os.getpid()])
    assert 1 << 20 < own < 4 << 30
    assert memory_module.memory_used([os.getpid(), 1 << 30]) == own


def test_a_state_that_cannot_move_turns_speculation_off(mixed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A parser whose state cannot be pickled: no speculation is taken, the records still are, the same report."""
    original = LogAnalyzer.live

    def unpicklable(self: LogAnalyzer) -> object:
        live = original(self)
        live.parsers[0].__dict__["_lock"] = lambda: None
        return live

    monkeypatch.setattr(LogAnalyzer, "live", unpicklable)
    seen = _same(mixed, 333_333)
    assert seen["adopted"] == 0


def test_parser_state_survives_pickling(mixed: Path) -> None:
    """A session's state moved between processes reads on as the one it came from (gates, the catalogue)."""
    data = mixed.read_bytes()
    cut = data.rfind(b"\n", 0, len(data) // 3) + 1
    analyzer = LogAnalyzer("mixed.log")
    analyzer.feed(data[:cut])
    other = LogAnalyzer("mixed.log")
    other.adopt(pickle.loads(pickle.dumps(analyzer.live())))
    other.sessions, other.sessions_closed = list(analyzer.sessions), analyzer.sessions_closed
    other.scanner.lines = analyzer.scanner.lines  # the same place in the input
    assert other.parsers is not analyzer.parsers and other.parsers[0].facts is other.facts
    rest = data[cut:]
    analyzer.feed(rest)
    other.feed(rest)
    assert json.dumps(other.finish().to_json(), sort_keys=True) == json.dumps(analyzer.finish().to_json(),
                                                                             sort_keys=True)


def test_regions_are_the_serial_scanner_s(mixed: Path) -> None:
    """Each region ends where the serial scanner cuts its read (held-back last line, CRLF, long lines)."""
    data = mixed.read_bytes()
    data = data.replace(b"\n", b"\r\n", 3000)[:2_000_000] + b"x" * 20_000 + b"\n" + data[:300_000]
    for chunk in (4096, 65_536, 1 << 20):
        scanner = LineScanner(compile_triggers(["zzzz"]))
        scanner.hold_last = True
        ends = []
        for pos in range(0, len(data), chunk):
            list(scanner.feed(data[pos:pos + chunk]))
            ends.append(len(data[: pos + chunk]) - len(scanner._tail))
        found = file_regions(lambda offset, size: data[offset:offset + size], len(data), chunk)
        assert found is not None
        regions: list[Region] = list(found)
        assert [r.end for r in regions] == ends[: len(regions)]
        # up to the long line at least (reads shorter than it leave the rest to the serial path: it has no cut)
        assert regions[-1].end >= 1_900_000 and (chunk < 20_000 or len(regions) >= len(ends) - 1)


def test_a_cr_only_log_is_left_to_the_serial_path(tmp_path: Path) -> None:
    path = tmp_path / "cr.log"
    path.write_bytes(server_log(requests=300, restart_at=None).replace(b"\n", b"\r"))
    with path.open("rb") as f:
        assert parallel.analyze_file(f, "cr.log", chunk=65_536, workers=1, min_bytes=0) is None


def test_pipes_and_small_files_are_the_serial_path_s(tmp_path: Path) -> None:
    assert parallel.analyze_file(io.BytesIO(b"x\n" * 1000), "x", workers=1, min_bytes=0) is None
    path = tmp_path / "small.log"
    path.write_bytes(b"x\n" * 1000)
    with path.open("rb") as f:
        assert parallel.analyze_file(f, "small.log", workers=None) is None
    assert parallel.workers_wanted(1 << 30) >= 0


def test_the_command_reads_a_big_file_with_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`analyze FILE` past the size where workers pay, against LLM_DOCTOR_WORKERS=0: the same report."""
    from bench.analyze_real import build_mixed
    from doctor.cli import main

    path = tmp_path / "big.log"
    build_mixed(path, 2_500_000)
    monkeypatch.setattr(entry_module, "PARALLEL_MIN", 1 << 20)
    monkeypatch.setattr(parallel, "MIN_BYTES", 1 << 20)
    monkeypatch.setattr(entry_module, "CHUNK", 300_000)
    used: list[bool] = []
    original = parallel.analyze_file

    def spy(*args: object, **kwargs: object) -> object:
        facts = original(*args, **kwargs)  # type: ignore[arg-type]
        used.append(facts is not None)
        return facts

    monkeypatch.setattr(parallel, "analyze_file", spy)
    reports = []
    for workers in ("1", "0"):
        monkeypatch.setenv(parallel.ENV, workers)
        code = main(["analyze", str(path), "--format", "json", "--no-tui"])
        reports.append((code, capsys.readouterr().out))
    assert used == [True, False]
    assert reports[0] == reports[1] and '"findings"' in reports[0][1]
