"""The plan from the facts: the model's shape and layout, the settings, and the memory budget they need.

Reads the facts the sources gave (model.*, config.*, host.*) into doctor/derive/memory.py's dataclasses,
then sets what the memory model says of them: KV bytes (derived.kv_*), the budget per device, fit
and room, the largest n_gpu_layers and context that fit, and the sum that fails term by term
(doctor/derive/split.py). Each fact's source is an `estimate` that says how it was computed.
"""

from __future__ import annotations

from typing import Any

import doctor.derive.arch as estimate_arch
import doctor.derive.mmproj as estimate_mmproj
import doctor.derive.repack as estimate_repack
from doctor.core import engines
from doctor.core.facts import Facts
from doctor.core.vocab import KV_TYPES, MAX_LAYERS
from doctor.derive.context import asked_ctx
from doctor.derive.memory import (
    GPU_OVERHEAD_HOW,
    GPU_RUNTIME_OVERHEAD,
    HOST_CACHE_MARGIN,
    HOST_MAPPED_MINIMUM,
    HOST_OVERHEAD_HOW,
    HOST_PRIVATE_OVERHEAD,
    HOST_RUNTIME_OVERHEAD,
    KV_UNMODELLED,
    MAX_GPUS,
    MIB,
    Budget,
    ComputeShape,
    KvShape,
    Plan,
    WeightLayout,
    act_row_bytes,
    budget,
    compute_bytes,
    context_params,
    kv_bytes,
    kv_bytes_per_token,
    kv_cells,
    max_ctx_fit,
    max_gpu_layers,
    pad,
    place_weights,
    swa_cells,
)
from doctor.derive.source import step_src


def shape_from_facts(facts: Facts) -> KvShape | None:
    n_layer = facts.value("model.n_layer")
    if not isinstance(n_layer, int) or not 0 < n_layer <= MAX_LAYERS:
        return None
    per_layer = facts.value("model.n_head_kv_per_layer")
    n_head = facts.value("model.n_head")
    n_head_kv = facts.value("model.n_head_kv", n_head)
    if isinstance(per_layer, list) and len(per_layer) == n_layer and all(isinstance(h, int) for h in per_layer):
        heads = list(per_layer)
    elif isinstance(n_head_kv, int) and n_head_kv > 0:
        heads = [n_head_kv] * n_layer
    elif estimate_arch.state_per_layer(facts) is not None:  # [arch hook] all-recurrent: state, no KV
        return KvShape(n_layer, [0] * n_layer, 0, 0)
    else:
        return None
    hd_k = facts.value("model.head_dim_k")
    hd_v = facts.value("model.head_dim_v", hd_k)
    if not isinstance(hd_k, int):
        n_embd = facts.value("model.n_embd")
        if isinstance(n_embd, int) and isinstance(n_head, int) and n_head > 0:
            hd_k = n_embd // n_head
            hd_v = hd_k if not isinstance(hd_v, int) else hd_v
        else:
            return None
    if not isinstance(hd_v, int):
        hd_v = hd_k
    hd_v = estimate_arch.mla_head_dim_v(facts, hd_v)  # [arch hook] MLA caches the latent only
    n_swa = facts.value("model.n_swa", 0)
    mask = facts.value("model.swa_per_layer")
    swa: tuple[bool, ...] = ()
    if isinstance(n_swa, int) and n_swa > 0 and isinstance(mask, list) and len(mask) == n_layer:
        swa = tuple(bool(v) for v in mask)
    return KvShape(n_layer, heads, hd_k, hd_v, swa, n_swa if isinstance(n_swa, int) and swa else 0)


