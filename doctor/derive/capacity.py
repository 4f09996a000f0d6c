"""What holds a serving engine's throughput once its slots are busy (derived.capacity_bound, LD752-LD754).

Floor: derive (pure). Strings: the Source texts below. docs/speed.md section 6.
"""

from __future__ import annotations

from doctor.core.facts import Facts, Source
from doctor.derive.source import step_src


def _src(text: str) -> Source:
    return step_src("speed", text[:300])


def _num(facts: Facts, name: str) -> float | None:
    value = facts.value(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


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
