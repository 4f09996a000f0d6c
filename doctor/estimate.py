"""Memory and timing math: derived facts computed from the facts the sources gave.

KV cache bytes follow llama.cpp's allocation exactly (src/llama-context.cpp, src/llama-kv-cache.cpp):
n_ctx is padded to a multiple of 256; without a unified KV each of n_seq_max streams gets
n_ctx_seq = pad256(n_ctx / n_seq_max) cells; each layer holds one K tensor of n_embd_k_gqa x cells
x streams elements and one V tensor likewise, sized by ggml_nbytes (elements x type_size / block).

Everything here is pure: `derive(facts)` reads a snapshot and adds `derived.*` (and a few summary
`run.*`) facts, each with an `estimate` source that says how it was computed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from doctor.facts import Facts, Source

KV_PAD = 256
MIB = 1 << 20

# ggml block size and bytes per block for the KV cache types llama.cpp accepts (-ctk / -ctv).
# Values from ggml-common.h; tests check them against gguf.GGML_QUANT_SIZES.
KV_TYPES: dict[str, tuple[int, int]] = {
    "f32": (1, 4),
    "f16": (1, 2),
    "bf16": (1, 2),
    "q8_0": (32, 34),
    "q4_0": (32, 18),
    "q4_1": (32, 20),
    "q5_0": (32, 22),
    "q5_1": (32, 24),
    "iq4_nl": (32, 18),
}

# Architectures whose cache the plain per-layer formula does not describe.
KV_UNMODELLED = ("mamba", "mamba2", "rwkv", "rwkv6", "rwkv7", "jamba", "deepseek2", "deepseek3",
                 "qwen3next", "lfm2", "granitehybrid", "falcon-h1", "plamo2", "nemotron_h", "bert",
                 "nomic-bert", "t5", "t5encoder")


def pad(n: int, multiple: int = KV_PAD) -> int:
    return ((n + multiple - 1) // multiple) * multiple


@dataclass(frozen=True, slots=True)
class KvShape:
    """What the KV size depends on, per model and settings."""

    n_layer: int
    n_head_kv: list[int]  # per layer
    head_dim_k: int
    head_dim_v: int

    @classmethod
    def uniform(cls, n_layer: int, n_head_kv: int, head_dim_k: int, head_dim_v: int) -> KvShape:
        return cls(n_layer, [n_head_kv] * n_layer, head_dim_k, head_dim_v)


def type_bytes(type_name: str, n_elements: int, row: int | None = None) -> int:
    """ggml_nbytes: elements x type size / block size; a row must hold whole blocks."""
    block, size = KV_TYPES[type_name.lower()]
    if n_elements % block or (row is not None and row % block):
        raise ValueError(f"rows of {row or n_elements} elements are not whole {type_name} blocks of {block}")
    return n_elements // block * size


def kv_cells(n_ctx: int, n_seq: int = 1, unified: bool = False) -> tuple[int, int]:
    """(cells per stream, streams) as llama.cpp allocates them."""
    n_ctx = pad(max(n_ctx, 1))
    if unified or n_seq <= 1:
        return n_ctx, 1
    return pad(n_ctx // n_seq), n_seq


def kv_bytes(shape: KvShape, n_ctx: int, type_k: str = "f16", type_v: str = "f16",
             n_seq: int = 1, unified: bool = False) -> int:
    cells, streams = kv_cells(n_ctx, n_seq, unified)
    total = 0
    for heads in shape.n_head_kv:
        if heads <= 0:
            continue  # a layer without KV (recurrent or shared)
        total += type_bytes(type_k, shape.head_dim_k * heads * cells * streams, shape.head_dim_k * heads)
        total += type_bytes(type_v, shape.head_dim_v * heads * cells * streams, shape.head_dim_v * heads)
    return total


def kv_bytes_per_token(shape: KvShape, type_k: str = "f16", type_v: str = "f16") -> float:
    block_k, size_k = KV_TYPES[type_k]
    block_v, size_v = KV_TYPES[type_v]
    return sum(h * (shape.head_dim_k * size_k / block_k + shape.head_dim_v * size_v / block_v)
               for h in shape.n_head_kv if h > 0)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


# -- derive ----------------------------------------------------------------------------------

def _src(name: str, text: str) -> Source:
    return Source("estimate", f"estimate.{name}", text=text)


def shape_from_facts(facts: Facts) -> KvShape | None:
    n_layer = facts.value("model.n_layer")
    if not isinstance(n_layer, int) or n_layer <= 0:
        return None
    per_layer = facts.value("model.n_head_kv_per_layer")
    n_head = facts.value("model.n_head")
    n_head_kv = facts.value("model.n_head_kv", n_head)
    if isinstance(per_layer, list) and len(per_layer) == n_layer and all(isinstance(h, int) for h in per_layer):
        heads = list(per_layer)
    elif isinstance(n_head_kv, int) and n_head_kv > 0:
        heads = [n_head_kv] * n_layer
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
    return KvShape(n_layer, heads, hd_k, hd_v)


def derive(facts: Facts) -> Facts:
    """Add derived facts in place and return the same snapshot."""
    _derive_run_summaries(facts)
    _derive_kv(facts)
    _derive_context(facts)
    _derive_threads(facts)
    _derive_load(facts)
    _derive_offload(facts)
    return facts


def _derive_kv(facts: Facts) -> None:
    arch = str(facts.value("model.arch", "")).lower()
    if arch and arch in KV_UNMODELLED:
        facts.set_default("model.kv_model_supported", False, _src("kv", f"architecture {arch} keeps recurrent or compressed state"))
        for name in ("derived.kv_bytes", "derived.kv_bytes_per_token"):
            facts.unknown(name, f"KV size is not modelled for architecture {arch}", _src("kv", arch))
        return
    shape = shape_from_facts(facts)
    if shape is None:
        facts.unknown("derived.kv_bytes", "model shape unknown (n_layer, n_head_kv, head dims)", _src("kv", ""))
        return
    if arch:
        facts.set_default("model.kv_model_supported", True, _src("kv", arch))
    type_k = str(facts.value("config.type_k", "")).lower()
    type_v = str(facts.value("config.type_v", "")).lower() or type_k
    if type_k not in KV_TYPES or type_v not in KV_TYPES:
        facts.unknown("derived.kv_bytes", "KV cache types unknown", _src("kv", f"type_k={type_k!r} type_v={type_v!r}"))
        return
    formula = (f"{shape.n_layer} layers x {max(shape.n_head_kv)} KV heads x ({shape.head_dim_k} x {type_k}"
               f" + {shape.head_dim_v} x {type_v})")
    per_token = kv_bytes_per_token(shape, type_k, type_v)
    facts.set("derived.kv_bytes_per_token", round(per_token), _src("kv", formula), "bytes")
    f16_factor = kv_bytes_per_token(shape, type_k, type_v) / kv_bytes_per_token(shape, "f16", "f16")
    facts.set("derived.kv_type_factor", round(f16_factor, 4), _src("kv", "bytes per token vs f16"))
    n_ctx = facts.value("config.n_ctx")
    if not isinstance(n_ctx, int) or n_ctx <= 0:
        return
    n_seq = facts.value("config.n_parallel", 1)
    n_seq = n_seq if isinstance(n_seq, int) and n_seq > 0 else 1
    unified = bool(facts.value("config.kv_unified", False))
    cells, streams = kv_cells(n_ctx, n_seq, unified)
    how = f"{formula} x {cells} cells x {streams} stream(s)"
    facts.set("derived.kv_cells", cells * streams, _src("kv", how), "tokens")
    try:
        facts.set("derived.kv_bytes", kv_bytes(shape, n_ctx, type_k, type_v, n_seq, unified), _src("kv", how), "bytes")
        facts.set("derived.kv_bytes_f16", kv_bytes(shape, n_ctx, "f16", "f16", n_seq, unified),
                  _src("kv", how.replace(type_k, "f16")), "bytes")
        facts.set("derived.kv_bytes_q8_0", kv_bytes(shape, n_ctx, "q8_0", "q8_0", n_seq, unified),
                  _src("kv", "same cells at q8_0"), "bytes")
    except ValueError as exc:
        facts.unknown("derived.kv_bytes", str(exc), _src("kv", how))


def _needed_tokens(facts: Facts) -> tuple[int | None, str]:
    prompt = facts.value("config.prompt_tokens")
    new = facts.value("config.max_new_tokens")
    if isinstance(prompt, int) and isinstance(new, int):
        return prompt + new, "planned prompt + max new tokens"
    used = facts.value("run.tokens_used_max")
    if isinstance(used, int):
        return used, "most tokens a sequence held in the input"
    requested = facts.value("server.request_tokens_max")
    if isinstance(requested, int):
        return requested, "largest request seen"
    prompt_max = facts.value("run.prompt_tokens_max")
    if isinstance(prompt_max, int):
        return prompt_max, "largest prompt seen"
    return None, ""


def _needed_from_events(facts: Facts, n_seq_ctx: object) -> tuple[int | None, str]:
    """When no counts were printed, the overflow events still say the context was too small."""
    asked = [e.data.get("n_tokens") for kind in ("prompt_too_long", "truncation") for e in facts.events(kind)]
    numbers = [a for a in asked if isinstance(a, int) and a > 0]
    if numbers:
        return max(numbers), "tokens the rejected or truncated request asked for"
    full = facts.events("ctx_full") or facts.events("context_shift") or [
        e for e in facts.events("decode_failed") if e.data.get("ret") == 1]
    if full and isinstance(n_seq_ctx, int) and n_seq_ctx > 0:
        return 2 * n_seq_ctx, "the context ran out: at least double it"
    return None, ""


def _derive_context(facts: Facts) -> None:
    n_ctx = facts.value("config.n_ctx")
    n_par = facts.value("config.n_parallel", 1)
    n_par = n_par if isinstance(n_par, int) and n_par > 0 else 1
    n_seq_ctx = facts.value("config.n_ctx_seq")
    if not isinstance(n_seq_ctx, int) and isinstance(n_ctx, int):
        unified = bool(facts.value("config.kv_unified", False))
        n_seq_ctx = n_ctx if unified or n_par == 1 else n_ctx // n_par
        facts.set("derived.n_ctx_seq", n_seq_ctx, _src("context", f"n_ctx {n_ctx} / {n_par} slot(s)"), "tokens")
    elif isinstance(n_seq_ctx, int):
        facts.set("derived.n_ctx_seq", n_seq_ctx, _src("context", "engine's per-sequence context"), "tokens")
    need, how = _needed_tokens(facts)
    if need is None:
        need, how = _needed_from_events(facts, n_seq_ctx)
    if need is None:
        return
    facts.set("derived.tokens_needed", need, _src("context", how), "tokens")
    train = facts.value("model.n_ctx_train")
    recommended = pad(need + max(64, need // 10))  # room for the reply's end and the chat template
    if isinstance(train, int) and train > 0:
        recommended = min(recommended, train)
    facts.set("derived.ctx_recommended", recommended,
              _src("context", f"{need} tokens needed + 10% headroom, rounded up to 256"
                   + (f", capped at n_ctx_train {train}" if isinstance(train, int) else "")), "tokens")
    facts.set("derived.ctx_slot_recommended", recommended * n_par,
              _src("context", f"{recommended} per slot x {n_par} slot(s)"), "tokens")
    if isinstance(n_seq_ctx, int) and n_seq_ctx > 0:
        facts.set("derived.tokens_over", max(0, need - n_seq_ctx), _src("context", f"{need} needed - {n_seq_ctx} per sequence"), "tokens")
        facts.set("derived.ctx_headroom", round(n_seq_ctx / max(need, 1), 3), _src("context", f"{n_seq_ctx} / {need}"))
        kv_tok = facts.value("derived.kv_bytes_per_token")
        if isinstance(kv_tok, int) and isinstance(n_ctx, int):
            need_cells = pad(need) * n_par
            facts.set("derived.kv_bytes_at_need", kv_tok * need_cells,
                      _src("context", f"{kv_tok} B/token x {need_cells} cells"), "bytes")
    prompt = facts.value("config.prompt_tokens", facts.value("run.prompt_tokens"))
    if isinstance(prompt, int) and isinstance(n_seq_ctx, int):
        facts.set("derived.safe_max_new_tokens", max(0, n_seq_ctx - prompt),
                  _src("context", f"{n_seq_ctx} per sequence - {prompt} prompt tokens"), "tokens")


def _derive_threads(facts: Facts) -> None:
    threads = facts.value("config.n_threads")
    usable = facts.value("host.cpu.usable_cores")
    if not isinstance(usable, int | float):
        physical = facts.value("host.cpu.physical_cores")
        usable = physical if isinstance(physical, int) else None
    if isinstance(usable, int | float) and usable > 0:
        facts.set("derived.threads_recommended", max(1, int(usable)),
                  _src("threads", "physical cores within the CPU quota and affinity"), "threads")
        if isinstance(threads, int) and threads > 0:
            facts.set("derived.threads_over", round(threads / usable, 3),
                      _src("threads", f"{threads} threads / {usable:g} usable cores"))


def _derive_load(facts: Facts) -> None:
    load_ms = facts.value("run.load_ms")
    size = facts.value("model.file_bytes")
    if isinstance(load_ms, int | float) and isinstance(size, int) and load_ms > 0:
        facts.set("run.load_mb_s", round(size / 1e6 / (load_ms / 1000), 1),
                  _src("load", f"{size} bytes in {load_ms:.0f} ms"), "MB/s")
    read = facts.value("model.storage.read_mb_s")
    if isinstance(read, int | float) and read > 0 and isinstance(size, int):
        facts.set("derived.load_expected_ms", round(size / 1e6 / read * 1000, 1),
                  _src("load", f"{size} bytes at {read:.0f} MB/s"), "ms")


def _derive_offload(facts: Facts) -> None:
    off = facts.value("run.offloaded_layers")
    total = facts.value("run.total_layers")
    if isinstance(off, int) and isinstance(total, int) and total > 0:
        facts.set("run.gpu_layers_share", round(off / total, 4), _src("offload", f"{off}/{total} layers"))


def _derive_run_summaries(facts: Facts) -> None:
    steps = facts.value("run.decode_ms")
    if isinstance(steps, list) and steps and all(isinstance(s, int | float) for s in steps):
        # the first step often carries one-time warm-up; judge jitter on the steady state
        steady = [float(s) for s in (steps[1:] if len(steps) > 4 else steps)]
        p50 = percentile(steady, 50)
        src = _src("decode", f"{len(steady)} steady decode steps")
        facts.set_default("run.decode_ms_p50", round(p50, 3), src, "ms")
        facts.set_default("run.decode_ms_p99", round(percentile(steady, 99), 3), src, "ms")
        facts.set_default("run.decode_ms_max", round(max(steady), 3), src, "ms")
        facts.set_default("run.decode_ms_mean", round(sum(steady) / len(steady), 3), src, "ms")
        facts.set_default("run.decode_ms_total", round(sum(float(s) for s in steps), 3), src, "ms")
        facts.set_default("run.decode_tokens", len(steps), src, "tokens")
        if p50 > 0:
            facts.set_default("run.decode_spike_ratio", round(percentile(steady, 99) / p50, 3), src)
            facts.set_default("run.decode_spikes", sum(1 for s in steady if s > 3 * p50), src, "steps")
    total = facts.value("run.decode_ms_total")
    n = facts.value("run.decode_tokens")
    if isinstance(total, int | float) and isinstance(n, int) and total > 0 and n > 0:
        facts.set_default("run.decode_tps", round(n / (total / 1000), 2), _src("decode", f"{n} tokens in {total:.0f} ms"), "tokens/s")
    prefill = facts.value("run.prefill_ms")
    if isinstance(prefill, int | float) and isinstance(total, int | float) and prefill + total > 0:
        facts.set_default("run.prefill_share", round(prefill / (prefill + total), 4),
                          _src("run", f"prefill {prefill:.0f} ms vs decode {total:.0f} ms"))
