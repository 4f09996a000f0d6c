"""The kernel probe: what the engine's own kernels do on this machine, for a model's weight types, at
the planned threads - measured once, kept per machine, engine build, type and thread count.

A ceiling built from numpy's f32 GEMM is a model of one CPU, not a bound: llama.cpp's int8 dot
products (VNNI), its repacked weights and its AMX tiles run other instructions at other rates
(issue 36: 3.5x past such a "ceiling" on an AMD EPYC). So the engine times itself: small GGUFs of
real shapes (kernel_gguf.py: random valid blocks of each weight type) run through llama-cpp-python in
a child process (kernel_child.py), as scan's trace runs the model, with the setting the trace ran
with (weight repacking off where crash triage turned it off: AMX here); kernel_times.py turns the
child's times into the kept figures:

- per weight type, at the model's own row widths: decode steps (every weight once through the
  type's dot-product kernel) at the decode thread counts, a 32-token prompt at the prefill thread
  counts: weights/s and FLOP/s;
- a mixture of experts' types again with experts (MUL_MAT_ID runs other code than MUL_MAT);
- attention, with the model's own head shape, KV types and flash-attention setting: decode and
  prefill at two cache depths (their difference is the cost per layer per KV cell; llama.cpp pads
  the cells it attends over to 256) and the per-layer cost left at the shallow depth.

Each figure is kept (doctor/core/json_cache.py, `kernels/`) under the machine (CPU model and ISA
flags), the engine build (llama-cpp-python's version and its libraries' size and date), weight
repacking on or off, the type, the row widths, the thread count and (attention) the head shape: a month when the
cores were quiet, an hour when others used them. Probe GGUFs are kept beside it (`kernel-gguf/`).
The first traced scan measures what is missing (about half a second on 2 quiet cores, capped at 5 s
on busy ones: the planned thread counts first, the others within a 2 s target; scan says on stderr
what it measures and what it did, naming the figures it lacks), later scans and watch read what was
kept (`kernel_facts(..., measure_missing=False)`).

Sources floor (machine access: files, a child process). Strings: the facts' Source texts below.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.core.facts import Facts, Source
from doctor.core.json_cache import cache_folder, load_fresh, store_fresh
from doctor.derive.speed_cost import MINOR, kernel_gaps
from doctor.sources.live.embedded import kernel_gguf as kg
from doctor.sources.live.embedded.kernel_times import (
    BUSY_SHARE,
    PROMPT,
    REPS,
    STALL_S,
    STEPS,
    Heads,
    Job,
    dense_id,
    figures_from,
    rows_label,
)

CACHE_VERSION = 2  # 2: probes at the model's own row widths, 8 MiB
KEEP_GGUF = 24
# a first scan's probe aims at TARGET_S (the figures at other thread counts than the planned ones are left
# for a later scan once it is past that) and is stopped at CAP_S (busy cores): what finished is kept
TARGET_S, CAP_S = 2.0, 5.0
BENCH_CAP_S = 60.0  # scan --bench: every thread count, however long the busy cores take
COUNT_BUDGET_S = STALL_S  # a thread count's prompts and steps past this: the fewest that give a figure
QUIET_S = (0.25, 0.1)  # what the probe takes on 2 quiet cores: starting the child, a job (docs/speed.md)
# the type probe: a llama-shaped model with the model's own row widths (the dot products' lengths, which
# decide how well a kernel runs: SmolLM2's 576 and 1536), at most 2048 and 5632 (a 1-layer probe of an 8B
# model's 4096 x 14336 would be 120 MB), with enough layers to be ~8 MiB of weights (at least one: few
# layers, few graph nodes, few thread barriers to wait at on busy cores). The
# bus is the read bandwidth's term (section 1 of docs/speed.md), so the probe need not stream from RAM:
# on a Zen 4 CCD (32 MiB L3) it runs from cache as on the Xeon here (300 MiB L3)
PROBE_EMBD, PROBE_FF, PROBE_HEADS, PROBE_KV_HEADS, PROBE_HEAD_DIM, PROBE_VOCAB = 2048, 5632, 16, 4, 128, 256
PROBE_BYTES = 8 << 20
# the attention probe: the model's heads on a narrow residual (few weights), 8 layers so the KV of all
# layers does not sit in one core's L2 at the deep depth; two depths 256 KV cells apart
ATTN_LAYERS, ATTN_EMBD, ATTN_FF, ATTN_DEPTH = 8, 256, 256, 448
MOE_FF, MOE_EXPERTS_MAX = 768, 64



@dataclass(frozen=True, slots=True)
class Request:
    """What one model needs measured: its CPU-side weight types, the thread counts, the run's setting."""

    types: tuple[str, ...]  # ggml type names of the dense matrices on the CPU (and the head)
    moe_types: tuple[str, ...] = ()  # types of expert matrices (MUL_MAT_ID) on the CPU
    n_expert: int = 0
    n_expert_used: int = 0
    heads: Heads | None = None
    decode_threads: tuple[int, ...] = (1,)
    prefill_threads: tuple[int, ...] = (1,)
    extra_bufts: bool = True  # weight repacking (llama.cpp's extra buffer types)
    flash_attn: bool = False
    type_k: str = "f16"
    type_v: str = "f16"
    rows: tuple[int, int] = (PROBE_EMBD, PROBE_FF)  # the probe's row widths: the model's, at most the defaults
    # types only the output head has (SmolLM2's Q8_0): a prompt runs the head for its last token only, at the
    # decode rate (doctor/derive/speed_cost.py), so no prompt rate is measured for them
    head_only: tuple[str, ...] = ()
    head_types: tuple[str, ...] = ()  # the head's types: their decode rate at the prompt's count is planned too

    def kv_label(self) -> str:
        return f"{self.type_k}/{self.type_v}/fa{int(self.flash_attn)}"

    def rows_label(self) -> str:
        return rows_label(*self.rows)

    def planned(self, phase: str) -> int:
        """The engine's own thread count for the phase (the lowest asked: the others are all usable cores)."""
        return (self.decode_threads if phase == "decode" else self.prefill_threads)[0]


