"""The engine probe: which llama-cpp-python is installed and what its build can do.

Asks llama-cpp-python in a child process (a broken GPU build can abort the process that loads it):
the version, `llama_supports_gpu_offload()` (False on pip's default CPU-only build - the first
thing to check when a GPU sits idle), `llama_supports_mmap()`, and `llama_print_system_info()`,
whose sections name the compiled backends (CPU, CUDA, Metal, Vulkan ...) and the CPU features the
loaded CPU backend uses.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

from doctor.core import engines
from doctor.core.facts import Facts
from doctor.sources.probes.base import Probe, ProbeContext, Reporter

SECTION = re.compile(r"(?:^|\|)\s*([A-Za-z][A-Za-z0-9_]*)\s+:\s")
FEATURE = re.compile(r"\b([A-Z][A-Z0-9_]+)\s*=\s*1\b")
CHILD = """
import json
try:
    import llama_cpp
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
    raise SystemExit(0)
info = llama_cpp.llama_print_system_info()
print(json.dumps({"version": getattr(llama_cpp, "__version__", None),
                  "gpu_offload": bool(llama_cpp.llama_supports_gpu_offload()),
                  "mmap": bool(llama_cpp.llama_supports_mmap()),
                  "system_info": info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)}))
"""


def ask_engine(timeout_s: float = 30.0) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=timeout_s,
                          check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = " ".join(proc.stderr.split()[-30:])
        raise RuntimeError(f"llama-cpp-python check exited {proc.returncode}: {tail}")
    answer: dict[str, Any] = json.loads(lines[-1])
    return answer


def engine_facts(answer: dict[str, Any], rep: Reporter) -> None:
    if "error" in answer:
        for name in ("engine.version", "engine.gpu_offload_supported"):
            rep.unknown(name, f"{engines.embedded()} not importable ({answer['error']})")
        return
    rep.set("engine.name", engines.embedded(), text="the embedded engine")
    rep.set("engine.version", answer.get("version"), text="llama_cpp.__version__")
    rep.set("engine.gpu_offload_supported", answer.get("gpu_offload"), text="llama_supports_gpu_offload()")
    rep.set("engine.mmap_supported", answer.get("mmap"), text="llama_supports_mmap()")
    info = str(answer.get("system_info") or "")
    if info:
        backends = sorted({s for s in SECTION.findall(info)})
        rep.set("engine.backends", backends, text=info[:300])
        cpu = info.split("|")
        found = {f for part in cpu for f in FEATURE.findall(part)}
        features = sorted(found - {"LLAMAFILE", "OPENMP", "REPACK", "USE_GRAPHS", "PEER_MAX_BATCH_SIZE"})
        rep.set("engine.cpu_features", features, text="llama_print_system_info()")
        rep.set("engine.cpu_repack", "REPACK" in found, text="llama_print_system_info(): REPACK = 1")


def collect_engine(answers: dict[str, Any] | None = None) -> Facts:
    rep = Reporter("engine")
    answer = answers if answers is not None else rep.read(
        ("engine.version", "engine.gpu_offload_supported"), ask_engine, engines.embedded())
    if answer is not None:
        engine_facts(answer, rep)
    return rep.facts


def _collect(ctx: ProbeContext) -> Facts:
    if ctx.roots.engine is None and not ctx.roots.live:
        rep = Reporter("engine")
        rep.unknown("engine.gpu_offload_supported", f"not recorded for {ctx.roots.recorded or 'this machine'}")
        return rep.facts
    return collect_engine(ctx.roots.engine)


PROBE = Probe("engine", "light", "llama-cpp-python version, GPU offload support, mmap, backends",
              ("engine.version", "engine.gpu_offload_supported"), _collect)
