"""The derive floor: facts computed from facts (memory budget, fit, context, run summaries).

`derive(facts)` adds the derived.* facts (and a few summary run.* facts) to a snapshot, in order:
run summaries, KV, context, threads, load, offload, the vision projector, the budget, a reduced
context, the decode floor, GPU ratios, output loops, the estimate against the engine, the published
spec of the hardware a log names, the speed verdict (from the tensor table, else from a log's model
lines). The rooms:
- memory.py   the llama.cpp memory model (KV, weights, compute buffer, Plan -> Budget, fit searches)
- plan.py     the model and settings from the facts, KV bytes, the budget and its verdicts
- context.py  the tokens a run needs and the context to recommend
- run.py      run summaries, the decode floor, load, threads, offload, output loops
- arch.py mmproj.py repack.py split.py vs_engine.py   hooks of the budget (see each docstring)
- speed.py    the model's cost per token and each phase's speed against this machine's ceilings
              (speed_cost.py: the weights by kernel and the probe's rates; speed_ceilings.py: the bounds)
- capacity.py what holds a serving engine's throughput once its slots are busy
- whatif.py   stated budgets for `scan --ram/--vram`
- change.py   a fix's settings applied to the plan in the engine's own terms (the fix check, issue 37)
- spec_lookup.py, specs/   the published spec of the device a log names (spec.*; the table is data)
- speed_log.py  a pasted log's cost per token from its model lines (no tensor table), judged by speed.py
- speed_range.py  a pasted decode placed in the range its device class reaches in public runs (item 7)
- speed_causes.py the slow causes a paste shows: threads, offload, a CPU-only build, KV on the CPU, PCIe, BAR
- model_guess.py  a model's size from its Ollama name (`llama3.2:3b`) when a paste gives nothing else
- spec_memory.py  the spec's bandwidth at the Apple GPU variant and the installed memory a paste or --hardware names
- thin.py     how little a pasted input held (only a launch command, the system-info line, one line)
Pure: reads a Facts, sets derived.* facts; imports only doctor.core.
"""

from __future__ import annotations

from doctor.core.facts import Facts
from doctor.derive import (
    capacity,
    context,
    model_guess,
    plan,
    run,
    spec_lookup,
    spec_memory,
    speed,
    speed_causes,
    speed_log,
    speed_range,
    thin,
)


def _derive_vs_engine(facts: Facts) -> None:
    """[vs-engine hook] the estimate against the buffers the engine printed (doctor/derive/vs_engine.py)."""
    from doctor.derive.vs_engine import derive_vs_engine

    derive_vs_engine(facts, cpu_compute=plan.cpu_compute_bytes)


# the spec lookup reads only what the input names (CPU, GPUs, backends): before derive_threads, which
# takes a named CPU's published cores when nothing of the machine was read
STEPS = (run.derive_run_summaries, model_guess.derive_model_guess, plan.derive_kv, context.derive_context,
         context.derive_pool_limits, spec_lookup.derive_spec, spec_memory.derive_spec_memory,
         run.derive_threads, run.derive_load, run.derive_offload, plan.derive_mmproj, plan.derive_budget,
         context.derive_ctx_reduced, run.derive_decode_floor, run.derive_gpu_ratios, run.derive_output,
         _derive_vs_engine, capacity.derive_capacity, speed.derive_speed, speed_log.derive_speed_log,
         speed_range.derive_speed_range, speed_causes.derive_speed_causes, thin.derive_thin)


def derive(facts: Facts) -> Facts:
    """Add derived facts in place and return the same snapshot."""
    for step in STEPS:
        try:
            step(facts)
        except (ArithmeticError, ValueError):
            # facts no real run has (zero head dims, values at the edge of 64 bits from a damaged or
            # hostile input): that derivation is left out; the rules needing it say unknown
            continue
    return facts
