"""The engine table: every engine llm-doctor knows, in one place.

One `Engine` row says what the rest of the tool needs to know about an engine: its name (the
`engine.name` fact, the `--engine` choice, the key of a rule's `engines:` and `fix:`), the label a
person reads, the other spellings its log signatures vote under, the engine it wraps (its logs print
that engine's lines too: doctor/sources/logs/detect.py gives the wrapper those lines), the settings it starts
with when not told otherwise (scan's plan, the memory estimate), the log parser that reads it (a lazy
"module:Class" string, resolved only when the analyzer asks), the lines that show it starting (where
one run ends and the next begins in a log), how it spells a change of settings (the fixes `--verify`
tried, the crash fixes) and what such a change means for its plan (`Semantics`), a folder of rules
that ships with it, and where its pieces outside the log are: the model store it keeps models in,
the reader of its running server's plan and how its launch commands read (lazy "module:attribute"
strings, imported through `pieces` by doctor/sources/models/resolve.py,
doctor/sources/live/metrics/server_plan.py and doctor/sources/logs/launch.py).

The rows are not written here: each engine is a folder, doctor/sources/engines/<engine>/, whose
engine.py holds its row, and every row is found through the entry-point group `llm_doctor.engine`
(pyproject.toml; a third-party engine is a folder of its own plus one entry point in its own
distribution). The table is read from the group on first use; core imports no engine module by
name. Where the installed metadata is not this source tree's own (a checkout run with
PYTHONPATH, an editable install made before the group existed), the group as this tree's
pyproject.toml declares it stands for llm-doctor's own entry points.

Table order is the order engines are listed in (fix commands, `--engine` choices, help text): the
entry points' order, a wrapper after what it wraps. `register` / `unregister` change the table at
run time (tests, a program that embeds llm-doctor); `reload` reads the group again.

Core: pure data; imports nothing of sources, render, tui or commands (the parser string and the
entry points are imported on demand).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

GROUP = "llm_doctor.engine"  # the entry-point group every engine row is found through
DISTRIBUTION = "llm-doctor"  # the distribution whose entry points are the built-in rows
T = TypeVar("T")


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
    """How an engine spells a change of settings: one form per setting (a RunSettings field, or a
    server's own setting such as max_num_seqs), joined into one command and wrapped. A form is a
    format string: "{v}" the value, "{V}" it in capitals, "{onoff}" on/off, "{bit}" 1/0, "{lower}"
    lower case, "{mmap}" / "{repack}" llama.cpp's flag that turns it off ("" when on)."""

    forms: Mapping[str, str] = field(default_factory=dict, hash=False)
    join: str = " "
    wrap: str = "{}"
    # settings given somewhere else than the rest (llama-cpp-python: sampling goes to each completion
    # call, not to Llama()): setting -> its own wrap; each wrap's parts are joined, the wraps by "; "
    wraps: Mapping[str, str] = field(default_factory=dict, hash=False)

    def spell(self, change: Mapping[str, object]) -> str | None:
        """The change in this engine's words; None when it spells none of its settings."""
        groups: dict[str, list[str]] = {}
        for name, value in change.items():
            form = self.forms.get(name)
            text = form.format(**_fields(value)).strip() if form else ""
            parts = groups.setdefault(self.wraps.get(name, self.wrap), [])
            if text and text not in parts:
                parts.append(text)
        spelled = [wrap.format(self.join.join(parts)) for wrap, parts in groups.items() if parts]
        return "; ".join(spelled) if spelled else None


@dataclass(frozen=True, slots=True)
class Semantics:
    """What an engine does with its own settings, so that a fix is applied to the run's plan in its
    terms before it is shown (doctor/derive/change.py applies it, doctor/judge/recheck.py judges it).

    `context` says what the number of its context setting counts:
    - "total": the KV cells every sequence shares (llama.cpp --ctx-size, Llama(n_ctx=)), split over
      the parallel slots unless one KV buffer is unified (--kv-unified);
    - "per_sequence": one request's context, and the runner gets it times the parallel slots (Ollama:
      num_ctx x OLLAMA_NUM_PARALLEL is the runner's --ctx-size);
    - "per_request": the longest request, served from a KV pool sized apart (vLLM --max-model-len,
      SGLang --context-length, TGI --max-total-tokens): the pool does not grow with it, and a request
      longer than the pool cannot run.
    `facts`: setting -> the fact its value is read into, where that is not `config.<setting>` (Ollama's
    n_ctx is config.num_ctx, vLLM's config.max_model_len)."""

    context: str = "total"
    facts: Mapping[str, str] = field(default_factory=dict, hash=False)



def _fields(value: object) -> dict[str, object]:
    """What a Spelling form may use besides "{v}"."""
    return {"v": value, "V": str(value).upper(), "onoff": "on" if value else "off", "bit": int(bool(value)),
            "lower": str(value).lower(), "mmap": "" if value else "--no-mmap", "repack": "" if value else "-nr"}


@dataclass(frozen=True, slots=True)
class Starts:
    """The lines that show an engine starting: where one run ends and the next begins inside one input
    (doctor/sources/logs/sessions.py). `lines` are regular-expression fragments (RE2 syntax), in the order
    one start prints them (vLLM prints its API server version, then initialises the engine: one start,
    two lines)."""

    lines: tuple[str, ...] = ()
    # a start line seen again is a new run only once the first run did something (llama.cpp: a draft
    # model loads right after the main one, in the same process)
    again_after_run: bool = False
    # the start lines of the engine it wraps are a model load per request, not a restart (Ollama's runner)
    wrapped_per_request: bool = False


@dataclass(frozen=True, slots=True)
class MetricQuery:
    """One fleet-wide PromQL query over a server's metrics: which fact it feeds (its unit is the
    catalogue's) and how the value is scaled."""

    fact: str
    promql: str  # with {sel} for the label matchers and {d} for the window
    kind: str = "float"  # float | int
    scale: float = 1.0


@dataclass(frozen=True, slots=True)
class Metrics:
    """What a server publishes at /metrics (Prometheus): the names of its metrics, one gauge it always
    exports, the queries that turn them into facts over a window (`fleet`), the prefix `watch --metrics`
    knows its page by, and whether it answers /props beside them (the slot count and size)."""

    family: str  # regular expression of its metric names ("vllm:.+")
    gauge: str  # a gauge it always exports: finds instances whose series went stale inside a window
    queries: tuple[MetricQuery, ...] = ()
    prefix: str = ""  # its metric names' prefix, as `watch --metrics` reads a page ("": not read there)
    props: bool = False  # it answers /props (llama-server)


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
    starts: Starts = field(default_factory=Starts)  # the lines that show it starting (log sessions)
    embedded: bool = False  # the engine scan's short trace and watch's default run go through (one row has it)
    # its own words for the fix of a known failure, by the failure's key (the crash causes of
    # doctor/sources/engines/_ggml/crashes.py), where the failure's settings change in its spelling
    # does not say it all
    fixes: Mapping[str, str] = field(default_factory=dict, hash=False)
    short: str = ""  # its name where a name must be an identifier (event data: fix_<short>); "": from the name
    metrics: Metrics | None = None  # what it publishes to Prometheus (None: nothing llm-doctor reads)
    store: str | None = None  # "module:attribute" of the model store it keeps models in (a ModelStore)
    server: str | None = None  # "module:attribute" of the reader of its running server's plan (a ServerReader)
    launch: str | None = None  # "module:attribute" of how its launch commands read (a Launch: sources/logs/launch.py)
    semantics: Semantics = field(default_factory=Semantics)  # what its settings mean for the plan (fix checks)

    @property
    def key(self) -> str:
        """`short`, or the name with each character that is not a letter or a digit as "_"."""
        return self.short or "".join(c if c.isalnum() else "_" for c in self.name)


_TABLE: dict[str, Engine] = {}
_BUILTIN: set[str] = set()  # the rows of llm-doctor's own entry points: unregister keeps them
_STATE = {"loaded": False, "generation": 0}


# -- reading the table ----------------------------------------------------------------------------

def _rows() -> dict[str, Engine]:
    if not _STATE["loaded"]:
        _load()
    return _TABLE


def table() -> tuple[Engine, ...]:
    """Every engine, in table order."""
    return tuple(_rows().values())


def names() -> tuple[str, ...]:
    return tuple(_rows())


def labels() -> tuple[str, ...]:
    return tuple(e.label for e in _rows().values())


def generation() -> int:
    """A number that changes whenever the table does (what a reader that caches rows compares)."""
    _rows()
    return _STATE["generation"]


def embedded() -> str:
    """The name of the embedded engine (the row marked `embedded`)."""
    found = next((e.name for e in _rows().values() if e.embedded), None)
    if found is None:
        raise LookupError(f"no engine row of {GROUP} is the embedded engine")
    return found


def __getattr__(name: str) -> str:
    if name == "EMBEDDED":  # the name the commands read: the embedded engine's row
        return embedded()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def canonical(name: object) -> str | None:
    """The table name for a name or an alias ("llama-server" -> "llama.cpp"); None when unknown (or not a name)."""
    if not isinstance(name, str):
        return None
    rows = _rows()
    if name in rows:
        return name
    return next((e.name for e in rows.values() if name in e.aliases), None)


def get(name: object) -> Engine | None:
    found = canonical(name)
    return _rows()[found] if found is not None else None


def wrappers() -> dict[str, str]:
    """wrapper -> the engine it wraps, in table order."""
    return {e.name: e.wraps for e in _rows().values() if e.wraps}


def defaults(name: object) -> Defaults:
    """The defaults of the engine of this table name; an unknown name (or none) gets llama.cpp's C
    API's (the embedded engine's)."""
    engine = _rows().get(name) if isinstance(name, str) else None
    return engine.defaults if engine is not None else Defaults()


def parser_specs() -> list[str]:
    """The parsers of the table's engines, each once, in table order."""
    specs: list[str] = []
    for engine in _rows().values():
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


def pieces(kind: type[T], spec: Callable[[Engine], str | None]) -> list[T]:
    """What each row's `spec` names as "module:attribute" (its store, its server reader), imported, in
    table order; rows that name none are left out. A TypeError where what is named is not a `kind`."""
    out: list[T] = []
    for engine in _rows().values():
        value = spec(engine)
        if value is None:
            continue
        found = _import(value)
        if not isinstance(found, kind):
            raise TypeError(f"engine {engine.name}: {value} is not a {kind.__name__}")
        out.append(found)
    return out


def rule_dirs() -> list[Path]:
    """The rule folders that come with engines, in table order."""
    return [e.rules for e in _rows().values() if e.rules is not None]


# -- changing the table ---------------------------------------------------------------------------

def register(engine: Engine) -> Engine:
    """Add an engine at the end of the table. Its name and aliases must be new; what it wraps must be known."""
    rows = _rows()
    taken = set(rows) | {a for e in rows.values() for a in e.aliases}
    clash = sorted(({engine.name, *engine.aliases}) & taken)
    if clash:
        raise ValueError(f"engine {engine.name}: {', '.join(clash)} already in the engine table")
    if engine.wraps is not None and engine.wraps not in rows:
        raise ValueError(f"engine {engine.name} wraps {engine.wraps}, which is not in the engine table")
    rows[engine.name] = engine
    _STATE["generation"] += 1
    return engine


def unregister(name: str) -> None:
    """Remove an engine that `register` (or another distribution's entry point) added; llm-doctor's own
    rows stay."""
    rows = _rows()
    if name in _BUILTIN:
        raise ValueError(f"engine {name} is built in")
    if any(e.wraps == name for e in rows.values()):
        raise ValueError(f"engine {name} is wrapped by another engine in the table")
    if rows.pop(name, None) is not None:
        _STATE["generation"] += 1


def reload() -> None:
    """Forget the table; the next read finds the rows through the entry points again (a distribution
    installed, or a path added, since)."""
    _TABLE.clear()
    _BUILTIN.clear()
    _STATE["loaded"] = False
    _STATE["generation"] += 1


# -- finding the rows -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Declared:
    name: str  # the entry point's name
    value: str  # "module:attribute" of an Engine row
    builtin: bool  # llm-doctor's own


def _load() -> None:
    """Fill the table from the entry points: each names an `Engine` row; a wrapper waits for what it wraps."""
    _STATE["loaded"] = True  # first: a row module that reads the table while it loads sees what is there
    pending: list[tuple[Engine, bool]] = []
    for declared in _declared():
        row = _import(declared.value)
        if not isinstance(row, Engine):
            raise TypeError(f"entry point {declared.name} = {declared.value} ({GROUP}) is not an Engine row")
        pending.append((row, declared.builtin))
    while pending:  # in declared order, each row as soon as what it wraps is in
        ready = next(((row, builtin) for row, builtin in pending if row.wraps is None or row.wraps in _TABLE), None)
        if ready is None:
            missing = ", ".join(f"{row.name} wraps {row.wraps}" for row, _ in pending)
            raise ValueError(f"engine table: {missing}, which no entry point of {GROUP} provides")
        pending.remove(ready)
        register(ready[0])
        if ready[1]:
            _BUILTIN.add(ready[0].name)


def _import(value: str) -> object:
    module, _, attr = value.partition(":")
    found: object = importlib.import_module(module.strip())
    for part in attr.strip().split("."):
        if part:
            found = getattr(found, part)
    return found


def _declared() -> list[_Declared]:
    """The group's entry points: this source tree's own (when run from a checkout) first, then every
    installed distribution's, in the order importlib.metadata lists them."""
    from importlib.metadata import entry_points

    own = _checkout_entry_points()
    found = [_Declared(name, value, True) for name, value in own] if own is not None else []
    seen = {d.name for d in found}
    for ep in entry_points(group=GROUP):
        dist = getattr(ep, "dist", None)
        mine = dist is not None and _normal(dist.metadata["Name"] or "") == DISTRIBUTION
        if (mine and own is not None) or ep.name in seen:
            continue  # the checkout's declaration stands for llm-doctor's own (the metadata may be another tree's)
        seen.add(ep.name)
        found.append(_Declared(ep.name, ep.value, mine))
    return found


def _checkout_entry_points() -> list[tuple[str, str]] | None:
    """The group as the pyproject.toml of the source tree this package is imported from declares it;
    None for an installed package (no pyproject.toml of llm-doctor beside it)."""
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if not pyproject.is_file():
        return None
    import tomllib

    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    if _normal(str(project.get("name", ""))) != DISTRIBUTION:
        return None
    group = project.get("entry-points", {}).get(GROUP, {})
    return [(str(name), str(value)) for name, value in group.items()]


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")
