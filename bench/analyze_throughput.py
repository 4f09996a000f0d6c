"""Analyze throughput and memory on a large generated log, side by side with grep.

Generates a log of real engine lines (bench/gen_log.py), then alternates, several times:
  - `llm-doctor analyze FILE --format json` as a separate process (wall time, peak RSS), and
  - `grep -E -c` with the same trigger signatures on the same file (the reference),
and reports medians: MB/s of each, the ratio, and llm-doctor's peak RSS.

    python bench/analyze_throughput.py [--size-mb 1000] [--repeat 3] [--keep]
Results are written to bench/results/analyze_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gen_log import generate  # noqa: E402


def ere(fragment: str) -> str:
    """Our RE2 trigger fragments in POSIX ERE for grep: non-capturing groups become plain groups."""
    return re.sub(r"\(\?:", "(", fragment).replace(r"\d", "[0-9]").replace(r"\w", "[A-Za-z0-9_]")


def trigger_file(tmp: Path) -> Path:
    from doctor.logs.registry import parser_classes

    fragments: list[str] = []
    for cls in parser_classes():
        fragments += [ere(f) for f in cls.triggers if ere(f) not in fragments]
    path = tmp / "triggers.ere"
    path.write_text("\n".join(fragments) + "\n")
    return path


def run_doctor(log: Path) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%M", sys.executable, "-m", "doctor", "analyze", str(log), "--format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"llm-doctor failed: {proc.stderr.decode()[-500:]}")
    rss_kb = int(proc.stderr.decode().strip().splitlines()[-1])
    json.loads(proc.stdout)  # the output must be one valid document
    return wall, rss_kb * 1024


def run_grep(log: Path, patterns: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(["grep", "-E", "-c", "-f", str(patterns), str(log)], capture_output=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0 or not proc.stdout.strip().isdigit():
        raise SystemExit(f"grep failed ({proc.returncode}): {proc.stderr.decode()[-300:]}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the generated log")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="llm-doctor-bench-"))
    log = tmp / "big.log"
    size = generate(log, args.size_mb)
    patterns = trigger_file(tmp)
    doctor_s, grep_s, rss = [], [], []
    for _ in range(args.repeat):
        w, r = run_doctor(log)
        doctor_s.append(w)
        rss.append(r)
        grep_s.append(run_grep(log, patterns))
    d, g = statistics.median(doctor_s), statistics.median(grep_s)
    result = {
        "size_bytes": size, "repeat": args.repeat,
        "doctor_s": doctor_s, "grep_s": grep_s,
        "doctor_mb_s": round(size / 1e6 / d, 1), "grep_mb_s": round(size / 1e6 / g, 1),
        "ratio": round(g / d, 3), "peak_rss_mb": round(max(rss) / 2**20, 1),
        "python": sys.version.split()[0], "cpus": os.cpu_count(),
    }
    out = ROOT / "bench" / "results" / "analyze_throughput.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"analyze {result['doctor_mb_s']} MB/s vs grep -E {result['grep_mb_s']} MB/s "
          f"(ratio {result['ratio']}x), peak RSS {result['peak_rss_mb']} MB on {size / 1e6:.0f} MB")
    if not args.keep:
        log.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
