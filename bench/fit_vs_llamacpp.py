"""Fit verdicts against real loads: for SmolLM2-135M at n_ctx 64, 128, 300, 512, 2048, 8192 with
f16 / q8_0 / f32 KV and 1 or 4 sequences, what llama.cpp really allocated and how much memory the
real process used, next to llm-doctor's estimate and its verdict at budgets from 256 MiB to 2 GiB.

Each setting runs in a fresh llama-cpp-python child, one at a time, one thread (the machine is
shared), weight repacking off (`-nr`: on an AMX Xeon llama.cpp's AMX kernels crash with SIGILL, as
the scan's triage finds; the weights then stay in the mapped file buffer): model and context
created through the C API with verbose logging, then the worst-case
batch llama.cpp reserved its compute buffer for - min(n_ctx, n_ubatch) tokens, spread over the
sequences, each asking for its last token's logits as generation does. A full context would make the
rest of the compute buffer resident (the attention matrix grows with the cells in use), but filling
8192 cells takes minutes per setting on two shared cores; instead the child then reads and writes
back one byte of every page of the private writable data mappings of 1 MiB or more that appeared
(or the part the heap grew by) after llama_cpp was imported - llama.cpp's buffers and heap, not
thread stacks, not the interpreter's or numpy's own reservations - so everything the engine
allocated is resident, as at the end of a full context. It reports its own /proc/self/status:
VmHWM (peak resident memory, after the first batch and at the end) and VmPeak (peak address space:
what `ulimit -v` limits). The buffer lines of its log are llama.cpp's own figures.

What touching cannot bring: the CPU backend's work buffer (doctor/derive/memory.py, cpu_work_bytes) is
allocated for the graph actually run, so with an f16 V cache and no flash attention it is larger at a
full context than after one batch (72 MiB against 4.5 MiB at 8192 cells). Those settings (an f16
cache with more than 512 cells per sequence) decode every sequence to the end of its share first
("context filled": about 2 minutes at 8192 cells on one thread).

Then a 16-token reply, one token at a time as generation runs, reading /proc/self/io before and after:
each token needs every weight once, so where the mapped weights do not stay in memory the reply reads
them from disk again.

Truth for a budget B (where a memory cgroup can be made: root, or a delegated subtree): the same child
in a cgroup limited to B (bench/cgroup_limit.py), as a container runtime sets one, the model file's
pages dropped from the page cache first so the run reads and is charged for them itself. It ends one
of three ways: killed (the kernel's OOM kill), paged (it ran, but the reply read more than 10% of the
weights from disk per token), or full (everything stayed resident). Budgets from the smallest up; once
a run keeps everything resident, larger budgets are implied full. Nothing else may map the model file
meanwhile (a test suite running beside the bench would keep its pages cached and charged elsewhere):
each limited run checks that the file left the page cache, and stops the bench if it did not. Where no
cgroup can be made, the truth falls back to peak RSS <= B, without the paged/killed distinction.
`ulimit -v B` limits address space (VmPeak: the buffers + about 220 MiB here, libraries and
reservations never touched included), not memory used: `--ulimit` loads the n_ctx 8192 f32 setting
under `ulimit -v` at several budgets to show it.

llama.cpp's own projection: `llama-fit-params --fit-print on` (tools/fit-params of the llama.cpp that
llama-cpp-python vendors, built by scripts/build_llama_server.sh) with the same settings - the model
and context created without allocating, the Host line's model + context + compute MiB (each rounded
down) - and its time per call. Its verdict at a budget B is the projection <= B; llama.cpp's own fit
rule on a CPU-only machine also keeps its default --fit-target margin of 1024 MiB free (projection +
1024 MiB <= the host's total memory), shown as a second count. The column is left out when the tool is
not built.

llm-doctor's side is the scan's own path: the GGUF read by doctor/sources/probes/gguf_model.py, the settings as
`scan --ctx-size N --parallel S --type-k T --type-v T` plans them, `--ram B` as the budget, and
doctor/derive/plan.py's verdict in the same three words (derived.ram_runs false: killed; derived.fits_ram
true: full; else paged) with its measured overheads.

    python bench/fit_vs_llamacpp.py [--ulimit] [--recorded]
        (about 25 minutes on 2 cores, run alone; writes bench/results/fit_vs_llamacpp.{md,json})
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import Row as BenchRow  # noqa: E402
from bench.common import fit_params_binary, fit_params_cmd, parse_fit_print  # noqa: E402
from doctor.core.facts import Facts  # noqa: E402

RESULTS = ROOT / "bench" / "results"
MIB = 1 << 20
CTX = (64, 128, 300, 512, 2048, 8192)
KV = ("f16", "q8_0", "f32")
SEQS = (1, 4)
BUDGETS_MIB = (256, 320, 384, 448, 512, 640, 768, 1024, 1536, 2048)
FIT_TARGET_MIB = 1024  # llama.cpp's default --fit-target (common/common.h fit_params_target)

CHILD = r"""
import json, sys
settings = json.loads(sys.argv[1]); path = sys.argv[2]
def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmPeak", "VmHWM", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0]) * 1024
    return out
