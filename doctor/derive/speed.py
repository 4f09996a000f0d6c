"""Is it slow? Prefill and decode held against what this machine allows for this model.

Floor: derive (pure: facts in, facts out). Strings: the Source texts and `settle` sentences below.

Three parts (issue 26):
- the model's cost per token, from the GGUF tensor table and the weight placement
  (doctor/derive/memory.py): bytes streamed per decode token per device (the token embedding is a
  row gather, not a stream; a MoE reads expert_used/expert_count of its expert tensors; the KV cache
  is read at the trace's depth), FLOPs per prefill token (2 x active parameters + attention at the
  depth) and, under partial offload, the bytes llama.cpp copies to the GPU per prefill batch (it runs
  CPU-resident weights' products on the GPU for batches of 32 tokens or more);
- the ceilings: measured on this machine (host.ram.read_bw_gbs, host.cpu.matmul_gflops, the GPU
  probe's bandwidths) or, for a pasted log, the published spec of the hardware it names (spec.*);
  CPU ceilings are scaled to the share of the cores the engine had (host.cpu.other_busy, steal);
- per phase: the time per token each bound allows (memory bandwidth of each device, compute, PCIe
  copies, per-token overhead); the ceiling is the slowest of them (a roofline), the bound is the one
  that binds, and `expected` adds them up with the efficiencies llama.cpp was measured to reach on
  each (bench/speed_table.py; docs/speed.md). Contention and threads are named as the bound where
  the evidence says they took a real share of the ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.core.facts import Facts, Source
from doctor.derive.memory import Plan, kv_bytes_per_token, place_weights
from doctor.derive.plan import plan_from_facts
from doctor.derive.source import step_src
from doctor.derive.speed_cost import Mats, cpu_mats, fallback_mats

GB = 1e9
BATCH_OFFLOAD_MIN = 32  # llama.cpp offloads CPU weights' products to the GPU for batches this large

# CPU efficiencies (bench/speed_table.py on the 2-core AMX Xeon, docs/speed.md); the per-kernel rates
# and efficiencies of the weights are doctor/derive/speed_cost.py's
EFF_CPU_BW = 0.8  # of the read kernel's bandwidth, where decode is bandwidth-bound (many cores)
EFF_CPU_DECODE = 0.8  # that typical rate against the kernels' best: the ceiling is the best
# per-token overhead on the CPU layers: graph build and sampling at 1 thread (fitted on the 1-thread bench
# rows: 0.0003 ms, nothing to tell from zero), and a barrier after each graph node that every thread
# passes: one cache-line hand-over (~0.1 us between cores) per thread per barrier, ~20 nodes a layer
CPU_LAYER_MS = 0.0
BARRIERS_PER_LAYER = 20
BARRIER_MS_PER_THREAD = 0.0001
# GPUs (no GPU here): decode time per token = bytes / (bandwidth x EFF_GPU_BW) + layers x launch cost,
# least squares over the full-offload rows the sources call normal in bench/data/public_runs.yaml
# (geerlingguy/ai-benchmarks, llama.cpp discussions; docs/speed.md): small models on big GPUs are
# launch-bound. Per backend where it had rows: CUDA 34, Vulkan 29, Metal 17, ROCm 6; all 90: eff 0.73.
EFF_GPU_BW = 0.73
EFF_GPU_COMPUTE = 0.35  # FP16 tensor throughput share reached by prefill (public llama-bench pp rows)
GPU_LAYER_MS = 0.08  # all 90 rows
GPU_LAYER_MS_BY_BACKEND = {"cuda": 0.065, "vulkan": 0.11, "rocm": 0.12, "hip": 0.12, "metal": 0.26}
EFF_PCIE = 0.8
# one core's sustained read bandwidth, for a published CPU figure at fewer threads than cores: 16.3 GB/s
# measured on one core of the AMX Xeon here (bench/results/speed_table.md); desktop cores draw more
PER_CORE_READ_GBS = 20.0
# a bound that leaves less than this share of the ceiling to the engine is named as the bound
CONTENTION_SHARE = 0.8
THREADS_GAIN = 1.25  # all cores would lift the ceiling at least this much: "threads" binds


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
    weight_type: str
    mats: Mats | None = None  # the CPU side's weights by kernel (speed_cost.py); None: from the parameters
    prefill_depth: float = 0.0  # the prompt's mean depth


@dataclass(frozen=True, slots=True)
class Ceilings:
    cpu_bw_gbs: float | None
    cpu_bw_all_gbs: float | None
    cpu_gflops: float | None  # at the engine's (decode) thread count
    cpu_gflops_all: float | None
    gpu_bw_gbs: float | None
    gpu_tflops: float | None
    pcie_gbs: float | None
    source: str  # measured | spec | unknown
    how: str
    gpu_layer_ms: float = GPU_LAYER_MS  # kernel launches per layer per token, by the engine's GPU backend


@dataclass(frozen=True, slots=True)
class Share:
    threads: int
    usable: float
    share: float  # of the engine's threads' CPU time the engine could have had (0..1)
    other_busy: float | None
    steal_pct: float | None
    usable_known: bool = True  # False: no core count read (a pasted log naming no CPU): threads not judged


@dataclass
class Verdict:
    phase: str
    tok_s: float | None
    terms: dict[str, float] = field(default_factory=dict)  # bound -> seconds per token
    expected_s: float = 0.0
    bound: str = "unknown"
    source: str = "unknown"
    settle: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ceiling(self) -> float | None:
        worst = max(self.terms.values(), default=0.0)
        return 1.0 / worst if worst > 0 else None


# -- the model's cost ---------------------------------------------------------------------------

def weight_type(facts: Facts) -> str:
    label = str(facts.value("model.file_type", "")).lower()
    for name in ("q4_0", "q8_0", "bf16", "f16", "f32"):
        if name in label:
            return name
    return "other"


def _expert_share(facts: Facts) -> float:
    """Share of the expert tensors a token does not read (0 for a dense model)."""
    n_expert, used = facts.value("model.n_expert", 0), facts.value("model.n_expert_used", 0)
    if isinstance(n_expert, int) and n_expert > 0 and isinstance(used, int) and 0 < used <= n_expert:
        return 1.0 - used / n_expert
    return 0.0


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
    prefill_depth = prompt / 2  # the prompt is evaluated from an empty cache: its mean depth
    mats = cpu_mats(facts.value("model.matmul_weights"), n, start, place.output_on_gpu, _expert_share(facts),
                    attn_per_depth / n)
    if mats is None:
        total = sum(layout.layer_bytes) + layout.output_bytes
        cpu_part = (sum(layout.layer_bytes[:start]) + (0 if place.output_on_gpu else layout.output_bytes)) / total \
            if total else 1.0
        mats = fallback_mats(weight_type(facts), active_params * cpu_part, attn_per_depth * start / n)
    pcie = 0
    if plan.gpu and 0 < place.gpu_layers < n + 1:
        pcie = int(sum(layout.layer_bytes[:start]) + (0 if place.output_on_gpu else layout.output_bytes))
    return Cost(decode_gpu_bytes=int(gpu_w + kv_gpu), decode_cpu_bytes=int(cpu_w + kv_read - kv_gpu),
                prefill_flops=2.0 * active_params + attn_per_depth * prefill_depth,
                pcie_bytes_per_batch=pcie,
                n_layer=n, gpu_layers=n - start, depth=depth, weight_type=weight_type(facts), mats=mats,
                prefill_depth=prefill_depth)


# -- the ceilings -------------------------------------------------------------------------------

def _num(facts: Facts, name: str) -> float | None:
    value = facts.value(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def ceilings(facts: Facts) -> Ceilings:
    bw, bw_all, gflops = (_num(facts, "host.ram.read_bw_gbs"), _num(facts, "host.ram.read_bw_all_gbs"),
                          _num(facts, "host.cpu.matmul_gflops"))
    gflops_all = _num(facts, "host.cpu.matmul_all_gflops")
    gpu_bw, pcie = _num(facts, "host.gpu[0].bandwidth_measured_gbs"), _num(facts, "host.gpu[0].pcie.h2d_measured_gbs")
    gpu_tflops = None
    how = []
    source = "measured" if bw or gpu_bw else "unknown"
    if bw:
        how.append(f"RAM read {bw:g} GB/s")
    if gflops:
        how.append(f"GEMM {gflops:g} GFLOP/s")
    if gpu_bw:
        how.append(f"GPU copy {gpu_bw:g} GB/s")
    kind = str(facts.value("spec.kind", "")).lower()
    spec_bw, spec_tf, spec_pcie = (_num(facts, "spec.mem_bw_gbs"), _num(facts, "spec.fp16_tflops"),
                                   _num(facts, "spec.pcie_gbs"))
    if kind in ("gpu", "apple"):
        if gpu_bw is None and spec_bw:
            gpu_bw, source = spec_bw, "spec" if source == "unknown" else source
        gpu_tflops = spec_tf
        pcie = pcie or spec_pcie
        if kind == "apple" and bw is None and spec_bw:  # unified memory: the CPU reads the same RAM
            bw = bw_all = spec_bw
        host_bw = _num(facts, "spec.host_mem_bw_gbs")  # the CPU side of a partial offload, when named
        if bw is None and host_bw:
            bw = bw_all = host_bw
    elif kind == "cpu" and bw is None and spec_bw:
        bw, bw_all, source = spec_bw, spec_bw, "spec"
        if spec_tf and gflops is None:
            gflops = gflops_all = spec_tf * 1000
        bw, gflops = _at_threads(facts, spec_bw, gflops, how)
    if source == "spec":
        device, cite = facts.value("spec.device", "the device"), facts.value("spec.source", "spec")
        how.append(f"{device}: {spec_bw:g} GB/s ({cite})")
    return Ceilings(bw, bw_all or bw, gflops, gflops_all or gflops, gpu_bw, gpu_tflops, pcie, source, "; ".join(how),
                    gpu_layer_ms(facts))


def _at_threads(facts: Facts, spec_bw: float, gflops: float | None, how: list[str]) -> tuple[float, float | None]:
    """A published CPU's figures at the engine's thread count: one core draws only its own share of the
    memory bus (PER_CORE_READ_GBS each, up to the whole spec) and of the chip's FLOPs."""
    threads = facts.value("config.n_threads")
    cores = _num(facts, "host.cpu.usable_cores") or _num(facts, "host.cpu.physical_cores") \
        or _num(facts, "spec.cores")
    if not isinstance(threads, int) or threads <= 0 or cores is None or threads >= cores:
        return spec_bw, gflops
    bw = min(spec_bw, threads * PER_CORE_READ_GBS)
    if bw < spec_bw:
        how.append(f"{threads} thread(s) draw ~{bw:g} GB/s ({PER_CORE_READ_GBS:g} GB/s a core)")
    return bw, gflops * threads / cores if gflops else None


