"""A settings change applied to a run's plan in the engine's own terms, and the derivations run again:
what the run would be with a fix (issue 37: every fix is checked before it is shown, by
doctor/judge/recheck.py).

The engine table says what each engine's settings mean (`Semantics`, doctor/core/engines.py): a
context of "total" scope is the KV cells all slots share (llama.cpp --ctx-size: split over --parallel
unless --kv-unified), one of "per_sequence" scope is one request's and the runner holds it times the
slots (Ollama: num_ctx x OLLAMA_NUM_PARALLEL), one of "per_request" scope is the longest request a KV
pool sized apart serves (vLLM --max-model-len, SGLang --context-length, TGI --max-total-tokens). The
other settings are one fact each (`setting_fact`). What the run observed (its log lines, its events,
the machine) stays as it was; the plan's facts change, and every fact a derive step computed is
computed again from them.

`current` reads the run's own value of a setting in the same terms (the engine's default where the
run did not say), so that a fix asking for what is already so can be told apart.

Derive floor: pure, reads and builds Facts; the words of the sources are this module's.
"""

from __future__ import annotations

from typing import Any

from doctor.core import catalog, engines
from doctor.core.facts import Facts, Source
from doctor.core.vocab import KV_TYPES
from doctor.derive.memory import pad

SAMPLING = ("temperature", "repeat_penalty", "repeat_last_n", "top_k", "top_p", "min_p", "seed")
ALL_LAYERS = -1  # n_gpu_layers: every layer (llama.cpp -1 / "all"; Ollama 999)
SOURCE = Source("estimate", "estimate.change", text="the fix applied to the run's settings")


def _semantics(engine: str | None) -> engines.Semantics:
    row = engines.get(engine)
    return row.semantics if row is not None else engines.Semantics()


def setting_fact(setting: str, engine: str | None) -> str:
    """The fact a setting's value is read into, for this engine."""
    own = _semantics(engine).facts.get(setting)
    if own:
        return own
    if setting in SAMPLING:
        return f"sampling.{setting}"
    return f"config.{setting}"


