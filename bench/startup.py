"""Start-up: `llm-doctor --help`, `llm-doctor scan --no-trace --format json` and the estimate path
`scan --no-trace --only gguf,memory`, each a whole process, next to `python -c pass` measured in the
same alternation.

`scan --no-trace` on the default model (SmolLM2-135M) reads the GGUF with our bounded header walk,
which steps over the 49k-token vocabulary without materialising it; what it found is also kept in
the user's cache folder (doctor/sources/probes/gguf_model.py). The first scan of a model is measured with the cache
off (LLM_DOCTOR_NO_CACHE=1: the walk alone meets the target), with its peak resident memory; the
alternation runs with a warm cache, as a second scan does.

The estimate path is timed beside llama.cpp's own pre-load projection of the same plan
(`llama-fit-params --fit-print on -c 4096`, f16 KV, no flash attention: what the scan plans for the
default model), in the same alternation, where scripts/build_llama_server.sh has built it.

    python bench/startup.py [--rounds 7] [--cold 3]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    PYTHON,
    RESULTS,
    Row,
    alternate,
    child_env,
    doctor,
    fit_params_binary,
    fit_params_cmd,
    median,
    run,
    spread,
    workdir,
)

TARGET_HELP_S = 0.3
TARGET_SCAN_S = 1.5
TARGET_SCAN_RSS = 100 * 10**6
TARGET_ESTIMATE_S = 0.15
ESTIMATE_MISSED = ("what is left is start-up every scan pays: the interpreter, the core modules (dataclasses are "
                   "built at import), psutil for the memory probe, the rule base read from its JSON cache and "
                   "validated; the machine was loaded when it was measured (see the 1-minute load in bench.md).")


def measure(rounds: int = 7, cold: int = 3) -> list[Row]:
    warm_cache = child_env(XDG_CACHE_HOME=str(workdir() / "cache-warm"))
    scan = doctor("scan", "--no-trace", "--format", "json")
    estimate = doctor("scan", "--no-trace", "--only", "gguf,memory", "--format", "json")
    cpu: list = []  # the estimate path's runs, for their CPU time (steadier than wall on a shared machine)
    jobs = {
        "python": lambda: run([PYTHON, "-c", "pass"]).wall_s,
        "help": lambda: run(doctor("--help")).wall_s,
        "scan": lambda: run(scan, env=warm_cache, ok=(0, 1)).wall_s,
        "estimate": lambda: cpu.append(run(estimate, env=warm_cache, ok=(0, 1))) or cpu[-1].wall_s,
    }
    binary = fit_params_binary()
    if binary is not None:  # llama.cpp's own projection of the same plan
        from bench.fit_vs_llamacpp import model_path

        projection = fit_params_cmd(binary, model_path(), 4096)
        jobs["llamacpp"] = lambda: run(projection).wall_s
    times = alternate(jobs, rounds)
    cpu_e = median([r.cpu_s for r in cpu])
    no_cache = child_env(LLM_DOCTOR_NO_CACHE="1")
    cold_runs = [run(scan, env=no_cache, ok=(0, 1)) for _ in range(cold)]
    cold_s = [r.wall_s for r in cold_runs]
    p, h, s, e = (median(times[k]) for k in ("python", "help", "scan", "estimate"))
    lc = median(times["llamacpp"]) if "llamacpp" in times else None
    c = median(cold_s) if cold_s else None
    rss = max(r.peak_rss for r in cold_runs) if cold_runs else None
    details = {k: [round(x, 4) for x in v] for k, v in times.items()} | {"scan_cold_s": [round(x, 3) for x in cold_s]}
    rows = [
        Row("llm-doctor --help start-up", "python -c pass (same rounds)", f"<= {TARGET_HELP_S} s",
            f"{h:.3f} s", f"{p:.3f} s", f"{h:.3f} s (+{h - p:.3f})", h <= TARGET_HELP_S,
            f"median of {rounds}; range {spread(times['help'])} s", details),
        Row("scan --no-trace --format json (GGUF cache warm)", "python -c pass (same rounds)",
            f"<= {TARGET_SCAN_S} s", f"{s:.3f} s", f"{p:.3f} s", f"{s:.3f} s", s <= TARGET_SCAN_S,
            f"median of {rounds}; range {spread(times['scan'])} s"),
        Row("scan --no-trace --only gguf,memory (the estimate path, warm)",
            "llama.cpp's projection, llama-fit-params --fit-print on (same rounds)" if lc is not None
            else "python -c pass (same rounds; llama-fit-params not built)",
            f"<= {TARGET_ESTIMATE_S} s", f"{e:.3f} s", f"{lc:.3f} s" if lc is not None else f"{p:.3f} s",
            f"{e:.3f} s" + (f" ({e / lc:.2f}x llama.cpp's)" if lc else ""), e <= TARGET_ESTIMATE_S,
            f"median of {rounds}; range {spread(times['estimate'])} s; CPU {cpu_e:.3f} s; python -c pass {p:.3f} s"
            + (f"; llama-fit-params range {spread(times['llamacpp'])} s" if lc is not None else ""),
            missed=ESTIMATE_MISSED),
    ]
    if c is not None and rss is not None:
        rows.append(Row("first scan: LLM_DOCTOR_NO_CACHE=1 scan --no-trace", "-",
                        f"<= {TARGET_SCAN_S} s, peak RSS <= 100 MB", f"{c:.3f} s, {rss / 1e6:.0f} MB", "-",
                        f"{c:.3f} s, {rss / 1e6:.0f} MB", c <= TARGET_SCAN_S and rss <= TARGET_SCAN_RSS,
                        f"median of {cold}, GGUF cache off; range {spread(cold_s)} s; CPU "
                        f"{median([r.cpu_s for r in cold_runs]):.3f} s"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--cold", type=int, default=3)
    args = ap.parse_args()
    rows = measure(args.rounds, args.cold)
    for row in rows:
        print(f"{row.measure}: {row.doctor} (python -c pass {row.ref}; target {row.target})")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "startup.json").write_text(json.dumps([r.to_json() for r in rows], indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