def data_maps():
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            head = line.split()
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            out.append((lo, hi, head[1], head[5] if len(head) > 5 else ""))
    return out
import llama_cpp
from llama_cpp._logger import set_verbose
base = status()
before = {lo: hi for lo, hi, _, _ in data_maps()}  # the interpreter's and numpy's own, left as they are
types = {"f32": llama_cpp.GGML_TYPE_F32, "f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0}
set_verbose(True)
llama_cpp.llama_backend_init()
mp = llama_cpp.llama_model_default_params()
mp.use_extra_bufts = False  # no weight repacking (-nr): llama.cpp's AMX kernels crash on AMX Xeons (SIGILL)
model = llama_cpp.llama_model_load_from_file(path.encode(), mp)
if not model:
    sys.exit(5)
cp = llama_cpp.llama_context_default_params()
cp.n_ctx = settings["n_ctx"]; cp.n_batch = 512; cp.n_ubatch = 512; cp.n_seq_max = settings["n_seq"]
cp.type_k = types[settings["kv"]]; cp.type_v = types[settings["kv"]]; cp.n_threads = 1; cp.n_threads_batch = 1
fa = settings["kv"] == "q8_0"  # a quantised V cache needs flash attention
cp.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if fa else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
ctx = llama_cpp.llama_init_from_model(model, cp)
if not ctx:
    sys.exit(6)
loaded = status()
n = min(settings["n_ctx"], llama_cpp.llama_n_ubatch(ctx))
s = settings["n_seq"]
batch = llama_cpp.llama_batch_init(n, 0, 1)
for i in range(n):  # the worst-case batch, spread over the sequences, each asking for its last logits
    batch.token[i] = 100 + (i * 7) % 4000; batch.pos[i] = i // s; batch.n_seq_id[i] = 1; batch.seq_id[i][0] = i % s
    batch.logits[i] = i >= n - s
batch.n_tokens = n
if llama_cpp.llama_decode(ctx, batch) != 0:
    sys.exit(7)
first = status()
if settings.get("fill"):  # each sequence to the end of its share, batch after batch, as long prompts fill them
    per_seq = llama_cpp.llama_n_ctx(ctx) // s if s > 1 else settings["n_ctx"]
    for q in range(s):
        pos = n // s
        while pos < per_seq:
            m = min(n, per_seq - pos)
            for i in range(m):
                batch.token[i] = 100 + ((pos + i) * 7) % 4000; batch.pos[i] = pos + i; batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = q; batch.logits[i] = i == m - 1
            batch.n_tokens = m
            if llama_cpp.llama_decode(ctx, batch) != 0:
                sys.exit(8)
            pos += m
# A full context makes the rest of the compute buffer resident; filling the cache takes minutes per
# setting on two shared cores, so the pages a later batch would write are made resident here: every
# page the engine mapped since the import (data mappings of 1 MiB or more, not 8 MiB thread stacks)
# is read and written back with the same byte.
import ctypes
touched = 0
for lo, hi, perms, name in data_maps():
    lo = max(lo, before.get(lo, lo))  # only what was mapped, or what the heap grew by, since the import
    size = hi - lo
    if perms != "rw-p" or name not in ("", "[heap]") or size < 1 << 20 or size == 8 << 20:
        continue
    for addr in range(lo, hi, 4096):
        cell = ctypes.c_ubyte.from_address(addr)
        cell.value = cell.value
    touched += size
decoded = status()
# then a reply: 16 tokens, one at a time, as generation runs; each needs every weight once, so where the
# mapped weights do not stay in memory they are read from disk again (bytes read, time per token)
def read_bytes():
    with open("/proc/self/io") as f:
        return int(dict(line.split(": ") for line in f.read().splitlines())["read_bytes"])
import time
pos = n // s - 16
llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), 0, pos, -1)
read0, t0 = read_bytes(), time.perf_counter()
for k in range(16):
    batch.token[0] = 200 + k; batch.pos[0] = pos + k; batch.n_seq_id[0] = 1; batch.seq_id[0][0] = 0; batch.logits[0] = 1
    batch.n_tokens = 1
    if llama_cpp.llama_decode(ctx, batch) != 0:
        sys.exit(9)