@dataclass
class Figures:
    """Measured figures by key (see `_keys`), each {"best", "typ", ...}, with when and how busy."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    system_info: str = ""
    errors: list[str] = field(default_factory=list)
    skipped: str = ""  # why the child left the other thread counts for a later scan: target | busy
    stalled: bool = False  # runs that stalled on busy cores were left out
    wall_s: float = 0.0


# -- what a model needs ---------------------------------------------------------------------------

def request_from(facts: Facts, usable: int) -> Request | None:
    """The request for the model and settings in `facts` (the GGUF's tensor table, the planned threads,
    the setting the trace ran with); None without a tensor table or with nothing on the CPU."""
    rows = facts.value("model.matmul_weights")
    n_layer = facts.value("model.n_layer")
    if not isinstance(rows, list) or not isinstance(n_layer, int) or n_layer <= 0:
        return None
    gpu_layers = facts.value("config.n_gpu_layers")
    first_gpu = n_layer + 1  # the output layer is layer n_layer; llama.cpp offloads the last n_gpu_layers
    if isinstance(gpu_layers, int) and gpu_layers != 0 and facts.value("host.gpu.count") != 0:
        first_gpu = max(0, n_layer + 1 - (n_layer + 1 if gpu_layers < 0 else gpu_layers))
    weights: dict[tuple[str, bool], float] = {}
    body: set[str] = set()  # types with weights in the repeating layers (a prompt runs them at its rate)
    head: set[str] = set()  # the output head's (a prompt runs it once, at the decode rate)
    for row in rows:
        if not (isinstance(row, list) and len(row) == 6 and isinstance(row[0], int) and isinstance(row[3], list)):
            continue
        layer, op, type_name = row[0], str(row[1]), str(row[2]).upper()
        if layer >= first_gpu or type_name not in kg.BUILDABLE:
            continue
        key = (type_name, op == "mul_mat_id")
        (body if layer < n_layer else head).add(type_name)
        weights[key] = weights.get(key, 0.0) + float(row[5] if isinstance(row[5], int) else 1) * math.prod(row[3])
    total = sum(weights.values()) or 1.0
    # a type with a sliver of the weights (a MoE's F32 router) is costed at the slowest rate measured
    # (doctor/derive/speed_cost.py), not probed on its own
    dense = [t for (t, experts), w in weights.items() if not experts and w / total >= MINOR]
    moe = [t for (t, experts), w in weights.items() if experts and w / total >= MINOR]
    if not dense and not moe:
        return None
    n_head, n_kv, head_dim = (facts.value(k) for k in ("model.n_head", "model.n_head_kv", "model.head_dim_k"))
    n_embd = facts.value("model.n_embd")
    if not isinstance(head_dim, int) and isinstance(n_embd, int) and isinstance(n_head, int) and n_head:
        head_dim = n_embd // n_head
    heads = Heads(n_head, n_kv if isinstance(n_kv, int) and n_kv > 0 else n_head, head_dim) \
        if isinstance(n_head, int) and n_head > 0 and isinstance(head_dim, int) and head_dim > 0 else None
    threads = facts.value("config.n_threads")
    batch = facts.value("config.n_threads_batch")
    t = threads if isinstance(threads, int) and threads > 0 else max(1, usable)
    tb = batch if isinstance(batch, int) and batch > 0 else t
    usable = max(1, usable)
    extra = facts.value("config.use_extra_bufts") is not False and facts.value("run.triage_change") != "repack_off"
    n_expert, used = facts.value("model.n_expert"), facts.value("model.n_expert_used")
    rows = _rows(facts.value("model.n_embd"), facts.value("model.n_ff"), [*dense, *moe])
    head_only = tuple(sorted(t for t in dense if t not in body))
    head_types = tuple(sorted(t for t in dense if t in head))
    return Request(tuple(sorted(dense)), tuple(sorted(moe)),
                   min(n_expert, MOE_EXPERTS_MAX) if isinstance(n_expert, int) else 0,
                   used if isinstance(used, int) else 0, heads,
                   tuple(sorted({min(t, usable), usable})), tuple(sorted({min(tb, usable), usable})),
                   # as scan's trace runs it: anything but "disabled" turns flash attention on
                   extra, str(facts.value("config.flash_attn", "disabled")) != "disabled",
                   str(facts.value("config.type_k", "f16")), str(facts.value("config.type_v", "f16")), rows,
                   head_only, head_types)


def _rows(n_embd: Any, n_ff: Any, types: list[str]) -> tuple[int, int]:
    """The model's row widths capped at the defaults, where every type's blocks fit them; else the defaults."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    if not (isinstance(n_embd, int) and isinstance(n_ff, int) and n_embd > 0 and n_ff > 0):
        return PROBE_EMBD, PROBE_FF
    rows = (min(n_embd, PROBE_EMBD), min(n_ff, PROBE_FF))
    blocks = [GGML_QUANT_SIZES[GGMLQuantizationType[t]][0] for t in types]
    return rows if all(r % b == 0 for r in rows for b in blocks) else (PROBE_EMBD, PROBE_FF)


