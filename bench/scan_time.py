"""Wall time of `llm-doctor scan` on this machine with the default model: with and without the
short real trace (and with --bench), each run in a fresh process as a user would run it.

Prints a table and writes it to bench/results/scan_time.md. The GGUF cache is warm after the first
(warm-up) run, as for any second scan of a model; bench/startup.py reports the cold first scan.

Run:  python bench/scan_time.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "scan_time.md"
VARIANTS = (("scan --no-trace", ["--no-trace"]), ("scan (with the trace)", []), ("scan --bench", ["--bench"]))


def one_run(args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the scan and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    from bench.common import child_env  # byte-code cached, as an installed package runs

    proc = subprocess.run([sys.executable, "-m", "doctor", "scan", "--format", "json", *args], cwd=ROOT,
                          capture_output=True, timeout=600, check=False, env=child_env())
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"scan {' '.join(args)} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    one_run(["--no-trace"])  # warm the page cache and Python's bytecode cache once
    rows = []
    load_before = os.getloadavg()[0]
    for label, extra in VARIANTS:
        runs = [one_run(extra) for _ in range(args.runs)]
        walls = [w for w, _ in runs]
        rows.append((label, statistics.median(walls), min(walls), max(walls), statistics.median(c for _, c in runs)))
    cpu = platform.processor() or platform.machine()
    lines = [f"scan wall time, default model (SmolLM2-135M), {os.cpu_count()} CPUs ({cpu}), {args.runs} runs each;"
             f" 1-minute load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after", "",
             "| command | median wall s | min s | max s | median CPU s (all processes) |", "|---|---|---|---|---|"]
    lines += [f"| {label} | {med:.2f} | {lo:.2f} | {hi:.2f} | {cpu_s:.2f} |" for label, med, lo, hi, cpu_s in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
