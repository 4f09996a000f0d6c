"""Run summaries: decode steps, rates, the decode floor, load speed, threads, offload, output loops.

What a run measured (run.decode_ms, run.load_ms, the generated text) summed up as the rules read it
(run.decode_ms_p50 ... run.decode_spikes, run.load_mb_s, run.output_repetition), and what the
memory model says a decode step must cost at least (derived.decode_floor_ms: the bytes read per
token over the memory bandwidth).

The decode spike rule lives here: a steady step (the first, warm-up step left out once there are
more than WARMUP_STEPS) slower than SPIKE_FACTOR x the steady median (nearest rank) is a spike.
doctor/sources/live/trace.py applies the same rule step by step and marks the spikes on the live
events, so the watch screen shows what run.decode_spikes counts.
"""

from __future__ import annotations

from doctor.core.facts import Facts
from doctor.core.stats import percentile
from doctor.derive.memory import MAX_GPUS, MIB, kv_bytes_per_token, pad, place_weights
from doctor.derive.plan import plan_from_facts
from doctor.derive.source import step_src

SPIKE_FACTOR = 3.0  # a steady decode step slower than this many medians is a spike (run.decode_spikes)
WARMUP_STEPS = 4  # with more decode steps than this, the first is warm-up and not a steady step


def steady_start(n_steps: int) -> int:
    """Index of the first steady step of `n_steps`: the first step often carries one-time warm-up."""
    return 1 if n_steps > WARMUP_STEPS else 0


def spike_bar(p50: float) -> float | None:
    """The time above which a steady step is a spike, given the steady median; None when there is none."""
    return SPIKE_FACTOR * p50 if p50 > 0 else None


def derive_run_summaries(facts: Facts) -> None:
    steps = facts.value("run.decode_ms")
    if isinstance(steps, list) and steps and all(isinstance(s, int | float) for s in steps):
        # the first step often carries one-time warm-up; judge jitter on the steady state
        steady = [float(s) for s in steps[steady_start(len(steps)):]]
        p50 = percentile(steady, 50)
        src = step_src("decode", f"{len(steady)} steady decode steps")
        facts.set_default("run.decode_ms_p50", round(p50, 3), src)
        facts.set_default("run.decode_ms_p99", round(percentile(steady, 99), 3), src)
        facts.set_default("run.decode_ms_max", round(max(steady), 3), src)
        facts.set_default("run.decode_ms_mean", round(sum(steady) / len(steady), 3), src)
        facts.set_default("run.decode_ms_total", round(sum(float(s) for s in steps), 3), src)
        facts.set_default("run.decode_tokens", len(steps), src)
        bar = spike_bar(p50)
        if bar is not None:
            facts.set_default("run.decode_spike_ratio", round(percentile(steady, 99) / p50, 3), src)
            facts.set_default("run.decode_spikes", sum(1 for s in steady if s > bar), src)
    total = facts.value("run.decode_ms_total")
    n = facts.value("run.decode_tokens")
    if isinstance(total, int | float) and isinstance(n, int) and total > 0 and n > 0:
        facts.set_default("run.decode_tps", round(n / (total / 1000), 2),
                          step_src("decode", f"{n} tokens in {total:.0f} ms"))
    prefill = facts.value("run.prefill_ms")
    if isinstance(prefill, int | float) and isinstance(total, int | float) and prefill + total > 0:
        facts.set_default("run.prefill_share", round(prefill / (prefill + total), 4),
                          step_src("run", f"prefill {prefill:.0f} ms vs decode {total:.0f} ms"))


