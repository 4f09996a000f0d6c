"""Why a pasted run is slow: the causes the paste itself shows, likeliest first.

Each cause is read from facts the paste (or `analyze --hardware`) gave, never guessed from the speed
alone; `speed.cause.<name>` holds what showed it and `speed.causes` their names in this order:

- cpu_build: a GPU is on the machine (a device line, nvidia-smi, --hardware) but the engine ran on
  CPU backends only (system_info without a GPU section, llama-bench's backend column `CPU`/`BLAS`);
- offload: the model is split between GPU and host (`offloaded 20/33 layers`, llama-bench's ngl
  below the layer count), a GPU machine ran it with no layer on the GPU, or the weights alone are
  larger than the GPUs' memory (the spec row's VRAM);
- working_set: on Apple silicon, the model's weights are larger than Metal's
  recommendedMaxWorkingSetSize (the GPU then pages through unified memory);
- kv_cpu: the KV cache or attention ran on the CPU: `-nkvo 1`, a KV buffer only on the CPU while
  layers are on the GPU, or a quantized KV cache the GPU backend has no kernel for (with flash
  attention, CUDA builds compile the f16/q4_0/q8_0 pairs with K = V only, GGML_CUDA_FA_ALL_QUANTS
  off by default: another pair runs attention on the CPU, llama.cpp PR 28456), shown by the graph
  splitting into more pieces than the devices in use, or - a quantized cache and nothing showing
  where attention ran - by a GPU decode below its usual range (the likeliest place; medium);
- bar: Resizable BAR off (`--hardware "..., ReBAR off"`);
- pcie: the GPU's link is narrow (x1-x4) or runs below its generation;
- threads: threads against cores, for a run on the CPU: more threads than physical cores (SMT
  siblings share one core's memory pipeline), threads past a hybrid CPU's performance cores or a
  big.LITTLE SoC's big cores (the fast cores wait for the slow ones at every barrier), or fewer
  than half the cores.

Derive floor, pure. The strings are written here.
"""

from __future__ import annotations

from doctor.core.facts import Facts, Source
from doctor.derive.source import step_src
from doctor.derive.specs import table

GPU_BACKENDS = ("cuda", "rocm", "hip", "vulkan", "metal", "mtl", "sycl", "musa", "cann", "opencl", "kompute")
QUANT_KV = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "iq4_nl")
CUDA_FA_DEFAULT = {("f16", "f16"), ("q4_0", "q4_0"), ("q8_0", "q8_0"), ("bf16", "bf16")}
ORDER = ("cpu_build", "offload", "working_set", "kv_cpu", "bar", "pcie", "threads")
LABELS = {"cpu_build": "a CPU-only run on a machine with a GPU", "offload": "part of the model in host RAM",
          "working_set": "a model past Metal's working set", "kv_cpu": "the KV cache or attention on the CPU",
          "bar": "Resizable BAR off", "pcie": "a narrow PCIe link", "threads": "threads against cores"}


def _src(text: str) -> Source:
    return step_src("speed", text[:300])


