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
For `--rounds` rounds, in turn: `llm-doctor analyze FILE --format json` as a user runs it (worker processes
where the file is big enough: doctor/sources/logs/parallel.py), the same serial (LLM_DOCTOR_WORKERS=0), the
per-line reference path (LLM_DOCTOR_FOLD=0, serial: no folding of hot-line runs, doctor/sources/logs/fold.py;
leave it out with --no-reference), `grep -E -c -f TRIGGERS FILE` (the trigger signatures of
bench/analyze_throughput.py, C locale) and Drain3 0.9.11 over the same file (bench/drain3_run.py: the template
miner log explainers use; `pip install -r bench/requirements.txt`; leave it out with --no-drain3). Wall and CPU
time of each whole process (the workers' CPU included), the peak RSS of the largest process and the peak of
all of them summed (sampled, RSS and PSS). The reports of the analyze runs must be identical (else it stops).
Issue 38's targets, on 2 cores: every engine's server log (queue, ollama, vllm, sglang) >= 0.2x grep by wall
time; the mixed log at or above Drain3's rate; peak memory <= 100 MB; `watch --log` keeps up with a log growing
at 50 MB/s (it feeds the same analyzer, doctor/sources/live/session.py emit_log_block: its capacity is the
serial analyze rate per CPU second). `--table` prints the issue's table (Markdown) at the end.

    python bench/analyze_real.py [--size-mb 100] [--rounds 3] [--logs queue,mixed,ollama,vllm,sglang]
                                 [--no-reference] [--no-drain3] [--table]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.analyze_throughput import grep_cmd, trigger_file  # noqa: E402
from bench.common import PYTHON, RESULTS, Row, Run, child_env, doctor, median, run, spread, workdir  # noqa: E402

TARGET_RATIO = 0.2  # issue 38: every engine's server log, by wall time, on 2 cores
SERVER_LOGS = ("queue", "ollama", "vllm", "sglang")
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


MODES = {  # the analyze runs of each round: name -> environment
    "workers": {"PYTHONHASHSEED": "0"},
    "serial": {"PYTHONHASHSEED": "0", "LLM_DOCTOR_WORKERS": "0"},
    "per-line": {"PYTHONHASHSEED": "0", "LLM_DOCTOR_WORKERS": "0", "LLM_DOCTOR_FOLD": "0"},
}


def drain3_ready() -> bool:
    try:
        import drain3  # noqa: F401
    except ImportError:
        return False
    return True


def _rate(mb: float, runs: list[Run], cpu: bool = False) -> float:
    return median([mb / (r.cpu_s if cpu else r.wall_s) for r in runs])


def measure(name: str, size_mb: int, rounds: int, patterns: Path, reference: bool = True,
            drain: bool = True) -> list[Row]:
    folder = workdir()
    log = folder / f"{name}.log"
    size = BUILDERS[name](log, size_mb * 1_000_000)
    mb = size / 1e6
    c_locale = child_env(LC_ALL="C")
    counts = run(grep_cmd(patterns, log), env=c_locale).stdout.strip()  # also warms the page cache
    run(doctor("--help"))  # byte code compiled once, before any timed run
    modes = [m for m in MODES if reference or m != "per-line"]
    runs: dict[str, list[Run]] = {m: [] for m in (*modes, "grep", "drain3")}
    # one hash seed for every analyze run: on the mixed log (a hundred sessions of every engine) which of two
    # equally ranked findings the report shows follows Python's string hashing, on either path
    for _ in range(rounds):
        reports = {}
        for mode in modes:
            r = run(doctor("analyze", str(log), "--format", "json"), env=child_env(**MODES[mode]), ok=(0, 1),
                    timeout_s=3600, tree=True)
            reports[mode] = json.loads(r.stdout)
            runs[mode].append(r)
        if any(report != reports["workers"] for report in reports.values()):
            raise SystemExit(f"{name}: the reports of {', '.join(modes)} differ")
        runs["grep"].append(run(grep_cmd(patterns, log), env=c_locale))
        if drain:
            runs["drain3"].append(run([PYTHON, "-m", "bench.drain3_run", str(log)], timeout_s=7200))
    log.unlink()
    workers, serial, grep, peer = runs["workers"], runs["serial"], runs["grep"], runs["drain3"]
    ratios = [g.wall_s / d.wall_s for d, g in zip(workers, grep, strict=True)]
    ratio = median(ratios)
    details: dict[str, Any] = {
        "size_bytes": size, "rounds": rounds, "candidate_lines_grep": int(counts or 0),
        "load_1m": round(os.getloadavg()[0], 2), "same_report": modes,
        **{f"{m}_{what}": [round(getattr(r, attr), 3) for r in runs[m]] for m in runs if runs[m]
           for what, attr in (("wall_s", "wall_s"), ("cpu_s", "cpu_s"))},
        **{f"{m}_mb_s_wall": round(_rate(mb, runs[m]), 1) for m in runs if runs[m]},
        **{f"{m}_mb_s_cpu": round(_rate(mb, runs[m], cpu=True), 1) for m in runs if runs[m]},
        "ratio_wall_per_round": [round(x, 4) for x in ratios],
        "ratio_cpu": round(median([g.cpu_s / d.cpu_s for d, g in zip(workers, grep, strict=True)]), 4),
        "serial_ratio_wall": round(median([g.wall_s / d.wall_s for d, g in zip(serial, grep, strict=True)]), 4),
        "peak_rss_process_bytes": max(r.peak_rss for m in modes for r in runs[m]),
        "peak_rss_summed_bytes": max(r.tree_rss for r in workers),
        "peak_pss_summed_bytes": max(r.tree_pss for r in workers),
    }
    title = f"{TITLES[name]}, {mb:.0f} MB"
    rss, summed = details["peak_rss_process_bytes"], details["peak_rss_summed_bytes"]
    watch = _rate(mb, serial, cpu=True)
    server = name in SERVER_LOGS
    rows = [
        Row(f"analyze throughput, {title}", "grep -E -c, same signatures, same file (LC_ALL=C)",
            f">= {TARGET_RATIO}x grep MB/s (wall)" if server else "-", f"{_rate(mb, workers):.1f} MB/s",
            f"{_rate(mb, grep):.1f} MB/s", f"{ratio:.3f}x", ratio >= TARGET_RATIO if server else None,
            f"median of {rounds} alternating rounds; per-round ratio {spread(ratios)}; serial "
            f"{_rate(mb, serial):.1f} MB/s ({details['serial_ratio_wall']}x); by CPU time {details['ratio_cpu']}x "
            f"({_rate(mb, workers, cpu=True):.1f} MB/s of CPU with workers, {watch:.1f} serial)", details),
        Row(f"analyze peak memory, {title}", "-", "<= 100 MB", f"{rss / 2**20:.1f} MB", "-",
            f"{rss / 2**20:.1f} MB a process, {summed / 2**20:.1f} MB summed",
            rss <= TARGET_RSS and summed <= TARGET_RSS,
            f"largest process of all the runs; summed over the process and its workers (sampled; PSS "
            f"{details['peak_pss_summed_bytes'] / 2**20:.1f} MB)"),
        Row(f"watch --log capacity, {title}", "a log growing at 50 MB/s", f">= {WATCH_RATE:.0f} MB/s",
            f"{watch:.1f} MB/s", f"{WATCH_RATE:.0f} MB/s", f"{watch / WATCH_RATE:.2f}x", watch >= WATCH_RATE,
            "watch --log feeds the same analyzer: its serial rate per CPU second, with a core to itself"),
    ]
    if peer:
        vs = median([p.wall_s / d.wall_s for d, p in zip(workers, peer, strict=True)])
        details.update({"drain3_ratio_wall": round(vs, 4),
                        "drain3_ratio_cpu": round(median([p.cpu_s / d.cpu_s for d, p in zip(workers, peer,
                                                                                          strict=True)]), 4),
                        "drain3_templates": peer[-1].stdout.decode().strip()})
        rows.append(Row(f"analyze vs Drain3, {title}", "Drain3 0.9.11 over the same file (bench/drain3_run.py)",
                        ">= 1.0x Drain3's MB/s (wall)" if name == "mixed" else "-", f"{_rate(mb, workers):.1f} MB/s",
                        f"{_rate(mb, peer):.1f} MB/s", f"{vs:.2f}x", vs >= 1.0 if name == "mixed" else None,
                        f"by CPU time {details['drain3_ratio_cpu']}x; Drain3: {details['drain3_templates']}"))
    return rows


def table(rows: list[Row]) -> str:
    """Issue 38's table: one line per log."""
    out = ["| log | analyze, workers (wall) | serial (wall) | CPU s workers / serial | grep | ratio to grep (wall) "
           "| Drain3 | vs Drain3 | peak RSS a process / summed | same report |", "|" + "---|" * 10]
    for row in rows:
        if not row.measure.startswith("analyze throughput, ") or not row.details:
            continue
        d = row.details
        title = row.measure.removeprefix("analyze throughput, ")
        peer = next((r for r in rows if r.measure == f"analyze vs Drain3, {title}"), None)
        out.append(f"| {title} | {d['workers_mb_s_wall']} MB/s | {d['serial_mb_s_wall']} MB/s | "
                   f"{median(d['workers_cpu_s'])} / {median(d['serial_cpu_s'])} | {d['grep_mb_s_wall']} MB/s | "
                   f"{row.result} | {d.get('drain3_mb_s_wall', '-')} MB/s | {peer.result if peer else '-'} | "
                   f"{int(d['peak_rss_process_bytes']) / 2**20:.0f} / {int(d['peak_rss_summed_bytes']) / 2**20:.0f} MB"
                   f" | {', '.join(d['same_report'])} |")
    return "\n".join(out)


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
    ap.add_argument("--no-drain3", action="store_true", help="leave out Drain3")
    ap.add_argument("--table", action="store_true", help="print issue 38's table (Markdown) at the end")
    args = ap.parse_args()
    drain = not args.no_drain3
    if drain and not drain3_ready():
        raise SystemExit("Drain3 is not installed: pip install -r bench/requirements.txt (or --no-drain3)")
    rows = each_log(args.logs, lambda name, patterns: measure(name, args.size_mb, args.rounds, patterns,
                                                              reference=not args.no_reference, drain=drain))
    for row in rows:
        print(f"{row.measure}: {row.doctor} vs {row.ref} -> {row.result} (target {row.target}); {row.note}")
    if args.table:
        print(table(rows))
    write_rows(rows, f"analyze_real_{args.size_mb}mb.json")
    return 0


def write_rows(rows: list[Row], name: str) -> None:
    """The rows as bench/results/NAME (JSON)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text(json.dumps([r.to_json() for r in rows], indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
