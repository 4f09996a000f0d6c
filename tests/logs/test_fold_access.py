"""Folding Ollama's `[GIN]` access lines (doctor/sources/engines/ollama/fold.py) gives the same facts, state and
findings as reading them line by line, and really folds.

The access lines are built with gin's own default formatter (gin-gonic/gin logger.go `defaultLogFormatter`:
v1.7-v1.11 `[GIN] %v |%s %3d %s| %13v | %15s |%s %-7s %s %#v\\n%s`, v1.12 the latency as `|%s %8v %s|`, its
colours for a terminal) and Go's time.Duration formatting, bare or behind journald's prefix as
fixtures/logs/ollama/healthy-v0.5.7-journald.log holds them, set inside the real start-up and runner crash of
fixtures/logs/ollama/runner-cublas-oom-v0.5.13.log.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from doctor.judge.evaluate import diagnose
from doctor.sources.engines.llamacpp.parser import LlamaCppParser
from doctor.sources.engines.ollama.parser import OllamaParser
from doctor.sources.engines.ollama.patterns import GIN, INFERENCE_PATH
from doctor.sources.logs.analyze import LogAnalyzer
from doctor.views.render.json import render_json
from tests.logs.test_fold import _analyze, _both, _parser

ROOT = Path(__file__).resolve().parents[2]
CRASH = (ROOT / "fixtures" / "logs" / "ollama" / "runner-cublas-oom-v0.5.13.log").read_bytes().splitlines()
# the real log: start-up and runner start (lines 1-13), the runner's llama.cpp lines, the crash (line 43 on)
HEAD, LOADER, CRASH_TAIL = CRASH[:13], CRASH[13:42], CRASH[42:47]
INFERENCE = ("/api/generate", "/api/chat", "/api/embed", "/v1/chat/completions", "/v1/completions")
OTHER = ("/api/show", "/api/tags", "/", "/api/version", "/api/pull", "/v1/models", "/api/chatty")
# real lines of every engine (fixtures/logs), printable ASCII, for paths that hold them
WILD = [line for p in sorted((ROOT / "fixtures" / "logs").rglob("*.log"))
        for line in p.read_text(errors="replace").splitlines()[:60] if line.isascii() and line.isprintable()][::7]
# gin's colours (logger.go): status, method and latency colours and the reset
GREEN, BLUE, RESET = "\x1b[97;42m", "\x1b[97;44m", "\x1b[0m"


def go_duration(ns: int) -> str:
    """Go's time.Duration.String() (src/time/time.go)."""
    if ns == 0:
        return "0s"
    if ns < 1000:
        return f"{ns}ns"
    if ns < 1_000_000:
        return _frac(ns, 3) + "µs"
    if ns < 1_000_000_000:
        return _frac(ns, 6) + "ms"
    secs, frac = divmod(ns, 1_000_000_000)
    hours, rest = divmod(secs, 3600)
    minutes, seconds = divmod(rest, 60)
    text = _frac(seconds * 1_000_000_000 + frac, 9) + "s"
    if hours or minutes:
        text = f"{minutes}m" + text
    if hours:
        text = f"{hours}h" + text
    return text


def _frac(value: int, digits: int) -> str:
    whole, frac = divmod(value, 10**digits)
    tail = f"{frac:0{digits}d}".rstrip("0")
    return f"{whole}.{tail}" if tail else str(whole)


def gin_line(rng: random.Random, when: str, *, version: str = "1.9", status: int | None = None,
             path: str | None = None, method: str | None = None, colour: bool = False,
             journald: bool = False, client: str | None = None) -> str:
    status = status if status is not None else rng.choice((200, 200, 200, 200, 404, 400, 500, 503))
    method = method or rng.choice(("POST", "POST", "POST", "GET", "HEAD", "DELETE", "OPTIONS"))
    path = path if path is not None else rng.choice(INFERENCE + OTHER)
    ns = rng.choice((rng.randrange(1, 999), rng.randrange(1_000, 999_999), rng.randrange(10**6, 10**9),
                     rng.randrange(10**9, 60 * 10**9), rng.randrange(61 * 10**9, 7300 * 10**9)))
    client = client or rng.choice(("127.0.0.1", "10.44.0.7", "::1", "2001:db8::8a2e:370:7334"))
    sc, mc, rs = (GREEN, BLUE, RESET) if colour else ("", "", "")
    if version == "1.12":  # truncated as logger.go v1.12 does, then `|%s %8v %s|`
        ns -= ns % (10**10 if ns > 60 * 10**9 else 10**7 if ns > 10**9 else 10**4 if ns > 10**6 else 1)
        latency = f"|{sc} {go_duration(ns):>8} {rs}|"
    else:
        if ns > 60 * 10**9:
            ns -= ns % 10**9
        latency = f"| {go_duration(ns):>13} |"
    text = (f"[GIN] {when} |{sc} {status:3d} {rs}{latency} {client:>15} |{mc} {method:<7} {rs} "
            f'"{path}"')
    return (f"Jan 16 04:28:11 gpu-box ollama[1532]: {text}" if journald else text)


