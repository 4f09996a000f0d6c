"""Is it slow? Prefill and decode held against what this machine allows for this model.

Floor: derive (pure: facts in, facts out). Strings: the Source texts and `settle` sentences below.

Three parts (issues 26 and 36):
- the model's cost per token, from the GGUF tensor table and the weight placement
  (doctor/derive/memory.py): bytes streamed per decode token per device (the token embedding is a
  row gather, not a stream; a MoE reads expert_used/expert_count of its expert tensors; the KV cache
  is read at the trace's depth), its weights by type and op (speed_cost.py), FLOPs per prefill
  token and, under partial offload, the bytes llama.cpp copies to the GPU per prefill batch;
- the bounds (speed_ceilings.py): measured on this machine - memory read bandwidth, the engine's own
  kernel rates for the model's weight types at the planned threads (the kernel probe), the GPU
  probe's bandwidths - or another machine's published peaks; CPU bounds are scaled to the share of
  the cores the engine had (host.cpu.other_busy, steal, its own CPU time);
- per phase: the time per token each bound allows; the ceiling is the slowest of them (a roofline,
  each term a lower bound on the time: memory bandwidth, the kernels at their best, the per-layer
  cost, PCIe copies), the bound is the one that binds, and `expected` adds the probe's typical
  figures up. A measured speed above its ceiling by more than noise (CEILING_NOISE) is a defect of
  the ceiling, never a verdict: the bound is `ceiling-misfit` and the term that did not fit is named.
  Contention is named where the engine had less than CONTENTION_SHARE of its cores, threads where
  the kernel probe measured all cores at least THREADS_GAIN faster (a published CPU: its bandwidth).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.core.facts import Facts, Source
from doctor.derive.memory import Plan, kv_bytes_per_token, place_weights
from doctor.derive.plan import plan_from_facts
from doctor.derive.source import step_src
from doctor.derive.speed_ceilings import Ceilings, ceilings, gpu_peak, gpu_unit, missing_kernels
from doctor.derive.speed_cost import (
    BEST,
    TYPICAL,
    Mats,
    attention_seconds,
    barrier_seconds,
    cpu_mats,
    decode_cells,
    decode_seconds,
    fallback_mats,
    main_type,
    prefill_cells,
    prefill_seconds,
)

GB = 1e9
BATCH_OFFLOAD_MIN = 32  # llama.cpp offloads CPU weights' products to the GPU for batches this large
# GPUs (no GPU here): bandwidth and matrix-unit shares llama.cpp reaches, from public rows (docs/speed.md)
EFF_GPU_BW = 0.73
EFF_GPU_COMPUTE = 0.35  # of the published peak of the unit the prompt runs on
EFF_PCIE = 0.8
CONTENTION_SHARE = 0.8  # the engine had less than this share of the cores it asked for: contention
THREADS_GAIN = 1.10  # the probe says all cores are this much faster: "threads" binds (issue 36)
SPEC_THREADS_GAIN = 1.25  # a published CPU: all cores would draw this much more bandwidth
CEILING_NOISE = 1.05  # a measured speed this far above its ceiling: the ceiling does not fit
MISFIT = "ceiling-misfit"


def _src(text: str) -> Source:
    return step_src("speed", text[:300])


@dataclass(frozen=True, slots=True)
class Cost:
    """What one token costs this model under this placement."""

    decode_gpu_bytes: int
    decode_cpu_bytes: int
    prefill_flops: float  # per token, at the prompt's mean depth
    pcie_bytes_per_batch: int  # 0 unless partially offloaded
    n_layer: int
    gpu_layers: int  # repeating layers on the GPU
    depth: int
    weight_type: str  # the file's main ggml type (Q4_K, F16, ...) or "other"
    mats: Mats | None = None  # the CPU side's weights by type and op (speed_cost.py); None: from the parameters
    prefill_depth: float = 0.0  # the prompt's mean depth
    start: int = 0  # cells already in the cache when the prompt came (llama-bench -d, a cached prefix)
    prompt: int = 1
    steps: int = 1  # decode steps timed
    cells: int = 1 << 20  # the context's cells (n_ctx padded): the most llama.cpp attends over
    ubatch: int = 512
    types: frozenset[str] = frozenset()  # every matrix type (the GPU's unit for the prompt)


@dataclass(frozen=True, slots=True)
class Share:
    threads: int
    usable: float
    share: float  # of the engine's threads' CPU time the engine could have had (0..1)
    other_busy: float | None
    steal_pct: float | None
    usable_known: bool = True  # False: no core count read (a pasted log naming no CPU): threads not judged

    @property
    def measured_at(self) -> int:
        """The thread count the kernel probe measured for this run: the engine's, at most the cores."""
        return max(1, min(self.threads, int(self.usable)))


