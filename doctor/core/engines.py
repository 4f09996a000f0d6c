"""The engine table: every engine llm-doctor knows, in one place.

One `Engine` row says what the rest of the tool needs to know about an engine: its name (the
`engine.name` fact, the `--engine` choice, the key of a rule's `engines:` and `fix:`), the label a
person reads, the other spellings its log signatures vote under, the engine it wraps (its logs print
that engine's lines too: doctor/sources/logs/detect.py gives the wrapper those lines), the settings it starts
with when not told otherwise (scan's plan, the memory estimate), the log parser that reads it (a lazy
"module:Class" string, resolved only when the analyzer asks), how it spells a change of settings
(the fixes `--verify` tried), and a folder of rules that ships with it.

Table order is the order engines are listed in (fix commands, `--engine` choices, help text).
Adding an engine is one parser module, one `register(Engine(...))` and its rules; the table's rows
for the engines llm-doctor ships are below. `register` / `unregister` change the table at run
time (plugins, tests).

Core: pure data; imports nothing of logs, render, tui or commands (the parser string is imported
by `parser_class`, on demand).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

EMBEDDED = "llama-cpp-python"  # the engine scan's short trace and watch's default run go through


@dataclass(frozen=True, slots=True)
class Defaults:
    """The settings an engine starts with when it is not told otherwise."""

    threads: str | None = "half-logical"  # "physical": one per physical core; "half-logical": os.cpu_count() // 2;
    #                                       "logical": every CPU; None: no CPU thread setting (a GPU server)
    flash_attn: str = "disabled"  # auto | disabled | enabled
    swa_full: bool = True  # full-size KV cache for sliding-window layers (llama.cpp's C API default)
    n_batch: int = 512
    n_ubatch: int = 512
    type_k: str = "f16"
    type_v: str = "f16"
    prompt_cache_mib: int = 0  # host memory the server may fill with cached prompt states (llama-server --cache-ram)


@dataclass(frozen=True, slots=True)
class Spelling:
    """How an engine spells a change of settings: one form per RunSettings field (doctor/judge/fixmap.py
    fills "{v}" and its other fields), joined into one command and wrapped."""

    forms: Mapping[str, str] = field(default_factory=dict, hash=False)
    join: str = " "
    wrap: str = "{}"


@dataclass(frozen=True, slots=True)
class Engine:
    name: str  # engine.name, the --engine choice, the key in a rule's engines: and fix:
    label: str  # for people: "Ollama", "vLLM"
    parser: str | None = None  # "module:Class" of the LogParser that reads its logs (several engines may share one)
    aliases: tuple[str, ...] = ()  # other names its signature lines vote under ("llama-server")
    wraps: str | None = None  # the engine whose lines its logs also hold (Ollama prints llama.cpp's)
    defaults: Defaults = field(default_factory=Defaults)
    spelling: Spelling | None = None  # None: llm-doctor does not spell settings changes for it
    rules: Path | None = None  # a folder of rule files that comes with the engine (loaded after the built-ins)


_LLAMACPP_PARSER = "doctor.sources.logs.llamacpp:LlamaCppParser"

# RunSettings field -> the engine's form; "{v}" the value, the other fields: doctor/judge/fixmap.py
_LLAMACPP_FLAGS = {
    "n_ctx": "--ctx-size {v}", "n_threads": "--threads {v}", "n_threads_batch": "--threads-batch {v}",
    "n_batch": "--batch-size {v}", "n_ubatch": "--ubatch-size {v}", "n_gpu_layers": "--n-gpu-layers {v}",
    "type_k": "--cache-type-k {v}", "type_v": "--cache-type-v {v}", "flash_attn": "--flash-attn {onoff}",
    "use_mmap": "{mmap}", "use_extra_bufts": "{repack}", "temperature": "--temp {v}",
    "repeat_penalty": "--repeat-penalty {v}", "repeat_last_n": "--repeat-last-n {v}", "top_k": "--top-k {v}",
    "top_p": "--top-p {v}", "min_p": "--min-p {v}",
}
_LCP_ARGS = {
    "n_ctx": "n_ctx={v}", "n_threads": "n_threads={v}", "n_threads_batch": "n_threads_batch={v}",
    "n_batch": "n_batch={v}", "n_ubatch": "n_ubatch={v}", "n_gpu_layers": "n_gpu_layers={v}",
    "type_k": "type_k=GGML_TYPE_{V}", "type_v": "type_v=GGML_TYPE_{V}", "flash_attn": "flash_attn={v}",
    "use_mmap": "use_mmap={v}", "use_extra_bufts": "use_extra_bufts={v}", "temperature": "temperature={v}",
    "repeat_penalty": "repeat_penalty={v}", "repeat_last_n": "last_n_tokens_size={v}", "top_k": "top_k={v}",
    "top_p": "top_p={v}", "min_p": "min_p={v}",
}
_OLLAMA_PARAMS = {
    "n_ctx": "PARAMETER num_ctx {v}", "n_threads": "PARAMETER num_thread {v}", "n_batch": "PARAMETER num_batch {v}",
    "n_gpu_layers": "PARAMETER num_gpu {v}", "type_k": "OLLAMA_KV_CACHE_TYPE={v}",
    "type_v": "OLLAMA_KV_CACHE_TYPE={v}", "flash_attn": "OLLAMA_FLASH_ATTENTION={bit}",
    "use_mmap": "PARAMETER use_mmap {lower}", "temperature": "PARAMETER temperature {v}",
    "repeat_penalty": "PARAMETER repeat_penalty {v}", "repeat_last_n": "PARAMETER repeat_last_n {v}",
    "top_k": "PARAMETER top_k {v}", "top_p": "PARAMETER top_p {v}", "min_p": "PARAMETER min_p {v}",
}

BUILTIN: tuple[Engine, ...] = (
    # llama.cpp's CLI and server: one thread per physical core, flash attention auto, swa_full false;
    # llama-server keeps prompt states in host memory up to --cache-ram (`llama-server --help`: "default: 8192")
    Engine("llama.cpp", "llama.cpp", _LLAMACPP_PARSER, aliases=("llama-server", "llama.cpp-library"),
           defaults=Defaults(threads="physical", flash_attn="auto", swa_full=False, prompt_cache_mib=8192),
           spelling=Spelling(_LLAMACPP_FLAGS)),
    # the C API through Python: n_threads = os.cpu_count() // 2, flash attention off, swa_full true
    Engine("llama-cpp-python", "llama-cpp-python", _LLAMACPP_PARSER, wraps="llama.cpp",
           spelling=Spelling(_LCP_ARGS, join=", ", wrap="Llama(..., {})")),
    Engine("ollama", "Ollama", "doctor.sources.logs.ollama:OllamaParser", wraps="llama.cpp",
           defaults=Defaults(threads="physical", swa_full=False), spelling=Spelling(_OLLAMA_PARAMS, join=" / ")),
    Engine("vllm", "vLLM", "doctor.sources.logs.vllm:VllmParser", defaults=Defaults(threads=None)),
    # TGI's llama.cpp backend (backends/llamacpp/src/main.rs): --n-threads defaults to num_cpus::get(),
    # flash attention on unless --disable-flash-attention
    Engine("tgi", "TGI", "doctor.sources.logs.tgi:TgiParser", wraps="llama.cpp",
           defaults=Defaults(threads="logical", flash_attn="enabled")),
)

_TABLE: dict[str, Engine] = {e.name: e for e in BUILTIN}


# -- reading the table ----------------------------------------------------------------------------

def table() -> tuple[Engine, ...]:
    """Every engine, in table order."""
    return tuple(_TABLE.values())


def names() -> tuple[str, ...]:
    return tuple(_TABLE)


def labels() -> tuple[str, ...]:
    return tuple(e.label for e in _TABLE.values())


def canonical(name: object) -> str | None:
    """The table name for a name or an alias ("llama-server" -> "llama.cpp"); None when unknown (or not a name)."""
    if not isinstance(name, str):
        return None
    if name in _TABLE:
        return name
    return next((e.name for e in _TABLE.values() if name in e.aliases), None)


def get(name: object) -> Engine | None:
    found = canonical(name)
    return _TABLE[found] if found is not None else None


def wrappers() -> dict[str, str]:
    """wrapper -> the engine it wraps, in table order."""
    return {e.name: e.wraps for e in _TABLE.values() if e.wraps}


def defaults(name: object) -> Defaults:
    """The defaults of the engine of this table name; an unknown name (or none) gets llama.cpp's C
    API's (the embedded engine's)."""
    engine = _TABLE.get(name) if isinstance(name, str) else None
    return engine.defaults if engine is not None else Defaults()


def parser_specs() -> list[str]:
    """The parsers of the table's engines, each once, in table order."""
    specs: list[str] = []
    for engine in _TABLE.values():
        if engine.parser and engine.parser not in specs:
            specs.append(engine.parser)
    return specs


