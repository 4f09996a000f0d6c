"""Analyze throughput and memory on real server lines, side by side with grep (issue 28).

Logs made of real lines, repeated to `--size-mb` (queue and mixed are the issue's two):
  - queue: fixtures/logs/llama-server/real-queueing.log, its start-up once, then its request block (the
    slot/srv lines after start-up) repeated, then its last line: one long llama-server session, where
    nearly every line is a candidate (slot launches, timings, releases);
  - mixed: every real log of the repository and the labelled corpus (fixtures/logs/**/*.log and
    $LLM_DOCTOR_CORPUS or /work/shared/corpus/*.log) concatenated, the whole repeated: every engine,
    many sessions;
  - ollama: fixtures/logs/ollama/healthy-v0.5.7-journald.log's start-up, then every real `[GIN]` access line
    of those logs (bare and behind journald's prefix) repeated: one long Ollama server, one access line
    per request (not one of the issue's two logs: the other engine whose request lines are folded);
  - vllm: fixtures/logs/vllm/healthy-v0.8.5-v1-tp2.log's start-up, then every request line of the vLLM logs
    (`Received request` with its prompt and sampling parameters, `Added request`, `Finished request`, the
    API server's access lines) in file order, five times, then one of their periodic `Avg prompt
    throughput` stats lines (each in turn: about what a server taking ten requests a second prints in its
    ten-second stats interval), repeated: a busy vLLM server that logs its requests (the default before
    v0.10), read line by line (not folded);
  - sglang: fixtures/logs/sglang/v0.4.3-decode-retract-kv-full.log's start-up, then every batch line of the SGLang
    logs behind a dated stamp (`Prefill batch` / `Decode batch`, 0.4.3 and 0.5.23), repeated: a busy SGLang
    server, its scheduler's lines folded (doctor/sources/engines/sglang/fold.py).
For `--rounds` rounds, in turn: `llm-doctor analyze FILE --format json` as a user runs it (wall, CPU,
peak RSS), the same with LLM_DOCTOR_FOLD=0 (the per-line reference path, no folding of hot-line runs:
doctor/sources/logs/fold.py; leave it out with --no-reference) and `grep -E -c -f TRIGGERS FILE` (the
trigger signatures of bench/analyze_throughput.py, C locale). Reports the median MB/s of each, the ratio
(target >= 0.5x grep, by wall time; by CPU time in the details: on a busy shared machine the wall ratio
swings with the load) and the peak RSS (<= 100 MB). `watch --log` feeds the same analyzer
(doctor/sources/live/session.py emit_log_block); its capacity is the analyze rate, judged against a log
growing at 50 MB/s.

    python bench/analyze_real.py [--size-mb 100] [--rounds 3] [--logs queue,mixed,ollama,vllm,sglang] [--no-reference]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.analyze_throughput import grep_cmd, trigger_file, versus_grep  # noqa: E402
from bench.common import RESULTS, Row, child_env, doctor, median, run, spread, workdir  # noqa: E402

TARGET_RATIO = 0.5
TARGET_RSS = 100 << 20
WATCH_RATE = 50.0  # MB/s: the growing log watch --log must keep up with
QUEUE = ROOT / "fixtures" / "logs" / "llama-server" / "real-queueing.log"
QUEUE_HEAD, QUEUE_BLOCK_END = 11, 45  # lines 1-11: start-up; 12-45: the request block; 46: exit
OLLAMA = ROOT / "fixtures" / "logs" / "ollama" / "healthy-v0.5.7-journald.log"
VLLM = ROOT / "fixtures" / "logs" / "vllm" / "healthy-v0.8.5-v1-tp2.log"
VLLM_REQUEST_LINES = (b"Received request ", b"Added request ", b"Finished request ", b' HTTP/1.1" ')
SGLANG = ROOT / "fixtures" / "logs" / "sglang" / "v0.4.3-decode-retract-kv-full.log"
VLLM_STATS_LINE = b"Avg prompt throughput: "
VLLM_REQUESTS_PER_STATS = 5  # the request lines, this many times, between two stats lines


def corpus_dir() -> Path:
    return Path(os.environ.get("LLM_DOCTOR_CORPUS") or "/work/shared/corpus")


def _repeat(out: Path, head: bytes, block: bytes, tail: bytes, size: int) -> int:
    rep = block * max(1, (1 << 20) // max(1, len(block)))
    written = 0
    with out.open("wb") as f:
        f.write(head)
        written += len(head)
        while written < size - len(tail):
            f.write(rep)
            written += len(rep)
        f.write(tail)
        written += len(tail)
    return written


def queue_parts() -> tuple[bytes, bytes, bytes]:
    """(start-up, request block, last line) of real-queueing.log."""
    lines = QUEUE.read_bytes().splitlines(keepends=True)
    return (b"".join(lines[:QUEUE_HEAD]), b"".join(lines[QUEUE_HEAD:QUEUE_BLOCK_END]),
            b"".join(lines[QUEUE_BLOCK_END:]))


def ollama_parts() -> tuple[bytes, bytes, bytes]:
    """(the journald log's start-up, every real `[GIN]` access line, nothing)."""
    files = sorted((ROOT / "fixtures" / "logs").rglob("*.log")) + sorted(corpus_dir().glob("*.log"))
    access = [line for p in files for line in p.read_bytes().splitlines(keepends=True) if b"[GIN] " in line
              and line.endswith(b"\n")]
    head = b"".join(line for line in OLLAMA.read_bytes().splitlines(keepends=True) if b"[GIN] " not in line)
    return head, b"".join(access), b""


def vllm_parts() -> tuple[bytes, bytes, bytes]:
    """(healthy-v0.8.5-v1-tp2.log's start-up, the request lines of the vLLM logs with their stats lines
    between, nothing)."""
    files = sorted((ROOT / "fixtures" / "logs" / "vllm").glob("*.log"))
    lines = [line for p in files for line in p.read_bytes().splitlines(keepends=True) if line.endswith(b"\n")]
    requests = b"".join(line for line in lines if any(mark in line for mark in VLLM_REQUEST_LINES))
    stats = [line for line in lines if VLLM_STATS_LINE in line]
    head = VLLM.read_bytes().splitlines(keepends=True)
    first = next(i for i, line in enumerate(head) if b"Received request " in line)
    return b"".join(head[:first]), b"".join(requests * VLLM_REQUESTS_PER_STATS + line for line in stats), b""


def sglang_parts() -> tuple[bytes, bytes, bytes]:
    """(v0.4.3-decode-retract-kv-full.log's start-up, every dated batch line of the SGLang logs, nothing)."""
    files = sorted((ROOT / "fixtures" / "logs" / "sglang").glob("*.log"))
    batches = [line for p in files for line in p.read_bytes().splitlines(keepends=True)
               if line.endswith(b"\n") and line.startswith(b"[20") and (b"] Prefill batch" in line
                                                                        or b"] Decode batch" in line)]
    head = SGLANG.read_bytes().splitlines(keepends=True)
    first = next(i for i, line in enumerate(head) if b" batch" in line)
    return b"".join(head[:first]), b"".join(batches), b""


def build_mixed(out: Path, size: int) -> int:
    files = sorted((ROOT / "fixtures" / "logs").rglob("*.log")) + sorted(corpus_dir().glob("*.log"))
    parts = [p.read_bytes() for p in files]
    blob = b"".join(p if p.endswith(b"\n") else p + b"\n" for p in parts)
    return _repeat(out, b"", blob, b"", size)


PARTS = {"queue": queue_parts, "ollama": ollama_parts, "vllm": vllm_parts, "sglang": sglang_parts}


def _built(parts: Callable[[], tuple[bytes, bytes, bytes]]) -> Callable[[Path, int], int]:
    """A builder of a log: the start-up, the block repeated, the tail (the parts)."""
    return lambda out, size: _repeat(out, *parts(), size)


BUILDERS = {"mixed": build_mixed, **{name: _built(parts) for name, parts in PARTS.items()}}
TITLES = {"queue": "real-queueing.log request block repeated", "mixed": "every engine's real logs, repeated",
          "ollama": "real Ollama access lines repeated", "vllm": "vLLM request lines repeated",
          "sglang": "SGLang batch lines repeated"}


def measure(name: str, size_mb: int, rounds: int, patterns: Path, reference: bool = True) -> list[Row]:
    folder = workdir()
    log = folder / f"{name}.log"
    size = BUILDERS[name](log, size_mb * 1_000_000)
    c_locale = child_env(LC_ALL="C")
    counts = run(grep_cmd(patterns, log), env=c_locale).stdout.strip()  # also warms the page cache
    run(doctor("--help"))  # byte-code compiled once, before any timed run
    doctor_runs, grep_runs, line_runs = [], [], []
    # one hash seed for both paths: on the mixed log (a hundred sessions of every engine) which of two
    # equally ranked findings the report shows follows Python's string hashing, on either path
    seeded = child_env(PYTHONHASHSEED="0")
    for _ in range(rounds):
        d = run(doctor("analyze", str(log), "--format", "json"), env=seeded, ok=(0, 1), timeout_s=3600)
        folded = json.loads(d.stdout)
        doctor_runs.append(d)
        if reference:
            r = run(doctor("analyze", str(log), "--format", "json"),
                    env=child_env(PYTHONHASHSEED="0", LLM_DOCTOR_FOLD="0"), ok=(0, 1), timeout_s=3600)
            if json.loads(r.stdout) != folded:
                raise SystemExit(f"{name}: the folded and the per-line reports differ")
            line_runs.append(r)
        grep_runs.append(run(grep_cmd(patterns, log), env=c_locale))
    log.unlink()
    vs = versus_grep(size, counts, doctor_runs, grep_runs)
    mb, d_rate, g_rate, ratios, rss, details = vs.mb, vs.d_rate, vs.g_rate, vs.ratios, vs.rss, vs.details
    cpu_ratio, cpu_rate = vs.cpu_ratio, vs.cpu_rate
    if line_runs:
        details.update({
            "per_line_cpu_s": [round(r.cpu_s, 2) for r in line_runs],
            "per_line_wall_s": [round(r.wall_s, 2) for r in line_runs],
            "per_line_mb_s_cpu": round(median([mb / r.cpu_s for r in line_runs]), 1),
            "per_line_ratio_cpu": round(median([g.cpu_s / r.cpu_s
                                                for r, g in zip(line_runs, grep_runs, strict=True)]), 4),
            "per_line_peak_rss_bytes": [r.peak_rss for r in line_runs],
            "same_report": True,
        })
    title = f"{TITLES[name]}, {mb:.0f} MB"
    ratio = median(ratios)
    return [
        Row(f"analyze throughput, {title}", "grep -E -c, same signatures, same file (LC_ALL=C)",
            f">= {TARGET_RATIO}x grep MB/s", f"{d_rate:.1f} MB/s", f"{g_rate:.1f} MB/s", f"{ratio:.3f}x",
            ratio >= TARGET_RATIO,
            f"median of {rounds} alternating rounds; per-round ratio {spread(ratios)}; by CPU time {cpu_ratio:.3f}x "
            f"({cpu_rate:.1f} MB/s of CPU)", details),
        Row(f"analyze peak memory, {title}", "-", "<= 100 MB", f"{rss / 2**20:.1f} MB", "-",
            f"{rss / 2**20:.1f} MB", rss <= TARGET_RSS, "largest peak RSS of the runs above"),
        Row(f"watch --log capacity, {title}", "a log growing at 50 MB/s", f">= {WATCH_RATE:.0f} MB/s",
            f"{cpu_rate:.1f} MB/s", f"{WATCH_RATE:.0f} MB/s", f"{cpu_rate / WATCH_RATE:.2f}x", cpu_rate >= WATCH_RATE,
            "watch --log feeds the same analyzer: its rate per CPU second, with a core to itself"),
    ]


def arguments(doc: str, logs: str) -> argparse.ArgumentParser:
    """The options both analyze benches on real lines take: the size of each log, the rounds, which logs."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--logs", default=logs, help=f"any of {','.join(BUILDERS)}")
    return ap


def each_log(logs: str, measure_one: Callable[[str, Path], list[Row]]) -> list[Row]:
    """The rows of each of the comma-separated `logs`, measured in turn against the same grep signatures."""
    patterns = trigger_file(workdir())
    return [row for name in logs.split(",") for row in measure_one(name, patterns)]


def main() -> int:
    ap = arguments(__doc__, "queue,mixed,ollama,vllm,sglang")
    ap.add_argument("--no-reference", action="store_true", help="leave out the per-line path (LLM_DOCTOR_FOLD=0)")
    args = ap.parse_args()
    rows = each_log(args.logs, lambda name, patterns: measure(name, args.size_mb, args.rounds, patterns,
                                                              reference=not args.no_reference))
    for row in rows:
        print(f"{row.measure}: {row.doctor} vs {row.ref} -> {row.result} (target {row.target}); {row.note}")
        if row.details and "per_line_cpu_s" in row.details:
            d = row.details
            print(f"  CPU s: folded {d['doctor_cpu_s']}, per-line {d['per_line_cpu_s']}, grep {d['grep_cpu_s']}; "
                  f"per-line {d['per_line_mb_s_cpu']} MB/s of CPU ({d['per_line_ratio_cpu']}x grep)")
    write_rows(rows, f"analyze_real_{args.size_mb}mb.json")
    return 0


def write_rows(rows: list[Row], name: str) -> None:
    """The rows as bench/results/NAME (JSON)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text(json.dumps([r.to_json() for r in rows], indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