reply = {"read_per_token": (read_bytes() - read0) / 16, "ms_per_token": (time.perf_counter() - t0) / 16 * 1000}
print("STATUS " + json.dumps({"base": base, "loaded": loaded, "first": first, "decoded": decoded, "n_tokens": n,
                              "touched": touched, "reply": reply}), file=sys.stderr)
"""

KV_LINE = re.compile(r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*\d+ layers,\s*\d+/(\d+) seqs\)")
COMPUTE_LINE = re.compile(r"sched_reserve:\s+CPU compute buffer size =\s*([\d.]+) MiB")
MODEL_LINE = re.compile(r"CPU_Mapped model buffer size =\s*([\d.]+) MiB")
OUTPUT_LINE = re.compile(r"CPU\s+output buffer size =\s*([\d.]+) MiB")


def filled(n_ctx: int, kv: str, n_seq: int) -> bool:
    """Whether a setting's truth needs its context decoded to the end: the CPU backend's work buffer
    grows with the cells in use for an f16 V cache without flash attention (doctor/derive/memory.py,
    cpu_work_bytes), beyond the one-batch figure once a sequence holds more than one batch."""
    return kv == "f16" and n_ctx // n_seq > 512


@dataclass(slots=True)
class Setting:
    n_ctx: int
    kv: str
    n_seq: int
    fill: bool = False  # decode the whole context (one sequence), not only the worst-case batch

    @property
    def name(self) -> str:
        filled = ", context filled" if self.fill else ""
        return f"n_ctx {self.n_ctx}, {self.kv}{' (fa)' if self.kv == 'q8_0' else ''}, n_seq {self.n_seq}{filled}"


@dataclass(slots=True)
class Truth:
    kv_mib: str  # as printed
    cells: int
    compute_mib: float
    model_mib: float
    output_mib: float
    peak_rss: int  # VmHWM with every allocated data page resident (the worst case)
    first_rss: int  # VmHWM after the first worst-case batch, before that
    peak_vm: int  # VmPeak after the prompt batch
    base_rss: int  # after importing llama_cpp, before the model
    anon_rss: int = 0  # RssAnon at the peak: the process's private memory (buffers but the mapped weights)
    ms_per_token: float = 0.0  # the 16-token reply with nothing limited

    def private_overhead(self, anon_buffers: int) -> int:
        """Private memory beyond the buffers that are private (all but the mapped weights)."""
        return self.anon_rss - anon_buffers

    @property
    def buffers(self) -> int:
        return round((float(self.kv_mib) + self.compute_mib + self.model_mib + self.output_mib) * MIB)


def model_path() -> Path:
    sys.path.insert(0, str(ROOT / "fixtures"))
    from record_buffers import model_path as find

    return find()


def child_cmd(setting: Setting, path: Path) -> list[str]:
    """The child that loads one setting (CHILD), as a command line."""
    return [sys.executable, "-c", CHILD, json.dumps(asdict(setting)), str(path)]


def real_run(setting: Setting, path: Path, ulimit: int | None = None) -> tuple[int, str]:
    cmd = child_cmd(setting, path)
    if ulimit is not None:
        cmd = ["bash", "-c", f'ulimit -v {ulimit // 1024} && exec "$@"', "bash", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    return proc.returncode, proc.stderr


def truth(setting: Setting, path: Path) -> Truth:
    rc, log = real_run(setting, path)
    status = next((json.loads(ln[7:]) for ln in log.splitlines() if ln.startswith("STATUS ")), None)
    kv, compute = KV_LINE.search(log), COMPUTE_LINE.search(log)
    model, output = MODEL_LINE.search(log), OUTPUT_LINE.search(log)
    if rc != 0 or status is None or not (kv and compute and model and output):
        raise SystemExit(f"{setting.name}: the real run failed ({rc}): {log[-1500:]}")
    cells = int(kv.group(2)) * int(kv.group(3))
    return Truth(kv.group(1), cells, float(compute.group(1)), float(model.group(1)), float(output.group(1)),
                 status["decoded"]["VmHWM"], status["first"]["VmHWM"], status["decoded"]["VmPeak"],
                 status["base"]["VmHWM"], status["decoded"]["RssAnon"], status["reply"]["ms_per_token"])


# a reply that reads more than this share of the mapped weights per token from disk is paging them
PAGED_SHARE = 0.10


def limited_outcome(setting: Setting, path: Path, budget: int) -> dict:
    """The same run in a cgroup limited to `budget` bytes, the model file's pages dropped first: how it
    ended - "killed" (the kernel's OOM kill), "paged" (it ran, re-reading the weights from disk for the
    reply), "full" (it ran with everything resident) - with the reply's disk reads and speed."""
    from bench.cgroup_limit import drop_file_cache, run_limited

    drop_file_cache(path)
    run = run_limited(child_cmd(setting, path), budget)
    status = next((json.loads(ln[7:]) for ln in run.stderr.splitlines() if ln.startswith("STATUS ")), None)
    if run.killed or status is None:
        if not run.killed:
            raise SystemExit(f"{setting.name} at {budget / MIB:.0f} MiB: the limited run failed "
                             f"({run.returncode}) without an OOM kill: {run.stderr[-800:]}")
        return {"outcome": "killed", "peak": run.peak}
    reply = status["reply"]
    paged = reply["read_per_token"] > PAGED_SHARE * path.stat().st_size
    return {"outcome": "paged" if paged else "full", "peak": run.peak,
            "read_per_token": reply["read_per_token"], "ms_per_token": reply["ms_per_token"]}