def _keys(req: Request) -> list[str]:
    """The cache keys of every figure the request needs."""
    rows = req.rows_label()
    keys = [f"{dense_id(ty, rows)}/decode/{t}" for ty in req.types for t in req.decode_threads]
    keys += [f"{dense_id(ty, rows)}/prefill/{t}" for ty in req.types if ty not in req.head_only
             for t in req.prefill_threads]
    moe = f"e{req.n_expert}u{req.n_expert_used}"
    keys += [f"moe/{ty}/{rows}/{moe}/{phase}/{t}" for ty in req.moe_types for phase, counts in
             (("decode", req.decode_threads), ("prefill", req.prefill_threads)) for t in counts]
    if req.heads is not None and req.types:
        base = _attn_base(req)
        keys += [f"{base}/decode/{t}" for t in req.decode_threads]
        keys += [f"{base}/prefill/{t}" for t in req.prefill_threads]
    return keys


def _attn_base(req: Request) -> str:
    assert req.heads is not None
    return f"attn/{req.heads.label()}/{req.kv_label()}/{req.types[0]}/{req.rows_label()}"


# -- the cache --------------------------------------------------------------------------------------

def _cpu_identity(cpuinfo: str) -> tuple[str, str]:
    model, flags = "", ""
    for line in cpuinfo.splitlines():
        if line.startswith("model name") and not model:
            model = line.partition(":")[2].strip()
        elif line.startswith(("flags", "Features")) and not flags:
            flags = " ".join(sorted(line.partition(":")[2].split()))
    return model, hashlib.sha256(flags.encode()).hexdigest()[:16]


