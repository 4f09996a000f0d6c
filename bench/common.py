"""What every measure shares: child processes run as a user runs them, timing and peak memory of
one process, alternation, medians, and the result rows the runner prints as one table.

Children get the environment of an installed package: byte-code caching on (some shells and CI set
PYTHONDONTWRITEBYTECODE, which makes every start compile the whole tool again), kept under a
folder of the benchmark's own so the checkout stays clean.
"""

from __future__ import annotations

import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PYTHON = sys.executable
_WORK: Path | None = None


def repack_crashes_here() -> bool:
    """Whether llama.cpp's weight repacking must be off for the engine to run here: on a Xeon with AMX
    the AMX kernel of llama-cpp-python 0.3.36's llama.cpp crashes (SIGILL / SIGSEGV; rules/LD9-model-engine.yaml
    LD951). Benchmarks that load the engine turn it off there on every side they compare, alike."""
    try:
        return "amx_tile" in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def workdir() -> Path:
    """One scratch folder per benchmark process (byte-code cache, generated logs, fresh caches),
    removed when the process ends."""
    global _WORK
    if _WORK is None:
        _WORK = Path(tempfile.mkdtemp(prefix="llm-doctor-bench-"))
        atexit.register(shutil.rmtree, _WORK, True)
    return _WORK


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(workdir() / "pycache")
    env.update(extra)
    return env


@dataclass(slots=True)
class Run:
    """One finished child process."""

    wall_s: float
    cpu_s: float  # the process and the children it waited for (a worker pool's too)
    peak_rss: int  # bytes (the largest maximum resident set of the process or one of its children)
    returncode: int
    stdout: bytes
    tree_rss: int = 0  # bytes: the largest sum of the resident sets of the process and its children (sampled)
    tree_pss: int = 0  # the same as proportional set sizes (pages shared after a fork counted once in all)


