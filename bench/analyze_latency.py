"""Analyze latency on a typical pasted log: 200 lines of a real llama-cpp-python run, the whole
`llm-doctor analyze FILE --format json` process from start to exit, next to `python -c pass` (the
interpreter's own start, the floor any Python tool pays) measured in the same alternation.

The log is the recorded run that hit its context limit (fixtures/logs/llama-cpp-python/
generation-cut-at-context.log) without its per-tensor debug lines, which nobody pastes: its last
200 lines (model metadata, context and buffer sizes, system info, timings, the output).

    python bench/analyze_latency.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import PYTHON, RESULTS, Row, alternate, doctor, median, run, spread, workdir  # noqa: E402

SOURCE = ROOT / "fixtures" / "logs" / "llama-cpp-python" / "generation-cut-at-context.log"
FLOOD = ("create_tensor:", "llama_graph_n_input_tensors:")
LINES = 200
TARGET_S = 0.3


def pasted_log() -> Path:
    lines = [ln for ln in SOURCE.read_text(encoding="utf-8").splitlines() if not ln.startswith(FLOOD)]
    path = workdir() / "pasted-200.log"
    path.write_text("\n".join(lines[-LINES:]) + "\n", encoding="utf-8")
    return path


def measure(rounds: int = 15) -> list[Row]:
    log = pasted_log()
    times = alternate({
        "python": lambda: run([PYTHON, "-c", "pass"]).wall_s,
        "analyze": lambda: run(doctor("analyze", str(log), "--format", "json"), ok=(0, 1)).wall_s,
    }, rounds)
    d, p = median(times["analyze"]), median(times["python"])
    return [Row(f"analyze latency, pasted log ({LINES} lines), whole process", "python -c pass (same rounds)",
                f"<= {TARGET_S} s wall", f"{d:.3f} s", f"{p:.3f} s", f"{d:.3f} s", d <= TARGET_S,
                f"median of {rounds}; range {spread(times['analyze'])} s",
                {"analyze_s": [round(x, 4) for x in times["analyze"]],
                 "python_s": [round(x, 4) for x in times["python"]]})]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    rows = measure(ap.parse_args().rounds)
    for row in rows:
        print(f"{row.measure}: {row.doctor} (python -c pass {row.ref}; target {row.target})")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "analyze_latency.json").write_text(json.dumps([r.to_json() for r in rows], indent=1) + "\n",
                                                  encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