def _int(facts: Facts, name: str) -> int | None:
    value = facts.value(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _backends(facts: Facts) -> list[str]:
    found = [str(b).lower() for b in facts.value("engine.backends") or [] if isinstance(b, str)] \
        if isinstance(facts.value("engine.backends"), list) else []
    bench = facts.value("bench.backend")
    if isinstance(bench, str):
        found += [b.strip().lower() for b in bench.split(",") if b.strip()]
    return found


def _gpu_on_machine(facts: Facts) -> str | None:
    for i in range(4):
        name = facts.value(f"host.gpu[{i}].name")
        if isinstance(name, str) and name.strip():
            return name.strip()
    return None


def _cpu_build(facts: Facts) -> str | None:
    gpu = _gpu_on_machine(facts)
    backends = _backends(facts)
    if gpu is None or facts.value("spec.kind") == "apple" or "apple" in gpu.lower():
        return None
    if backends and not any(b.startswith(GPU_BACKENDS) for b in backends):
        return f"the engine's backends are {', '.join(sorted(set(backends)))} only, on a machine with {gpu}"
    if facts.value("engine.gpu_offload_supported") is False:
        return f"the engine was built without a GPU backend, on a machine with {gpu}"
    return None


def _offload(facts: Facts) -> str | None:
    placed, total = _int(facts, "run.offloaded_layers"), _int(facts, "run.total_layers")
    if placed is not None and total is not None and placed < total:
        return f"{placed} of {total} layers on the GPU"
    if facts.value("run.offloaded_layers") == 0 and total:
        return f"0 of {total} layers on the GPU"
    shown = facts.value("run.gpu_share")
    if isinstance(shown, int | float) and shown < 1.0 and (shown > 0 or _gpu_on_machine(facts)):
        return f"ollama ps shows {1 - shown:.0%} of the model on the CPU"
    if facts.value("speed.decode.placement") == "partial":
        asked = facts.value("config.n_gpu_layers")
        return f"-ngl {asked}: part of the model in host RAM" if isinstance(asked, int) else \
            "the model is split between the GPU and host RAM"
    if facts.value("config.n_gpu_layers") == 0 and any(b.startswith(GPU_BACKENDS) for b in _backends(facts)) \
            and facts.value("spec.kind") != "apple":
        return "ngl 0: a GPU build with every layer left on the CPU"
    return _past_vram(facts)


def _past_vram(facts: Facts) -> str | None:
    """A discrete GPU run whose weights alone are more than the cards' memory: part of the model stays in host
    RAM whatever the settings (Ollama splits it; llama.cpp needs a lower -ngl)."""
    row = table().named(str(facts.value("spec.device", "")))
    weights = _int(facts, "model.weights_bytes") or _int(facts, "model.file_bytes")
    if row is None or row.kind != "gpu" or not row.vram_gib or weights is None:
        return None
    count = _int(facts, "host.gpu.count") or 1
    vram = row.vram_gib * count * (1 << 30)
    if weights <= vram:
        return None
    return (f"the model's {weights / 1e9:.1f} GB of weights are more than the {count}x {row.vram_gib:g} GiB of "
            f"{row.name}: part of it runs from host RAM")


def _working_set(facts: Facts) -> str | None:
    limit = _int(facts, "host.gpu[0].working_set")
    weights = _int(facts, "model.weights_bytes") or _int(facts, "model.file_bytes")
    if limit is None or weights is None or weights <= limit:
        return None
    return (f"the model's {weights / 1e9:.1f} GB of weights are more than Metal's recommendedMaxWorkingSetSize "
            f"({limit / 1e9:.1f} GB)")


def _kv_cpu(facts: Facts) -> str | None:
    if facts.value("config.offload_kqv") is False:
        return "the KV cache kept in host RAM (-nkvo / offload_kqv off)"
    placed = _int(facts, "run.offloaded_layers")
    if facts.value("run.kv_gpu_bytes") == 0 and _int(facts, "run.kv_host_bytes") and placed:
        return f"the KV cache is in host RAM while {placed} layers are on the GPU"
    k, v = str(facts.value("config.type_k", "")).lower(), str(facts.value("config.type_v", "")).lower()
    quant = k in QUANT_KV or v in QUANT_KV
    if not quant:
        return None
    splits = _int(facts, "run.graph_splits")
    backends = _backends(facts)
    flash = facts.value("config.flash_attn")
    # no backend in the paste (a post's prose): an NVIDIA GPU's engine runs CUDA
    cuda = any(b.startswith(("cuda", "rocm", "hip")) for b in backends) or (not backends and _nvidia(facts))
    if cuda and flash in ("enabled", "on", True) and (k, v or k) not in CUDA_FA_DEFAULT:
        return (f"a {k}/{v or k} KV cache with flash attention: CUDA builds compile only f16, q4_0 and q8_0 with "
                "K = V by default, so attention runs on the CPU")
    if splits is not None and splits > 2:
        return f"a {k}/{v or k} KV cache and {splits} graph splits: attention on the quantized cache ran on the CPU"
    return None


def _kv_cpu_likely(facts: Facts) -> str | None:
    """A quantized KV cache where nothing in the paste shows where attention ran."""
    k, v = str(facts.value("config.type_k", "")).lower(), str(facts.value("config.type_v", "")).lower()
    if not (k in QUANT_KV or v in QUANT_KV) or facts.value("config.offload_kqv") is False:
        return None
    head = _int(facts, "model.head_dim_k")
    cuda = any(b.startswith(("cuda", "rocm", "hip")) for b in _backends(facts)) or _nvidia(facts)
    if cuda and facts.value("config.flash_attn") in ("enabled", "on", True) and (k, v or k) in CUDA_FA_DEFAULT \
            and head is not None and head <= 128:
        return None  # CUDA's default flash-attention kernels cover this pair at this head size
    if facts.value("spec.kind") == "gpu" and facts.value("speed.decode.placement") == "below":
        # the paste shows the quantized cache but not where attention ran: below the usual range, it is the
        # likeliest place (a backend without an attention kernel for this cache type or this model's head size
        # gives the op to the CPU: llama.cpp issue 12352, Gemma's 256-wide heads; Ollama issue 9683)
        return (f"a {k}/{v or k} KV cache on a GPU run below its usual range: where the backend has no attention "
                "kernel for the cache type or the model's head size, attention runs on the CPU (the server log's "
                "graph splits would confirm it)")
    return None


def _nvidia(facts: Facts) -> bool:
    row = table().named(str(facts.value("spec.device", "")))
    return row is not None and row.kind == "gpu" and row.vendor == "nvidia"


def _bar(facts: Facts) -> str | None:
    return "Resizable BAR is off: the CPU reaches VRAM through a 256 MB window" \
        if facts.value("host.gpu[0].rebar") is False else None


def _pcie(facts: Facts) -> str | None:
    width, gen = _int(facts, "host.gpu[0].pcie.width_current"), _int(facts, "host.gpu[0].pcie.gen_current")
    if width is not None and width <= 4:
        return f"the GPU's PCIe link is x{width}" + (f" (gen {gen})" if gen else "")
    gen_max = _int(facts, "host.gpu[0].pcie.gen_max")
    if gen is not None and gen_max is not None and gen < gen_max:
        return f"the GPU's PCIe link runs at gen {gen} of {gen_max}"
    return None


def _cores(facts: Facts) -> tuple[int | None, int | None, int | None]:
    """Physical, logical and performance cores: the paste's, else the CPU's spec row."""
    physical, logical = _int(facts, "host.cpu.physical_cores"), _int(facts, "host.cpu.logical_cores")
    perf = _int(facts, "host.cpu.perf_cores")
    cpu_run = facts.value("spec.kind") in ("cpu", "apple")
    name = facts.value("spec.device") if cpu_run else facts.value("spec.host_device")
    row = table().named(str(name or ""))
    if row is not None:
        physical = physical or row.cores
        perf = perf or row.perf_cores
    return physical, logical, perf


def _threads(facts: Facts) -> str | None:
    threads = _int(facts, "config.n_threads")
    if threads is None or (facts.value("spec.kind") == "gpu" and facts.value("speed.decode.placement") != "partial"):
        return None  # a whole-model GPU offload: the CPU threads only feed it
    physical, logical, perf = _cores(facts)
    if physical and threads > physical:
        return f"{threads} threads on {physical} physical cores" + (
            f" ({logical} logical): SMT siblings share one core's memory pipeline" if logical and logical > physical
            else "")
    if perf and physical and perf < physical and threads > perf:
        return (f"{threads} threads on a CPU with {perf} performance cores of {physical}: the fast cores wait for the "
                "slow ones at every step")
    fast = perf if perf and physical and perf < physical else physical  # a hybrid CPU's fast cores
    if fast and fast >= 4 and threads * 2 <= fast:
        return f"{threads} threads on {fast} {'performance ' if fast != physical else ''}cores"
    return None


FINDERS = {"cpu_build": _cpu_build, "offload": _offload, "working_set": _working_set, "kv_cpu": _kv_cpu,
           "bar": _bar, "pcie": _pcie, "threads": _threads}


def derive_speed_causes(facts: Facts) -> None:
    """speed.cause.* and speed.causes for a run with a measured decode or prefill speed."""
    if not (facts.has("run.decode_tps") or facts.has("run.prefill_tps")):
        return
    found = []
    for name in ORDER:
        why = FINDERS[name](facts)
        if not why and name == "kv_cpu":
            why = _kv_cpu_likely(facts)
            if why:
                facts.set("speed.cause.kv_cpu_inferred", True, _src(why))
        if why:
            facts.set(f"speed.cause.{name}", why, _src(why))
            found.append(LABELS[name])
    if found:
        facts.set("speed.causes", found, _src("the slow causes the paste shows, likeliest first (speed.cause.*)"))