@dataclass
class Verdict:
    phase: str
    tok_s: float | None
    terms: dict[str, float] = field(default_factory=dict)  # bound -> seconds per token
    expected_s: float = 0.0  # 0: unknown
    bound: str = "unknown"
    source: str = "unknown"
    settle: str | None = None
    notes: list[str] = field(default_factory=list)
    misfit_term: str | None = None
    threads_gain: float | None = None  # all usable cores against the engine's threads, by the kernel probe

    @property
    def ceiling(self) -> float | None:
        worst = max(self.terms.values(), default=0.0)
        return 1.0 / worst if worst > 0 else None


# -- the model's cost ---------------------------------------------------------------------------

def weight_type(facts: Facts) -> str:
    return main_type(str(facts.value("model.file_type", ""))) or "other"


def _expert_share(facts: Facts) -> float:
    """Share of the expert tensors a token does not read (0 for a dense model)."""
    n_expert, used = facts.value("model.n_expert", 0), facts.value("model.n_expert_used", 0)
    if isinstance(n_expert, int) and n_expert > 0 and isinstance(used, int) and 0 < used <= n_expert:
        return 1.0 - used / n_expert
    return 0.0


def _int(facts: Facts, name: str, default: int) -> int:
    value = facts.value(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def model_cost(facts: Facts, plan: Plan, depth: int, prompt: int) -> Cost | None:
    layout = plan.layout
    n = layout.n_layer
    if n <= 0:
        return None
    place = place_weights(layout, plan.n_gpu_layers, plan.gpu)
    start = min(place.first_gpu_layer, n)
    experts = facts.value("model.expert_bytes", 0)
    skip = _expert_share(facts) * (experts / n if isinstance(experts, int) else 0)
    active = [max(0.0, b - skip) for b in layout.layer_bytes]
    # the lm head: output.weight, or the token embedding itself when tied (read in full as a matrix)
    head = layout.output_bytes + (layout.input_bytes if layout.output_tied else 0)
    gpu_w = sum(active[start:]) + (head if place.output_on_gpu else 0)
    cpu_w = sum(active[:start]) + (0 if place.output_on_gpu else head)
    kv_tok = kv_bytes_per_token(plan.kv, plan.type_k, plan.type_v) if plan.kv is not None else 0.0
    kv_read = kv_tok * max(0, depth)
    kv_gpu = kv_read * (n - start) / n if plan.offload_kqv else 0.0
    # FLOPs: 2 per active parameter (the embedding gather excluded) + attention (QK and AV)
    params = facts.value("model.n_params")
    weights = facts.value("model.weights_bytes") or layout.total
    n_vocab, n_embd = facts.value("model.n_vocab"), facts.value("model.n_embd")
    if not isinstance(params, int) or params <= 0:
        return None
    gather = n_vocab * n_embd if isinstance(n_vocab, int) and isinstance(n_embd, int) and not layout.output_tied else 0
    unused = params * (experts / weights) * _expert_share(facts) if isinstance(experts, int) and weights else 0
    active_params = max(0.0, params - gather - unused)
    n_head, head_dim = facts.value("model.n_head"), facts.value("model.head_dim_k")
    if not isinstance(head_dim, int) and isinstance(n_embd, int) and isinstance(n_head, int) and n_head:
        head_dim = n_embd // n_head
    attn_per_depth = 4.0 * n * n_head * head_dim if isinstance(n_head, int) and isinstance(head_dim, int) else 0.0
    begin = _int(facts, "run.depth_start", 0) if facts.value("run.depth_start") else 0
    prefill_depth = begin + prompt / 2  # the prompt is evaluated from the cells already there
    mats = cpu_mats(facts.value("model.matmul_weights"), n, start, place.output_on_gpu, _expert_share(facts))
    rows = facts.value("model.matmul_weights")
    types = frozenset(str(r[2]).upper() for r in rows if isinstance(r, list) and len(r) == 6) \
        if isinstance(rows, list) else frozenset({weight_type(facts)})
    if mats is None:
        total = sum(layout.layer_bytes) + layout.output_bytes
        cpu_part = (sum(layout.layer_bytes[:start]) + (0 if place.output_on_gpu else layout.output_bytes)) / total \
            if total else 1.0
        mats = fallback_mats(weight_type(facts), active_params * cpu_part, start)
    pcie = 0
    if plan.gpu and 0 < place.gpu_layers < n + 1:
        pcie = int(sum(layout.layer_bytes[:start]) + (0 if place.output_on_gpu else layout.output_bytes))
    decoded = facts.value("run.decode_tokens")
    return Cost(decode_gpu_bytes=int(gpu_w + kv_gpu), decode_cpu_bytes=int(cpu_w + kv_read - kv_gpu),
                prefill_flops=2.0 * active_params + attn_per_depth * prefill_depth,
                pcie_bytes_per_batch=pcie, n_layer=n, gpu_layers=n - start, depth=depth,
                weight_type=weight_type(facts), mats=mats, prefill_depth=prefill_depth, start=begin,
                prompt=max(1, prompt), steps=decoded if isinstance(decoded, int) and decoded > 0 else 1,
                cells=(_int(facts, "config.n_ctx", 1 << 20) + 255) // 256 * 256,
                ubatch=_int(facts, "config.n_ubatch", 512), types=types)


# -- the shares of the cores --------------------------------------------------------------------

def _num(facts: Facts, name: str) -> float | None:
    value = facts.value(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def core_share(facts: Facts, phase: str = "decode") -> Share:
    """The engine's threads for the phase (prefill runs n_threads_batch) and the share of them the
    cores gave it: what the engine's own CPU time says where measured, else what others left."""
    threads = facts.value("config.n_threads")
    known = _num(facts, "host.cpu.usable_cores") or _num(facts, "host.cpu.logical_cores") or _num(facts, "spec.cores")
    usable = known or 1.0
    threads = threads if isinstance(threads, int) and threads > 0 else max(1, int(usable))
    batch = facts.value("config.n_threads_batch")
    if phase == "prefill" and isinstance(batch, int) and batch > 0:
        threads = batch
    other, steal = facts.value("host.cpu.other_busy"), facts.value("host.cpu.steal_pct")
    logical = _num(facts, "host.cpu.logical_cores") or usable
    avail = usable
    if isinstance(other, int | float):
        avail -= float(other) * logical
    if isinstance(steal, int | float):
        avail *= max(0.0, 1 - float(steal) / 100)
    want = min(float(threads), usable)
    share = max(0.05, min(1.0, avail / want)) if want > 0 else 1.0
    engine = _num(facts, "host.cpu.engine_cores")
    if engine is not None and want > 0:  # what the engine actually got, where it was measured
        share = max(0.05, min(1.0, engine / want))
    return Share(threads, usable, share, other if isinstance(other, int | float) else None,
                 steal if isinstance(steal, int | float) else None, usable_known=known is not None)


# -- the terms ----------------------------------------------------------------------------------

def _mats(cost: Cost) -> Mats:
    if cost.mats is not None:
        return cost.mats
    total = cost.decode_cpu_bytes + cost.decode_gpu_bytes
    cpu_part = cost.decode_cpu_bytes / total if total else 1.0
    return fallback_mats(cost.weight_type, cost.prefill_flops / 2 * cpu_part, cost.n_layer - cost.gpu_layers)


def cpu_decode(cost: Cost, ceil: Ceilings, threads: int, which: int) -> tuple[float, float, float] | None:
    """(the kernels' time with attention, the per-layer time, the bandwidth time) of one decode token on
    the CPU layers at `threads`, from the kernel probe; None where it has no figure for them."""
    if ceil.kernels is None or ceil.cpu_bw_gbs is None:
        return None
    mats = _mats(cost)
    kernels = decode_seconds(mats, ceil.kernels, threads, which)
    cells = decode_cells(cost.start + cost.prompt, cost.steps, cost.cells)
    attention = attention_seconds(ceil.kernels, threads, mats.cpu_layers, cells, "decode", which)
    if kernels is None or attention is None:
        return None
    return kernels + attention[0], attention[1], cost.decode_cpu_bytes / (ceil.cpu_bw_gbs * GB)


def cpu_prefill(cost: Cost, ceil: Ceilings, threads: int, batch: int, which: int) -> float | None:
    """One prompt token's time on the CPU layers at `threads` (products, the head per batch, attention)."""
    if ceil.kernels is None:
        return None
    mats = _mats(cost)
    kernels = prefill_seconds(mats, ceil.kernels, threads, batch, which)
    cells = prefill_cells(cost.start, cost.prompt, min(batch, cost.ubatch), cost.cells)
    attention = attention_seconds(ceil.kernels, threads, mats.cpu_layers, cells, "prefill", which)
    if kernels is None or attention is None:
        return None
    return kernels + attention[0]


def decode_terms(cost: Cost, ceil: Ceilings, share: Share) -> tuple[dict[str, float], float, str | None]:
    """Seconds per token each bound allows, the expected total (0: unknown), and what is missing (or None)."""
    terms: dict[str, float] = {}
    expected: float | None = 0.0
    # the GPU layers' launches (fitted per backend on public rows: the one ceiling term that is a fit, not a
    # bound - a run faster than it is a misfit, said so) and the CPU layers' measured per-layer cost
    over = cost.gpu_layers * ceil.gpu_layer_ms / 1000
    if cost.decode_cpu_bytes:
        if ceil.cpu_bw_gbs is None:
            return {}, 0.0, "the machine's memory read bandwidth (run llm-doctor scan on it, or name its CPU)"
        s = share.share
        terms["memory-bandwidth:cpu"] = cost.decode_cpu_bytes / (ceil.cpu_bw_gbs * GB * s)
        best, typ = (cpu_decode(cost, ceil, share.measured_at, w) for w in (BEST, TYPICAL))
        if best is not None and typ is not None:
            terms["compute:cpu"] = best[0] / s
            over += best[1] / s
            expected = (max(typ[0], typ[2]) + typ[1]) / s
        else:
            expected = None
            if ceil.kernels is None:  # a published CPU: thread barriers, each weight a multiply-add at its peak
                over += barrier_seconds(cost.n_layer - cost.gpu_layers, share.threads) / s
                if ceil.cpu_peak_gflops:
                    weights = sum(w for _, _, w in _mats(cost).decode)
                    terms["compute:cpu"] = weights / (ceil.cpu_peak_gflops * 1e9 / 2) / s
    if cost.decode_gpu_bytes:
        if ceil.gpu_bw_gbs is None:
            return {}, 0.0, "the GPU's name or its memory bandwidth (a device line of the log, or scan --bench)"
        t = cost.decode_gpu_bytes / (ceil.gpu_bw_gbs * GB)
        terms["memory-bandwidth:gpu"] = t
        if expected is not None:
            expected += t / EFF_GPU_BW + cost.gpu_layers * ceil.gpu_layer_ms / 1000
    if over > 0:
        terms["per-token-overhead"] = over
    return terms, expected or 0.0, None


def prefill_terms(cost: Cost, ceil: Ceilings, share: Share, batch: int) -> tuple[dict[str, float], float, str | None]:
    terms: dict[str, float] = {}
    expected: float | None = 0.0
    cpu_share = 1 - cost.gpu_layers / cost.n_layer
    offloaded = cost.gpu_layers > 0
    all_on_gpu = offloaded and batch >= BATCH_OFFLOAD_MIN  # CPU weights are copied over and run there
    on_gpu_flops = cost.prefill_flops if all_on_gpu else cost.prefill_flops * (1 - cpu_share)
    cpu_flops = cost.prefill_flops - on_gpu_flops
    if cpu_flops > 0:
        s = share.share
        best, typ = (cpu_prefill(cost, ceil, share.measured_at, batch, w) for w in (BEST, TYPICAL))
        if best is not None and typ is not None:
            terms["compute:cpu"] = best / s
            expected = typ / s
        elif ceil.cpu_peak_gflops:
            terms["compute:cpu"] = cpu_flops / (ceil.cpu_peak_gflops * 1e9) / s
            expected = None
        elif ceil.kernels is not None or ceil.source == "measured":
            return {}, 0.0, missing_kernels(ceil, "prefill", share.measured_at,
                                            tuple(t for t, _ in _mats(cost).head))
        else:
            return {}, 0.0, "the CPU's name or its measured kernels (run llm-doctor scan on it)"
    if on_gpu_flops > 0:
        unit = gpu_unit(set(cost.types) or {cost.weight_type}, ceil.gpu_kind)
        peak, used = gpu_peak(ceil, unit)
        if peak is None:
            return {}, 0.0, (f"the GPU's published {unit} matrix throughput (the unit llama.cpp runs this model's "
                             "prompt on), which the spec table does not give")
        t = on_gpu_flops / (peak * 1e12)
        terms[f"compute:gpu:{used}"] = t
        if expected is not None:
            expected += t / EFF_GPU_COMPUTE
    if cost.pcie_bytes_per_batch and batch >= BATCH_OFFLOAD_MIN:
        if ceil.pcie_gbs is None:
            return {}, 0.0, "the GPU's host-to-device copy bandwidth (PCIe generation and width, or scan --bench)"
        t = cost.pcie_bytes_per_batch / (ceil.pcie_gbs * GB) / batch
        terms["pcie"] = t
        if expected is not None:
            expected += t / EFF_PCIE
    over = cost.gpu_layers * ceil.gpu_layer_ms / 1000 / max(1, batch)  # the launches, once per batch
    if over > 0:
        terms["per-token-overhead"] = over
        if expected is not None:
            expected += over
    return terms, expected or 0.0, None


def thread_gain(cost: Cost, ceil: Ceilings, share: Share, phase: str, batch: int) -> tuple[float, str] | None:
    """How much faster the kernel probe says all usable cores are than the engine's threads (and how it
    says so), for the phase; None where it did not measure both."""
    usable = int(share.usable)
    if ceil.kernels is None or share.threads >= usable:
        return None
    at: list[float] = []
    for t in (share.measured_at, usable):
        if phase == "decode":
            got = cpu_decode(cost, ceil, t, TYPICAL)
            at += [max(got[0], got[2]) + got[1]] if got else []
        else:
            one = cpu_prefill(cost, ceil, t, batch, TYPICAL)
            at += [one] if one else []
    if len(at) != 2 or at[1] <= 0:
        return None
    return at[0] / at[1], (f"the kernel probe: {share.threads} thread(s) {1 / at[0]:,.1f} tok/s, {usable} threads "
                           f"{1 / at[1]:,.1f} tok/s")


# -- the verdict --------------------------------------------------------------------------------

def _binding(verdict: Verdict, cost: Cost, ceil: Ceilings, share: Share, gain: tuple[float, str] | None) -> str:
    """The bound to name: the misfit of a ceiling below the measured speed, contention or threads where
    the evidence says they took a real share, else the slowest term."""
    cpu_run = cost.gpu_layers < cost.n_layer
    if not verdict.terms:
        return "contention" if cpu_run and share.share < CONTENTION_SHARE else "unknown"
    worst = max(verdict.terms, key=lambda k: verdict.terms[k])
    ceiling = verdict.ceiling
    cpu_side = worst.endswith(":cpu") or (worst == "per-token-overhead" and cpu_run)
    if verdict.tok_s and ceiling and verdict.tok_s > ceiling * CEILING_NOISE:
        verdict.misfit_term = worst
        verdict.notes.append(f"{verdict.tok_s:g} tok/s measured is {verdict.tok_s / ceiling:.0%} of the {ceiling:,.1f} "
                             f"the {worst} bound allows: that bound does not fit this machine")
        if not (cpu_side and share.share < CONTENTION_SHARE):
            return MISFIT
        # on shared cores a ceiling scaled to the engine's share is approximate: the shared cores are the finding
    if cpu_side and share.share < CONTENTION_SHARE:
        verdict.notes.append(f"the engine had {share.share * 100:.0f}% of the cores it asked for")
        return "contention"
    if not share.usable_known:
        return worst
    if cpu_side and share.threads > share.usable:
        verdict.notes.append(f"{share.threads} threads on {share.usable:g} usable cores")
        return "threads"
    if (cpu_side and share.threads < share.usable and share.other_busy is not None
            and share.other_busy * share.usable >= share.usable - share.threads):
        # the cores the engine left idle were not idle: other processes used them, more threads would compete
        verdict.notes.append(f"other processes used {share.other_busy * 100:.0f}% of the cores")
        return "contention"
    if cpu_side and share.threads < share.usable:
        if gain is not None and gain[0] >= THREADS_GAIN:
            verdict.notes.append(f"{share.threads} of {share.usable:g} usable cores in use; {gain[1]}")
            return "threads"
        if ceil.source == "spec" and ceil.cpu_bw_gbs and ceil.cpu_bw_all_gbs \
                and ceil.cpu_bw_all_gbs / ceil.cpu_bw_gbs >= SPEC_THREADS_GAIN:
            verdict.notes.append(f"{share.threads} of {share.usable:g} usable cores in use")
            return "threads"
    return worst


def judge(facts: Facts, cost: Cost, ceil: Ceilings) -> list[tuple[Verdict, Share]]:
    out = []
    prompt = facts.value("run.prompt_tokens")
    n_batch = facts.value("config.n_ubatch") or facts.value("config.n_batch") or 512
    batch = min(int(n_batch), int(prompt)) if isinstance(prompt, int) and prompt > 0 else int(n_batch)
    for phase in ("prefill", "decode"):
        tok_s = _num(facts, f"run.{phase}_tps")
        share = core_share(facts, phase)
        if phase == "decode":
            terms, expected, missing = decode_terms(cost, ceil, share)
        else:
            terms, expected, missing = prefill_terms(cost, ceil, share, batch)
        v = Verdict(phase, tok_s, terms, expected, source=ceil.source if not missing else "unknown", settle=missing)
        if phase == "decode" and not missing and (ceil.kernels is not None or ceil.kernel_missing) \
                and cost.decode_cpu_bytes and "compute:cpu" not in terms:
            v.notes.append("no kernel figures (compute:cpu left out): "
                           + missing_kernels(ceil, "decode", share.measured_at))
        gain = thread_gain(cost, ceil, share, phase, batch)
        v.threads_gain = gain[0] if gain else None
        v.bound = _binding(v, cost, ceil, share, gain)
        out.append((v, share))
    return out


def derive_speed(facts: Facts) -> None:
    """Set derived.* cost facts and speed.<phase>.* for each phase with a measured speed."""
    plan = plan_from_facts(facts)
    if plan is None:
        return
    prompt = facts.value("run.prompt_tokens")
    decoded = facts.value("run.decode_tokens")
    prompt = prompt if isinstance(prompt, int) and prompt > 0 else 0
    begin = _int(facts, "run.depth_start", 0) if facts.value("run.depth_start") else 0
    depth = begin + prompt + (decoded // 2 if isinstance(decoded, int) and decoded > 0 else 0)
    cost = model_cost(facts, plan, depth, prompt or 1)
    if cost is None:
        return
    how = f"GGUF tensor table, {cost.gpu_layers}/{cost.n_layer} layers on the GPU, KV at depth {depth}"
    facts.set("derived.decode_bytes_per_token_gpu", cost.decode_gpu_bytes, _src(how))
    facts.set("derived.decode_bytes_per_token_cpu", cost.decode_cpu_bytes, _src(how))
    facts.set("derived.prefill_flops_per_token", round(cost.prefill_flops), _src(
        "2 x active parameters (no embedding gather, routed experts only) + attention at the prompt's depth"))
    facts.set("derived.speed_depth", depth, _src("the cells cached before the prompt + the prompt + half the decode"))
    if cost.pcie_bytes_per_batch:
        facts.set("derived.prefill_pcie_bytes_per_batch", cost.pcie_bytes_per_batch,
                  _src("CPU-resident weights llama.cpp copies to the GPU for each batch of 32+ tokens"))
    if not (_num(facts, "run.prefill_tps") or _num(facts, "run.decode_tps")):
        return
    ceil = ceilings(facts)
    for v, share in judge(facts, cost, ceil):
        if v.tok_s is not None:
            set_verdict(facts, v, ceil, share, cost.gpu_layers < cost.n_layer)


def set_verdict(facts: Facts, v: Verdict, ceil: Ceilings, share: Share, cpu_run: bool = True) -> None:
    p = f"speed.{v.phase}"
    facts.set(f"{p}.tok_s", round(v.tok_s or 0.0, 2), _src(f"run.{v.phase}_tps"))
    facts.set(f"{p}.ceiling_source", v.source, _src(ceil.how or "no ceiling known"))
    shared = cpu_run and (share.share < CONTENTION_SHARE or v.bound == "contention")
    if not facts.has("speed.cores_shared") or shared:
        facts.set("speed.cores_shared", shared, _src(
            f"the engine had {share.share * 100:.0f}% of the {share.threads} core(s) it asked for"
            + (f"; other processes used {share.other_busy * 100:.0f}% of the cores" if share.other_busy else "")))
    ceiling = v.ceiling
    if ceiling is None or v.settle:
        bound = "contention" if v.bound == "contention" else "unknown"
        facts.set(f"{p}.bound", bound, _src("; ".join(v.notes) or "no ceiling for this placement"))
        facts.set(f"{p}.settle", v.settle or "the machine's ceilings", _src("what the verdict lacks"))
        return
    terms = ", ".join(f"{k} {1 / s:,.0f}" for k, s in sorted(v.terms.items(), key=lambda kv: -kv[1]))
    on_share = f" on {share.share * 100:.0f}% of the cores" if share.share < 0.999 else ""
    facts.set(f"{p}.ceiling_tok_s", round(ceiling, 2), _src(f"tok/s each bound allows: {terms}{on_share}; {ceil.how}"))
    facts.set(f"{p}.fraction", round((v.tok_s or 0.0) / ceiling, 3), _src(f"{v.tok_s:g} / {ceiling:.1f} tok/s"))
    facts.set(f"{p}.bound", v.bound, _src("; ".join(v.notes) or f"the slowest bound: {terms}"))
    if v.misfit_term:
        facts.set(f"{p}.misfit_term", v.misfit_term, _src("; ".join(v.notes)))
    if v.threads_gain is not None:
        facts.set(f"{p}.threads_gain", round(v.threads_gain, 2), _src(
            f"the kernel probe's typical times for this model at {share.threads} thread(s) and on all "
            f"{share.usable:g} usable cores"))
    if v.expected_s > 0:
        facts.set(f"{p}.expected_tok_s", round(1 / v.expected_s, 2), _src(
            "the engine's typical kernel times on this machine for this model's shapes, added up (docs/speed.md)"
            if ceil.kernels is not None else "each bound's time at the share llama.cpp reaches on it (docs/speed.md)"))