def gpu_layer_ms(facts: Facts) -> float:
    """The launch cost per GPU layer for the engine's GPU backend (engine.backends), else all rows' fit."""
    backends = facts.value("engine.backends")
    for name in backends if isinstance(backends, list) else []:
        for key, ms in GPU_LAYER_MS_BY_BACKEND.items():
            if key in str(name).lower():
                return ms
    return GPU_LAYER_MS


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


# -- the verdict --------------------------------------------------------------------------------

def overhead_s(cost: Cost, threads: int, gpu_ms: float = GPU_LAYER_MS) -> float:
    """Per-token work that is not the weights': graph and barriers on the CPU layers (each graph node
    ends in a barrier every thread passes, a cache-line hand-over per thread), launches on the GPU's."""
    cpu_layers = cost.n_layer - cost.gpu_layers
    barrier_ms = BARRIERS_PER_LAYER * BARRIER_MS_PER_THREAD * max(0, threads - 1)
    return (cpu_layers * (CPU_LAYER_MS + barrier_ms) + cost.gpu_layers * gpu_ms) / 1000


def _mats(cost: Cost) -> Mats:
    """The CPU side's weights by kernel; from the parameters where the tensor table was not known."""
    if cost.mats is not None:
        return cost.mats
    total = cost.decode_cpu_bytes + cost.decode_gpu_bytes
    cpu_part = cost.decode_cpu_bytes / total if total else 1.0
    return fallback_mats(cost.weight_type, cost.prefill_flops / 2 * cpu_part, 0.0)


