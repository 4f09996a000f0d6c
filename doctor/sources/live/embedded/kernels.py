"""The kernel probe: what the engine's own kernels do on this machine, for a model's weight types, at
the planned threads - measured once, kept per machine, engine build, type and thread count.

A ceiling built from numpy's f32 GEMM is a model of one CPU, not a bound: llama.cpp's int8 dot
products (VNNI), its repacked weights and its AMX tiles run other instructions at other rates
(issue 36: 3.5x past such a "ceiling" on an AMD EPYC). So the engine times itself: small GGUFs of
real shapes (kernel_gguf.py: random valid blocks of each weight type) run through llama-cpp-python in
a child process (kernel_child.py), as scan's trace runs the model, with the setting the trace ran
with (weight repacking off where crash triage turned it off: AMX here); kernel_times.py turns the
child's times into the kept figures:

- per weight type: decode steps (every weight once through the type's dot-product kernel) at the
  decode thread counts, a 32-token prompt at the prefill thread counts: weights/s and FLOP/s;
- a mixture of experts' types again with experts (MUL_MAT_ID runs other code than MUL_MAT);
- attention, with the model's own head shape, KV types and flash-attention setting: decode and
  prefill at two cache depths (their difference is the cost per layer per KV cell; llama.cpp pads
  the cells it attends over to 256) and the per-layer cost left at the shallow depth.

Each figure is kept (doctor/core/json_cache.py, `kernels/`) under the machine (CPU model and ISA
flags), the engine build (llama-cpp-python's version and its libraries' size and date), weight
repacking on or off, the type, the thread count and (attention) the head shape: a month when the
cores were quiet, an hour when others used them. Probe GGUFs are kept beside it (`kernel-gguf/`).
The first traced scan measures what is missing (about a second on 2 cores; scan says so on stderr),
later scans and watch read what was kept (`kernel_facts(..., measure_missing=False)`).

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
from doctor.derive.speed_cost import MINOR
from doctor.sources.live.embedded import kernel_gguf as kg
from doctor.sources.live.embedded.kernel_times import PROMPT, STEPS, Heads, Job, figures_from

CACHE_VERSION = 1
KEEP_GGUF = 24
TIMEOUT_S = 20.0  # a first scan waits this long at most (busy cores): what was measured by then is kept
# the type probe: a llama-shaped model whose rows are as long as common models' (2048, 5632: K-quant
# blocks fit), with enough layers to be ~64 MiB of weights - more than one Zen 4 CCD's 32 MiB L3, so
# there decode streams from RAM as a model does (the 2-core Xeon's 300 MiB L3 holds it; there the
# dot products, not the bus, bind at 1-2 threads: 3.9 of 16 GB/s, docs/speed.md)
PROBE_EMBD, PROBE_FF, PROBE_HEADS, PROBE_KV_HEADS, PROBE_HEAD_DIM, PROBE_VOCAB = 2048, 5632, 16, 4, 128, 256
PROBE_BYTES = 64 << 20
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

    def kv_label(self) -> str:
        return f"{self.type_k}/{self.type_v}/fa{int(self.flash_attn)}"


@dataclass
class Figures:
    """Measured figures by key (see `_keys`), each {"best", "typ", ...}, with when and how busy."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    system_info: str = ""
    errors: list[str] = field(default_factory=list)


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
    for row in rows:
        if not (isinstance(row, list) and len(row) == 6 and isinstance(row[0], int) and isinstance(row[3], list)):
            continue
        layer, op, type_name = row[0], str(row[1]), str(row[2]).upper()
        if layer >= first_gpu or type_name not in kg.BUILDABLE:
            continue
        key = (type_name, op == "mul_mat_id")
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
    return Request(tuple(sorted(dense)), tuple(sorted(moe)),
                   min(n_expert, MOE_EXPERTS_MAX) if isinstance(n_expert, int) else 0,
                   used if isinstance(used, int) else 0, heads,
                   tuple(sorted({min(t, usable), usable})), tuple(sorted({min(tb, usable), usable})),
                   # as scan's trace runs it: anything but "disabled" turns flash attention on
                   extra, str(facts.value("config.flash_attn", "disabled")) != "disabled",
                   str(facts.value("config.type_k", "f16")), str(facts.value("config.type_v", "f16")))


