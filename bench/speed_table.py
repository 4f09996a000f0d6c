"""The speed verdict against llama-bench, side by side in one run (issues 26 and 36).

For each real-shape model (bench/speed_models.py: Llama-3.2-1B in Q4_0, Q4_1, Q4_K_M, Q6_K, Q8_0, F16,
Granite-3.0-1B-A400M MoE in Q4_K_M, and the default SmolLM2-135M with its real weights), at 1 and 2
threads, at depth 0 and 2048:

- measured: the embedded engine (llama-cpp-python's low-level binding, in the kernel probe's child,
  doctor/sources/live/embedded/kernel_child.py): a prompt of P tokens at the depth, N decode steps
  from the depth (as llama-bench's tg runs), median of the repeats;
- reference: llama-bench built from the same vendored llama.cpp source (scripts/build_llama_bench.sh),
  `-p P -n N -d 0,2048 -t 1,2 -fa off`, `--repack 0` where repacking crashes (AMX), on the same file;
- the doctor's verdict: the ceiling (a bound) and the expected speed from what a scan would have -
  the GGUF probe, the read bandwidth (doctor/sources/probes/ceilings.py) and the kernel probe
  (doctor/sources/live/embedded/kernels.py, measured in this run into a private cache), the threads,
  the depth and the share of the cores the engine had (/proc/stat around each run).

Goals (issue 36): the expected speed within ±20% of llama-bench's, and no measured speed (the
engine's or llama-bench's) above its ceiling by more than 5%, both phases.

Run:  python -m bench.speed_table [--models a,b] [--threads 1,2] [--depth 2048 (and 0)] [--keep DIR] [--note TEXT]
      python -m bench.speed_table --rejudge bench/results/speed_table_<kind>.json --keep DIR
Writes bench/results/speed_table_<kind>.md and .json (<kind>: this CPU's, e.g. xeon-amx), and
bench/results/speed_table.md, the table of every recorded kind.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import repack_crashes_here  # noqa: E402
from bench.speed_models import MODELS, SMOLLM2, mix  # noqa: E402
from bench.speed_report import write, write_index  # noqa: E402

RESULTS = ROOT / "bench" / "results"
PROMPT, STEPS, REPS = 128, 32, 2  # llama-bench's -p, -n, -r (options --prompt, --steps, --reps)
BENCH_BUILD = ROOT / "scripts" / "build_llama_bench.sh"


def cpu_kind() -> tuple[str, str]:
    """(a short kind for file names, the CPU's model name)."""
    text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    name = next((ln.partition(":")[2].strip() for ln in text.splitlines() if ln.startswith("model name")), "cpu")
    if "amx_tile" in text:
        return "xeon-amx", name
    if "AMD" in name:
        return "amd-epyc" if "EPYC" in name else "amd", name
    return "cpu", name


def model_file(name: str, folder: Path) -> Path:
    shape, kind = MODELS[name]
    if shape is None:  # a private copy: tests elsewhere may rewrite the installed file while it is mapped
        from doctor.sources.models.default import default_model_path

        path = folder / f"{SMOLLM2}.gguf"
        if not path.exists():
            shutil.copyfile(default_model_path(), path)
        return path
    from doctor.sources.live.embedded import kernel_gguf as kg

    path = folder / f"{name}.gguf"
    if not path.exists():
        t0 = time.perf_counter()
        kg.write(shape, kg.tensors(shape, mix(kind, shape)), path.with_suffix(".tmp"), kind)
        path.with_suffix(".tmp").rename(path)
        print(f"built {path.name} ({path.stat().st_size / 2**30:.2f} GiB, {time.perf_counter() - t0:.0f} s)",
              file=sys.stderr)
    return path


# -- the two sides ----------------------------------------------------------------------------------

def ours(path: Path, threads: list[int], depth: int, extra: bool) -> dict[str, Any]:
    """The embedded engine: {(phase, threads): (tok/s, share of its threads' time)} at depth 0 and `depth`."""
    from doctor.sources.live.embedded.kernels import run_child
    from doctor.sources.probes.cpustat import CpuWindow

    spec = {"extra_bufts": extra, "flash_attn": False, "type_k": "f16", "type_v": "f16", "jobs": [{
        "id": "bench", "path": str(path), "batch": PROMPT, "steps": STEPS, "depth": depth, "reps": REPS,
        "prefill_threads": threads, "decode_threads": threads, "decode_after_prompt": False}]}
    window = CpuWindow().start()
    lines, error = run_child(spec, timeout_s=3600)
    busy = window.stop()
    result = next((ln for ln in lines if ln.get("id") == "bench" and "error" not in ln), None)
    if result is None:
        raise RuntimeError(f"{path.name}: the engine run failed: {error or lines}")
    out: dict[str, Any] = {"other_busy": busy.other_busy if busy else None}
    for label, at in (("", 0), ("_deep", depth)):
        for t in threads:
            pre = result[f"prefill{label}"][str(t)]
            dec = result[f"decode{label}"][str(t)]
            out[f"prefill/{t}/{at}"] = (PROMPT / statistics.median(w for w, _ in pre), _share(pre))
            out[f"decode/{t}/{at}"] = (len(dec) / sum(w for w, _ in dec), _share(dec))
    return out


def _share(runs: list[list[float]]) -> float:
    """The share of its threads' time the engine had over the runs (each run's share by its wall time)."""
    wall = sum(w for w, _ in runs)
    return sum(w * s for w, s in runs) / wall if wall > 0 else 1.0


def llama_bench(binary: str, path: Path, threads: list[int], depth: int, repack: bool) -> dict[str, Any]:
    """llama-bench's median t/s per (phase, threads, depth)."""
    cmd = [binary, "-m", str(path), "-p", str(PROMPT), "-n", str(STEPS), "-d", f"0,{depth}",
           "-t", ",".join(map(str, threads)), "-r", str(REPS), "-fa", "off", "-o", "json"]
    if not repack:
        cmd += ["--repack", "0"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=7200, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"llama-bench exited {proc.returncode}: {' '.join(proc.stderr.split()[-40:])}")
    out: dict[str, Any] = {}
    for row in json.loads(proc.stdout):
        phase = "prefill" if row["n_prompt"] > 0 else "decode"
        samples = row.get("samples_ts") or [row["avg_ts"]]
        out[f"{phase}/{row['n_threads']}/{row['n_depth']}"] = statistics.median(samples)
    return out


# -- the doctor's side ------------------------------------------------------------------------------

def scan_facts(path: Path, kernel_cache: str, extra: bool, usable: int) -> Any:
    """What a scan has before its verdict: the GGUF probe, the read bandwidth (at every count), the kernel
    probe for this model's types (measured into `kernel_cache` once per type in this run)."""
    from doctor.core.facts import Facts, Source
    from doctor.sources.live.embedded.kernels import kernel_facts, request_from
    from doctor.sources.probes.base import ProbeContext, run_probe
    from doctor.sources.probes.gguf_model import PROBE as GGUF

    facts = Facts()
    facts.merge(run_probe(GGUF, ProbeContext(model_path=str(path))))
    src = Source("config", "bench")
    view = Facts()
    view.merge(facts)
    for name, value in (("config.n_threads", 1), ("config.n_threads_batch", 1), ("config.use_extra_bufts", extra),
                        ("config.n_gpu_layers", 0), ("host.gpu.count", 0), ("config.flash_attn", "disabled")):
        view.set(name, value, src)
    request = request_from(view, usable)
    if request is not None:
        facts.merge(kernel_facts(request, Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace"),
                                 folder=kernel_cache, progress=lambda text: print(text, file=sys.stderr),
                                 timeout_s=1800, target_s=None))
    return facts


def verdict(base: Any, bandwidth: dict[str, float], phase: str, threads: int, depth: int, tok_s: float,
            share: float | None, other_busy: float | None, usable: int) -> dict[str, Any]:
    """The doctor's speed facts for one measured phase, from the facts a scan would have."""
    from doctor.core.facts import Facts, Source
    from doctor.derive import derive

    facts = Facts()
    facts.merge(base)
    src = Source("config", "bench")
    values: dict[str, Any] = {
        "config.n_threads": threads, "config.n_threads_batch": threads, "config.n_ctx": depth + PROMPT + STEPS + 16,
        "config.n_batch": 512, "config.n_ubatch": 512, "config.n_gpu_layers": 0, "host.gpu.count": 0,
        "host.cpu.usable_cores": float(usable), "host.cpu.logical_cores": usable, "run.depth_start": depth,
        "run.decode_tokens": STEPS, f"run.{phase}_tps": tok_s, "host.cpu.other_busy": other_busy,
        "host.ram.read_bw_gbs": bandwidth.get(str(min(threads, usable))),
        "host.ram.read_bw_all_gbs": bandwidth.get(str(usable)),
        "host.cpu.engine_cores": share * threads if share is not None else None}
    if phase == "prefill":
        values["run.prompt_tokens"] = PROMPT
    for name, value in values.items():
        if value is not None:
            facts.set(name, value, src)
    derive(facts)
    keys = ("ceiling_tok_s", "fraction", "bound", "expected_tok_s", "misfit_term", "threads_gain")
    return {k: facts.value(f"speed.{phase}.{k}") for k in keys}


def main() -> None:
    global PROMPT, STEPS, REPS  # the run's sizes, read by the measuring functions
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--depth", type=int, default=2048)
    parser.add_argument("--prompt", type=int, default=PROMPT)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--reps", type=int, default=REPS)
    parser.add_argument("--keep", help="folder to keep the GGUFs in (built once)")
    parser.add_argument("--llama-bench", help="the llama-bench binary (default: scripts/build_llama_bench.sh's)")
    parser.add_argument("--note", default="", help="a sentence on where and when the rows were measured")
    parser.add_argument("--rejudge", metavar="JSON", help="judge stored rows again (no engine run)")
    parser.add_argument("--out", help="where the rows go (a stem: .md and .json; default "
                        "bench/results/speed_table_<kind>)")
    args = parser.parse_args()
    kind, cpu = cpu_kind()
    PROMPT, STEPS, REPS = args.prompt, args.steps, args.reps
    if args.rejudge:
        from bench.speed_report import rejudge

        meta = json.loads(Path(args.rejudge).read_text(encoding="utf-8"))["meta"]
        PROMPT, STEPS, REPS = meta["prompt"], meta["steps"], meta["reps"]
        rejudge(Path(args.rejudge), Path(args.keep or "."), args.note, verdict, scan_facts)
        return
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="speed-table-"))
    folder.mkdir(parents=True, exist_ok=True)
    binary = args.llama_bench or subprocess.run(["bash", str(BENCH_BUILD)], capture_output=True, text=True,
                                                check=True, env=dict(os.environ, PYTHON=sys.executable)
                                                ).stdout.strip().splitlines()[-1]
    from doctor.sources.probes.ceilings import measure

    usable = len(os.sched_getaffinity(0))
    threads = [int(t) for t in args.threads.split(",")]
    extra = not repack_crashes_here()
    started = time.perf_counter()
    bw = measure(sorted({*threads, usable}))
    bandwidth = {k: float(v) for k, v in bw["bw"].items()}
    kernel_cache = tempfile.mkdtemp(prefix="speed-table-kernels-")
    rows: list[dict[str, Any]] = []
    for name in args.models.split(","):
        path = model_file(name, folder)
        t0 = time.perf_counter()
        base = scan_facts(path, kernel_cache, extra, usable)
        mine = ours(path, threads, args.depth, extra)
        ref = llama_bench(binary, path, threads, args.depth, extra)
        for t in threads:
            for depth in (0, args.depth):
                for phase in ("prefill", "decode"):
                    tok_s, share = mine[f"{phase}/{t}/{depth}"]
                    v = verdict(base, bandwidth, phase, t, depth, tok_s, share, mine["other_busy"], usable)
                    rows.append({"model": name, "type": MODELS[name][1], "threads": t, "depth": depth,
                                 "phase": phase, "measured": tok_s, "share": share, "other_busy": mine["other_busy"],
                                 "llama_bench": ref.get(f"{phase}/{t}/{depth}"), **v})
        print(f"{name}: {time.perf_counter() - t0:.0f} s, others {mine['other_busy']}", file=sys.stderr)
        if not args.keep and MODELS[name][0] is not None:
            path.unlink()
    shutil.rmtree(kernel_cache, ignore_errors=True)
    meta = {"cpu": cpu, "kind": kind, "cpus": os.cpu_count(), "repack": extra, "bandwidth": bandwidth,
            "bandwidth_other_busy": bw.get("other_busy"), "seconds": round(time.perf_counter() - started),
            "date": time.strftime("%Y-%m-%d %H:%M"), "prompt": PROMPT, "steps": STEPS, "reps": REPS,
            "note": args.note, "llama_bench": binary}
    write(rows, meta, Path(args.out) if args.out else RESULTS / f"speed_table_{kind}")
    write_index(RESULTS)


if __name__ == "__main__":
    main()