def doctor_outcome(facts: Facts) -> str:
    """llm-doctor's verdict in the same three words."""
    if facts.value("derived.ram_runs") is False:
        return "killed"
    return "full" if facts.value("derived.fits_ram") is True else "paged"


@dataclass(slots=True)
class Projection:
    """llama-fit-params --fit-print on: the Host line in MiB (rounded down), and the call's wall time."""

    model_mib: int
    context_mib: int
    compute_mib: int
    seconds: float

    @property
    def total_mib(self) -> int:
        return self.model_mib + self.context_mib + self.compute_mib


def projection(binary: Path, setting: Setting, path: Path) -> Projection:
    import time

    cmd = fit_params_cmd(binary, path, setting.n_ctx, setting.n_seq, setting.kv, flash_attn=setting.kv == "q8_0")
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    took = time.perf_counter() - start
    host = parse_fit_print(proc.stdout) if proc.returncode == 0 else None
    if host is None:
        raise SystemExit(f"{setting.name}: llama-fit-params failed ({proc.returncode}): {proc.stderr[-800:]}")
    return Projection(*host, seconds=took)


def doctor_facts(setting: Setting, model_facts: object, ram: int | None):
    """The facts `scan --ctx-size N --parallel S --type-k T --type-v T [--ram B]` judges."""
    from doctor.core.facts import Facts, Source
    from doctor.derive import derive

    facts = Facts()
    facts.merge(model_facts)
    src = Source("config", "bench")
    values = {"config.engine": "llama-cpp-python", "config.n_ctx_requested": setting.n_ctx,
              "config.n_ctx": (setting.n_ctx + 255) // 256 * 256, "config.n_parallel": setting.n_seq,
              "config.n_batch": 512, "config.n_ubatch": 512, "config.type_k": setting.kv, "config.type_v": setting.kv,
              "config.flash_attn": "enabled" if setting.kv == "q8_0" else "disabled", "config.n_gpu_layers": 0,
              "host.gpu.count": 0}
    if ram is not None:
        values["host.ram.available"] = ram
    for name, value in values.items():
        facts.set(name, value, src)
    return derive(facts)


def _recorded() -> tuple[dict[str, Truth], dict[str, dict[int, dict]]]:
    """The real runs of the last full run (bench/results/fit_vs_llamacpp.json), by setting: the
    unlimited run and the limited runs' outcomes by budget."""
    try:
        data = json.loads((RESULTS / "fit_vs_llamacpp.json").read_text(encoding="utf-8"))
        truths = {r["setting"]: Truth(**r["truth"]) for r in data["rows"]}
        limited = {r["setting"]: {int(b): v["limited"] for b, v in r["verdicts"].items() if "limited" in v}
                   for r in data["rows"]}
        return truths, limited
    except (OSError, ValueError, KeyError, TypeError):
        return {}, {}


