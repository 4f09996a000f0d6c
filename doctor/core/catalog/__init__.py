"""The fact catalogue: every fact name documented once, with its unit and type.

Each family lives in its own module (host, model, config, run, derived, server, ...). Rule loading
checks every fact a rule names against this catalogue, so a typo in a rule is an error at load
time, not a rule that silently never fires. Indexed names use `[]` for the index: `host.gpu[].name`
covers `host.gpu[0].name`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from doctor.core.catalog import arch, client, config, derived, host, model, run, server, speed, usual
from doctor.core.catalog import spec as spec_facts


@dataclass(frozen=True, slots=True)
class FactSpec:
    name: str
    type: str  # int | float | str | bool | list
    unit: str | None
    doc: str


_INDEX = re.compile(r"\[\d+\]")

EVENT_KINDS: dict[str, str] = {
    "oom": "out of memory; phase = weights | kv_cache | compute | runtime | concurrency | host | unknown",
    "alloc_failed": "an allocation failed without saying out of memory (phase as for oom)",
    "ctx_full": "the KV cache / context had no room for the next batch (memory slot, KV full)",
    "context_shift": "the engine discarded old tokens to continue (context shift / swapping)",
    "truncation": "the engine cut the input prompt to fit the context",
    "prompt_too_long": "a request's prompt (plus generation) was rejected for exceeding the context",
    "decode_failed": "a decode call returned an error",
    "load_failed": "the model failed to load",
    "context_failed": "the inference context could not be created",
    "no_gpu": "the engine found no usable GPU or was built without GPU support",
    "gpu_init_failed": "the GPU backend failed to initialise",
    "crash": "the engine aborted (GGML_ASSERT, abort, segfault, runner terminated)",
    "crash_cause": "a crash whose cause the crash table knows (doctor/sources/engines/_ggml/crashes.py); data: cause, "
                   "confidence, summary, fix (in words) and fix_<engine key> for each engine of the table "
                   "(fix_llama_cpp, fix_lcp, ...)",
    "crash_evidence": "a line that supports a crash_cause (an AMX weight buffer, the system line, a backtrace "
                      "frame); same data",
    "host_oom_kill": "the host ran out of memory and the engine was killed for it (the kernel's OOM killer, systemd's "
                     "or a container's report, SIGKILL / exit 137); phase = weights (no sign the load had finished) "
                     "| runtime (it had served); data: reporter, confidence, process, rss_bytes, after (prompt_save)",
    "host_oom_evidence": "another line reporting the same host out-of-memory kill (data: reporter)",
    "preempted": "a server preempted requests because its KV pool ran out",
    "kv_capacity": "a server's KV pool cannot hold one maximum-length sequence",
    "repetition": "the generated output loops (a span repeated many times)",
    "ctx_over_train": "the context is larger than the model was trained for",
    "reload": "a server unloads a loaded model to load it again for a request (Ollama: the request's load options "
              "differ from the runner's); data: engine",
    "slow_step": "a decode step far above the median step time",
    "warning": "an engine warning worth showing that no rule consumes directly",
    "message": "a catalogued warning or error message of an engine (doctor/sources/catalogue/messages); data: id, "
               "class (the diagnosis class it is evidence for), level, engine, fix (in the engine's words), known "
               "(an engine parser read that line already) and the numbers it carries",
    "triage": "a step of the crash triage: a short re-run after the embedded engine died (data: run, change, "
              "outcome; the last one: final, status)",
}


# Facts whose values are labels from a closed vocabulary (set by llm-doctor or printed by the engine:
# "vm", "nvme", "q8_0", "kv_cache"), never personal text: redaction leaves them alone even when a
# label equals a user or host name. Numbers and booleans are labels too (see is_label).
LABELS = frozenset({
    "config.engine", "config.load_mode", "config.flash_attn", "config.type_k", "config.type_v",
    "config.kv_cache_dtype", "derived.oom_phase", "derived.oom_device", "host.virtualized", "host.vm",
    "host.cpu.governor", "host.cpu.flags", "host.gpu.vendor", "engine.name", "engine.detect_confidence",
    "engine.backends", "engine.cpu_features", "engine.detected", "model.arch", "model.file_type",
    "model.storage.kind", "model.storage.fs_type", "model.storage.transport", "run.finish_reason",
    "server.limit_name", "server.vllm.quantization", "server.tgi.quantize", "server.ollama.kv_cache_type_env",
    "derived.weights_repack_buffers", "client.max_tokens_name", "client.frontend", "client.frontend_engine",
}) | speed.LABELS | spec_facts.LABELS | usual.LABELS


def _build() -> dict[str, FactSpec]:
    specs: dict[str, FactSpec] = {}
    for module in (host, model, config, run, derived, server, arch, client, speed, spec_facts, usual):
        for name, type_, unit, doc in module.FACTS:
            if name in specs:
                raise RuntimeError(f"fact {name} documented twice")
            specs[name] = FactSpec(name, type_, unit, doc)
    return specs


CATALOG: dict[str, FactSpec] = _build()


def normalise(name: str) -> str:
    """`host.gpu[0].name` → `host.gpu[].name`."""
    return _INDEX.sub("[]", name)


def spec(name: str) -> FactSpec | None:
    return CATALOG.get(normalise(name))


def is_known(name: str) -> bool:
    return normalise(name) in CATALOG


def is_label(name: str) -> bool:
    """The fact's value is a label or a number, not free text (see LABELS)."""
    found = spec(name)
    if found is None:
        return False
    return found.type in ("int", "float", "bool") or found.name in LABELS
