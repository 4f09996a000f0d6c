"""Heavy probe (scan --bench): memory bandwidth measured with torch, in a child process.

- Host RAM: a CPU tensor copy (reads and writes N bytes: 2N moved) - what CPU decode is bound by.
- GPU memory: a device-to-device copy of a buffer far larger than the L2 cache (2N moved), timed
  with CUDA events after a warm-up.
- PCIe: a pinned host-to-device copy (N moved) - the real link figure - and a pageable one (what
  an mmap'd model's weights get). The link generation is read from NVML *while* the copies run,
  because an idle GPU drops its link to Gen1.

The child creates its own CUDA context (a few hundred MB of VRAM), so VRAM readings from the other
probes stay undisturbed, and a CUDA failure cannot take the tool down. Devices are ordered by PCI
bus (CUDA_DEVICE_ORDER=PCI_BUS_ID) so index i is NVML's index i.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from doctor.core.facts import Facts
from doctor.sources.probes.base import Probe, ProbeContext, Reporter

CHILD = r"""
import json, sys, time
budget = float(sys.argv[1])
out = {}
try:
    import torch
except Exception as exc:
    print(json.dumps({"error": f"torch not importable ({type(exc).__name__}: {exc}); pip install torch"}))
    raise SystemExit(0)
def host_copy():
    n = 256 << 20
    a = torch.empty(n, dtype=torch.uint8); b = torch.empty(n, dtype=torch.uint8)
    a.fill_(1); b.copy_(a)
    k, t0 = 0, time.perf_counter()
    while k < 20 and time.perf_counter() - t0 < budget / 4:
        b.copy_(a); k += 1
    return 2 * n * k / (time.perf_counter() - t0) / 1e9
out["host_gbs"] = host_copy()
gpus = []
if torch.cuda.is_available():
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:
        pynvml = None
    for i in range(min(torch.cuda.device_count(), 8)):
        dev = torch.device("cuda", i)
        entry = {"index": i, "name": torch.cuda.get_device_name(i)}
        try:
            free, _total = torch.cuda.mem_get_info(i)
            n = int(min(1 << 30, free // 4)) & ~((1 << 20) - 1)
            src = torch.empty(n, dtype=torch.uint8, device=dev); dst = torch.empty_like(src)
            for _ in range(3):
                dst.copy_(src)
            torch.cuda.synchronize(dev)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            k = 10
            start.record()
            for _ in range(k):
                dst.copy_(src)
            end.record(); torch.cuda.synchronize(dev)
            entry["d2d_gbs"] = 2 * n * k / (start.elapsed_time(end) / 1000) / 1e9
            del src, dst
            m = 256 << 20
            host = torch.empty(m, dtype=torch.uint8, pin_memory=True); d = torch.empty(m, dtype=torch.uint8, device=dev)
            for _ in range(2):
                d.copy_(host, non_blocking=True)
            torch.cuda.synchronize(dev)
            start.record()
            for _ in range(20):
                d.copy_(host, non_blocking=True)
            end.record()
            if pynvml is not None:
                try:
                    h = pynvml.nvmlDeviceGetHandleByIndex(i)
                    entry["gen_under_load"] = pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h)
                    entry["width_under_load"] = pynvml.nvmlDeviceGetCurrPcieLinkWidth(h)
                except Exception:
                    pass
            torch.cuda.synchronize(dev)
            entry["h2d_pinned_gbs"] = m * 20 / (start.elapsed_time(end) / 1000) / 1e9
            pageable = torch.empty(m, dtype=torch.uint8)
            start.record()
            for _ in range(5):
                d.copy_(pageable)
            end.record(); torch.cuda.synchronize(dev)
            entry["h2d_pageable_gbs"] = m * 5 / (start.elapsed_time(end) / 1000) / 1e9
        except Exception as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
        gpus.append(entry)
out["gpus"] = gpus
out["cuda"] = torch.cuda.is_available()
print(json.dumps(out))
"""


def run_bench(seconds: float = 8.0, timeout_s: float = 120.0) -> dict[str, Any]:
    env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")
    proc = subprocess.run([sys.executable, "-c", CHILD, str(seconds)], capture_output=True, text=True,
                          timeout=timeout_s, env=env, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = " ".join(proc.stderr.split()[-30:])
        raise RuntimeError(f"bandwidth benchmark exited {proc.returncode}: {tail}")
    answer: dict[str, Any] = json.loads(lines[-1])
    return answer


def bench_facts(answer: dict[str, Any], rep: Reporter, origin: str = "torch") -> None:
    if "error" in answer:
        rep.unknown("host.ram.bandwidth_measured_gbs", answer["error"])
        return
    host = answer.get("host_gbs")
    if isinstance(host, int | float) and host > 0:
        rep.set("host.ram.bandwidth_measured_gbs", round(float(host), 1),
                text=f"{origin}: CPU tensor copy, 2 x 256 MiB moved per copy")
    for gpu in answer.get("gpus", []):
        p = f"host.gpu[{int(gpu['index'])}]"
        if "error" in gpu:
            rep.unknown(f"{p}.bandwidth_measured_gbs", f"benchmark failed: {gpu['error']}")
        values = (("bandwidth_measured_gbs", "d2d_gbs", "device-to-device copy, 2N bytes moved"),
                  ("pcie.h2d_measured_gbs", "h2d_pinned_gbs", "pinned host-to-device copy"),
                  ("pcie.h2d_pageable_gbs", "h2d_pageable_gbs", "pageable host-to-device copy"))
        for name, key, how in values:
            value = gpu.get(key)
            if isinstance(value, int | float) and value > 0:
                rep.set(f"{p}.{name}", round(float(value), 1), text=f"{origin}: {how}")
        if isinstance(gpu.get("gen_under_load"), int):
            rep.set(f"{p}.pcie.gen_under_load", int(gpu["gen_under_load"]),
                    text=f"NVML during the pinned copy (x{gpu.get('width_under_load', '?')})")


def _collect(ctx: ProbeContext) -> Facts:
    rep = Reporter("gpubench")
    if not ctx.roots.live:
        if isinstance(ctx.roots.bench, dict) and ("host_gbs" in ctx.roots.bench or "gpus" in ctx.roots.bench):
            bench_facts(ctx.roots.bench, rep, f"recorded on {ctx.roots.recorded}")
        else:
            rep.unknown("host.ram.bandwidth_measured_gbs", f"not recorded for {ctx.roots.recorded}")
        return rep.facts
    answer = rep.read("host.ram.bandwidth_measured_gbs", lambda: run_bench(ctx.bench_seconds), "torch benchmark")
    if answer is not None:
        bench_facts(answer, rep)
    return rep.facts


PROBE = Probe("gpubench", "heavy", "memory bandwidth with torch: host RAM, GPU device copy, PCIe pinned/pageable",
              ("host.ram.bandwidth_measured_gbs",), _collect)
