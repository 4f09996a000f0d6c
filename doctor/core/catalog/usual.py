"""Fact names of the usual range (issue 36, item 7) and of the slow causes a paste shows (item 6).

Floor: core (data only). Strings are written here. `speed.decode.placement` and its range are set by
doctor/derive/speed_range.py from the efficiency distribution of public runs per device class
(doctor/derive/specs/speed_ranges.json, written by bench/speed_ranges.py); the `speed.cause.*` facts by
doctor/derive/speed_causes.py from what the paste shows (threads against cores, layers on the GPU,
the engine's backends, the KV cache's place and type, the Metal working set, the PCIe link, BAR).
"""

FACTS: list[tuple[str, str, str | None, str]] = [
    ("speed.decode.efficiency", "float", None, "measured decode x bytes read per token / the device's published "
     "bandwidth: the share of the bandwidth bound the run reached"),
    ("speed.decode.usual_class", "str", None, "the device class whose public runs give the usual range, in words "
     "('CUDA GPUs with models of 2.5 GB or more'; its key, gpu:cuda:large, is in the Source)"),
    ("speed.decode.usual_low", "float", None, "the lowest efficiency of the runs of that class the sources call "
     "normal"),
    ("speed.decode.usual_high", "float", None, "the highest efficiency of those runs"),
    ("speed.decode.usual_tok_s", "float", "tokens/s", "the low end of the usual range for this model on this device"),
    ("speed.decode.placement", "str", None, "where the run falls: below | within | above the usual range of its "
     "class; partial when the model is split between GPU and host"),
    ("run.graph_splits", "int", None, "splits of the decode graph between backends (llama.cpp's `graph splits`, "
     "the bs=1 figure where two are printed): more than the devices in use means ops ran on the CPU"),
    ("run.gpu_share", "float", None, "share of the loaded model in GPU memory, as `ollama ps` prints it (42%/58% "
     "CPU/GPU: 0.58; 100% CPU: 0)"),
    ("speed.causes", "list", None, "the slow causes the paste shows, likeliest first, in words (each is a "
     "speed.cause.* fact)"),
    ("speed.cause.offload", "str", None, "part or none of the model on the GPU of a machine that has one"),
    ("speed.cause.cpu_build", "str", None, "the engine ran on the CPU only (a build or install without the GPU "
     "backend) on a machine with a GPU"),
    ("speed.cause.working_set", "str", None, "the model and KV cache are larger than Metal's recommended working "
     "set"),
    ("speed.cause.kv_cpu", "str", None, "the KV cache or attention ran on the CPU (-nkvo, or a quantized KV cache "
     "the GPU backend has no kernel for)"),
    ("speed.cause.threads", "str", None, "threads against cores: more threads than physical cores (SMT), threads "
     "on efficiency or little cores, or a few threads on many cores"),
    ("speed.cause.kv_cpu_inferred", "bool", None, "speed.cause.kv_cpu is inferred: a quantized KV cache on a GPU "
     "run below its usual range, nothing in the paste showing where attention ran"),
    ("speed.cause.pcie", "str", None, "the GPU's PCIe link is narrow or slow (x1/x4, a riser, a downgraded link)"),
    ("speed.cause.bar", "str", None, "Resizable BAR is off: the CPU reaches VRAM through a 256 MB window"),
]

LABELS = frozenset({"speed.decode.usual_class", "speed.decode.placement", "speed.causes"})