def slots(facts: Facts) -> int:
    """The parallel sequences the run's context is shared by (1 when nothing says more)."""
    for name in ("config.n_parallel", "server.ollama.num_parallel_env"):
        value = facts.value(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 1


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _all_layers_on_gpu(facts: Facts) -> bool:
    off, total = _int(facts.value("run.offloaded_layers")), _int(facts.value("run.total_layers"))
    if off is not None and total:
        return off >= total
    asked, layers = _int(facts.value("config.n_gpu_layers")), _int(facts.value("derived.total_layers"))
    return asked is not None and (asked < 0 or (layers is not None and asked >= layers))


def current(facts: Facts, setting: str, engine: str | None) -> Any:
    """The run's own value of a setting, in the engine's terms: what the fix would be compared with.
    None where neither the run nor the engine's defaults say."""
    scope = _semantics(engine).context
    if setting == "n_ctx":
        if scope == "total":
            return _int(facts.value("config.n_ctx_requested")) or _int(facts.value("config.n_ctx"))
        return _int(facts.value(setting_fact("n_ctx", engine))) or _int(facts.value("config.n_ctx_seq"))
    if setting == "n_gpu_layers":
        if _all_layers_on_gpu(facts):
            return ALL_LAYERS
        return _int(facts.value("run.offloaded_layers")) if facts.has("run.offloaded_layers") \
            else _int(facts.value("config.n_gpu_layers"))
    if setting == "n_threads_batch" and not facts.has("config.n_threads_batch"):
        return facts.value("config.n_threads")  # llama.cpp: the batch threads default to the threads
    if setting == "flash_attn":
        value = str(facts.value("config.flash_attn", engines.defaults(engine).flash_attn)).lower()
        return True if value in ("enabled", "on", "true", "1") else False if value in ("disabled", "off",
                                                                                         "false", "0") else None
    if setting in ("type_k", "type_v"):
        value = facts.value(f"config.{setting}")
        return str(value).lower() if value is not None else getattr(engines.defaults(engine), setting)
    if setting == "n_parallel":
        return slots(facts)
    value = facts.value(setting_fact(setting, engine))
    if value is None and setting in ("n_batch", "n_ubatch"):
        return getattr(engines.defaults(engine), setting)
    return value


def apply(facts: Facts, change: dict[str, Any], engine: str | None) -> Facts:
    """A new snapshot: the run's observations with the change set as the engine would set it, and the
    derived facts computed again (the caller runs derive: see `changed`)."""
    out = Facts()
    for fact in facts:
        if fact.source.kind != "estimate":  # what a derive step computed is computed again
            out.add(fact)
    for event in facts.events():
        out.add_event(event)
    out.events_observed = facts.events_observed
    out.inputs = list(facts.inputs)
    for setting, value in change.items():
        _set(out, setting, value, engine)
    return out


def _put(facts: Facts, name: str, value: Any) -> None:
    if catalog.is_known(name):
        facts.set(name, value, SOURCE)


def _set(facts: Facts, setting: str, value: Any, engine: str | None) -> None:
    scope = _semantics(engine).context
    n_par = slots(facts)
    if setting == "n_ctx" and isinstance(value, int):
        if scope == "total":
            _put(facts, "config.n_ctx", pad(value))
            _put(facts, "config.n_ctx_requested", value)
            if facts.has("config.n_ctx_seq"):  # the engine's printed split is the old context's
                per_seq = pad(value) if facts.value("config.kv_unified") is True or n_par == 1 else pad(value) // n_par
                _put(facts, "config.n_ctx_seq", per_seq)
        elif scope == "per_sequence":
            _put(facts, setting_fact("n_ctx", engine), value)
            _put(facts, "config.n_ctx", value * n_par)
            _put(facts, "config.n_ctx_requested", value * n_par)
            _put(facts, "config.n_ctx_seq", value)
        else:
            _put(facts, setting_fact("n_ctx", engine), value)
            _put(facts, "config.n_ctx_seq", value)
        return
    if setting == "n_parallel" and isinstance(value, int) and value > 0:
        _put(facts, "config.n_parallel", value)
        if scope == "per_sequence" and facts.has(setting_fact("n_ctx", engine)):
            per_seq = _int(facts.value(setting_fact("n_ctx", engine))) or 0
            _put(facts, "config.n_ctx", per_seq * value)
        elif facts.has("config.n_ctx_seq") and scope == "total":
            cells = _int(facts.value("config.n_ctx")) or 0
            _put(facts, "config.n_ctx_seq", cells if facts.value("config.kv_unified") is True else cells // value)
        return
    if setting == "n_gpu_layers" and isinstance(value, int):
        total = _int(facts.value("run.total_layers"))
        layers = total if value < 0 or (total is not None and value > total) else value
        _put(facts, "config.n_gpu_layers", layers if layers is not None else value)
        if total is not None and layers is not None:
            _put(facts, "run.offloaded_layers", layers)
        return
    if setting == "flash_attn":
        _put(facts, "config.flash_attn", "enabled" if value else "disabled")
        return
    if setting in ("type_k", "type_v"):
        _put(facts, f"config.{setting}", str(value).lower())
        return
    _put(facts, setting_fact(setting, engine), value)


def kv_size(facts: Facts, engine: str | None, *, in_bytes: bool = True) -> float | None:
    """What the KV cache the engine allocates at load weighs, to compare a run with its fix: its bytes
    where the model's shape is known (and `in_bytes`), else its cells times the width of the cache type
    in f16 cells (f16 = 1, q8_0 = 0.53). None for an engine whose KV pool does not follow its context
    setting (vLLM, SGLang, TGI: see the pool's own figures)."""
    if _semantics(engine).context == "per_request":
        return None
    size = facts.value("derived.kv_bytes")
    if in_bytes and isinstance(size, int | float) and not isinstance(size, bool):
        return float(size)
    cells = _int(facts.value("config.n_ctx"))
    if cells is None:
        return None
    width = [KV_TYPES.get(str(current(facts, t, engine) or "f16"), (1, 2)) for t in ("type_k", "type_v")]
    return pad(cells) * sum(size / block for block, size in width) / 4