def decode_terms(cost: Cost, ceil: Ceilings, share: Share) -> tuple[dict[str, float], float, str | None]:
    """Seconds per token each bound allows, the expected total, and what is missing (or None)."""
    terms: dict[str, float] = {}
    expected = 0.0
    if cost.decode_cpu_bytes:
        if ceil.cpu_bw_gbs is None:
            return {}, 0.0, "the machine's memory read bandwidth (run llm-doctor scan on it, or name its CPU)"
        t = cost.decode_cpu_bytes / (ceil.cpu_bw_gbs * GB * share.share)
        terms["memory-bandwidth:cpu"] = t
        slowest = t / EFF_CPU_BW
        if ceil.cpu_gflops:  # the dot-product kernels' own rate on the engine's threads, attention at depth
            one_core = ceil.cpu_gflops / max(1.0, min(float(share.threads), share.usable))
            tc = _mats(cost).decode_seconds(ceil.cpu_gflops * share.share, one_core * share.share, cost.depth)
            terms["compute:cpu"] = tc * EFF_CPU_DECODE
            slowest = max(slowest, tc)
        expected += slowest
    if cost.decode_gpu_bytes:
        if ceil.gpu_bw_gbs is None:
            return {}, 0.0, "the GPU's name or its memory bandwidth (a device line of the log, or scan --bench)"
        t = cost.decode_gpu_bytes / (ceil.gpu_bw_gbs * GB)
        terms["memory-bandwidth:gpu"] = t
        expected += t / EFF_GPU_BW
    over = overhead_s(cost, share.threads, ceil.gpu_layer_ms) / (share.share if cost.decode_cpu_bytes else 1.0)
    if over > 0:
        terms["per-token-overhead"] = over
    expected += over
    return terms, expected, None