def _int_fact(facts: Facts, name: str, default: int) -> int:
    value = facts.value(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _swa_full(facts: Facts) -> bool:
    value = facts.value("config.swa_full")
    if isinstance(value, bool):
        return value
    # the engine's default (doctor/core/engines.py): llama.cpp's CLI and server false, the C API (llama-cpp-python) true
    return engines.defaults(facts.value("config.engine", facts.value("engine.name"))).swa_full


def _flash_attn(facts: Facts) -> bool:
    value = str(facts.value("config.flash_attn", "disabled")).lower()
    return value in ("enabled", "auto", "on", "true", "1")


def layout_from_facts(facts: Facts) -> WeightLayout | None:
    layers = facts.value("model.layer_bytes")
    n_layer = facts.value("model.n_layer")
    if not (isinstance(layers, list) and 0 < len(layers) <= MAX_LAYERS and all(isinstance(b, int) for b in layers)):
        return None
    if isinstance(n_layer, int) and len(layers) != n_layer:
        return None
    inp = facts.value("model.input_bytes")
    out = facts.value("model.output_bytes")
    if not isinstance(inp, int) or not isinstance(out, int):
        return None
    tied = facts.value("model.output_tied") is True
    return WeightLayout(list(layers), inp, out, tied, inp if tied else 0)


def compute_shape_from_facts(facts: Facts) -> ComputeShape | None:
    n_vocab, n_embd, n_head = (facts.value(f"model.{k}") for k in ("n_vocab", "n_embd", "n_head"))
    shape = shape_from_facts(facts)
    if not (isinstance(n_head, int) and n_head > 0) and estimate_arch.state_per_layer(facts) is not None:
        n_head = 0  # [arch hook] all-recurrent (Mamba): no attention term
    elif not isinstance(n_head, int) or n_head <= 0:
        return None
    if not all(isinstance(v, int) and v > 0 for v in (n_vocab, n_embd)) or shape is None:
        return None
    return ComputeShape(n_vocab, n_embd, n_head, max(shape.n_head_kv) * shape.head_dim_k,
                        estimate_arch.compute_extra(facts))


def _gpu_present(facts: Facts) -> bool:
    count = facts.value("host.gpu.count")
    return isinstance(count, int) and count > 0


def _vram_free(facts: Facts) -> int | None:
    count = facts.value("host.gpu.count")
    if not isinstance(count, int) or not 0 < count <= MAX_GPUS:
        return None
    free = [facts.value(f"host.gpu[{i}].vram_free") for i in range(count)]
    if not all(isinstance(f, int) for f in free):
        return None
    return sum(free)  # llama.cpp splits layers over GPUs in proportion to their free memory


def plan_from_facts(facts: Facts) -> Plan | None:
    layout = layout_from_facts(facts)
    n_ctx = asked_ctx(facts)
    if layout is None or n_ctx is None:
        return None
    arch = str(facts.value("model.arch", "")).lower()
    kv = None if arch in KV_UNMODELLED and not estimate_arch.modelled(facts) else shape_from_facts(facts)
    type_k = str(facts.value("config.type_k", "f16")).lower()
    type_v = str(facts.value("config.type_v", type_k)).lower()
    if type_k not in KV_TYPES or type_v not in KV_TYPES:
        kv = None
    n_batch = _int_fact(facts, "config.n_batch", 512)
    ngl = _int_fact(facts, "config.n_gpu_layers", 0)
    gpu = _gpu_present(facts) and facts.value("engine.gpu_offload_supported") is not False
    proj = estimate_mmproj.projector(facts, _flash_attn(facts))  # [mmproj hook]
    mmproj = proj.weights + (proj.compute or 0) if proj is not None else 0
    return Plan(layout=layout, kv=kv, compute=compute_shape_from_facts(facts), n_ctx=n_ctx, n_gpu_layers=ngl,
                type_k=type_k, type_v=type_v, n_seq=max(1, _int_fact(facts, "config.n_parallel", 1)),
                unified=facts.value("config.kv_unified") is True, n_batch=n_batch,
                n_ubatch=min(n_batch, _int_fact(facts, "config.n_ubatch", 512)), flash_attn=_flash_attn(facts),
                offload_kqv=facts.value("config.offload_kqv") is not False, swa_full=_swa_full(facts), gpu=gpu,
                state=tuple(estimate_arch.state_per_layer(facts) or ()), n_ff=max(0, _int_fact(facts, "model.n_ff", 0)),
                act_row=act_row_bytes(facts.value("model.file_type")), mmproj=mmproj,
                repack=estimate_repack.plan_from_facts(facts, layout.n_layer, gpu))  # [repack hook]


def derive_kv(facts: Facts) -> None:
    arch = str(facts.value("model.arch", "")).lower()
    if arch and arch in KV_UNMODELLED and not estimate_arch.modelled(facts):  # [arch hook]
        facts.set_default("model.kv_model_supported", False,
                          step_src("kv", f"architecture {arch} keeps recurrent or compressed state"))
        for name in ("derived.kv_bytes", "derived.kv_bytes_per_token"):
            facts.unknown(name, f"KV size is not modelled for architecture {arch}", step_src("kv", arch))
        return
    shape = shape_from_facts(facts)
    if shape is None:
        facts.unknown("derived.kv_bytes", "model shape unknown (n_layer, n_head_kv, head dims)", step_src("kv", ""))
        return
    if arch:
        facts.set_default("model.kv_model_supported", True, step_src("kv", arch))
    type_k = str(facts.value("config.type_k", "")).lower()
    type_v = str(facts.value("config.type_v", "")).lower() or type_k
    if type_k not in KV_TYPES or type_v not in KV_TYPES:
        facts.unknown("derived.kv_bytes", "KV cache types unknown",
                      step_src("kv", f"type_k={type_k!r} type_v={type_v!r}"))
        return
    formula = (f"{shape.n_layer} layers x {max(shape.n_head_kv)} KV heads x ({shape.head_dim_k} x {type_k}"
               f" + {shape.head_dim_v} x {type_v})")
    per_token = kv_bytes_per_token(shape, type_k, type_v)
    facts.set("derived.kv_bytes_per_token", round(per_token), step_src("kv", formula))
    f16_per_token = kv_bytes_per_token(shape, "f16", "f16")
    if f16_per_token:
        facts.set("derived.kv_type_factor", round(per_token / f16_per_token, 4),
                  step_src("kv", "bytes per token vs f16"))
    n_seq_state = _int_fact(facts, "config.n_parallel", 1)
    state = estimate_arch.state_bytes(facts, n_seq_state)  # [arch hook] recurrent state (Mamba, LFM2)
    if state is not None:
        facts.set("derived.state_bytes", state,
                  step_src("kv", f"recurrent state, f32, x {max(1, n_seq_state)} sequence(s) (doctor/derive/arch.py)"))
    n_ctx = asked_ctx(facts)
    if n_ctx is None:
        return
    n_seq = facts.value("config.n_parallel", 1)
    n_seq = n_seq if isinstance(n_seq, int) and n_seq > 0 else 1
    unified = bool(facts.value("config.kv_unified", False))
    n_batch = _int_fact(facts, "config.n_batch", 512)
    cp = context_params(n_ctx, n_seq, unified, n_batch, _int_fact(facts, "config.n_ubatch", 512))
    cells, streams, n_ubatch = cp.n_ctx_seq, cp.streams, cp.n_ubatch
    swa_full = _swa_full(facts)
    n_swa = facts.value("model.n_swa", 0)
    if isinstance(n_swa, int) and n_swa > 0 and not shape.swa and not swa_full:
        facts.unknown("derived.kv_bytes", "which layers use the sliding window is unknown, and SWA layers get a"
                      " smaller cache without swa_full", step_src("kv", f"n_swa {n_swa}"))
        return
    how = f"{formula} x {cells} cells x {streams} stream(s)"
    if shape.swa and not swa_full:
        how += (f"; {sum(shape.swa)} sliding-window layers x "
                f"{swa_cells(cells, shape.n_swa, n_seq, unified, n_ubatch)} cells")
    facts.set("derived.kv_cells", cells * streams, step_src("kv", how))
    opts: dict[str, Any] = {"swa_full": swa_full, "n_ubatch": n_ubatch, "n_batch": cp.n_batch}
    try:
        facts.set("derived.kv_bytes", kv_bytes(shape, n_ctx, type_k, type_v, n_seq, unified, **opts),
                  step_src("kv", how))
        facts.set("derived.kv_bytes_f16", kv_bytes(shape, n_ctx, "f16", "f16", n_seq, unified, **opts),
                  step_src("kv", how.replace(type_k, "f16")))
        facts.set("derived.kv_bytes_q8_0", kv_bytes(shape, n_ctx, "q8_0", "q8_0", n_seq, unified, **opts),
                  step_src("kv", "same cells at q8_0"))
    except ValueError as exc:
        facts.unknown("derived.kv_bytes", str(exc), step_src("kv", how))


def derive_mmproj(facts: Facts) -> None:
    """[mmproj hook] the vision projector's own figures (doctor/derive/mmproj.py)."""
    estimate_mmproj.derive(facts, _flash_attn(facts))


def derive_budget(facts: Facts) -> None:
    plan = plan_from_facts(facts)
    if plan is None:
        return
    b = budget(plan)
    n_total = plan.layout.n_layer + 1
    settings = (f"n_ctx {plan.n_ctx}, n_gpu_layers {plan.n_gpu_layers}, {plan.type_k}/{plan.type_v}, "
                f"n_ubatch {plan.n_ubatch}, flash attention {'on' if plan.flash_attn else 'off'}")
    src = step_src("budget", settings)
    facts.set("derived.total_layers", n_total, step_src("budget", "n_layer repeating layers + the output layer"))
    facts.set("derived.weights_bytes", plan.layout.total, step_src("budget", "sum of per-tensor sizes"))
    facts.set("derived.gpu_layers", b.gpu_layers, src)
    facts.set("derived.weights_gpu_bytes", b.weights_gpu,
              step_src("budget", f"layers {n_total - b.gpu_layers}..{n_total - 1} of 0..{n_total - 1} on the GPU"))
    facts.set("derived.weights_host_bytes", b.weights_host,
              step_src("budget", "token embedding (always on the CPU) + layers not offloaded"))
    place = place_weights(plan.layout, plan.n_gpu_layers, plan.gpu)  # [repack hook] doctor/derive/repack.py
    estimate_repack.set_facts(facts, plan.repack, place.first_gpu_layer, place.output_on_gpu)
    if plan.kv is not None:
        facts.set("derived.kv_gpu_bytes", b.kv_gpu, src)
        facts.set("derived.kv_host_bytes", b.kv_host, src)
    if plan.compute is not None:
        cp = context_params(plan.n_ctx, plan.n_seq, plan.unified, plan.n_batch, plan.n_ubatch)
        how = step_src("budget", f"worst-case ubatch of {cp.n_tokens_reserve} tokens; {settings}")
        facts.set("derived.compute_bytes", b.compute_gpu + b.compute_host, how)
        facts.set("derived.compute_gpu_bytes", b.compute_gpu, how)
        facts.set("derived.compute_host_bytes", b.compute_host, how)
    complete = plan.kv is not None and plan.compute is not None
    if not complete:
        reason = ("KV cache not modelled for this model" if plan.kv is None
                  else "compute buffer needs n_vocab, n_embd, n_head")
        for name in ("derived.fits_vram", "derived.fits_ram", "derived.max_ctx_fit"):
            facts.unknown(name, reason, src)
    proj = " + the vision projector" if plan.mmproj else ""
    facts.set("derived.gpu_need_bytes", b.gpu,
              step_src("budget", f"weights + KV + compute{proj if b.mmproj_gpu else ''} on the GPU"))
    facts.set("derived.host_need_bytes", b.host,
              step_src("budget", f"weights + KV + compute + output buffer{proj if b.mmproj_host else ''}"
                                 " + the CPU backend's work buffer in host memory"))
    if plan.compute is not None:
        facts.set("derived.cpu_work_bytes", b.work_host,
                  step_src("budget", "the CPU backend's scratch for the largest product at a full context "
                                     "(ggml_graph_plan work size; llama.cpp does not print it)"))

    vram_free = _vram_free(facts)
    vram_budget = None
    if vram_free is not None:
        count = _int_fact(facts, "host.gpu.count", 1)
        overhead = GPU_RUNTIME_OVERHEAD * count
        vram_budget = max(0, vram_free - overhead)
        facts.set("derived.gpu_overhead_bytes", overhead, step_src("budget", f"{count} x {GPU_OVERHEAD_HOW}"))
        facts.set("derived.vram_budget", vram_budget,
                  step_src("budget", f"free VRAM {vram_free / MIB:.0f} MiB - {count} x "
                                     f"{GPU_RUNTIME_OVERHEAD / MIB:.0f} MiB CUDA context"))
    available = facts.value("host.ram.available")
    ram_budget = None
    host_overhead = HOST_PRIVATE_OVERHEAD + HOST_CACHE_MARGIN
    if isinstance(available, int):
        ram_budget = max(0, available - host_overhead)
        facts.set("derived.host_overhead_bytes", host_overhead, step_src("budget", HOST_OVERHEAD_HOW))
        facts.set("derived.ram_budget", ram_budget,
                  step_src("budget", f"available RAM {available / MIB:.0f} MiB - {host_overhead / MIB:.1f} MiB "
                                     "the engine's process needs beyond its buffers (measured)"))
    mapped = place.host_bytes if facts.value("config.use_mmap") is not False else 0
    margin = HOST_MAPPED_MINIMUM if mapped else HOST_CACHE_MARGIN
    floor = b.host - mapped + HOST_PRIVATE_OVERHEAD + margin  # below it the kernel kills the process
    if complete:
        facts.set("derived.host_peak_bytes", b.host + HOST_RUNTIME_OVERHEAD  # [repack hook] + the replaced
                  + _int_fact(facts, "derived.weights_repack_replaced_bytes", 0),  # file pages, resident after load
                  step_src("budget", "weights + KV + compute in host memory + the process's own overhead"))
        facts.set("derived.weights_mapped_bytes", mapped,
                  step_src("budget", "weights in host memory left in the memory-mapped file" if mapped else
                           "mmap off: the weights are the process's own memory"))
        facts.set("derived.host_floor_bytes", floor,
                  step_src("budget", "KV + compute + output + work buffer + the process's private memory + "
                           + ("18 MiB of the mapped weights' page cache" if mapped else "3 MiB of page cache")
                           + " (measured under cgroup limits: below it the kernel kills the process)"))

    phase, device = "none", "none"
    if vram_budget is not None and plan.gpu and b.gpu_layers > 0:
        fits = b.gpu <= vram_budget
        facts.set("derived.weights_fit_vram", b.weights_gpu <= vram_budget, src)
        facts.set("derived.kv_fits_vram", b.weights_gpu + b.kv_gpu <= vram_budget, src)
        if complete:
            facts.set("derived.fits_vram", fits, src)
            facts.set("derived.gpu_short_bytes", max(0, b.gpu - vram_budget), src)
            facts.set("derived.gpu_room_bytes", max(0, vram_budget - b.gpu),
                      step_src("budget", "free VRAM left after the CUDA context and the plan's buffers"))
        if not fits:
            device = "gpu"
            phase = ("weights" if b.weights_gpu > vram_budget else
                     "kv_cache" if b.weights_gpu + b.kv_gpu > vram_budget else "compute")
    if ram_budget is not None and complete and isinstance(available, int):
        runs = floor <= available
        own = max(0, available - HOST_PRIVATE_OVERHEAD - margin)  # for the buffers that cannot be paged out
        fits_ram = runs and b.host <= ram_budget
        facts.set("derived.fits_ram", fits_ram, src)
        facts.set("derived.ram_runs", runs,
                  step_src("budget", f"the process's least memory {floor / MIB:.1f} MiB against "
                                     f"{available / MIB:.0f} MiB"
                                     + (" (the mapped weights paged from disk)" if mapped and not fits_ram else "")))
        facts.set("derived.host_short_bytes", max(0, b.host - ram_budget), src)
        facts.set("derived.host_room_bytes", max(0, ram_budget - b.host) if fits_ram else 0,
                  step_src("budget", "available RAM left after the process and the plan's buffers"))
        cache_ram = facts.value("config.cache_ram")  # llama-server's prompt cache (doctor/core/engines.py)
        if fits_ram and isinstance(cache_ram, int) and cache_ram > 0:
            facts.set("derived.cache_ram_fit_mib", (ram_budget - b.host) // MIB,
                      step_src("budget", "the RAM left after the plan, in MiB: the largest --cache-ram that keeps "
                                         "everything resident"))
        if runs and not fits_ram:
            facts.set("derived.weights_paged_bytes", min(mapped, b.host - ram_budget),
                      step_src("budget", "mapped weights that cannot stay in the page cache: re-read from disk "
                                         "per token"))
        if not runs and device == "none":
            device = "host"
            weights_own = b.weights_host - mapped
            phase = ("weights" if weights_own > own else
                     "kv_cache" if weights_own + b.kv_host > own else "compute")
    if complete and (vram_budget is not None or ram_budget is not None):
        facts.set("derived.oom_phase", phase, src)
        facts.set("derived.oom_device", device, src)
        if device != "none":
            need, room = (b.gpu, vram_budget) if device == "gpu" else (b.host - mapped, own)
            facts.set("derived.oom_need_bytes", need,
                      step_src("budget", f"weights + KV + compute on the {device}"
                                         + (" (the mapped weights left out: they can be paged)" if device == "host"
                                            and mapped else "")))
            facts.set("derived.oom_budget_bytes", room,
                      step_src("budget", f"free {device} memory minus the margin"))

    if complete:  # [split hook] the sum that fails, term by term (doctor/derive/split.py)
        _explain_split(facts, plan, b, vram_budget, ram_budget)
    if vram_budget is not None and complete:
        best = max_gpu_layers(plan, vram_budget)
        fit_how = f"largest n_gpu_layers whose weights + KV + compute fit in {vram_budget / MIB:.0f} MiB"
        facts.set("derived.max_gpu_layers", best, step_src("budget", fit_how))
        facts.set("derived.gpu_layers_fit_recommended", -1 if best >= n_total else best,
                  step_src("budget", "all layers (-1)" if best >= n_total else f"{best} of {n_total} layers fit"))
    if complete and (vram_budget is not None or ram_budget is not None):
        train = facts.value("model.n_ctx_train")
        limit = train if isinstance(train, int) and train > 0 else max(plan.n_ctx, 131072)
        limit = max(limit, plan.n_ctx)
        best_ctx = max_ctx_fit(plan, vram_budget if plan.gpu and b.gpu_layers else None, ram_budget, limit)
        if best_ctx is None:
            facts.set("derived.max_ctx_fit", 0, step_src("budget", "not even 256 tokens fit next to the weights"))
        else:
            facts.set("derived.max_ctx_fit", best_ctx,
                      step_src("budget", f"largest multiple of 256 up to {limit} that fits with n_gpu_layers "
                                         f"{plan.n_gpu_layers}"))
            need = facts.value("derived.ctx_recommended")
            rec = min(need, best_ctx) if isinstance(need, int) else best_ctx
            facts.set("derived.ctx_fit_recommended", rec,
                      step_src("budget", "the context needed, or the largest that fits if smaller"))


def _explain_split(facts: Facts, plan: Plan, b: Budget, vram_budget: int | None, ram_budget: int | None) -> None:
    import doctor.derive.split as estimate_split

    place = place_weights(plan.layout, plan.n_gpu_layers, plan.gpu)
    output = plan.layout.output_bytes + (plan.layout.tied_bytes if plan.layout.output_tied else 0)
    gpu = host = None
    if vram_budget is not None and plan.gpu and b.gpu_layers > 0:
        gpu = estimate_split.DeviceSum("GPU", b.weights_gpu, output if place.output_on_gpu else 0, b.kv_gpu,
                                       b.compute_gpu, vram_budget, b.mmproj_gpu)
    if ram_budget is not None:
        # compute on the host: its compute buffer, the CPU backend's scratch and the logits (the budget's own sum)
        host = estimate_split.DeviceSum("host", b.weights_host, 0 if place.output_on_gpu else plan.layout.output_bytes,
                                        b.kv_host, b.compute_host + b.work_host + b.output_host, ram_budget,
                                        b.mmproj_host)
    estimate_split.explain(facts, gpu, host)


def cpu_compute_bytes(facts: Facts) -> int | None:
    """The compute buffer of a CPU-only run from the shape and the run's settings (no layout needed)."""
    if _opt_int(facts, "run.compute_gpu_bytes") or _opt_int(facts, "run.weights_gpu_bytes"):
        return None
    shape = compute_shape_from_facts(facts)
    plan_ctx = _opt_int(facts, "config.n_ctx")
    if shape is None or not plan_ctx:
        return None
    n_seq = max(1, _opt_int(facts, "config.n_parallel") or 1)
    cells, _ = kv_cells(plan_ctx, n_seq, facts.value("config.kv_unified") is True)
    n_batch = _opt_int(facts, "config.n_batch") or 512
    n_ubatch = min(n_batch, _opt_int(facts, "config.n_ubatch") or 512)
    fa = str(facts.value("config.flash_attn", "disabled")).lower() in ("enabled", "on", "true", "1")
    type_k = str(facts.value("config.type_k", "f16")).lower()
    return compute_bytes(shape, cells, n_ubatch, n_batch, pad(plan_ctx), fa, type_k)


def _opt_int(facts: Facts, name: str) -> int | None:
    value = facts.value(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