def _keys(req: Request) -> list[str]:
    """The cache keys of every figure the request needs."""
    keys = [f"dense/{ty}/decode/{t}" for ty in req.types for t in req.decode_threads]
    keys += [f"dense/{ty}/prefill/{t}" for ty in req.types for t in req.prefill_threads]
    moe = f"e{req.n_expert}u{req.n_expert_used}"
    keys += [f"moe/{ty}/{moe}/{phase}/{t}" for ty in req.moe_types for phase, counts in
             (("decode", req.decode_threads), ("prefill", req.prefill_threads)) for t in counts]
    if req.heads is not None and req.types:
        base = f"attn/{req.heads.label()}/{req.kv_label()}/{req.types[0]}"
        keys += [f"{base}/decode/{t}" for t in req.decode_threads]
        keys += [f"{base}/prefill/{t}" for t in req.prefill_threads]
    return keys


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

def type_shape(type_name: str) -> kg.Shape:
    per_layer = sum(w for w in kg.weights(kg.tensors(kg.Shape("llama", "p", 1, PROBE_EMBD, PROBE_FF, PROBE_HEADS,
                                                               PROBE_KV_HEADS, PROBE_HEAD_DIM, PROBE_VOCAB),
                                                      kg.uniform(type_name))).values())
    layer_bytes = per_layer * _bits(type_name) / 8
    layers = max(1, round(PROBE_BYTES / layer_bytes))
    return kg.Shape("llama", f"kernel probe {type_name}", layers, PROBE_EMBD, PROBE_FF, PROBE_HEADS, PROBE_KV_HEADS,
                    PROBE_HEAD_DIM, PROBE_VOCAB, tied=False)


def moe_shape(req: Request) -> kg.Shape:
    return kg.Shape("llama", "kernel probe experts", 1, PROBE_EMBD, MOE_FF, PROBE_HEADS, PROBE_KV_HEADS,
                    PROBE_HEAD_DIM, PROBE_VOCAB, tied=False, n_expert=req.n_expert,
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
    jobs = []
    for ty in req.types:
        if any(k.startswith(f"dense/{ty}/") for k in missing) or (
                req.heads is not None and ty == req.types[0] and any(k.startswith("attn/") for k in missing)):
            shape = type_shape(ty)
            path, table = _gguf(folder, shape, ty)
            jobs.append(Job(_spec(f"dense/{ty}", path, req), "dense", ty, table, shape))
    for ty in req.moe_types:
        if any(k.startswith(f"moe/{ty}/") for k in missing):
            shape = moe_shape(req)
            path, table = _gguf(folder, shape, ty)
            jobs.append(Job(_spec(f"moe/{ty}", path, req), "moe", ty, table, shape))
            if ty not in req.types:  # the experts' probe needs the type's dense rate for its attention
                dense_shape = type_shape(ty)
                dpath, dtable = _gguf(folder, dense_shape, ty)
                jobs.append(Job(_spec(f"dense/{ty}", dpath, req), "dense", ty, dtable, dense_shape))
    if req.heads is not None and req.types and any(k.startswith("attn/") for k in missing):
        shape = attention_shape(req.heads)
        path, table = _gguf(folder, shape, req.types[0])
        spec = _spec("attn", path, req)
        spec["depth"] = ATTN_DEPTH
        jobs.append(Job(spec, "attn", req.types[0], table, shape, req.kv_label()))
    return jobs


def _spec(job_id: str, path: Path, req: Request) -> dict[str, Any]:
    # the steps start from the cache's first cells: no prompt before them to pay for (attention is its own job)
    return {"id": job_id, "path": str(path), "batch": PROMPT, "steps": STEPS, "decode_after_prompt": False,
            "prefill_threads": list(req.prefill_threads), "decode_threads": list(req.decode_threads)}


def run_child(spec: dict[str, Any], timeout_s: float = TIMEOUT_S) -> tuple[list[dict[str, Any]], str | None]:
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
        return _json_lines(out), f"the kernel probe ran past {timeout_s:.0f} s (busy cores?)"
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
            timeout_s: float = TIMEOUT_S, kept: dict[str, dict[str, Any]] | None = None) -> Figures:
    """Run the probe for the missing figures; dense rates first (the experts and attention are told apart
    with them: the ones measured now, else those kept)."""
    from doctor.sources.probes.cpustat import CpuWindow

    figures = Figures()
    jobs = _jobs(req, missing, folder)
    if not jobs:
        return figures
    spec = {"extra_bufts": req.extra_bufts, "flash_attn": req.flash_attn, "type_k": req.type_k,
            "type_v": req.type_v, "jobs": [j.spec for j in jobs]}
    window = CpuWindow(proc_root).start()
    lines, error = run_child(spec, timeout_s)
    busy = window.stop()
    when = time.time()
    other = busy.other_busy if busy else None
    by_id = {str(line.get("id")): line for line in lines if "id" in line}
    for line in lines:
        if "system_info" in line:
            figures.system_info = str(line["system_info"])
    dense: dict[str, dict[str, Any]] = {k: v for k, v in (kept or {}).items() if k.startswith("dense/")}
    for job in sorted(jobs, key=lambda j: j.kind != "dense"):
        result = by_id.get(job.spec["id"])
        if result is None or "error" in result:
            if result is not None:
                figures.errors.append(f"{job.spec['id']}: {result['error']}")
            continue
        got = figures_from(job, result, dense, when, other)
        if job.kind == "dense":
            dense.update(got)
        figures.entries.update(got)
    if error:
        figures.errors.append(error)
    _prune_gguf(folder)
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
    for op, types, prefix in (("mul_mat", req.types, "dense/{ty}"), ("mul_mat_id", req.moe_types, "moe/{ty}/" + moe)):
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
        base = f"attn/{req.heads.label()}/{req.kv_label()}/{req.types[0]}"
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
            f"and of 2 prompts of {PROMPT} tokens{note}")


