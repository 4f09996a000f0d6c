"""`python -m bench` (or `bench/run`): every performance claim of llm-doctor, each next to its
reference measured in the same run, as one table.

  measure                              reference                                 target
  analyze throughput (1 GB log)        grep -E -c, same signatures, same file    >= 0.3x grep MB/s
  analyze peak memory                  -                                         <= 100 MB
  analyze latency (200-line paste)     python -c pass                            <= 0.3 s, whole process
  --help / scan --no-trace start-up    python -c pass                            <= 0.3 s / <= 1.5 s
  estimate path (--only gguf,memory)   llama-fit-params --fit-print (if built)   <= 0.15 s
  first scan, GGUF cache off           -                                         <= 1.5 s, <= 100 MB
  watch tracing overhead               bare llama-cpp-python, same settings      >= 0.98x decode tokens/s
  trace fidelity                       llama.cpp perf counters, same run         within 5%
  KV / weights / compute estimates     llama.cpp buffer lines, same run          exact / 2% / 10%
  fit: KV, compute, RAM verdicts       real loads; llama.cpp projection beside   exact / 2% / all equal

One script per measure (bench/analyze_throughput.py, analyze_latency.py, startup.py,
watch_overhead.py with trace_fidelity.py, estimate_vs_llamacpp.py, fit_vs_llamacpp.py); each also
runs alone. Timed
commands run as whole processes the way a user runs them, alternating with their reference, and
the medians are compared. The table is printed and written to bench/results/bench.json and
bench.md, and docs/performance.md's text to bench/results/README-performance.md.

    python -m bench [--quick] [--only NAME,...] [--size-mb N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import RESULTS, Row, machine, markdown_table, text_table  # noqa: E402

MEASURES = ("startup", "latency", "estimates", "fit", "watch", "throughput")


def _say(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


def run_measures(names: list[str], quick: bool, size_mb: int | None, rounds: int | None) -> tuple[list[Row], dict]:
    rows: list[Row] = []
    took: dict[str, float] = {}
    for name in names:
        start = time.perf_counter()
        _say(f"{name} ...")
        if name == "startup":
            from bench.startup import measure as startup

            rows += startup(rounds=3 if quick else 7, cold=1 if quick else 3)
        elif name == "latency":
            from bench.analyze_latency import measure as latency

            rows += latency(rounds=5 if quick else 15)
        elif name == "estimates":
            from bench.estimate_vs_llamacpp import RESULTS as TABLE
            from bench.estimate_vs_llamacpp import measure as estimates

            summary, table = estimates(live=True)
            TABLE.write_text(table, encoding="utf-8")
            rows += summary
        elif name == "fit":
            from bench.fit_vs_llamacpp import RESULTS as FIT_DIR
            from bench.fit_vs_llamacpp import measure as fit

            summary, table, data = fit()
            (FIT_DIR / "fit_vs_llamacpp.md").write_text(table, encoding="utf-8")
            (FIT_DIR / "fit_vs_llamacpp.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
            rows += summary
        elif name == "watch":
            from bench.trace_fidelity import fidelity_rows
            from bench.watch_overhead import measure as overhead

            got, runs = overhead(tokens=128 if quick else 256, rounds=2 if quick else 6)
            rows += got + fidelity_rows(runs)
        elif name == "throughput":
            from bench.analyze_throughput import measure as throughput

            rows += throughput(size_mb=size_mb or (100 if quick else 1000), rounds=rounds or (2 if quick else 3))
        took[name] = round(time.perf_counter() - start, 1)
        _say(f"{name} done in {took[name]:.0f} s")
    return rows, took


def performance_section(rows: list[Row], command: str, when: str, info: dict) -> str:
    missed = [r for r in rows if r.met is False]
    lines = [
        "## Performance",
        "",
        f"Measured with `{command}` on {when} ({info.get('cpus')} CPUs, {info.get('cpu') or 'unknown CPU'}, "
        f"Python {info.get('python')}). Every figure is taken next to its reference in the same run "
        "(alternating runs, medians); the harness and the method are in bench/.",
        "",
        markdown_table(rows),
        "",
    ]
    noisy = [r for r in rows if r.met is not None and r.note and ("throughput" in r.measure or "overhead" in r.measure)]
    if noisy:
        lines += ["On a shared 2-vCPU machine these two move from run to run:", ""]
        lines += [f"- {r.measure}: {r.note}." for r in noisy]
        lines.append("")
    if missed:
        lines.append("Not met:")
        lines.append("")
        lines += [f"- {r.measure} ({r.result}, target {r.target}): {r.missed or r.note}" for r in missed]
    else:
        lines.append("Every target is met.")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer rounds (a check, not a result)")
    ap.add_argument("--only", default="", help=f"comma-separated measures: {', '.join(MEASURES)}")
    ap.add_argument("--size-mb", type=int, default=None, help="size of the generated log (default 1000)")
    ap.add_argument("--rounds", type=int, default=None, help="throughput rounds (default 3)")
    args = ap.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(MEASURES)
    unknown = [n for n in names if n not in MEASURES]
    if unknown:
        ap.error(f"unknown measure {unknown[0]!r} (choose from {', '.join(MEASURES)})")
    started = time.perf_counter()
    when = time.strftime("%Y-%m-%d %H:%M")
    info = machine()
    rows, took = run_measures(names, args.quick, args.size_mb, args.rounds)
    total = time.perf_counter() - started
    info["load_1m_after"] = machine()["load_1m"]
    command = "bench/run" + ("".join(f" {a}" for a in sys.argv[1:]))
    print(text_table(rows))
    print(f"\n{sum(r.met is True for r in rows)} of {sum(r.met is not None for r in rows)} targets met; "
          f"{total:.0f} s in all ({', '.join(f'{k} {v:.0f} s' for k, v in took.items())})")
    RESULTS.mkdir(parents=True, exist_ok=True)
    doc = {"when": when, "command": command, "quick": args.quick, "machine": info, "seconds": round(total, 1),
           "seconds_per_measure": took, "rows": [r.to_json() for r in rows]}
    # a full run is the result of record (bench.json, bench.md, the README section); a partial or
    # quick run is kept beside it, named after what it measured
    full = not args.quick and set(names) == set(MEASURES) and args.size_mb is None and args.rounds is None
    suffix = "" if full else "-" + "-".join(names) + ("-quick" if args.quick else "")
    (RESULTS / f"bench{suffix}.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    md = [f"# llm-doctor benchmarks ({when})", "", f"Command: `{command}`; {total:.0f} s in all.",
          f"Machine: {info.get('cpus')} CPUs ({info.get('cpu') or 'unknown'}), Python {info.get('python')}, "
          f"1-minute load {info.get('load_1m')} before and {info.get('load_1m_after')} after.", "",
          markdown_table(rows), "", "Notes per row:", ""]
    md += [f"- **{r.measure}**: {r.note}" + (f" Not met: {r.missed}" if r.met is False and r.missed else "")
           for r in rows if r.note or r.missed]
    (RESULTS / f"bench{suffix}.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    if full:
        (RESULTS / "README-performance.md").write_text(performance_section(rows, command, when, info),
                                                       encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