def derive_decode_floor(facts: Facts) -> None:
    """Bytes read per generated token / memory bandwidth: a floor on ms per token."""
    plan = plan_from_facts(facts)
    if plan is None or plan.kv is None:
        return
    place = place_weights(plan.layout, plan.n_gpu_layers, plan.gpu)
    # decode reads every weight once per token except the embedding table (one row) and, for MoE,
    # the experts that are not routed to
    n_expert, used = facts.value("model.n_expert", 0), facts.value("model.n_expert_used", 0)
    experts = facts.value("model.expert_bytes", 0)
    unused_share = 0.0
    if isinstance(n_expert, int) and n_expert > 0 and isinstance(used, int) and isinstance(experts, int):
        unused_share = experts / max(1, sum(plan.layout.layer_bytes)) * (1 - used / n_expert)
    gpu_weights = place.gpu_bytes
    host_weights = place.host_bytes - plan.layout.input_bytes
    if plan.layout.output_tied and not place.output_on_gpu:
        host_weights += plan.layout.tied_bytes  # the tied lm head is the embedding table, read in full
    gpu_weights = int(gpu_weights * (1 - unused_share))
    host_weights = int(host_weights * (1 - unused_share))
    tokens = facts.value("derived.tokens_needed")
    ctx_tokens = min(tokens, pad(plan.n_ctx)) if isinstance(tokens, int) else pad(plan.n_ctx)
    kv_tok = kv_bytes_per_token(plan.kv, plan.type_k, plan.type_v)
    kv_read = int(kv_tok * ctx_tokens)
    share_gpu = (place.gpu_layers - (1 if place.output_on_gpu else 0)) / max(1, plan.layout.n_layer)
    kv_gpu = int(kv_read * share_gpu) if plan.offload_kqv else 0
    gpu_bytes, host_bytes = gpu_weights + kv_gpu, host_weights + kv_read - kv_gpu
    how = f"weights read per token + KV of {ctx_tokens} tokens"
    facts.set("derived.decode_bytes_per_token", gpu_bytes + host_bytes, step_src("decode", how))
    facts.set("derived.decode_gpu_bytes_per_token", gpu_bytes, step_src("decode", how))
    facts.set("derived.decode_host_bytes_per_token", host_bytes, step_src("decode", how))
    gpu_bw = facts.value("host.gpu[0].bandwidth_measured_gbs", facts.value("host.gpu[0].bandwidth_spec_gbs"))
    # the read bandwidth on all cores (a floor holds whatever the thread count), else the torch copy figure
    host_bw = facts.value("host.ram.read_bw_all_gbs", facts.value("host.ram.read_bw_gbs",
                                                                   facts.value("host.ram.bandwidth_measured_gbs")))
    if isinstance(gpu_bw, int | float) and gpu_bw > 0:
        facts.set("derived.gpu_bandwidth_gbs", float(gpu_bw), step_src("decode", "measured device copy, else spec"))
    if isinstance(host_bw, int | float) and host_bw > 0:
        facts.set("derived.host_bandwidth_gbs", float(host_bw), step_src("decode", "measured host read (all cores)"))
    floor = 0.0
    parts = []
    for n_bytes, bw, where in ((gpu_bytes, gpu_bw, "GPU"), (host_bytes, host_bw, "RAM")):
        if n_bytes <= 0:
            continue
        if not isinstance(bw, int | float) or bw <= 0:
            facts.unknown("derived.decode_floor_ms", f"{where} memory bandwidth unknown (llm-doctor scan measures it)",
                          step_src("decode", how))
            return
        floor += n_bytes / (bw * 1e9) * 1000
        parts.append(f"{n_bytes / MIB:.0f} MiB at {bw:.0f} GB/s ({where})")
    facts.set("derived.decode_floor_ms", round(floor, 3), step_src("decode", " + ".join(parts)))
    if plan.gpu and isinstance(gpu_bw, int | float) and gpu_bw > 0 and place.first_gpu_layer > 0:
        full = place_weights(plan.layout, -1, True)
        full_bytes = full.gpu_bytes + kv_read
        full_ms = full_bytes / (gpu_bw * 1e9) * 1000 * (1 - unused_share)
        facts.set("derived.decode_floor_full_gpu_ms", round(full_ms, 3), step_src(
            "decode", f"{full_bytes / MIB:.0f} MiB at {gpu_bw:.0f} GB/s if every layer were on the GPU"))
        if full_ms > 0:
            facts.set("derived.offload_slowdown", round(floor / full_ms, 2),
                      step_src("decode", f"{floor:.1f} ms / {full_ms:.1f} ms per token"))


def derive_gpu_ratios(facts: Facts) -> None:
    """Measured against spec: memory bandwidth and the pinned host-to-device copy over PCIe."""
    count = facts.value("host.gpu.count")
    if not isinstance(count, int):
        return
    for i in range(min(count, MAX_GPUS)):
        p = f"host.gpu[{i}]"
        for measured, spec, out in ((f"{p}.bandwidth_measured_gbs", f"{p}.bandwidth_spec_gbs", f"{p}.bandwidth_ratio"),
                                    (f"{p}.pcie.h2d_measured_gbs", f"{p}.pcie.spec_gbs", f"{p}.pcie.h2d_ratio")):
            m, s = facts.value(measured), facts.value(spec)
            if isinstance(m, int | float) and isinstance(s, int | float) and s > 0:
                facts.set(out, round(m / s, 3), step_src("gpu", f"{m:g} GB/s measured / {s:g} GB/s spec"))