def kernel_facts(req: Request, cpuinfo: str, *, measure_missing: bool = True, folder: str | None = None,
                 progress: Callable[[str], None] | None = None, proc_root: str = "/proc",
                 timeout_s: float = TIMEOUT_S) -> Facts:
    """The kept figures, measuring what is missing when `measure_missing` (scan), never otherwise (watch)."""
    folder = folder if folder is not None else cache_folder("kernels")
    key = machine_key(cpuinfo, req.extra_bufts)
    kept = load(folder, key, time.time()) if folder else {}
    needed = set(_keys(req))
    missing = needed - set(kept)
    origin = "kept"
    errors: list[str] = []
    if missing and measure_missing and key["engine"] != "none":
        if progress is not None:
            what = ", ".join([*req.types, *(f"{t} experts" for t in req.moe_types)])
            counts = "/".join(str(t) for t in sorted(set(req.decode_threads) | set(req.prefill_threads)))
            progress(f"timing the engine's kernels on this machine once ({what}; {counts} threads; kept for "
                     "later scans)")
        gguf_dir = Path(folder).parent / "kernel-gguf" if folder else Path(tempfile.mkdtemp(prefix="llm-doctor-"))
        got = measure(req, missing, gguf_dir, proc_root, timeout_s, kept)
        errors = got.errors
        if folder and got.entries:
            store(folder, key, got.entries)
        kept.update(got.entries)
        origin = "measured"
        if not folder:
            for leftover in gguf_dir.glob("*"):
                leftover.unlink(missing_ok=True)
            gguf_dir.rmdir()
    facts = to_facts(req, {k: v for k, v in kept.items() if k in needed}, describe(kept, req, origin))
    still = needed - set(kept)
    if still:
        why = "; ".join(errors) or ("not measured yet (a traced scan measures it)" if not measure_missing
                                    else "not measured")
        facts.set("host.cpu.kernel_missing", sorted(still), _src(why))
    return facts
