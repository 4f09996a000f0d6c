"""This machine's CPU ceilings for the speed verdict, measured once and kept per machine.

Floor: sources (machine access). Strings: the Source texts below say how each figure was measured.

- Memory read bandwidth: a float32 sum over a 128 MiB buffer, best of three passes after a warm
  one; at the engine's thread count and at all usable cores. Through torch (`torch.sum` on torch's
  own intra-op threads, torch.set_num_threads) where torch is installed and its import is paid
  already or allowed (see below); else numpy's vectorised sum over equal chunks on a thread pool
  (numpy releases the GIL in the loop). A read kernel: a copy kernel moves 2N bytes and reports
  another figure (read kernels differ by up to 3x, so the kernel is named in the fact's source).
- Matrix-multiply throughput: float32 GEMM 768 x 768 through numpy's BLAS (one thread each on row
  blocks over the pool) with either read kernel: the figure llama.cpp's CPU kernels were measured
  against (bench/speed_table.py; doctor/derive/speed_cost.py's efficiencies, docs/speed.md); at the
  engine's thread count and all cores, best of three.

Which kernel: `import torch` alone takes ~1.2 s of CPU on the 2-core test machine, numpy's 0.1 s,
and the first scan's budget is 1.5 s all told. So torch measures when it is already loaded in this
process or under `scan --bench` (heavy probes, their own budget), numpy otherwise; the two kernels'
figures on the test machine are side by side in docs/speed.md. The measurement runs in a child
process (OPENBLAS_NUM_THREADS must be set before numpy loads) while the engine is not running, and
the other processes' share of the cores is read from /proc/stat around it: a figure measured on
busy cores is kept for an hour only. Kept on disk (doctor/core/json_cache.py) under the user's cache
folder, keyed by the machine (CPU model, cores, RAM, boot id), the thread counts and the kernel;
replayed machines use their recorded figures (`bench.ceilings`), never this machine's.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from typing import Any

from doctor.core.facts import Facts
from doctor.core.json_cache import store_text
from doctor.sources.probes.base import Probe, ProbeContext, Reporter, try_text
from doctor.sources.probes.cpustat import CpuWindow

CACHE_VERSION = 3
CACHE_KEEP = 8
FRESH_S = 30 * 86400  # a quiet measurement is kept a month
BUSY_FRESH_S = 3600  # one taken while others used the cores, an hour
BUSY = 0.25  # others' share of the cores above which a measurement counts as busy
BUFFER_MIB = 128
GEMM_N = 768

CHILD = r"""
import json, sys, time
kernel, counts, n, m = sys.argv[4], [int(x) for x in sys.argv[1].split(",")], int(sys.argv[2]) << 20, int(sys.argv[3])
def timed(fn, threads):
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    dt = time.perf_counter() - t0
    return dt, min(1.0, (time.process_time() - c0) / (dt * threads))
def best_of(fn, threads, work):
    fn()
    best, share = 0.0, 1.0
    for _ in range(3):
        dt, got = timed(fn, threads)
        if work / dt / 1e9 / got > best:
            best, share = work / dt / 1e9 / got, got
    return best, share