def prefill_terms(cost: Cost, ceil: Ceilings, share: Share, batch: int) -> tuple[dict[str, float], float, str | None]:
    terms: dict[str, float] = {}
    expected = 0.0
    cpu_share = 1 - cost.gpu_layers / cost.n_layer
    offloaded = cost.gpu_layers > 0
    all_on_gpu = offloaded and batch >= BATCH_OFFLOAD_MIN  # CPU weights are copied over and run there
    on_gpu_flops = cost.prefill_flops if all_on_gpu else cost.prefill_flops * (1 - cpu_share)
    cpu_flops = cost.prefill_flops - on_gpu_flops
    if cpu_flops > 0:
        gflops = gflops_at(ceil, share)
        if gflops is None:
            return {}, 0.0, "the machine's matrix-multiply throughput (run llm-doctor scan on it, or name its CPU)"
        t = cpu_flops / (gflops * 1e9 * share.share)
        terms["compute:cpu"] = t
        expected += _mats(cost).prefill_seconds(gflops * share.share, batch, cost.prefill_depth)
    if on_gpu_flops > 0:
        if ceil.gpu_tflops is None:
            return {}, 0.0, "the GPU's name (its FP16 throughput comes from the published spec)"
        t = on_gpu_flops / (ceil.gpu_tflops * 1e12)
        terms["compute:gpu"] = t
        expected += t / EFF_GPU_COMPUTE
    if cost.pcie_bytes_per_batch and batch >= BATCH_OFFLOAD_MIN:
        if ceil.pcie_gbs is None:
            return {}, 0.0, "the GPU's host-to-device copy bandwidth (PCIe generation and width, or scan --bench)"
        t = cost.pcie_bytes_per_batch / (ceil.pcie_gbs * GB) / batch
        terms["pcie"] = t
        expected += t / EFF_PCIE
    over = overhead_s(cost, share.threads, ceil.gpu_layer_ms) / max(1, batch)
    if over > 0:
        terms["per-token-overhead"] = over
    expected += over
    return terms, expected, None


def gflops_at(ceil: Ceilings, share: Share) -> float | None:
    """GEMM throughput at the phase's thread count: all cores' figure from the usable count on, the
    engine's below it (measured at the decode thread count), scaled by threads in between."""
    if ceil.cpu_gflops is None:
        return None
    if share.threads >= share.usable and ceil.cpu_gflops_all:
        return ceil.cpu_gflops_all
    return ceil.cpu_gflops


def _binding(verdict: Verdict, cost: Cost, ceil: Ceilings, share: Share) -> str:
    """The bound to name: contention or threads where they took a real share, else the slowest term."""
    if not verdict.terms:
        return "unknown"
    worst = max(verdict.terms, key=lambda k: verdict.terms[k])
    cpu_side = worst.endswith(":cpu") or (worst == "per-token-overhead" and cost.gpu_layers < cost.n_layer)
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
        gain = share.usable / share.threads
        if worst == "memory-bandwidth:cpu" and ceil.cpu_bw_gbs and ceil.cpu_bw_all_gbs:
            gain = ceil.cpu_bw_all_gbs / ceil.cpu_bw_gbs
        if gain >= THREADS_GAIN:
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
        v.bound = _binding(v, cost, ceil, share)
        out.append((v, share))
    return out


KV_FULL_PCT = 90.0  # a KV pool this full turns more concurrency into preemption, not throughput
CORES_BUSY = 0.9  # load per usable core from which the cores count as saturated


