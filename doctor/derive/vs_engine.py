"""The estimate set against what the engine then allocated, term by term, and the engine's own plan too.

A step of doctor/derive's derive() (marked [vs-engine hook]). When a log or a live run gave the
buffers the engine printed (run.*: model / KV / compute / output buffer sizes, summed over devices),
each term llm-doctor can estimate is set beside it:
  weights  derived.weights_bytes (the GGUF's tensors), else model.weights_bytes, + the repacked copy
           the CPU backend makes for its AMX / CPU_REPACK kernels (derived.weights_repack_bytes,
           doctor/derive/repack.py: on top of the mapped file with mmap, in place of the originals
           it replaces without); where llm-doctor cannot size that copy (no tensor table), the
           engine's repacked buffers (run.weights_repack_bytes) are left out of its side instead;
           where the engine printed its model buffers and no repacked one, that run had repacking
           off (`-nr`, which a log does not print) and the copy is left out of the estimate
  KV       derived.kv_bytes + derived.state_bytes (recurrent state)
  compute  derived.compute_bytes, else - for a CPU-only run - plan.cpu_compute_bytes at the
           run's settings (handed in by derive(), so this module does not import plan.py)
  output   n_vocab x 4 bytes x n_seq_max (llama_context's logits buffer: one output per sequence)
A term differs when |estimate - engine| > max(8 MiB, 5% of the engine's figure); the largest such
difference is named (`derived.alloc_off_term`, `derived.alloc_off_bytes`): on a new llama.cpp build
this is how the estimator learns it has drifted. Nothing is compared when the run ran out of memory
or crashed (the buffers printed by then are not the whole allocation). Engine terms printed as 0 (a `no_alloc` dry run
prints 0.00 MiB for model and KV buffers) are left out, not compared.

The engine's own planner, where it printed one, is compared the same way against the same buffers:
Ollama's `offload to ...` line (memory.required.kv vs the KV buffers, memory.weights.total vs the
model buffers, memory.required.partial vs everything on the GPUs) and llama.cpp's `--fit` line
(`projected to use N MiB of device memory`) vs everything on the GPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from doctor.core.facts import Facts, Source

MIB = 1 << 20
FLOOR = 8 * MIB
SHARE = 0.05


@dataclass(frozen=True, slots=True)
class Term:
    name: str  # weights | kv_cache | compute | output | gpu_total
    estimate: int
    engine: int

    @property
    def diff(self) -> int:
        return self.estimate - self.engine

    @property
    def differs(self) -> bool:
        return abs(self.diff) > max(FLOOR, SHARE * self.engine)

    def text(self) -> str:
        pct = f" ({self.diff / self.engine:+.1%})" if self.engine else ""
        return f"{self.name} {self.estimate / MIB:.1f} vs {self.engine / MIB:.1f} MiB{pct}"


def _int(facts: Facts, name: str) -> int | None:
    value = facts.value(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _sum(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _engine_terms(facts: Facts) -> dict[str, int]:
    out: dict[str, int] = {}
    weights = _sum(_int(facts, "run.weights_gpu_bytes"), _int(facts, "run.weights_host_bytes"))
    repacked = _int(facts, "run.weights_repack_bytes")
    if weights and repacked and _int(facts, "derived.weights_repack_bytes") is None:
        weights -= repacked  # a copy llm-doctor could not size: compare the rest
    kv = _int(facts, "run.kv_bytes")
    for name, value in (("weights", weights), ("kv_cache", kv), ("compute", _int(facts, "run.compute_bytes")),
                        ("output", _int(facts, "run.output_bytes"))):
        if value:  # 0 = not allocated (no_alloc) or not printed: nothing to compare
            out[name] = value
    return out


def _estimate_terms(facts: Facts, cpu_compute: Callable[[Facts], int | None] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    weights = _int(facts, "derived.weights_bytes") or _int(facts, "model.weights_bytes")
    repack = _int(facts, "derived.weights_repack_bytes") or 0
    if facts.value("config.use_mmap") is False:
        repack -= _int(facts, "derived.weights_repack_replaced_bytes") or 0
    if repack and not _int(facts, "run.weights_repack_bytes") and _int(facts, "run.weights_host_bytes"):
        repack = 0  # model buffers printed, none repacked: this run had repacking off
    if weights:
        out["weights"] = weights + repack
    kv, state = _int(facts, "derived.kv_bytes"), _int(facts, "derived.state_bytes")
    if kv is not None or state is not None:
        out["kv_cache"] = (kv or 0) + (state or 0)
    compute = _int(facts, "derived.compute_bytes")
    if compute is None and cpu_compute is not None:
        compute = cpu_compute(facts)
    if compute:
        out["compute"] = compute
    n_vocab = _int(facts, "model.n_vocab")
    if n_vocab:
        out["output"] = n_vocab * 4 * max(1, _int(facts, "config.n_parallel") or 1)
    return out


def _worst(terms: list[Term]) -> Term | None:
    off = [t for t in terms if t.differs]
    return max(off, key=lambda t: abs(t.diff)) if off else None


def derive_vs_engine(facts: Facts, cpu_compute: Callable[[Facts], int | None] | None = None) -> None:
    """`cpu_compute(facts)`: the compute buffer of a CPU-only run at its settings, asked for only when no
    derived.compute_bytes was derived (doctor/derive/ passes plan.cpu_compute_bytes: the math stays there)."""
    if facts.events("oom") or facts.events("alloc_failed") or facts.value("run.crashed") is True:
        return  # the buffers printed before the failure are not the whole allocation: the OOM rules speak
    engine = _engine_terms(facts)
    if not engine:
        return
    mine = _estimate_terms(facts, cpu_compute)
    terms = [Term(name, mine[name], engine[name]) for name in ("weights", "kv_cache", "compute", "output")
             if name in mine and name in engine]
    if terms:
        src = Source("estimate", "estimate.vs_engine", text="llm-doctor's estimate vs the buffers the engine printed")
        facts.set("derived.alloc_compare", "; ".join(t.text() for t in terms), src)
        worst = _worst(terms)
        facts.set("derived.alloc_off_term", worst.name if worst else "none", src)
        facts.set("derived.alloc_off_bytes", worst.diff if worst else 0, src)
        if worst:
            facts.set("derived.alloc_off_estimate_bytes", worst.estimate, src)
            facts.set("derived.alloc_off_engine_bytes", worst.engine, src)
    _planner(facts, engine)


def _planner(facts: Facts, engine: dict[str, int]) -> None:
    gpu = _sum(_int(facts, "run.weights_gpu_bytes"), _int(facts, "run.kv_gpu_bytes"),
               _int(facts, "run.compute_gpu_bytes"))
    terms: list[Term] = []
    name = ""
    # --fit projects the initial parameters; when it then cut the context or moved layers, what was
    # allocated is another plan's, not a miss of its projection
    fit_changed = facts.has("run.fit_short_bytes") or facts.has("run.fit_ctx_to")
    projected = None if fit_changed else _int(facts, "run.fit_projected_bytes")
    if projected and gpu:
        name = "llama.cpp --fit (projected to use)"
        terms.append(Term("gpu_total", projected, gpu))
    ollama = {"kv_cache": _int(facts, "server.ollama.memory_required_kv"),
              "weights": _int(facts, "server.ollama.memory_weights")}
    partial = _int(facts, "server.ollama.memory_required_partial")
    if any(ollama.values()) or partial:
        name = name or "Ollama (memory.required)"
        terms += [Term(k, v, engine[k]) for k, v in ollama.items() if v and k in engine]
        if partial and gpu and not projected:
            terms.append(Term("gpu_total", partial, gpu))
    if not terms:
        return
    src = Source("estimate", "estimate.vs_engine", text=f"{name} vs the buffers the engine printed")
    facts.set("derived.planner_name", name, src)
    facts.set("derived.planner_compare", "; ".join(t.text() for t in terms), src)
    worst = _worst(terms)
    facts.set("derived.planner_off_term", worst.name if worst else "none", src)
    facts.set("derived.planner_off_bytes", worst.diff if worst else 0, src)
