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
     "bounds (memory bandwidth, the engine's kernels at their best on this machine or a published peak, PCIe "
     "copies, per-token overhead), on the share of the cores the engine had"),
    ("fraction", "float", None, "measured / ceiling (0..1; above 1.05 the ceiling does not fit: bound "
     "ceiling-misfit)"),
    ("bound", "str", None, "the bound that binds: memory-bandwidth:<device>, compute:cpu, compute:gpu:<unit> "
     "(int8, fp16, bf16, fp32), pcie, per-token-overhead, contention, threads, ceiling-misfit (measured above "
     "the ceiling: the ceiling is wrong, not the run), unknown"),
    ("misfit_term", "str", None, "the bound a measured speed ran past (more than 5%): the figure that does not "
     "fit this machine"),
    ("ceiling_source", "str", None, "where the ceiling came from: measured (on this machine), spec (a "
     "published figure for the hardware the log names), unknown"),
    ("expected_tok_s", "float", "tokens/s", "what this engine usually reaches here: the kernel probe's typical "
     "times on this machine for this model's shapes, added up (a GPU: the bounds at the share public runs "
     "reach; docs/speed.md)"),
    ("threads_gain", "float", None, "how much faster the kernel probe says all usable cores run this phase "
     "than the engine's thread count (1.0: no gain)"),
    ("settle", "str", None, "the one fact that would settle the verdict when the ceiling is unknown"),
]

FACTS: list[tuple[str, str, str | None, str]] = [
    # ceilings measured on this machine (each fact's Source says kernel, size, threads, date)
    ("host.ram.read_bw_gbs", "float", "GB/s", "sustained memory read bandwidth at the engine's thread count "
     "(a read kernel: a large tensor sum)"),
    ("host.ram.read_bw_all_gbs", "float", "GB/s", "sustained memory read bandwidth on all cores"),
    ("host.cpu.kernel_decode", "list", None, "the engine's decode kernels on this machine (the kernel probe): "
     "rows [ggml type, op (mul_mat | mul_mat_id), threads, best, typical] in G weights/s through one token"),
    ("host.cpu.kernel_prefill", "list", None, "the engine's prompt kernels on this machine: rows [ggml type, op, "
     "threads, best, typical] in GFLOP/s (2 per weight per prompt token)"),
    ("host.cpu.kernel_attention", "list", None, "attention on this machine with the model's head shape and KV "
     "types: rows [threads, decode ns per layer per KV cell (best, typical), prompt ns per layer per cell per "
     "token (best, typical), decode ms per layer beyond weights and cells (best, typical)]"),
    ("host.cpu.kernel_missing", "list", None, "kernel figures the model needs that are not measured (cache keys), "
     "with why"),
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
    ("speed.cores_shared", "bool", None, "the engine had less than 80% of the cores it asked for while it ran "
     "(other processes, steal): its speeds were measured on a shared machine"),
    ("derived.capacity_bound", "str", None, "what holds a server's throughput when its slots are busy: cores (a "
     "CPU-only engine whose threads already take every usable core), kv (the KV pool nearly full), slots (the "
     "server's concurrency limit, with cores and KV to spare); unset when unknown"),
] + [(f"speed.{phase}.{key}", type_, unit, f"{phase}: {doc}")
     for phase in _PHASES for key, type_, unit, doc in _VERDICT]

# closed-vocabulary values (see catalog.LABELS)
LABELS = frozenset({f"speed.{phase}.{key}" for phase in _PHASES for key in ("bound", "ceiling_source", "misfit_term")}
                   | {"derived.capacity_bound"})