class TreeMemory:
    """Samples the resident memory of a process and its children (worker processes), summed, every `every_s`."""

    def __init__(self, pid: int, every_s: float = 0.02) -> None:
        self.pid = pid
        self.every_s = every_s
        self.rss = 0
        self.pss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _pids(self) -> list[int]:
        pids, todo = [], [self.pid]
        while todo:
            pid = todo.pop()
            pids.append(pid)
            try:
                for task in Path(f"/proc/{pid}/task").iterdir():
                    todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
        return pids

    def _sample(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while not self._stop.is_set():
            rss = pss = 0
            for pid in self._pids():
                try:
                    rss += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
                    rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
                    pss += next(int(ln.split()[1]) * 1024 for ln in rollup.splitlines() if ln.startswith("Pss:"))
                except (OSError, StopIteration, ValueError, IndexError):
                    continue
            self.rss, self.pss = max(self.rss, rss), max(self.pss, pss)
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run(cmd: Sequence[str], env: dict[str, str] | None = None, ok: Sequence[int] = (0,),
        timeout_s: float = 600.0, tree: bool = False) -> Run:
    """Run `cmd` from the repository root; wall time from start to exit, CPU and peak RSS from the
    kernel's accounting of that process and the children it waited for (os.wait4); with `tree`, the
    summed memory of the process and its children sampled as it runs. Fails loudly on an unexpected exit code."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(cmd), cwd=ROOT, env=env if env is not None else child_env(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
        assert proc.stdout is not None
        memory = TreeMemory(proc.pid) if tree else None
        watchdog = threading.Timer(timeout_s, proc.kill)
        watchdog.start()
        try:
            chunks = []
            while True:  # read everything (a full pipe would stall the child), then reap it ourselves
                chunk = proc.stdout.read(1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            watchdog.cancel()
            if memory is not None:
                memory.stop()
        wall = time.perf_counter() - start
        proc.stdout.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in ok:
            err.seek(0)
            tail = err.read().decode("utf-8", "replace")[-800:]
            raise SystemExit(f"{' '.join(cmd[:6])} exited {proc.returncode}: {tail}")
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, proc.returncode, b"".join(chunks),
               memory.rss if memory else 0, memory.pss if memory else 0)


def doctor(*args: str) -> list[str]:
    return [PYTHON, "-m", "doctor", *args]


def alternate(jobs: dict[str, Callable[[], Any]], rounds: int, warmup: bool = True) -> dict[str, list[Any]]:
    """Run every job once per round, in turn, so that drift on the machine hits all of them alike."""
    if warmup:
        for job in jobs.values():
            job()
    results: dict[str, list[Any]] = {name: [] for name in jobs}
    for _ in range(rounds):
        for name, job in jobs.items():
            results[name].append(job())
    return results


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def spread(values: Sequence[float]) -> str:
    return f"{min(values):.3g}–{max(values):.3g}" if values else "-"


@dataclass(slots=True)
class Row:
    """One line of the table: a measure next to its reference, measured in the same run."""

    measure: str
    reference: str
    target: str
    doctor: str  # llm-doctor's figure, with its unit
    ref: str  # the reference's figure ("-" when there is none)
    result: str  # the ratio or the figure that is judged against the target
    met: bool | None  # None: nothing to judge
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    missed: str = ""  # when the target is not met: why, and what it would take

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def mark(met: bool | None) -> str:
    return {True: "yes", False: "NO", None: "-"}[met]


def markdown_table(rows: Sequence[Row]) -> str:
    lines = ["| measure | reference | target | llm-doctor | reference | result | met |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r.measure, r.reference, r.target, r.doctor, r.ref, r.result, mark(r.met)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def text_table(rows: Sequence[Row]) -> str:
    head = ("measure", "target", "llm-doctor", "reference", "result", "met")
    body = [(r.measure, r.target, r.doctor, r.ref, r.result, mark(r.met)) for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=False)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in body]
    return "\n".join(out)


def machine() -> dict[str, Any]:
    import platform

    info: dict[str, Any] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                            "platform": platform.platform(terse=True)}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            info["cpu"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
    except OSError:
        pass
    info["load_1m"] = round(os.getloadavg()[0], 2)
    return info


# -- llama.cpp's own pre-load projection (llama-fit-params) ---------------------------------------

FIT_PARAMS_BUILD = "scripts/build_llama_server.sh"


def fit_params_binary() -> Path | None:
    """llama-fit-params built by scripts/build_llama_server.sh from the llama.cpp the installed
    llama-cpp-python vendors, or None when it is not built."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        engine = version("llama-cpp-python")
    except PackageNotFoundError:
        return None
    cache = Path(os.environ.get("LLM_DOCTOR_CACHE") or Path.home() / ".cache" / "llm-doctor")
    path = cache / f"llama-server-{engine}" / "bin" / "llama-fit-params"
    return path if os.access(path, os.X_OK) else None


def fit_params_cmd(binary: Path, model: Path, n_ctx: int, n_seq: int = 1, kv: str = "f16",
                   flash_attn: bool = False, *, kv_v: str | None = None, n_batch: int = 512, n_ubatch: int = 512,
                   swa_full: bool = False) -> list[str]:
    """`llama-fit-params --fit-print on` for one setting: llama.cpp loads the model and creates the
    context without allocating (no_alloc, load mode none: no weight is read) and prints model,
    context and compute MiB per device. Weight repacking off (-nr), as the real runs of
    bench/fit_vs_llamacpp.py load the model. `kv` is the K cache type, and V's unless `kv_v` is
    given. It has no `--kv-unified` (llama.cpp offers that flag to the server and a few examples only)."""
    cmd = [str(binary), "-m", str(model), "-c", str(n_ctx), "-np", str(n_seq), "-ctk", kv, "-ctv", kv_v or kv,
           "-fa", "on" if flash_attn else "off", "-b", str(n_batch), "-ub", str(n_ubatch), "-t", "1", "-nr"]
    return cmd + (["--swa-full"] if swa_full else []) + ["--fit-print", "on"]


def parse_fit_print(stdout: str) -> tuple[int, int, int] | None:
    """The `Host MODEL CONTEXT COMPUTE` line (MiB, rounded down by llama.cpp), or None."""
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "Host" and all(p.isdigit() for p in parts[1:]):
            return int(parts[1]), int(parts[2]), int(parts[3])
    return None


def fit_print_failure(stderr: str, returncode: int) -> str:
    """Why a `llama-fit-params --fit-print on` run printed no Host line, in one short phrase: llama.cpp's
    first error-level log line (`0.00.006.188 E llama_init_from_model: ...`, timestamp dropped), else
    the exception it died of (`what():  failed to load model`), else the exit status."""
    lines = stderr.splitlines()
    for line in lines:
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[1] == "E" and parts[0].replace(".", "").isdigit():
            return parts[2].strip()
    for line in lines:
        if line.strip().startswith("what():"):
            return line.strip()[len("what():"):].strip()
    return f"exit {returncode}"