def real_outcomes(setting: Setting, path: Path, real: Truth, cgroups: bool) -> dict[int, dict]:
    """The real outcome at each budget: under a cgroup limit where one can be made (from the smallest
    budget up; once a run keeps everything resident, the larger budgets are implied), else read from
    the unlimited run's peak resident memory."""
    out: dict[int, dict] = {}
    for budget_mib in BUDGETS_MIB:
        if not cgroups:
            out[budget_mib] = {"outcome": "full" if real.peak_rss <= budget_mib * MIB else "short",
                               "measured": False}
        elif any(v["outcome"] == "full" for v in out.values()):
            out[budget_mib] = {"outcome": "full", "measured": False}
        else:
            out[budget_mib] = {**limited_outcome(setting, path, budget_mib * MIB), "measured": True}
    return out


def measure(ulimit: bool = False, recorded: bool = False) -> tuple[list[BenchRow], str, dict]:
    from bench.cgroup_limit import available
    from doctor.sources.probes.gguf_model import collect_model

    path = model_path()
    model = collect_model(str(path))
    settings = [Setting(c, k, s, fill=filled(c, k, s)) for s in SEQS for k in KV for c in CTX]
    rows = []
    reuse, reuse_limited = _recorded() if recorded else ({}, {})
    cgroups, why = available()
    binary = fit_params_binary()
    for setting in settings:
        print(f"fit: {setting.name} ...", file=sys.stderr, flush=True)
        real = reuse.get(setting.name) or truth(setting, path)
        proj = projection(binary, setting, path) if binary is not None else None
        est = doctor_facts(setting, model, None)
        outcomes = reuse_limited.get(setting.name) or real_outcomes(setting, path, real, cgroups)
        verdicts = {}
        for budget_mib in BUDGETS_MIB:
            judged = doctor_facts(setting, model, budget_mib * MIB)
            limited = outcomes[budget_mib]
            doctor = doctor_outcome(judged)
            if limited["outcome"] == "short":  # no cgroup: only "everything resident or not" is known
                doctor = "full" if doctor == "full" else "short"
            entry = {"doctor": doctor, "real": limited["outcome"], "limited": limited}
            if proj is not None:
                entry["llamacpp"] = proj.total_mib <= budget_mib
                entry["llamacpp_fit_rule"] = proj.total_mib + FIT_TARGET_MIB <= budget_mib
            verdicts[budget_mib] = entry
        anon_buffers = est.value("derived.host_need_bytes") - est.value("derived.weights_host_bytes")
        rows.append({"setting": setting.name, "n_ctx": setting.n_ctx, "kv": setting.kv, "n_seq": setting.n_seq,
                     "truth": asdict(real), "truth_buffers": real.buffers,
                     "kv_est": f"{est.value('derived.kv_bytes') / MIB:.2f}", "cells_est": est.value("derived.kv_cells"),
                     "compute_est": est.value("derived.compute_bytes") / MIB,
                     "host_need": est.value("derived.host_need_bytes"),
                     "host_peak_est": est.value("derived.host_peak_bytes"),
                     "host_floor_est": est.value("derived.host_floor_bytes"),
                     "private_overhead": real.private_overhead(anon_buffers) if real.anon_rss else None,
                     "projection": asdict(proj) if proj is not None else None,
                     "verdicts": verdicts})
    limited = {}
    if ulimit:
        reference = Setting(8192, "f32", 1)
        for budget_mib in (768, 832, 896, 1024):
            rc, _ = real_run(reference, path, budget_mib * MIB)
            limited[budget_mib] = rc == 0
    summary, table, data = summarise(rows, limited)
    data["limits"] = why if cgroups else f"peak resident memory (no cgroup: {why})"
    return summary, header(recorded, binary, why if cgroups else '') + table, data