def derive_capacity(facts: Facts) -> None:
    """derived.capacity_bound: what holds a serving engine's throughput once its slots are busy."""
    running, slots = facts.value("server.running_max"), facts.value("config.n_parallel")
    if not isinstance(running, int) and not isinstance(facts.value("server.waiting_max"), int):
        return
    kv = _num(facts, "server.kv_usage_max")
    if kv is not None and kv >= KV_FULL_PCT:
        facts.set("derived.capacity_bound", "kv", _src(f"KV cache usage up to {kv:g}%"))
        return
    gpus, layers = facts.value("host.gpu.count"), facts.value("config.n_gpu_layers")
    cpu_only = gpus == 0 or layers == 0
    threads, usable = facts.value("config.n_threads"), _num(facts, "host.cpu.usable_cores")
    load = _num(facts, "host.cpu.load_per_core")
    if cpu_only and ((isinstance(threads, int) and usable and threads >= usable) or (load and load >= CORES_BUSY)):
        why = f"{threads} threads on {usable:g} usable cores" if isinstance(threads, int) and usable \
            else f"load {load:g} per usable core"
        facts.set("derived.capacity_bound", "cores", _src(f"the engine runs on the CPU only; {why}"))
        return
    if isinstance(running, int) and isinstance(slots, int) and running >= slots:
        facts.set("derived.capacity_bound", "slots", _src(f"{running} requests ran on {slots} slot(s)"))


def derive_speed(facts: Facts) -> None:
    """Set derived.* cost facts and speed.<phase>.* for each phase with a measured speed."""
    derive_capacity(facts)
    plan = plan_from_facts(facts)
    if plan is None:
        return
    prompt = facts.value("run.prompt_tokens")
    decoded = facts.value("run.decode_tokens")
    prompt = prompt if isinstance(prompt, int) and prompt > 0 else 0
    depth = prompt + (decoded // 2 if isinstance(decoded, int) and decoded > 0 else 0)
    cost = model_cost(facts, plan, depth, prompt or 1)
    if cost is None:
        return
    how = f"GGUF tensor table, {cost.gpu_layers}/{cost.n_layer} layers on the GPU, KV at depth {depth}"
    facts.set("derived.decode_bytes_per_token_gpu", cost.decode_gpu_bytes, _src(how))
    facts.set("derived.decode_bytes_per_token_cpu", cost.decode_cpu_bytes, _src(how))
    facts.set("derived.prefill_flops_per_token", round(cost.prefill_flops), _src(
        "2 x active parameters (no embedding gather, routed experts only) + attention at the prompt's depth"))
    facts.set("derived.speed_depth", depth, _src("the trace's prompt + half its decode"))
    if cost.pcie_bytes_per_batch:
        facts.set("derived.prefill_pcie_bytes_per_batch", cost.pcie_bytes_per_batch,
                  _src("CPU-resident weights llama.cpp copies to the GPU for each batch of 32+ tokens"))
    if not (_num(facts, "run.prefill_tps") or _num(facts, "run.decode_tps")):
        return
    ceil = ceilings(facts)
    for v, share in judge(facts, cost, ceil):
        if v.tok_s is not None:
            set_verdict(facts, v, ceil, share)


def set_verdict(facts: Facts, v: Verdict, ceil: Ceilings, share: Share) -> None:
    p = f"speed.{v.phase}"
    facts.set(f"{p}.tok_s", round(v.tok_s or 0.0, 2), _src(f"run.{v.phase}_tps"))
    facts.set(f"{p}.ceiling_source", v.source, _src(ceil.how or "no ceiling known"))
    ceiling = v.ceiling
    if ceiling is None or v.settle:
        facts.set(f"{p}.bound", "unknown", _src("no ceiling for this placement"))
        facts.set(f"{p}.settle", v.settle or "the machine's ceilings", _src("what the verdict lacks"))
        return
    terms = ", ".join(f"{k} {1 / s:,.0f}" for k, s in sorted(v.terms.items(), key=lambda kv: -kv[1]))
    on_share = f" on {share.share * 100:.0f}% of the cores" if share.share < 0.999 else ""
    facts.set(f"{p}.ceiling_tok_s", round(ceiling, 2), _src(f"tok/s each bound allows: {terms}{on_share}; {ceil.how}"))
    facts.set(f"{p}.fraction", round((v.tok_s or 0.0) / ceiling, 3), _src(f"{v.tok_s:g} / {ceiling:.1f} tok/s"))
    facts.set(f"{p}.bound", v.bound, _src("; ".join(v.notes) or f"the slowest bound: {terms}"))
    if v.expected_s > 0:
        facts.set(f"{p}.expected_tok_s", round(1 / v.expected_s, 2), _src(
            "each bound's time at the efficiency llama.cpp reaches on it (docs/speed.md), added up"))