def ollama_log(seed: int = 0, requests: int = 3000, crlf: bool = False, breaks: int = 8) -> bytes:
    """The real start-up, then `requests` access lines (every shape above, some runs broken by lines read one
    by one: a coloured line, an error message, a path with brackets), the runner's start and crash, more
    access lines, a second server start (a new session), and access lines again."""
    rng = random.Random(seed)
    out = [line.decode() for line in HEAD]

    def access(n: int) -> None:
        for i in range(n):
            when = f"2025/03/14 - 13:{20 + i // 3600 % 40:02d}:{i % 60:02d}"
            version = rng.choice(("1.9", "1.12"))
            out.append(gin_line(rng, when, version=version, journald=rng.random() < 0.3))
            if rng.random() < breaks / max(1, n):
                kind = rng.randrange(4)
                if kind == 0:
                    out.append(gin_line(rng, when, colour=True))
                elif kind == 1:
                    out.append(gin_line(rng, when, status=500, path="/api/chat"))
                    out.append("Error #01: llama runner process has terminated")
                elif kind == 2:
                    out.append(gin_line(rng, when, path="/api/[weird]"))
                else:  # a path holding a real line of any engine: other parsers may read it (Folder.guard)
                    text = rng.choice(WILD)
                    out.append(gin_line(rng, when, path="/" + "".join(c for c in text if c not in '"\\[]|')))

    access(requests // 3)
    out += [line.decode(errors="replace") for line in LOADER]
    access(requests // 3)
    out += [line.decode(errors="replace") for line in CRASH_TAIL]
    out += [line.decode() for line in HEAD[:4]]  # the server again: a new session
    access(requests // 3)
    end = "\r\n" if crlf else "\n"
    return (end.join(out) + end).encode()


def _ollama(analyzer: LogAnalyzer) -> OllamaParser:
    return _parser(analyzer, OllamaParser)


def _same(data: bytes, chunk: int = 1 << 22) -> LogAnalyzer:
    folded, line_by_line = _both(data, chunk)
    a, b = _ollama(folded).s, _ollama(line_by_line).s
    def last(line: object) -> object:
        return None if line is None else (line.number, line.text, line.raw)  # type: ignore[attr-defined]

    assert (a.requests, a.errors_5xx, a.served, last(a.gin_line)) == (b.requests, b.errors_5xx, b.served,
                                                                       last(b.gin_line))
    assert _ollama(folded).votes == _ollama(line_by_line).votes
    return folded


def test_go_duration_matches_go() -> None:
    """Values from Go's own time.Duration tests (src/time/time_test.go durationTests)."""
    for ns, text in ((0, "0s"), (1, "1ns"), (1100, "1.1µs"), (2_200_000, "2.2ms"), (3_300_000_000, "3.3s"),
                     (4 * 60 * 10**9 + 5 * 10**9, "4m5s"), (4 * 60 * 10**9 + 5_001_000_000, "4m5.001s"),
                     (5 * 3600 * 10**9 + 6 * 60 * 10**9 + 7_001_000_000, "5h6m7.001s"),
                     (8 * 60 * 10**9 + 1, "8m0.000000001s")):
        assert go_duration(ns) == text


def test_a_busy_ollama_log_folds_to_the_same_facts_state_and_findings(rulebase) -> None:
    data = ollama_log()
    folded = _same(data)
    assert folded.folders is not None
    folder = folded.folders.of(OllamaParser)
    assert folder is not None and folder.runs >= 3
    assert folded.scanner.folded > 0.9 * data.count(b"[GIN]")
    # the llama.cpp parser (no gate: every line reaches it) and the catalogue read the runs too
    assert {type(p) for p in folder.parsers} >= {OllamaParser, LlamaCppParser}
    reports = []
    for fold in (True, False):
        analyzer, _ = _analyze(data, fold)
        reports.append(render_json(diagnose(analyzer.snapshot(), rulebase, command="analyze", mode="analyze")))
    assert reports[0] == reports[1]


def test_what_the_fold_counts_is_right() -> None:
    """GIN's own reading, line by line (patterns.py GIN, INFERENCE_PATH): the requests whose latency it reads
    (not Go's `1m12s`), the 5xx among them, the inference calls served (reset when a runner starts)."""
    rng = random.Random(7)
    lines = [line.decode() for line in HEAD[:4]]
    lines += [gin_line(rng, "2025/03/14 - 13:20:46", status=200, path="/api/chat", method="POST") for _ in range(40)]
    lines += [gin_line(rng, "2025/03/14 - 13:20:46", status=200, path="/api/chat", method="GET") for _ in range(5)]
    lines += [gin_line(rng, "2025/03/14 - 13:20:46", status=502, path="/api/show") for _ in range(7)]
    lines += ['[GIN] 2025/02/02 - 18:07:16 | 200 |          1m12s |       127.0.0.1 | POST     "/api/chat"'] * 3
    lines += ['[GIN] 2025/02/02 - 18:07:16 | 200 |    52.113\u03bcs |       127.0.0.1 | POST     "/api/embed"'] * 2
    data = ("\n".join(lines) + "\n").encode()
    folded = _same(data)
    s = _ollama(folded).s
    counted = [m for m in map(GIN.search, lines[4:]) if m]  # what GIN reads: not `1m12s`, `11m36s`, `67ns`
    assert 30 < len(counted) < 54 and s.requests == len(counted)
    assert s.errors_5xx == sum(m.group(1).startswith("5") for m in counted) > 0
    assert s.served == sum(m.group(1) == "200" and bool(INFERENCE_PATH.search(m.string)) for m in counted) > 20
    assert s.gin_line is not None and s.gin_line.number == len(lines)
    assert folded.folders is not None and folded.folders.runs == 1


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("chunk", [1 << 22, 4096])
def test_random_ollama_logs_fold_the_same(seed: int, chunk: int) -> None:
    rng = random.Random(seed)
    data = ollama_log(seed=seed, requests=rng.randrange(3, 1500), breaks=rng.randrange(0, 30))
    lines = data.split(b"\n")
    for _ in range(rng.randrange(0, 6)):  # a line dropped anywhere: the crash, a start line, an access line
        del lines[rng.randrange(len(lines) - 1)]
    _same(b"\n".join(lines), chunk=chunk)


def test_crlf_and_cr_only_access_lines_fold_the_same() -> None:
    data = ollama_log(seed=3, requests=900, crlf=True)
    folded = _same(data, chunk=65_536)
    assert folded.scanner.folded > 0.9 * data.count(b"[GIN]")
    cr_only = ollama_log(seed=4, requests=600).replace(b"\n", b"\r")
    assert _same(cr_only, chunk=50_000).scanner.folded > 0.9 * cr_only.count(b"[GIN]")


def test_an_oom_left_pending_stops_the_llama_cpp_parser_from_folding_the_runs() -> None:
    """The llama.cpp parser reads every line: a pending OOM is flushed by the first line 40 lines after it, so
    no run is folded while one waits (fold_ready), and the facts stay the same."""
    rng = random.Random(11)
    oom = ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 3200.00 MiB on device 0: "
           "cudaMalloc failed: out of memory")
    lines = [line.decode() for line in HEAD] + [oom]
    lines += [gin_line(rng, "2025/03/14 - 13:20:46") for _ in range(300)]
    data = ("\n".join(lines) + "\n").encode()
    folded = _same(data)
    llama = next(p for p in folded.parsers if isinstance(p, LlamaCppParser))
    assert not llama.s.pending


def test_a_gin_line_that_names_a_llama_cpp_literal_is_read_by_it() -> None:
    """A path can hold any text: a run where one of the llama.cpp parser's literals occurs is fed to it line by
    line (its other lines no handler takes), the same as line by line."""
    from doctor.sources.engines.llamacpp.patterns import INDEX

    assert INDEX is not None
    rng = random.Random(5)
    lines = [line.decode() for line in HEAD]
    literals = [lit for lit in INDEX.literals if lit.isascii() and lit.isprintable() and '"' not in lit
                and not any(c in lit for c in "[]|\\")][:40]
    for lit in literals:
        lines.append(gin_line(rng, "2025/03/14 - 13:20:46", path=f"/x/{lit}"))
        lines += [gin_line(rng, "2025/03/14 - 13:20:47") for _ in range(3)]
    _same(("\n".join(lines) + "\n").encode())


def test_a_path_that_another_parser_reads_ends_the_run_there() -> None:
    """A path is free text: one that holds an OOM message, a start line or another engine's words reaches
    other parsers line by line, so the run is cut before it (Folder.guard) and the facts, events and
    sessions stay the per-line path's."""
    rng = random.Random(3)
    planted = ("/x torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
               "/llama server listening at http://127.0.0.1:8080", "/main: build = 1234 (abc)",
               "/x CUDA error: out of memory", "/x Avg prompt throughput: 1.0 tokens/s")
    lines = [line.decode() for line in HEAD]
    for path in planted:
        lines += [gin_line(rng, "2025/03/14 - 13:20:46") for _ in range(20)]
        lines.append(gin_line(rng, "2025/03/14 - 13:20:47", path=path, status=200))
    lines += [gin_line(rng, "2025/03/14 - 13:20:48") for _ in range(20)]
    data = ("\n".join(lines) + "\n").encode()
    folded = _same(data)
    assert folded.folders is not None
    folder = folded.folders.of(OllamaParser)
    assert folder is not None and folder.guard is not None and folder.runs >= 2
    assert folded.scanner.folded > len(lines) / 3  # the runs between the planted lines still fold
    per_line, _ = _analyze(data, False)
    assert per_line.finish().event_counts  # the planted lines do say something line by line