def header(recorded: bool, binary: Path | None, limits: str) -> str:
    from importlib.metadata import version

    truth = (f"Real outcome at a budget: the same load in a memory cgroup limited to it ({limits}), the model file "
             "dropped from the page cache first, then a 16-token reply: killed (the kernel's OOM kill), paged (it "
             f"ran, reading more than {PAGED_SHARE:.0%} of the weights from disk per reply token), full (everything "
             "stayed resident). Budgets above the first full one are implied full. llm-doctor's verdict in the same "
             "words: derived.ram_runs false = killed, derived.fits_ram true = full, else paged. " if limits else
             "Real outcome at a budget: peak RSS <= budget (no cgroup could be made here: full or short only). ")
    return (f"Fit verdicts vs real loads, SmolLM2-135M-Instruct Q4_1, llama-cpp-python {version('llama-cpp-python')}"
            " (CPU), one child per setting, 1 thread" + (" (real runs of the last full run, judged again)"
                                                         if recorded else "") + "\n\n"
            "Buffers: the MiB llama.cpp printed. Peak RSS: the real process with everything it allocated resident"
            " (est.: llm-doctor's host need + its measured runtime overhead). " + truth
            + ("llama.cpp projection: `llama-fit-params --fit-print on` with the same settings (Host line, MiB"
               " rounded down); its verdict is projection <= budget, counted right where the real run kept"
               " everything resident (llama.cpp keeps no margin for the process itself; its CPU-only fit rule"
               " adds a flat 1024 MiB, counted below the table).\n\n" if binary
               else "llama-fit-params is not built here (scripts/build_llama_server.sh): no llama.cpp column.\n\n"))


