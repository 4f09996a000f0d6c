"""The floor of analyze's design on real server lines (issue 28): the native passes it cannot leave out,
timed alone, side by side with grep over the same file.

`bench/analyze_real.py` times whole `analyze` processes. This bench times, in this process, only the one
native pass each log needs however fast the Python around it becomes:
  - queue (llama-server's request block repeated): the exact validation of the folded run, the anchored RE2
    match `(?:unit\\r?\\n)+` of the llama.cpp parser's hot-line spec (doctor/sources/engines/llamacpp/fold.py
    HOT, compiled as doctor/sources/logs/fold.py compiles it) from the first request line to the end: the
    pass that proves every line of the run is one of the folded shapes;
  - mixed (every real log repeated): the scanner's search for candidate lines, the RE2 trigger pattern of
    every parser and start line (doctor/sources/logs/analyze.py `_trigger_pattern`), one search per
    candidate from the line after the last, as LineScanner._scan makes it.
With `--hyperscan` (the `hyperscan` package installed), the queue's validation is also timed with Hyperscan,
the other multi-pattern library on PyPI, on the same spec two ways: the anchored run `\\A(?:unit\\r?\\n)+`, and
each line matched `^(?:line)\\r?$` in multi-line mode (reports counted by a C-level callback, no Python per
line), its bounded repeats made unbounded where it would not compile them fast.
Next to them: `bytes.count(b"\\n")` over the same bytes (what one pass of the plainest native loop costs
here) and `grep -E -c -f TRIGGERS FILE` (bench/analyze_throughput.py, C locale), best of `--rounds` each,
alternating. The ratio of a floor pass to grep bounds analyze's ratio from above: no Python work added to
that pass can make the whole faster than it.

    python bench/analyze_floor.py [--size-mb 100] [--rounds 3]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.analyze_real import BUILDERS, TARGET_RATIO, arguments, each_log, write_rows  # noqa: E402
from bench.analyze_throughput import grep_cmd  # noqa: E402
from bench.common import Row, child_env, run, workdir  # noqa: E402


def validation_pass(data: bytes) -> Callable[[], int]:
    """The folded run's exact validation over `data` from its first request line: the bytes it covers."""
    from doctor.sources.engines.llamacpp.fold import HOT
    from doctor.sources.logs.fold import _compile_run

    run_end = _compile_run(HOT.line)
    if run_end is None:
        raise SystemExit("RE2 is not installed: there is no folding to time")
    first = data.find(b"slot get_availabl")
    start = data.rfind(b"\n", 0, first) + 1

    def go() -> int:
        return run_end(data, start, len(data)) - start

    return go


def trigger_pass(data: bytes) -> Callable[[], int]:
    """The scanner's candidate search over `data`, one search per candidate line: the lines it finds."""
    from doctor.sources.logs.analyze import _trigger_pattern
    from doctor.sources.logs.matcher import span_finder
    from doctor.sources.logs.registry import parser_classes
    from doctor.sources.logs.sessions import start_lines

    find = span_finder(_trigger_pattern([cls() for cls in parser_classes()], start_lines()))

    def go() -> int:
        pos, found, end = 0, 0, len(data)
        while pos < end:
            span = find(data, pos, end)
            if span is None:
                break
            found += 1
            stop = data.find(b"\n", span[1])
            pos = end if stop < 0 else stop + 1
        return found

    return go


def hyperscan_passes(data: bytes) -> dict[str, Callable[[], int]]:
    """The same validation with Hyperscan (block mode): the anchored run, and line by line; each answers
    the last match end it reported (a C callable stores it: struct.pack_into, no Python call per match)."""
    import functools
    import re
    import struct

    import hyperscan  # not a dependency: only this bench's --hyperscan

    from doctor.sources.engines.llamacpp.fold import HOT

    first = data.find(b"slot get_availabl")
    start = data.rfind(b"\n", 0, first) + 1
    body = data[start:]
    loose = re.sub(r"\{1,(?:4|9|15|24)\}", "+", HOT.line).replace("{0,24}", "*")
    jobs: dict[str, Callable[[], int]] = {}
    for name, source, flags in (("hyperscan anchored run", f"\\A(?:(?:{HOT.line})\\r?\\n)+", 0),
                                ("hyperscan line by line", f"^(?:{loose})\\r?$", hyperscan.HS_FLAG_MULTILINE)):
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(expressions=[source.encode()], ids=[0], elements=1, flags=[flags])
        last = bytearray(33)
        record = functools.partial(struct.pack_into, "<QQQQ?", last, 0)

        def go(db: hyperscan.Database = db, last: bytearray = last, record: Callable[..., None] = record) -> int:
            db.scan(body, match_event_handler=record)
            return int(struct.unpack_from("<QQQQ?", last)[2])

        jobs[name] = go
    return jobs


PASSES = {"queue": ("exact validation of the folded run (RE2 anchored run match)", validation_pass),
          "mixed": ("candidate search (RE2 trigger pattern, one search per candidate)", trigger_pass)}


def best(job: Callable[[], object], rounds: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(rounds):
        start = time.process_time()
        out = job()
        times.append(time.process_time() - start)
    return min(times), out


def measure(name: str, size_mb: int, rounds: int, patterns: Path, hyperscan: bool = False) -> list[Row]:
    log = workdir() / f"{name}.log"
    size = BUILDERS[name](log, size_mb * 1_000_000)
    data = log.read_bytes()
    mb = size / 1e6
    title, make = PASSES[name]
    floor_job = make(data)
    floor_s, floor_out = best(floor_job, rounds)
    count_s, lines = best(lambda: data.count(b"\n"), rounds)
    grep_s = min(run(grep_cmd(patterns, log), env=child_env(LC_ALL="C")).cpu_s for _ in range(rounds))
    others = {}
    if hyperscan and name == "queue":
        for label, job in hyperscan_passes(data).items():
            cpu, out = best(job, rounds)
            others[label] = {"cpu_s": round(cpu, 4), "mb_s": round(mb / cpu, 1), "ratio": round(grep_s / cpu, 4),
                             "last_end": out}
    log.unlink()
    ratio = grep_s / floor_s
    details = {"mb": round(mb, 1), "floor_cpu_s": round(floor_s, 4), "floor_result": floor_out,
               "count_newlines_cpu_s": round(count_s, 4), "lines": lines, "grep_cpu_s": round(grep_s, 4),
               **others}
    return [Row(f"floor of analyze, {name} log, {mb:.0f} MB: {title}", "grep -E -c, same signatures, same file",
                f"analyze >= {TARGET_RATIO}x grep needs this pass >= {TARGET_RATIO}x", f"{mb / floor_s:.0f} MB/s",
                f"{mb / grep_s:.0f} MB/s", f"{ratio:.3f}x", None,
                f"best of {rounds}, CPU time in this process; bytes.count(b'\\n') over the same bytes: "
                f"{mb / count_s:.0f} MB/s", details)]


def main() -> int:
    ap = arguments(__doc__, "queue,mixed")
    ap.add_argument("--hyperscan", action="store_true", help="time the queue's validation with Hyperscan too")
    args = ap.parse_args()
    rows = each_log(args.logs, lambda name, patterns: measure(name, args.size_mb, args.rounds, patterns,
                                                              args.hyperscan))
    for row in rows:
        print(f"{row.measure}: {row.doctor} vs {row.ref} -> {row.result}; {row.note}")
        for label, got in row.details.items():
            if label.startswith("hyperscan"):
                print(f"  {label}: {got['mb_s']} MB/s -> {got['ratio']}x grep")
    write_rows(rows, f"analyze_floor_{args.size_mb}mb.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