def engine_build() -> str:
    """llama-cpp-python's version and its native libraries' sizes and dates (a rebuild is another engine)."""
    try:
        from doctor.core.engines import embedded

        version = importlib.metadata.version(embedded())  # the embedded row's name is its distribution's
    except importlib.metadata.PackageNotFoundError:
        return "none"
    spec = importlib.util.find_spec("llama_cpp")
    libs = Path(spec.origin).parent / "lib" if spec is not None and spec.origin else None
    stamp = []
    if libs is not None and libs.is_dir():
        for lib in sorted(libs.glob("lib*.so*")):
            if lib.is_file() and not lib.is_symlink():
                st = lib.stat()
                stamp.append(f"{lib.name}:{st.st_size}:{int(st.st_mtime)}")
    return f"{version}:" + hashlib.sha256("|".join(stamp).encode()).hexdigest()[:12]


def machine_key(cpuinfo: str, extra_bufts: bool, build: str | None = None) -> dict[str, Any]:
    model, flags = _cpu_identity(cpuinfo)
    return {"v": CACHE_VERSION, "cpu": model, "flags": flags, "engine": build or engine_build(),
            "repack": extra_bufts}


def _busy(entry: dict[str, Any]) -> bool:
    return bool(entry.get("busy"))


def load(folder: str, key: dict[str, Any], now: float) -> dict[str, dict[str, Any]]:
    """The fresh figures kept under `key` ({} when none)."""
    return load_fresh(folder, key, "entries", now, _busy)


def store(folder: str, key: dict[str, Any], entries: dict[str, dict[str, Any]]) -> None:
    store_fresh(folder, key, "entries", entries, 16, _busy)


# -- the probe GGUFs --------------------------------------------------------------------------------