def summarise(rows: list[dict], limited: dict[int, bool]) -> tuple[list[BenchRow], str, dict]:
    projected = all(r.get("projection") for r in rows)
    lines = ["| setting | KV MiB real / est. | cells | compute MiB real / est. | err | buffers MiB |"
             + (" llama.cpp projection MiB (model + ctx + compute) |" if projected else "")
             + " peak RSS MiB real / est. | peak VM MiB | real outcome by budget (measured) | least memory est."
             + " MiB | llm-doctor verdicts wrong (of "
             + f"{len(BUDGETS_MIB)} budgets) |" + (" llama.cpp verdicts wrong |" if projected else ""),
             "|---|---|---|---|---|---|" + ("---|" if projected else "") + "---|---|---|---|---|"
             + ("---|" if projected else "")]
    kv_ok = compute_ok = verdict_ok = verdict_n = proj_ok = rule_ok = 0
    floors: list[tuple[int | None, int | None]] = []
    private: list[float] = []
    worst = 0.0
    proj_s: list[float] = []
    for r in rows:
        t = r["truth"]
        kv_same = t["kv_mib"] == r["kv_est"] and t["cells"] == r["cells_est"]
        err = abs(r["compute_est"] - t["compute_mib"]) / t["compute_mib"]
        worst = max(worst, err)
        kv_ok += kv_same
        compute_ok += err <= 0.02
        wrong = [b for b, v in r["verdicts"].items() if v["doctor"] != v["real"]]
        ran = [b for b, v in r["verdicts"].items() if v["real"] != "killed"]
        floors.append((min(ran) if ran else None, r.get("host_floor_est")))
        if r.get("private_overhead") is not None:
            private.append(r["private_overhead"] / MIB)
        wrong_text = ", ".join(f"{b} MiB (said {r['verdicts'][b]['doctor']})" for b in wrong) or "none"
        real_cell = ", ".join(f"{b} {v['real']}" for b, v in r["verdicts"].items()
                              if v["limited"].get("measured"))
        verdict_ok += len(r["verdicts"]) - len(wrong)
        verdict_n += len(r["verdicts"])
        peak_est = r["host_peak_est"] / MIB if isinstance(r["host_peak_est"], int) else float("nan")
        proj_cell = wrong_cell = ""
        if projected:
            p = r["projection"]
            proj_s.append(p["seconds"])
            total = p["model_mib"] + p["context_mib"] + p["compute_mib"]
            proj_cell = f" {total} ({p['model_mib']} + {p['context_mib']} + {p['compute_mib']}) |"
            p_wrong = [b for b, v in r["verdicts"].items() if v["llamacpp"] != (v["real"] == "full")]
            proj_ok += len(r["verdicts"]) - len(p_wrong)
            rule_ok += sum(v["llamacpp_fit_rule"] == (v["real"] == "full") for v in r["verdicts"].values())
            wrong_cell = f" {', '.join(f'{b}' for b in p_wrong) or 'none'} |"
        lines.append(f"| {r['setting']} | {t['kv_mib']} / {r['kv_est']} {'=' if kv_same else '≠'} |"
                     f" {t['cells']} / {r['cells_est']} | {t['compute_mib']:.2f} / {r['compute_est']:.2f} |"
                     f" {err:.1%} | {r['truth_buffers'] / MIB:.1f} |{proj_cell}"
                     f" {t['peak_rss'] / MIB:.1f} / {peak_est:.1f} |"
                     f" {t['peak_vm'] / MIB:.0f} | {real_cell or '-'} |"
                     f" {r['host_floor_est'] / MIB if r.get('host_floor_est') else float('nan'):.1f} |"
                     f" {wrong_text} |{wrong_cell}")
    n = len(rows)
    lines += ["", f"KV exact: {kv_ok}/{n}; compute within 2%: {compute_ok}/{n} (worst {worst:.1%}); "
                  f"fit verdicts equal to the real run: {verdict_ok}/{verdict_n} "
                  f"(budgets {', '.join(str(b) for b in BUDGETS_MIB)} MiB)."]
    if private:
        private.sort()
        lines.append("The process's private memory beyond its private buffers (RssAnon - KV - compute - output - "
                     f"work): median {private[len(private) // 2]:.1f} MiB, {private[0]:.1f}-{private[-1]:.1f} MiB "
                     "(doctor/derive/memory.py HOST_PRIVATE_OVERHEAD).")
    if any(ran is not None and est for ran, est in floors):
        lines.append("Least memory (killed below it), estimate against the smallest budget that ran: "
                     + ", ".join(f"{ran} MiB ran / {est / MIB:.1f} est." for ran, est in floors
                                 if ran is not None and est and ran - 64 < est / MIB) + ".")
    if projected:
        proj_s.sort()
        lines.append(f"llama.cpp's projection (llama-fit-params --fit-print on): its verdict (projection <= budget) "
                     f"equals the real run at {proj_ok}/{verdict_n}; with its default {FIT_TARGET_MIB} MiB fit margin "
                     f"at {rule_ok}/{verdict_n}. Median time per call {proj_s[len(proj_s) // 2]:.3f} s "
                     f"({proj_s[0]:.3f}-{proj_s[-1]:.3f} s).")
    if limited:
        ref = next((r for r in rows if r["setting"] == "n_ctx 8192, f32, n_seq 1"), None)
        peak = f"peak RSS {ref['truth']['peak_rss'] / MIB:.0f} MiB, VmPeak {ref['truth']['peak_vm'] / MIB:.0f} MiB" \
            if ref else ""
        lines.append(f"n_ctx 8192, f32 ({peak}) under `ulimit -v`: " + ", ".join(
            f"{b} MiB {'loads' if ok else 'fails to create the context'}" for b, ok in limited.items())
            + " - the address-space limit is crossed ~110 MiB before the memory is.")
    ref = "real loads through llama-cpp-python, same run"
    proj_ref = f"; llama.cpp's projection: {proj_ok}/{verdict_n}" if projected else ""
    summary = [
        BenchRow("fit: KV cache, n_ctx 64..8192, f16/q8_0/f32, n_seq 1/4", ref, "exact", f"{kv_ok}/{n} exact", "-",
                 f"{kv_ok}/{n}", kv_ok == n),
        BenchRow("fit: compute buffer, same grid", ref, "within 2%", f"worst {worst:.1%}", "-",
                 f"{compute_ok}/{n} within 2%", compute_ok == n),
        BenchRow("fit: RAM verdicts at 256 MiB..2 GiB, same grid", "the real run under a cgroup memory limit"
                 if any(v["limited"].get("measured") for r in rows for v in r["verdicts"].values())
                 else "peak resident memory of the real run", "all equal",
                 f"{verdict_ok}/{verdict_n} equal",
                 f"{proj_ok}/{verdict_n} (llama.cpp projection)" if projected else "-",
                 f"{verdict_ok}/{verdict_n}", verdict_ok == verdict_n,
                 "full table: bench/results/fit_vs_llamacpp.md" + proj_ref),
    ]
    return summary, "\n".join(lines) + "\n", {"rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ulimit", action="store_true", help="also load n_ctx 8192 f32 under ulimit -v at 768..1024 MiB")
    ap.add_argument("--recorded", action="store_true",
                    help="judge the real runs of the last full run again (after a change to the estimate)")
    args = ap.parse_args()
    summary, table, data = measure(args.ulimit, args.recorded)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fit_vs_llamacpp.md").write_text(table, encoding="utf-8")
    (RESULTS / "fit_vs_llamacpp.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return 0 if all(r.met for r in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
