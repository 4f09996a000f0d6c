"""Trace fidelity: the prefill and decode times `watch` measures, next to llama.cpp's own perf
counters (`llama_perf_context`: t_p_eval_ms, t_eval_ms) read at the end of the same run.

The traced prefill is the runner's prefill phase; the traced decode is the sum of its per-token
step times. Both must be within 5% of llama.cpp's figures in every run. `bench/run` takes the runs
from the overhead measure (bench/watch_overhead.py) rather than making new ones; alone, this
script makes its own traced runs.

    python bench/trace_fidelity.py [--tokens 128] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import RESULTS, Row  # noqa: E402

TARGET = 0.05


def fidelity_rows(runs: list[dict[str, float]]) -> list[Row]:
    rows = []
    for phase in ("prefill", "decode"):
        pairs = [(r[f"traced_{phase}_ms"], r[f"engine_{phase}_ms"]) for r in runs
                 if r.get(f"traced_{phase}_ms") is not None and r.get(f"engine_{phase}_ms")]
        if not pairs:
            rows.append(Row(f"trace fidelity: {phase} ms", "llama.cpp perf counters, same run", "within 5%",
                            "-", "-", "no runs", False, "the traced runs reported no engine counters"))
            continue
        errors = [abs(t - e) / e for t, e in pairs]
        worst = max(errors)
        traced = statistics.median(t for t, _ in pairs)
        engine = statistics.median(e for _, e in pairs)
        rows.append(Row(f"trace fidelity: {phase} ms", "llama.cpp perf counters, same run", "within 5%",
                        f"{traced:.1f} ms", f"{engine:.1f} ms", f"worst {worst:.1%}", worst <= TARGET,
                        f"{len(pairs)} runs, median error {statistics.median(errors):.1%}",
                        {"traced_ms": [round(t, 3) for t, _ in pairs], "engine_ms": [round(e, 3) for _, e in pairs]}))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    from bench.watch_overhead import traced_run
    from doctor.sources.models.resolve import resolve_model

    model = str(resolve_model(None))
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            record = os.path.join(tmp, "run.jsonl")
            runs.append(traced_run(model, args.tokens, None, max(512, args.tokens + 64), record)[2])
    rows = fidelity_rows(runs)
    for row in rows:
        print(f"{row.measure}: traced {row.doctor} vs llama.cpp {row.ref} -> {row.result} ({row.note})")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "trace_fidelity.json").write_text(json.dumps([r.to_json() for r in rows], indent=1) + "\n",
                                                 encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