def _probe_heads(req: Request) -> Heads:
    """The model's heads where they span the probe's residual (SmolLM2's 9 x 64 = 576), else heads of 128."""
    e = req.rows[0]
    if req.heads is not None and req.heads.n_head * req.heads.head_dim == e:
        return req.heads
    if e % PROBE_HEAD_DIM == 0:
        return Heads(e // PROBE_HEAD_DIM, max(1, e // (4 * PROBE_HEAD_DIM)), PROBE_HEAD_DIM)
    return Heads(1, 1, e)


def type_shape(type_name: str, req: Request | None = None) -> kg.Shape:
    req = req or Request((type_name,))
    (e, f), h = req.rows, _probe_heads(req)
    one = kg.Shape("llama", "p", 1, e, f, h.n_head, h.n_head_kv, h.head_dim, PROBE_VOCAB)
    layer_bytes = sum(kg.weights(kg.tensors(one, kg.uniform(type_name))).values()) * _bits(type_name) / 8
    layers = max(1, round(PROBE_BYTES / layer_bytes))
    return kg.Shape("llama", f"kernel probe {type_name}", layers, e, f, h.n_head, h.n_head_kv, h.head_dim,
                    PROBE_VOCAB, tied=False)


def moe_shape(req: Request) -> kg.Shape:
    h = _probe_heads(req)
    return kg.Shape("llama", "kernel probe experts", 1, req.rows[0], MOE_FF, h.n_head, h.n_head_kv, h.head_dim,
                    PROBE_VOCAB, tied=False, n_expert=req.n_expert,
                    n_expert_used=max(1, min(req.n_expert_used, req.n_expert)))


def attention_shape(heads: Heads) -> kg.Shape:
    return kg.Shape("llama", f"kernel probe attention {heads.label()}", ATTN_LAYERS, ATTN_EMBD, ATTN_FF,
                    heads.n_head, heads.n_head_kv, heads.head_dim, PROBE_VOCAB, tied=False)


def _bits(type_name: str) -> float:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
    return size * 8 / block


def _gguf(folder: Path, shape: kg.Shape, type_name: str) -> tuple[Path, list[kg.Tensor]]:
    table = kg.tensors(shape, kg.uniform(type_name))
    digest = hashlib.sha256(repr((shape, type_name, CACHE_VERSION)).encode()).hexdigest()[:16]
    path = folder / f"probe-{type_name}-{digest}.gguf"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        kg.write(shape, table, tmp, type_name)
        os.replace(tmp, path)
    return path, table


def _prune_gguf(folder: Path) -> None:
    files = sorted(folder.glob("probe-*.gguf"), key=lambda p: p.stat().st_mtime)
    for old in files[: max(0, len(files) - KEEP_GGUF)]:
        old.unlink(missing_ok=True)


# -- measuring --------------------------------------------------------------------------------------

def _jobs(req: Request, missing: set[str], folder: Path) -> list[Job]:
    """The child's jobs for the missing figures: every type, its experts, attention; each at the planned thread
    counts first, then at the others (`optional`: the child skips them once past its target, and a
    later scan measures them). A job's id is the key prefix of its figures."""
    rows = req.rows_label()
    parts: list[tuple[str, str, str, kg.Shape]] = [(dense_id(ty, rows), "dense", ty, type_shape(ty, req))
                                                   for ty in req.types]
    for ty in req.moe_types:
        parts.append((f"moe/{ty}/{rows}", "moe", ty, moe_shape(req)))
        if ty not in req.types:  # the experts' probe needs the type's dense rate
            parts.append((dense_id(ty, rows), "dense", ty, type_shape(ty, req)))
    if req.heads is not None and req.types:
        parts.append((_attn_base(req), "attn", req.types[0], attention_shape(req.heads)))
    moe = f"e{req.n_expert}u{req.n_expert_used}"
    jobs = []
    for job_id, kind, ty, shape in parts:
        # the figures' own keys; a dense probe made for experts is wanted where the experts' are
        prefix = f"{job_id}/{moe}" if kind == "moe" else \
            f"moe/{ty}/{rows}/{moe}" if kind == "dense" and ty not in req.types else job_id
        decode, prefill = ([t for t in counts if f"{prefix}/{phase}/{t}" in missing]
                           for phase, counts in (("decode", req.decode_threads), ("prefill", req.prefill_threads)))
        if not decode and not prefill:
            continue
        path, table = _gguf(folder, shape, ty)
        spec = {"id": job_id, "path": str(path), "batch": PROMPT, "steps": STEPS, "reps": REPS,
                "count_budget_s": COUNT_BUDGET_S, "fill_threads": 1,
                # the steps start from the cache's first cells: no prompt before them to pay for
                "decode_after_prompt": False, "prefill_threads": prefill, "decode_threads": decode,
                "optional": {"decode": [t for t in decode if t != req.planned("decode") and not (
                                 kind == "dense" and ty in req.head_types and t == req.planned("prefill"))],
                             "prefill": [t for t in prefill if t != req.planned("prefill")]}}
        if kind == "attn":
            spec["depth"] = ATTN_DEPTH
        jobs.append(Job(spec, kind, ty, table, shape, req.kv_label() if kind == "attn" else "", rows))
    return jobs


def run_child(spec: dict[str, Any], timeout_s: float = CAP_S) -> tuple[list[dict[str, Any]], str | None]:
    """Run the probe child; (the JSON lines it printed, why it ended early or None)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[4])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        proc = subprocess.run([sys.executable, "-m", "doctor.sources.live.embedded.kernel_child"],
                              input=json.dumps(spec), capture_output=True, text=True, timeout=timeout_s, env=env,
                              check=False)
    except subprocess.TimeoutExpired as exc:  # the jobs finished by then were printed: they are kept
        out = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return _json_lines(out), f"the kernel probe was stopped at its {timeout_s:g} s cap"
    except OSError as exc:
        return [], f"cannot start the kernel probe: {exc.strerror or exc}"
    lines = _json_lines(proc.stdout)
    if proc.returncode != 0:
        how = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
        return lines, f"the kernel probe {how}"
    return lines, None


def _json_lines(text: str) -> list[dict[str, Any]]:
    lines = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except ValueError:
                continue
    return lines


def measure(req: Request, missing: set[str], folder: Path, proc_root: str = "/proc",
            timeout_s: float = CAP_S, kept: dict[str, dict[str, Any]] | None = None,
            target_s: float | None = TARGET_S) -> Figures:
    """Run the probe for the missing figures (the planned thread counts; the others only while the probe is
    within `target_s`, None: always); dense rates first (the experts and attention are told apart with
    them: the ones measured now, else those kept)."""
    from doctor.sources.probes.cpustat import CpuWindow

    started = time.perf_counter()
    figures = Figures()
    jobs = _jobs(req, missing, folder)
    if not jobs:
        return figures
    spec: dict[str, Any] = {"extra_bufts": req.extra_bufts, "flash_attn": req.flash_attn, "type_k": req.type_k,
                            "type_v": req.type_v, "jobs": [j.spec for j in jobs]}
    if target_s is not None:  # the child's own clock starts later: the files were written meanwhile
        spec["target_s"] = max(0.0, target_s - (time.perf_counter() - started))
    window = CpuWindow(proc_root).start()
    lines, error = run_child(spec, timeout_s)
    busy = window.stop()
    when = time.time()
    other = busy.other_busy if busy else None
    results: dict[str, dict[str, Any]] = {}
    for line in lines:
        if "system_info" in line:
            figures.system_info = str(line["system_info"])
        elif "error" in line:
            figures.errors.append(f"{line.get('id')}: {line['error']}")
        elif "id" in line:
            results[str(line["id"])] = line
            figures.stalled = figures.stalled or any(
                isinstance(r, list) and len(r) == 2 and r[0] > STALL_S and r[1] < BUSY_SHARE
                for part in ("prefill", "decode", "prefill_deep", "decode_deep")
                for runs in (line.get(part) or {}).values() for r in runs)
            if line.get("skipped"):
                figures.skipped = str(line.get("skipped_why") or "target")
    dense: dict[str, dict[str, Any]] = {k: v for k, v in (kept or {}).items() if k.startswith("dense/")}
    for job in sorted(jobs, key=lambda j: j.kind != "dense"):
        if job.spec["id"] in results:
            got = figures_from(job, results[job.spec["id"]], dense, when, other)
            if job.kind == "dense":
                dense.update(got)
            figures.entries.update(got)
    if error:
        figures.errors.append(error)
    _prune_gguf(folder)
    figures.wall_s = time.perf_counter() - started
    return figures


# -- facts ------------------------------------------------------------------------------------------

def _src(text: str) -> Source:
    return Source("probe", "probe.kernels", text=text[:300])


def to_facts(req: Request, entries: dict[str, dict[str, Any]], how: str) -> Facts:
    """host.cpu.kernel_decode / kernel_prefill / kernel_attention rows for the request's types and
    threads (doctor/core/catalog/speed.py says what each column is)."""
    facts = Facts()
    decode, prefill, attention = [], [], []
    moe = f"e{req.n_expert}u{req.n_expert_used}"
    widths = req.rows_label()
    for op, types, prefix in (("mul_mat", req.types, "dense/{ty}/" + widths),
                              ("mul_mat_id", req.moe_types, f"moe/{{ty}}/{widths}/{moe}")):
        for ty in types:
            for t in req.decode_threads:
                e = entries.get(f"{prefix.format(ty=ty)}/decode/{t}")
                if e:
                    decode.append([ty, op, t, round(e["best"] / 1e9, 4), round(e["typ"] / 1e9, 4)])
            for t in req.prefill_threads:
                e = entries.get(f"{prefix.format(ty=ty)}/prefill/{t}")
                if e:
                    prefill.append([ty, op, t, round(e["best"] / 1e9, 3), round(e["typ"] / 1e9, 3)])
    if req.heads is not None and req.types:
        base = _attn_base(req)
        for t in sorted(set(req.decode_threads) | set(req.prefill_threads)):
            d, p = entries.get(f"{base}/decode/{t}"), entries.get(f"{base}/prefill/{t}")
            if d or p:
                attention.append([t, *(round(d[k] * 1e9, 3) if d else None for k in ("best", "typ")),
                                  *(round(p[k] * 1e9, 4) if p else None for k in ("best", "typ")),
                                  *(round(d[k] * 1e3, 5) if d else None for k in ("layer_best", "layer_typ"))])
    for name, rows in (("host.cpu.kernel_decode", decode), ("host.cpu.kernel_prefill", prefill),
                       ("host.cpu.kernel_attention", attention)):
        if rows:
            facts.set(name, rows, _src(how))
    return facts


def describe(entries: dict[str, dict[str, Any]], req: Request, origin: str) -> str:
    whens = [e["when"] for e in entries.values() if isinstance(e.get("when"), int | float)]
    busy = [e for e in entries.values() if e.get("busy")]
    date = time.strftime("%Y-%m-%d %H:%M", time.localtime(min(whens))) if whens else "?"
    shares = [e.get("share", 1.0) for e in busy]
    note = f"; on busy cores (the probe's threads got {min(shares):.0%} of their time): kept an hour" if busy else ""
    return (f"kernel probe ({origin} {date}): the engine's own kernels on small real-shape GGUFs, "
            f"weight repacking {'on' if req.extra_bufts else 'off'}, best and median of {STEPS - 1} decode steps "
            f"and of {REPS} prompts of {PROMPT} tokens, rows of {req.rows[0]} and {req.rows[1]}{note}")


def kernel_facts(req: Request, cpuinfo: str, *, measure_missing: bool = True, folder: str | None = None,
                 progress: Callable[[str], None] | None = None, proc_root: str = "/proc",
                 timeout_s: float = CAP_S, target_s: float | None = TARGET_S) -> Facts:
    """The kept figures, measuring what is missing when `measure_missing` (scan), never otherwise (watch):
    the planned thread counts first, the others while within `target_s` (None: all of them), all stopped at
    `timeout_s`; what it did is said through `progress`."""
    folder = folder if folder is not None else cache_folder("kernels")
    key = machine_key(cpuinfo, req.extra_bufts)
    kept = load(folder, key, time.time()) if folder else {}
    needed = set(_keys(req))
    missing = needed - set(kept)
    origin = "kept"
    errors: list[str] = []
    if missing and measure_missing and key["engine"] != "none":
        if progress is not None:
            progress(_announce(req, missing, target_s))
        gguf_dir = Path(folder).parent / "kernel-gguf" if folder else Path(tempfile.mkdtemp(prefix="llm-doctor-"))
        got = measure(req, missing, gguf_dir, proc_root, timeout_s, kept, target_s)
        errors = got.errors + ([(f"past its {target_s:g} s target" if got.skipped == "target" else
                                 "on cores so busy that a run stalled") + ", the other thread counts were left for "
                                "a later scan"] if got.skipped else []) \
            + (["runs that stalled on busy cores were left out"] if got.stalled else [])
        if folder and got.entries:
            store(folder, key, got.entries)
        kept.update(got.entries)
        origin = "measured"
        if not folder:
            for leftover in gguf_dir.glob("*"):
                leftover.unlink(missing_ok=True)
            gguf_dir.rmdir()
        if progress is not None:
            left = missing - set(got.entries)
            progress(f"kernel probe: {len(missing) - len(left)} of {len(missing)} figures in {got.wall_s:.1f} s"
                     + (f"; not measured: {kernel_gaps(sorted(left))} - {'; '.join(errors) or 'no result'}; "
                        "the next traced scan measures them" if left else ""))
    facts = to_facts(req, {k: v for k, v in kept.items() if k in needed}, describe(kept, req, origin))
    still = needed - set(kept)
    if still:
        why = "; ".join(errors) or ("not measured yet (a traced scan measures it)" if not measure_missing
                                    else "not measured")
        facts.set("host.cpu.kernel_missing", sorted(still), _src(why))
    return facts


def _announce(req: Request, missing: set[str], target_s: float | None) -> str:
    """What the probe is about to measure, and about how long it takes on quiet cores."""
    what = ", ".join([*req.types, *(f"{t} experts" for t in req.moe_types)])
    planned = sorted({req.planned("decode"), req.planned("prefill")})
    others = sorted({int(t) for k in missing for phase, t in [k.rsplit("/", 2)[1:]] if int(t) != req.planned(phase)})
    jobs = len(req.types) + len(req.moe_types) + (req.heads is not None)
    est = QUIET_S[0] + QUIET_S[1] * jobs * (1.5 if others else 1.0)
    more = f", then {'/'.join(map(str, others))} threads" + (" if time allows" if target_s is not None else "") \
        if others else ""
    return (f"measuring this machine's kernels once (~{min(est, target_s or est):.1f} s: {what} at "
            f"{'/'.join(map(str, planned))} thread(s){more}; kept for later scans)")