out = {"bw": {}, "share": {}, "gemm": {}, "gemm_share": {}, "kernel": kernel}
from concurrent.futures import ThreadPoolExecutor
import numpy as np
if kernel == "torch":
    import torch
    a = torch.empty(n // 4, dtype=torch.float32).fill_(1.0)
    for t in counts:
        torch.set_num_threads(t)
        out["bw"][str(t)], out["share"][str(t)] = best_of(lambda: float(a.sum()), t, n)
    del a
x = np.ones((m, m), dtype=np.float32); y = np.ones((m, m), dtype=np.float32)
b = np.empty(n // 4, dtype=np.float32) if kernel != "torch" else None
if b is not None:
    b.fill(1.0)
for t in counts:
    rows = np.array_split(x, t)
    with ThreadPoolExecutor(t) as pool:
        if b is not None:
            chunks = np.array_split(b, t)
            out["bw"][str(t)], out["share"][str(t)] = best_of(lambda: list(pool.map(np.sum, chunks)), t, n)
        out["gemm"][str(t)], out["gemm_share"][str(t)] = best_of(lambda: list(pool.map(lambda r: r @ y, rows)),
                                                                 t, 2 * m ** 3)
print(json.dumps(out))
"""
# what each read kernel is, for the facts' sources (read kernels differ by up to 3x); the GEMM is
# numpy's in both: the figure doctor/derive/speed_cost.py's efficiencies were fitted against
KERNELS = {"torch": "float32 sum over {mib} MiB (torch.sum on torch's own {t} thread(s))",
           "numpy": "float32 sum over {mib} MiB (numpy, equal chunks over {t} thread(s))"}
GEMM_HOW = "float32 GEMM {n}x{n} (numpy BLAS, one thread each on row blocks, {t} thread(s))"


def pick_kernel(bench: bool) -> str:
    """torch where it is installed and its import is paid already (loaded in this process) or allowed
    (scan --bench); numpy otherwise: `import torch` alone takes ~1.2 s of CPU here, the first-scan
    budget is 1.5 s all told (docs/speed.md)."""
    if "torch" in sys.modules or (bench and importlib.util.find_spec("torch") is not None):
        return "torch"
    return "numpy"


def thread_counts(engine_threads: int | None, usable: int) -> list[int]:
    """The counts to measure: the engine's (capped at the usable cores) and all usable cores."""
    usable = max(1, usable)
    counts = {usable}
    if engine_threads:
        counts.add(max(1, min(engine_threads, usable)))
    return sorted(counts)


def measure(counts: list[int], timeout_s: float = 30.0, proc_root: str = "/proc",
            kernel: str = "numpy") -> dict[str, Any]:
    """Run the child; the answer with the date, the kernels and the others' share of the cores.
    Each figure is divided by the share of its threads' time the kernel got (its CPU time / wall
    time x threads, at most 1): what the cores do when they are ours, not what others left over."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    window = CpuWindow(proc_root).start()
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, ",".join(map(str, counts)), str(BUFFER_MIB), str(GEMM_N),
                           kernel],
                          capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    seconds = time.perf_counter() - started
    busy = window.stop()
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = " ".join(proc.stderr.split()[-30:])
        raise RuntimeError(f"ceiling measurement exited {proc.returncode}: {tail}")
    answer: dict[str, Any] = json.loads(lines[-1])
    answer.update(date=time.strftime("%Y-%m-%d %H:%M", time.localtime()), when=time.time(),
                  seconds=round(seconds, 2),
                  other_busy=busy.other_busy if busy else None, steal_pct=busy.steal_pct if busy else None)
    return answer


def machine_key(ctx: ProbeContext, counts: list[int], kernel: str = "numpy") -> dict[str, Any]:
    cpu = ""
    for line in (try_text(ctx.roots.procfs("cpuinfo")) or "").splitlines():
        if line.startswith("model name"):
            cpu = line.partition(":")[2].strip()
            break
    mem = (try_text(ctx.roots.procfs("meminfo")) or "").split("\n", 1)[0]
    boot = try_text(ctx.roots.procfs("sys", "kernel", "random", "boot_id")) or ""
    return {"v": CACHE_VERSION, "cpu": cpu, "cpus": os.cpu_count(), "mem": mem, "boot": boot,
            "counts": counts, "buffer_mib": BUFFER_MIB, "gemm_n": GEMM_N, "kernel": kernel}


def cache_folder() -> str | None:
    if os.environ.get("LLM_DOCTOR_NO_CACHE", "").strip() not in ("", "0"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "llm-doctor", "ceilings")


def _entry(folder: str, key: dict[str, Any]) -> str:
    return os.path.join(folder, hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32] + ".json")


def load_cached(folder: str, key: dict[str, Any], now: float) -> dict[str, Any] | None:
    try:
        with open(_entry(folder, key), encoding="utf-8") as handle:
            data = json.load(handle)
        if not isinstance(data, dict) or data.get("key") != key:
            return None
        answer = data["answer"]
        busy = answer.get("other_busy")
        fresh = BUSY_FRESH_S if isinstance(busy, int | float) and busy > BUSY else FRESH_S
        if not isinstance(answer, dict) or now - float(answer["when"]) > fresh:
            return None
        return answer
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store_cached(folder: str, key: dict[str, Any], answer: dict[str, Any]) -> None:
    try:
        store_text(folder, _entry(folder, key), json.dumps({"key": key, "answer": answer}, sort_keys=True), CACHE_KEEP)
    except (OSError, TypeError, ValueError):
        return


def ceiling_facts(answer: dict[str, Any], counts: list[int], engine_threads: int, rep: Reporter,
                  origin: str = "measured") -> None:
    """The facts from a measurement (live, cached or recorded)."""
    bw = answer.get("bw") or {}
    when = f"{origin} {answer.get('date', '?')}"
    busy = answer.get("other_busy")
    note = f"; others used {busy * 100:.0f}% of the cores meanwhile" \
        if isinstance(busy, int | float) and busy > BUSY else ""
    read = KERNELS.get(str(answer.get("kernel")), KERNELS["numpy"])
    eng = str(max(1, min(engine_threads, max(counts))))
    for name, key in (("host.ram.read_bw_gbs", eng), ("host.ram.read_bw_all_gbs", str(max(counts)))):
        value = bw.get(key)
        if isinstance(value, int | float) and value > 0:
            how = read.format(mib=BUFFER_MIB, t=key)
            rep.set(name, round(float(value), 2), text=f"{how}, best of 3, per owned core time; {when}{note}")
        else:
            rep.unknown(name, f"no read bandwidth at {key} threads in the measurement")
    gemm = answer.get("gemm") or {}
    for name, key in (("host.cpu.matmul_gflops", eng), ("host.cpu.matmul_all_gflops", str(max(counts)))):
        value = gemm.get(key)
        if isinstance(value, int | float) and value > 0:
            how = GEMM_HOW.format(n=GEMM_N, t=key)
            rep.set(name, round(float(value), 1), text=f"{how}, best of 3, per owned core time; {when}{note}")


def _usable(ctx: ProbeContext) -> int:
    try:
        affinity = ctx.roots.affinity() if ctx.roots.affinity else os.sched_getaffinity(0)
        return max(1, len(affinity))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _collect(ctx: ProbeContext) -> Facts:
    rep = Reporter("ceilings")
    names = ("host.ram.read_bw_gbs", "host.ram.read_bw_all_gbs", "host.cpu.matmul_gflops", "host.cpu.matmul_all_gflops")
    if not ctx.roots.live:
        recorded = ctx.roots.bench.get("ceilings") if isinstance(ctx.roots.bench, dict) else None
        if isinstance(recorded, dict):
            counts = sorted(int(k) for k in (recorded.get("bw") or {"1": 0}))
            threads = int(recorded.get("engine_threads") or counts[0])
            ceiling_facts(recorded, counts, threads, rep, f"recorded on {ctx.roots.recorded}")
        else:
            for name in names:
                rep.unknown(name, f"not recorded for {ctx.roots.recorded}")
        return rep.facts
    usable = _usable(ctx)
    counts = thread_counts(ctx.threads, usable)
    threads = max(1, min(ctx.threads or usable, usable))
    kernel = pick_kernel(ctx.bench)
    key = machine_key(ctx, counts, kernel)
    folder = cache_folder()
    answer = load_cached(folder, key, time.time()) if folder else None
    origin = "measured (kept)" if answer is not None else "measured"
    if answer is None:
        answer = rep.read(names, lambda: measure(counts, proc_root=ctx.roots.proc, kernel=kernel),
                          "ceiling measurement")
        if answer is None:
            return rep.facts
        if folder:
            store_cached(folder, key, answer)
    ceiling_facts(answer, counts, threads, rep, origin)
    return rep.facts


def kept_facts(threads: int | None, ctx: ProbeContext | None = None) -> Facts:
    """The figures an earlier scan kept for this machine, never measured here (watch: the engine is
    already running, and would be measured with them). `threads` None: llama-cpp-python's default,
    os.cpu_count() // 2, as scan plans it."""
    threads = threads or max(1, (os.cpu_count() or 2) // 2)
    ctx = ctx or ProbeContext(threads=threads)
    rep = Reporter("ceilings")
    usable = _usable(ctx)
    counts = thread_counts(threads, usable)
    folder = cache_folder()
    answer = None
    if folder:
        for kernel in ("torch", "numpy"):  # the torch figure where a --bench scan kept one
            answer = answer or load_cached(folder, machine_key(ctx, counts, kernel), time.time())
    if answer is not None:
        ceiling_facts(answer, counts, max(1, min(threads, usable)), rep, "measured by an earlier scan")
    return rep.facts


PROBE = Probe("ceilings", "light", "this machine's CPU ceilings: memory read bandwidth and matrix-multiply "
              "throughput (torch or numpy, kept per machine)", ("host.ram.read_bw_gbs", "host.ram.read_bw_all_gbs",
                                                       "host.cpu.matmul_gflops"), _collect)