def derive_output(facts: Facts) -> None:
    """run.output_repetition / repeat_span / repeat_count from the generated text (doctor/core/repetition.py).

    Added by the watch task: the looping span found in run.output_text, with the span itself in the
    source text so it shows as evidence."""
    text = facts.value("run.output_text")
    if not isinstance(text, str) or facts.has("run.output_repetition"):
        return
    from doctor.core.repetition import find_loop, tokens_of

    loop = find_loop(text)
    if loop is None:
        n = len(tokens_of(text))
        facts.set("run.output_repetition", 0.0, step_src("output", f"no repeated span in {n} words of output"))
        return
    how = (f"\"{loop.span[:120]}\" x{loop.count} ({loop.period} words each) covers {loop.share:.0%} "
           f"of the last {loop.tokens} words of output")
    facts.set("run.output_repetition", loop.share, step_src("output", how))
    facts.set("run.repeat_count", loop.count, step_src("output", how))
    facts.set("run.repeat_span", loop.span, step_src("output", how))


def derive_threads(facts: Facts) -> None:
    threads = facts.value("config.n_threads")
    usable = facts.value("host.cpu.usable_cores")
    usable_fact = facts.get("host.cpu.usable_cores")
    why = "physical cores within the CPU quota and affinity"
    if not isinstance(usable, int | float):
        physical = facts.value("host.cpu.physical_cores")
        usable = physical if isinstance(physical, int) else None
    if usable is None and isinstance(facts.value("spec.cores"), int):  # a pasted log naming its CPU
        usable, why = facts.value("spec.cores"), "the published physical cores of the CPU the log names"
    if not isinstance(usable, int | float) or usable <= 0:
        return
    # a limit read from a log or a pasted command keeps its line as the evidence
    src = (usable_fact.source if usable_fact is not None and usable_fact.source.kind == "log"
           else step_src("threads", why))
    facts.set("derived.threads_usable", max(1, int(usable)), src)
    if isinstance(threads, int) and threads > 0:
        facts.set("derived.threads_over", round(threads / usable, 3),
                  step_src("threads", f"{threads} threads / {usable:g} usable cores"))
    # a hybrid CPU (P/E cores, big.LITTLE): threads past the performance cores make the fast cores wait for the
    # slow ones at every barrier, so its performance cores are the count to use (the same rule as LD840)
    perf = facts.value("host.cpu.perf_cores")
    perf = perf if isinstance(perf, int) and perf > 0 else facts.value("spec.perf_cores")
    if isinstance(perf, int) and 0 < perf < usable:
        src = step_src("threads", f"the {perf} performance cores of a hybrid CPU ({int(usable)} usable cores in all)")
        usable = perf
    facts.set("derived.threads_recommended", max(1, int(usable)), src)


def derive_load(facts: Facts) -> None:
    path = facts.get("model.path")
    if path is not None and isinstance(path.value, str) and not facts.has("model.path_storage"):
        from doctor.core.path_storage import path_storage

        found = path_storage(path.value)
        if found is not None:
            facts.set("model.path_storage", found[0], path.source)
    load_ms = facts.value("run.load_ms")
    size = facts.value("model.file_bytes")
    what = "bytes"
    if not isinstance(size, int):  # a serving engine (vLLM, TGI) names what its weights took in memory, not the file
        size, what = facts.value("server.weights_bytes"), "bytes of weights"
    if isinstance(load_ms, int | float) and isinstance(size, int) and load_ms > 0:
        facts.set("run.load_mb_s", round(size / 1e6 / (load_ms / 1000), 1),
                  step_src("load", f"{size} {what} in {load_ms:.0f} ms"))
    read = facts.value("model.storage.read_mb_s")
    if isinstance(read, int | float) and read > 0 and isinstance(size, int):
        facts.set("derived.load_expected_ms", round(size / 1e6 / read * 1000, 1),
                  step_src("load", f"{size} bytes at {read:.0f} MB/s"))


def derive_offload(facts: Facts) -> None:
    off = facts.value("run.offloaded_layers")
    total = facts.value("run.total_layers")
    if isinstance(off, int) and isinstance(total, int) and total > 0:
        facts.set("run.gpu_layers_share", round(off / total, 4), step_src("offload", f"{off}/{total} layers"))