def load(spec: str) -> type:
    """Import a "module:Class" string."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ValueError(f"a parser is 'module:Class' (got {spec!r})")
    cls: type = getattr(importlib.import_module(module), attr)
    return cls


def rule_dirs() -> list[Path]:
    """The rule folders that come with engines, in table order."""
    return [e.rules for e in _TABLE.values() if e.rules is not None]


# -- changing the table ---------------------------------------------------------------------------

def register(engine: Engine) -> Engine:
    """Add an engine at the end of the table. Its name and aliases must be new; what it wraps must be known."""
    taken = set(_TABLE) | {a for e in _TABLE.values() for a in e.aliases}
    clash = sorted(({engine.name, *engine.aliases}) & taken)
    if clash:
        raise ValueError(f"engine {engine.name}: {', '.join(clash)} already in the engine table")
    if engine.wraps is not None and engine.wraps not in _TABLE:
        raise ValueError(f"engine {engine.name} wraps {engine.wraps}, which is not in the engine table")
    _TABLE[engine.name] = engine
    return engine


def unregister(name: str) -> None:
    """Remove an engine that `register` added (the built-in rows stay)."""
    if any(e.name == name for e in BUILTIN):
        raise ValueError(f"engine {name} is built in")
    if any(e.wraps == name for e in _TABLE.values()):
        raise ValueError(f"engine {name} is wrapped by another engine in the table")
    _TABLE.pop(name, None)
