"""This machine's memory read bandwidth for the speed verdict, measured once and kept per machine.

Floor: sources (machine access). Strings: the Source texts below say how each figure was measured.

Memory read bandwidth: a float32 sum over a 128 MiB buffer, best of three passes after a warm one;
at the engine's thread count and at all usable cores. Through torch (`torch.sum` on torch's own
intra-op threads, torch.set_num_threads) where torch is installed and its import is paid already or
allowed (see below); else numpy's vectorised sum over equal chunks on a thread pool (numpy releases
the GIL in the loop). A read kernel: a copy kernel moves 2N bytes and reports another figure (read
kernels differ by up to 3x, so the kernel is named in the fact's source). It is a physical bound of
decode (every weight read once per token); what the engine's own kernels do is the kernel probe's
(doctor/sources/live/embedded/kernels.py) - a float32 GEMM is no bound on int8 dot products.

Which kernel: `import torch` alone takes ~1.2 s of CPU on the 2-core test machine, numpy's 0.1 s,
and the first scan's budget is 1.5 s all told. So torch measures when it is already loaded in this
process or under `scan --bench` (heavy probes, their own budget), numpy otherwise; the two kernels'
figures on the test machine are side by side in docs/speed.md. The measurement runs in a child
process (OPENBLAS_NUM_THREADS must be set before numpy loads) while the engine is not running, and
the other processes' share of the cores is read from /proc/stat around it: a figure measured on
busy cores is kept for an hour only. Kept on disk (doctor/core/json_cache.py) under the user's cache
folder, keyed by the machine (CPU model, cores, RAM, boot id) and the kernel, one figure per thread
count (a watch or a scan at another count reads what an earlier one measured, and measures only the
counts missing); replayed machines use their recorded figures (`bench.ceilings`), never this machine's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from typing import Any

from doctor.core import json_cache
from doctor.core.facts import Facts
from doctor.sources.probes.base import Probe, ProbeContext, Reporter, try_text
from doctor.sources.probes.cpustat import CpuWindow

CACHE_VERSION = 4
CACHE_KEEP = 8
BUSY = 0.25  # others' share of the cores above which a measurement counts as busy
BUFFER_MIB = 128

CHILD = r"""
import json, sys, time
kernel, counts, n = sys.argv[3], [int(x) for x in sys.argv[1].split(",")], int(sys.argv[2]) << 20
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
out = {"bw": {}, "share": {}, "kernel": kernel}
if kernel == "torch":
    import torch
    a = torch.empty(n // 4, dtype=torch.float32).fill_(1.0)
    for t in counts:
        torch.set_num_threads(t)
        out["bw"][str(t)], out["share"][str(t)] = best_of(lambda: float(a.sum()), t, n)
else:
    from concurrent.futures import ThreadPoolExecutor
    import numpy as np
    b = np.empty(n // 4, dtype=np.float32)
    b.fill(1.0)
    for t in counts:
        chunks = np.array_split(b, t)
        with ThreadPoolExecutor(t) as pool:
            out["bw"][str(t)], out["share"][str(t)] = best_of(lambda: list(pool.map(np.sum, chunks)), t, n)
print(json.dumps(out))
"""
# what each read kernel is, for the facts' sources (read kernels differ by up to 3x)
KERNELS = {"torch": "float32 sum over {mib} MiB (torch.sum on torch's own {t} thread(s))",
           "numpy": "float32 sum over {mib} MiB (numpy, equal chunks over {t} thread(s))"}


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
    proc = subprocess.run([sys.executable, "-c", CHILD, ",".join(map(str, counts)), str(BUFFER_MIB), kernel],
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


def machine_key(ctx: ProbeContext, kernel: str = "numpy") -> dict[str, Any]:
    cpu = ""
    for line in (try_text(ctx.roots.procfs("cpuinfo")) or "").splitlines():
        if line.startswith("model name"):
            cpu = line.partition(":")[2].strip()
            break
    mem = (try_text(ctx.roots.procfs("meminfo")) or "").split("\n", 1)[0]
    boot = try_text(ctx.roots.procfs("sys", "kernel", "random", "boot_id")) or ""
    return {"v": CACHE_VERSION, "cpu": cpu, "cpus": os.cpu_count(), "mem": mem, "boot": boot,
            "buffer_mib": BUFFER_MIB, "kernel": kernel}


def cache_folder() -> str | None:
    return json_cache.cache_folder("ceilings")


def per_count(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A measurement's figures one entry per thread count, each with its date and the others' share."""
    out = {}
    for count, value in (answer.get("bw") or {}).items():
        if isinstance(value, int | float) and value > 0:
            out[str(count)] = {"bw": float(value), "when": answer.get("when"), "date": answer.get("date", "?"),
                               "other_busy": answer.get("other_busy"), "kernel": answer.get("kernel", "numpy")}
    return out


def _busy(entry: dict[str, Any]) -> bool:
    busy = entry.get("other_busy")
    return isinstance(busy, int | float) and busy > BUSY


def load_cached(folder: str, key: dict[str, Any], now: float) -> dict[str, dict[str, Any]]:
    """The fresh figures kept for this machine and kernel, by thread count ({} when none)."""
    return json_cache.load_fresh(folder, key, "counts", now, _busy)


def store_cached(folder: str, key: dict[str, Any], entries: dict[str, dict[str, Any]]) -> None:
    json_cache.store_fresh(folder, key, "counts", entries, CACHE_KEEP, _busy)


def ceiling_facts(entries: dict[str, dict[str, Any]], engine_threads: int, all_cores: int, rep: Reporter,
                  origin: str = "measured") -> None:
    """host.ram.read_bw_gbs (the engine's count) and _all_gbs (all usable cores) from kept, measured or
    recorded figures by thread count."""
    for name, count in (("host.ram.read_bw_gbs", str(max(1, min(engine_threads, all_cores)))),
                        ("host.ram.read_bw_all_gbs", str(all_cores))):
        entry = entries.get(count)
        if entry is None:
            rep.unknown(name, f"no read bandwidth measured at {count} thread(s)")
            continue
        busy = entry.get("other_busy")
        note = f"; others used {busy * 100:.0f}% of the cores meanwhile" \
            if isinstance(busy, int | float) and busy > BUSY else ""
        how = KERNELS.get(str(entry.get("kernel")), KERNELS["numpy"]).format(mib=BUFFER_MIB, t=count)
        rep.set(name, round(float(entry["bw"]), 2),
                text=f"{how}, best of 3, per owned core time; {origin} {entry.get('date', '?')}{note}")


def _usable(ctx: ProbeContext) -> int:
    try:
        affinity = ctx.roots.affinity() if ctx.roots.affinity else os.sched_getaffinity(0)
        return max(1, len(affinity))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


NAMES = ("host.ram.read_bw_gbs", "host.ram.read_bw_all_gbs")


def _collect(ctx: ProbeContext) -> Facts:
    rep = Reporter("ceilings")
    if not ctx.roots.live:
        recorded = ctx.roots.bench.get("ceilings") if isinstance(ctx.roots.bench, dict) else None
        if isinstance(recorded, dict):
            entries = per_count(recorded)
            counts = sorted(int(k) for k in entries) or [1]
            threads = int(recorded.get("engine_threads") or counts[0])
            ceiling_facts(entries, threads, max(counts), rep, f"recorded on {ctx.roots.recorded}")
        else:
            for name in NAMES:
                rep.unknown(name, f"not recorded for {ctx.roots.recorded}")
        return rep.facts
    usable = _usable(ctx)
    counts = thread_counts(ctx.threads, usable)
    threads = max(1, min(ctx.threads or usable, usable))
    kernel = pick_kernel(ctx.bench)
    key = machine_key(ctx, kernel)
    folder = cache_folder()
    kept = load_cached(folder, key, time.time()) if folder else {}
    missing = [c for c in counts if str(c) not in kept]
    origin = "measured (kept)" if not missing else "measured"
    if missing:
        answer = rep.read(NAMES, lambda: measure(missing, proc_root=ctx.roots.proc, kernel=kernel),
                          "bandwidth measurement")
        if answer is None:
            return rep.facts
        got = per_count(answer)
        if folder:
            store_cached(folder, key, got)
        kept.update(got)
    ceiling_facts(kept, threads, usable, rep, origin)
    return rep.facts


def kept_facts(threads: int | None, ctx: ProbeContext | None = None) -> Facts:
    """The figures an earlier scan kept for this machine, never measured here (watch: the engine is
    already running, and would be measured with them): any thread counts kept, the torch figure where
    a --bench scan kept one. `threads` None: llama-cpp-python's default, os.cpu_count() // 2, as scan
    plans it."""
    threads = threads or max(1, (os.cpu_count() or 2) // 2)
    ctx = ctx or ProbeContext(threads=threads)
    rep = Reporter("ceilings")
    usable = _usable(ctx)
    folder = cache_folder()
    kept: dict[str, dict[str, Any]] = {}
    if folder:
        for kernel in ("numpy", "torch"):  # torch's figures, where kept, over numpy's
            kept.update(load_cached(folder, machine_key(ctx, kernel), time.time()))
    if kept:
        ceiling_facts(kept, threads, usable, rep, "measured by an earlier scan")
    return rep.facts


PROBE = Probe("ceilings", "light", "this machine's memory read bandwidth at the engine's threads and all cores "
              "(torch or numpy, kept per machine)", NAMES, _collect)
