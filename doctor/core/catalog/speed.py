"""Fact names of the speed verdict (issue 26): this machine's ceilings, the model's cost per token
and, per phase, measured tok/s held against the ceiling.

Floor: core (data only). Strings are written here. The ceilings are set by
doctor/sources/probes/ceilings.py (measured) and by the pasted-log side from its published-spec
table (spec.*, documented in that side's own catalogue module); the cost and the verdict by
doctor/derive/speed.py. `derived.decode_bytes_per_token` (all devices) is documented in
catalog/derived.py, where it was before this family.
"""

_PHASES = ("prefill", "decode")

_VERDICT: list[tuple[str, str, str | None, str]] = [
    ("tok_s", "float", "tokens/s", "measured speed of the phase (run.prefill_tps / run.decode_tps)"),
    ("ceiling_tok_s", "float", "tokens/s", "the most this machine allows for this model: the lowest of the "
     "bounds (memory bandwidth, compute, PCIe copies, per-token overhead), on the share of the cores the "
     "engine had"),
    ("fraction", "float", None, "measured / ceiling (0..1, above 1 when the ceiling is too low)"),
    ("bound", "str", None, "the bound that binds: memory-bandwidth:<device>, compute:<device>, pcie, "
     "per-token-overhead, contention, threads, storage, unknown"),
    ("ceiling_source", "str", None, "where the ceiling came from: measured (on this machine), spec (a "
     "published figure for the hardware the log names), unknown"),
    ("expected_tok_s", "float", "tokens/s", "what this engine usually reaches here: the ceiling times the "
     "efficiency measured for this bound (docs/speed.md)"),
    ("settle", "str", None, "the one fact that would settle the verdict when the ceiling is unknown"),
]

FACTS: list[tuple[str, str, str | None, str]] = [
    # ceilings measured on this machine (each fact's Source says kernel, size, threads, date)
    ("host.ram.read_bw_gbs", "float", "GB/s", "sustained memory read bandwidth at the engine's thread count "
     "(a read kernel: a large tensor sum)"),
    ("host.ram.read_bw_all_gbs", "float", "GB/s", "sustained memory read bandwidth on all cores"),
    ("host.cpu.matmul_gflops", "float", "GFLOP/s", "measured matrix-multiply throughput at the engine's thread "
     "count, in the type closest to the engine's path"),
    ("host.cpu.matmul_all_gflops", "float", "GFLOP/s", "the same on all usable cores"),
    ("host.cpu.token_overhead_ms", "float", "ms", "fixed cost of one decode step on this machine: graph build, "
     "thread sync, sampling (measured on a tiny model)"),
    ("host.cpu.other_busy", "float", None, "share of the cores (0..1) other processes used while the engine ran"),
    ("host.cpu.steal_pct", "float", "%", "CPU time the hypervisor took (steal) while the engine ran"),
    ("host.cpu.engine_cores", "float", "cores", "cores the engine's process used on average while it ran (its "
     "CPU time / the wall time): with the thread count, the share of the cores it had"),
    # the model's cost per token (doctor/derive/speed.py)
    ("derived.decode_bytes_per_token_gpu", "int", "bytes", "bytes streamed from GPU memory per decode token "
     "(weights on the GPU, routed experts only, + the KV read at the current depth)"),
    ("derived.decode_bytes_per_token_cpu", "int", "bytes", "bytes streamed from host RAM per decode token"),
    ("derived.prefill_flops_per_token", "float", "FLOP", "FLOPs per prefill token: 2 x active parameters + "
     "attention at the depth"),
    ("derived.prefill_pcie_bytes_per_batch", "int", "bytes", "bytes llama.cpp copies to the GPU per prefill "
     "batch under partial offload (CPU-resident weights, for batches of 32 tokens or more)"),
    ("derived.speed_depth", "int", "tokens", "context depth the cost is computed at (the trace's mean depth)"),
    ("derived.capacity_bound", "str", None, "what holds a server's throughput when its slots are busy: cores (a "
     "CPU-only engine whose threads already take every usable core), kv (the KV pool nearly full), slots (the "
     "server's concurrency limit, with cores and KV to spare); unset when unknown"),
] + [(f"speed.{phase}.{key}", type_, unit, f"{phase}: {doc}")
     for phase in _PHASES for key, type_, unit, doc in _VERDICT]

# closed-vocabulary values (see catalog.LABELS)
LABELS = frozenset({f"speed.{phase}.{key}" for phase in _PHASES for key in ("bound", "ceiling_source")}
                   | {"derived.capacity_bound"})
