"""`llm-doctor scan`: before deployment - will this model load, fit and run fast here, with these settings?

Sources: the probes (machine, storage under the model, GPUs and PCIe, engine build, GGUF), the
planned settings (options, or stated defaults), and a short real trace through llama-cpp-python
(prefill plus a few dozen decode steps, in a child process). All of it becomes one Facts snapshot,
doctor/derive/ adds the memory budget, and the rule base judges it in "scan" mode.

Planned settings the user did not give are chosen for a pre-deployment check and said out loud
(config facts whose source names the reason): the context is the model's training context capped
at 4096, every layer goes to the GPU when there is one, threads are what the chosen engine would
start by default (so an oversubscribed default is caught), the KV cache is f16.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from doctor.commands.options import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    VERIFY_BUDGET_S,
    add_options,
    default_ctx,
)
from doctor.commands.output import check_writable, show_report
from doctor.commands.selection import filter_rules, flatten, split
from doctor.core import engines
from doctor.core.errors import EngineError, UsageError
from doctor.core.facts import Facts, Source
from doctor.sources.live.embedded import TRIAGE_BUDGET_S

HELP = "check this machine, a model and planned settings before deployment"
TRACE_MAX_TOKENS = 32
TRACE_PROMPT_CAP = 256
TRACE_TIMEOUT_S = 120.0
TRACE_SENTENCE = "The quick brown fox jumps over the lazy dog while the painter mixes colours. "
# the trace's short run must not replace the plan: its prompt, length and sampling are its own
PLANNED_ONLY = ("config.max_new_tokens", "config.prompt_tokens")
TRACE_OWN_PREFIXES = ("sampling.",)
PROBED_PREFIXES = ("model.",)  # read from the GGUF file by the probe: the trace does not override them
# what the trace says about its own input (whether engine output was read, whether loading ended) is
# not the scan's: the scan's evidence is the probes and the GGUF as well
TRACE_ONLY = ("run.recognised", "run.loaded")



def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scan", help=HELP, description=HELP + ". Without options: this machine, the embedded "
                       "SmolLM2-135M and a short real trace. Options share their names with watch and with "
                       "llama.cpp (-m, -c, -ngl, -t, -np, -b, -ub, -ctk, -ctv, -fa, -n).")
    add_options(p, "scan")
    p.add_argument("--replay-machine", metavar="DIR", help=argparse.SUPPRESS)  # a recorded machine (tests, reports)
    p.set_defaults(run="doctor.commands.pick:run_scan")  # -m DIR on a terminal: a list first (pick.py)


# -- the plan -------------------------------------------------------------------------------

@dataclass
class Plan:
    """The settings being checked, each with why it has its value."""

    values: dict[str, Any] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)

    def put(self, name: str, value: Any, why: str) -> None:
        self.values[name] = value
        self.why[name] = why

    def facts(self) -> Facts:
        facts = Facts()
        for name, value in self.values.items():
            facts.set(name, value, Source("config", "scan plan", text=self.why[name]))
        return facts


def engine_default_threads(engine: str, logical: int | None, physical: int | None) -> tuple[int | None, str]:
    """The thread count the engine starts with here (its defaults in the engine table, doctor/core/engines.py)."""
    rule = engines.defaults(engine).threads
    if rule is None:  # no CPU thread setting (a GPU server)
        return None, ""
    if rule == "physical":
        if physical:
            return physical, f"{engine}'s default: one thread per physical core ({physical}), quota not considered"
        return None, ""
    if rule == "logical":
        if logical:
            return logical, (f"{engine}'s default: every CPU ({logical}; num_cpus::get() also honours affinity"
                             " and quota)")
        return None, ""
    if logical:
        return max(logical // 2, 1), (f"llama-cpp-python's default: os.cpu_count() // 2 = {max(logical // 2, 1)}"
                                      " (host CPUs; affinity and container quota are not considered)")
    return None, ""


# how make_plan says an option was given; a preset value (an Ollama Modelfile, a server's settings:
# doctor/commands/model_choice.py) replaces it with its own why
PRESET_FLAGS = {"ctx_size": "-c/--ctx-size", "n_gpu_layers": "-ngl/--n-gpu-layers", "threads": "-t/--threads",
                "parallel": "-np/--parallel", "batch_size": "-b/--batch-size", "ubatch_size": "-ub/--ubatch-size"}


def make_plan(args: argparse.Namespace, engine: str, header: dict[str, Any], probes: Facts,
              preset: dict[str, tuple[Any, str]] | None = None) -> Plan:
    taken = {d: v for d, v in (preset or {}).items() if d in PRESET_FLAGS and getattr(args, d, None) is None}
    if taken:
        args = argparse.Namespace(**{**vars(args), **{d: v for d, (v, _) in taken.items()}})
    plan = _make_plan(args, engine, header, probes)
    for dest, (_, why) in taken.items():
        for key, text in plan.why.items():
            if text.startswith(PRESET_FLAGS[dest]):
                plan.why[key] = why + text[len(PRESET_FLAGS[dest]):]
    return plan


POSITIVE = (("ctx_size", "--ctx-size"), ("threads", "--threads"), ("parallel", "--parallel"),
            ("batch_size", "--batch-size"), ("ubatch_size", "--ubatch-size"))
NOT_NEGATIVE = (("prompt_tokens", "--prompt-tokens"), ("max_tokens", "-n/--n-predict"))


def check_settings(args: argparse.Namespace) -> None:
    """The settings given, refused before anything is probed: counts that must be positive (or 0 or more)."""
    for dest, flag in POSITIVE:
        value = getattr(args, dest, None)
        if value is not None and value <= 0:
            raise UsageError(f"{flag} must be positive (got {value})")
    for dest, flag in NOT_NEGATIVE:
        value = getattr(args, dest, None)
        if value is not None and value < 0:
            raise UsageError(f"{flag} must be 0 or more (got {value})")


def _make_plan(args: argparse.Namespace, engine: str, header: dict[str, Any], probes: Facts) -> Plan:
    from doctor.derive.memory import context_params  # the memory model: imported by a scan, not with the parser

    plan = Plan()
    defaults = engines.defaults(engine)  # what the engine starts with (the engine table)
    plan.put("config.engine", engine, "--engine" if args.engine else "the embedded engine (default)")
    if args.ctx_size is not None:
        n_ctx, why = args.ctx_size, "-c/--ctx-size"
    else:
        n_ctx, why = default_ctx(header.get("n_ctx_train"))
    plan.put("config.n_ctx_requested", n_ctx, why)
    ctx_why = why
    gpus = probes.value("host.gpu.count")
    if args.n_gpu_layers is not None:
        plan.put("config.n_gpu_layers", args.n_gpu_layers, "-ngl/--n-gpu-layers")
    elif isinstance(gpus, int) and gpus > 0:
        plan.put("config.n_gpu_layers", -1, "default: every layer on the GPU, since there is one")
    else:
        found = "no GPU found" if isinstance(gpus, int) else "GPUs not probed"
        plan.put("config.n_gpu_layers", 0, f"default: {found}, all layers on the CPU")
    if args.threads is not None:
        plan.put("config.n_threads", args.threads, "-t/--threads")
    else:
        threads, why = engine_default_threads(engine, probes.value("host.cpu.logical_cores"),
                                              probes.value("host.cpu.physical_cores"))
        if threads:
            plan.put("config.n_threads", threads, why)
    parallel = args.parallel if args.parallel is not None else 1
    plan.put("config.n_parallel", parallel, "-np/--parallel" if args.parallel is not None else "default: 1 sequence")
    cells = context_params(n_ctx, parallel).n_ctx
    plan.put("config.n_ctx", cells, ctx_why + (", padded to 256 as llama.cpp does" if parallel == 1 else
                                               f", padded to 256 per sequence as llama.cpp does ({parallel} x "
                                               f"{cells // parallel})"))
    type_k = args.type_k or defaults.type_k
    type_v = args.type_v or defaults.type_v
    plan.put("config.type_k", type_k,
             "-ctk/--cache-type-k" if args.type_k else f"default: {defaults.type_k} (llama.cpp's)")
    plan.put("config.type_v", type_v,
             "-ctv/--cache-type-v" if args.type_v else f"default: {defaults.type_v} (llama.cpp's)")
    if args.flash_attn:
        fa = {"on": "enabled", "off": "disabled", "auto": "auto"}[args.flash_attn]
        plan.put("config.flash_attn", fa, "-fa/--flash-attn")
    else:
        fa = defaults.flash_attn
        plan.put("config.flash_attn", fa, f"default: {engine}'s ({fa})")
    check_settings(args)
    batch = args.batch_size if args.batch_size is not None else defaults.n_batch
    ubatch = min(args.ubatch_size if args.ubatch_size is not None else defaults.n_ubatch, batch)
    plan.put("config.n_batch", batch, "-b/--batch-size" if args.batch_size else f"default: {defaults.n_batch}")
    plan.put("config.n_ubatch", ubatch, "-ub/--ubatch-size" if args.ubatch_size else f"default: {defaults.n_ubatch}")
    plan.put("config.use_mmap", not args.no_mmap, "--no-mmap" if args.no_mmap else "default: mmap on")
    if defaults.prompt_cache_mib:
        plan.put("config.cache_ram", defaults.prompt_cache_mib << 20,
                 f"default: llama-server's --cache-ram {defaults.prompt_cache_mib} MiB")
    if args.no_repack:
        plan.put("config.use_extra_bufts", False, "--no-repack")
    prompt = args.prompt_tokens if args.prompt_tokens is not None else DEFAULT_PROMPT_TOKENS
    new = args.max_tokens if args.max_tokens is not None else DEFAULT_MAX_TOKENS
    plan.put("config.prompt_tokens", prompt, "--prompt-tokens" if args.prompt_tokens is not None
             else f"default: {DEFAULT_PROMPT_TOKENS}")
    plan.put("config.max_new_tokens", new, "-n/--n-predict" if args.max_tokens is not None
             else f"default: {DEFAULT_MAX_TOKENS}")
    return plan


# -- selection ------------------------------------------------------------------------------

def split_selectors(names: list[str], option: str, rulebase: Any, probe_names: tuple[str, ...]) \
        -> tuple[set[str], set[str]]:
    """(probe names incl. 'trace' and 'bench', rule selectors); unknown names are a usage error."""
    return split(names, option, rulebase, probe_names, command="scan")


# -- running --------------------------------------------------------------------------------

def _progress(text: str) -> None:
    print(f"llm-doctor scan: {text}", file=sys.stderr, flush=True)


def _trace_prompt(tokens: int) -> str:
    words = max(8, min(tokens, TRACE_PROMPT_CAP))
    sentence = TRACE_SENTENCE.split()
    return " ".join(sentence[i % len(sentence)] for i in range(words))


def trace_settings(model_path: str, plan: Plan) -> Any:
    """The RunSettings of the short real run: the planned settings, a short prompt, a few dozen steps."""
    from doctor.sources.live.embedded.runner import RunSettings

    v = plan.values
    return RunSettings(
        model_path=model_path, n_ctx=int(v["config.n_ctx_requested"]), n_gpu_layers=int(v["config.n_gpu_layers"]),
        n_threads=v.get("config.n_threads"), n_batch=int(v["config.n_batch"]), n_ubatch=int(v["config.n_ubatch"]),
        type_k=str(v["config.type_k"]), type_v=str(v["config.type_v"]),
        flash_attn=v["config.flash_attn"] != "disabled", use_mmap=bool(v["config.use_mmap"]),
        prompt=_trace_prompt(int(v["config.prompt_tokens"])), max_tokens=TRACE_MAX_TOKENS, seed=1,
        use_extra_bufts=v.get("config.use_extra_bufts", True) is not False,
    )


def run_trace(model_path: str, plan: Plan, timeout_s: float = TRACE_TIMEOUT_S,
              triage: bool = True, settings: Any = None) -> tuple[Facts, list[str]]:
    """The short real run: the planned settings, a short prompt, a few dozen decode steps. When the
    engine crashes, triage finds the setting that avoids it and the trace is made with that.
    `settings` replaces the planned ones (--verify's re-runs)."""
    from doctor.sources.live.embedded.runner import run_embedded

    settings = settings if settings is not None else trace_settings(model_path, plan)
    run = run_embedded(settings, host=False, timeout_s=timeout_s, triage=triage, triage_budget_s=TRIAGE_BUDGET_S,
                       on_progress=_progress)
    trace = Facts()
    for fact in run.facts:
        if fact.name not in PLANNED_ONLY + TRACE_ONLY and not fact.name.startswith(TRACE_OWN_PREFIXES):
            trace.add(fact)
    for event in run.facts.events():
        trace.add_event(event)
    trace.events_observed = run.facts.events_observed
    trace.inputs.append("trace.llama-cpp-python")
    return trace, list(run.errors)


def trace_only(trace: Facts, probed: Facts) -> Facts:
    """The trace's facts less what the probes read from the model file itself: the file is the one
    source of truth for the model (llama.cpp's "file size" line is the tensor bytes, not the file)."""
    kept = Facts()
    for fact in trace:
        if fact.name.startswith(PROBED_PREFIXES) and probed.has(fact.name):
            continue
        kept.add(fact)
    for event in trace.events():
        kept.add_event(event)
    kept._event_counts = dict(trace.event_counts)  # totals beyond the kept events
    kept.events_observed = trace.events_observed
    kept.inputs = list(trace.inputs)
    return kept


# RunSettings field -> the plan's config fact (--verify re-plans with the fix applied)
PLAN_KEYS = {"n_threads": "config.n_threads", "n_batch": "config.n_batch", "n_ubatch": "config.n_ubatch",
             "n_gpu_layers": "config.n_gpu_layers", "type_k": "config.type_k", "type_v": "config.type_v",
             "use_mmap": "config.use_mmap", "use_extra_bufts": "config.use_extra_bufts"}


def replan(plan: Plan, changes: dict[str, Any]) -> Plan:
    """The plan with a fix applied, each changed value saying so."""
    out = Plan(dict(plan.values), dict(plan.why))
    for name, value in changes.items():
        why = f"--verify: {name} = {value}, the fix tried"
        if name == "n_ctx":
            out.put("config.n_ctx_requested", value, why)
            out.put("config.n_ctx", (int(value) + 255) // 256 * 256, why + ", padded to 256 as llama.cpp does")
        elif name == "flash_attn":
            out.put("config.flash_attn", "enabled" if value else "disabled", why)
        elif name in PLAN_KEYS:
            out.put(PLAN_KEYS[name], value, why)
    return out


def verify_scan(report: Any, model_path: str, plan: Plan, machine: Facts, rulebase: Any, engine: str,
                budget_s: float, triage: bool) -> None:
    """scan --verify: each setting fix re-planned and re-traced (same prompt and seed), then judged again."""
    import dataclasses

    from doctor.commands.verify import verify
    from doctor.judge.evaluate import diagnose
    from doctor.sources.probes.cpustat import CpuWindow, cores_facts

    base = trace_settings(model_path, plan)

    def run_job(changes: dict[str, Any], max_tokens: int | None, timeout_s: float) -> Any:
        planned = replan(plan, changes)
        settings = dataclasses.replace(trace_settings(model_path, planned),
                                       **{k: v for k, v in changes.items() if k not in ("n_ctx",)})
        if max_tokens is not None:
            settings = dataclasses.replace(settings, max_tokens=max_tokens)
        if settings.n_ubatch > settings.n_batch:
            settings = dataclasses.replace(settings, n_ubatch=settings.n_batch)
        facts = Facts()
        facts.merge(machine)
        errors: list[str] = []
        try:
            window = CpuWindow().start()  # each re-run judged on the share of the cores it had
            trace, errors = run_trace(model_path, planned, timeout_s=timeout_s, triage=triage, settings=settings)
            facts.merge(trace)
            facts.merge(cores_facts(window.stop()))
        except EngineError as exc:
            errors = [f"trace: {exc.one_line()}"]
        facts.merge(planned.facts())
        return diagnose(facts, rulebase, command="scan", mode="scan", engine=engine, errors=errors)

    verify(report, dataclasses.asdict(base), run_job, budget_s=budget_s, progress=_progress, rules=rulebase)


def kernel_probe(facts: Facts, trace: Facts, plan: Plan, roots: Any, errors: list[str], bench: bool = False) -> Facts:
    """The kernel probe's figures for the traced model at the planned threads and the setting the trace
    ran with (kept ones, else measured now, saying so on stderr: a first scan's within about 2 s, the
    other thread counts left for a later scan where it runs past that; `scan --bench` measures them all);
    never fails the scan."""
    from doctor.sources.live.embedded.kernels import BENCH_CAP_S, kernel_facts, request_from
    from doctor.sources.probes.base import try_text

    view = Facts()
    for part in (facts, trace, plan.facts()):
        view.merge(part)
    usable = view.value("host.cpu.usable_cores")
    request = request_from(view, int(usable) if isinstance(usable, int | float) and usable >= 1 else 1)
    if request is None:
        return Facts()
    try:
        cpuinfo = try_text(roots.procfs("cpuinfo")) or ""
        if bench:
            return kernel_facts(request, cpuinfo, progress=_progress, proc_root=roots.proc, timeout_s=BENCH_CAP_S,
                                target_s=None)
        return kernel_facts(request, cpuinfo, progress=_progress, proc_root=roots.proc)
    except Exception as exc:  # one source among several: report, never crash
        errors.append(f"kernel probe failed: {type(exc).__name__}: {exc}")
        return Facts()


class _Beside(threading.Thread):
    """One call run beside the main thread; result() waits for it and raises what it raised (a plain
    thread: concurrent.futures would cost the estimate path its import, logging included)."""

    def __init__(self, fn: Any, *args: Any) -> None:
        super().__init__(name="scan-probes", daemon=True)
        self._call = (fn, args)
        self._value: Any = None
        self._error: BaseException | None = None
        self.start()

    def run(self) -> None:
        fn, args = self._call
        try:
            self._value = fn(*args)
        except BaseException as exc:  # handed to result(), in the caller's thread
            self._error = exc

    def result(self) -> Any:
        self.join()
        if self._error is not None:
            raise self._error
        return self._value


def _trace_blocked(plan: Plan, facts: Facts, header_error: str | None) -> str | None:
    """Why the trace should not run (it would not fit, or the file is bad), or None."""
    if header_error is not None or facts.value("model.corrupt") is True:
        return "the model file was refused"
    size = facts.value("model.file_bytes")
    available = facts.value("host.ram.available")
    if plan.values.get("config.n_gpu_layers") == 0 and isinstance(size, int) and isinstance(available, int) \
            and size > available:
        return f"the model ({size >> 20} MiB) is larger than available RAM ({available >> 20} MiB)"
    return None


def _read_mmproj(path: str) -> Facts:
    """The vision projector's facts (doctor/sources/probes/gguf_mmproj.py); a missing or wrong file is a usage error."""
    from doctor.sources.probes.gguf_header import GgufCorrupt
    from doctor.sources.probes.gguf_mmproj import NotAProjector, collect_mmproj

    if not os.path.isfile(path):
        raise UsageError(f"--mmproj {path}: no such file")
    try:
        return collect_mmproj(path)
    except (GgufCorrupt, NotAProjector) as exc:
        raise UsageError(f"--mmproj {path}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    from doctor.derive.whatif import Budgets, apply_budgets, parse_size, parse_sizes
    from doctor.judge.evaluate import diagnose
    from doctor.judge.rulebase import load_rulebase
    from doctor.sources.probes import registry
    from doctor.sources.probes.base import ProbeContext, Roots
    from doctor.sources.probes.cpustat import CpuWindow, cores_facts
    from doctor.sources.probes.gguf_header import GgufCorrupt
    from doctor.sources.probes.gguf_model import read_model

    started = time.perf_counter()
    rulebase = load_rulebase(args.rules)
    budgets = Budgets(parse_size(args.ram, "--ram") if args.ram else None,
                      tuple(parse_sizes(args.vram, "--vram")) if args.vram else None)
    only_probes, only_rules = split_selectors(flatten(args.only), "--only", rulebase, registry.NAMES)
    skip_probes, skip_rules = split_selectors(flatten(args.skip), "--skip", rulebase, registry.NAMES)
    if args.verify_budget is None:
        args.verify_budget = VERIFY_BUDGET_S
    if args.verify_budget <= 0:
        raise UsageError(f"--verify-budget must be positive (got {args.verify_budget:g})")
    check_settings(args)
    if args.save:
        check_writable(args.save, "--save")
    if "bench" in only_probes:
        only_probes |= {"readbench", "gpubench"}
    if "bench" in skip_probes:
        skip_probes |= {"readbench", "gpubench"}
    rulebase = filter_rules(rulebase, only_rules, skip_rules)
    from doctor.commands.model_choice import choose_model

    choice = choose_model(args)  # -m (a path or a name), the default model, or what --url runs
    for note in choice.notes:
        _progress(note)
    engine = args.engine or choice.engine or engines.EMBEDDED
    mmproj_path = getattr(args, "mmproj", None) or choice.mmproj
    mmproj = _read_mmproj(mmproj_path) if mmproj_path else None

    roots, storage_path, machine_name = Roots(), None, None
    if args.replay_machine:
        from doctor.sources.probes.replay import load_machine

        try:
            machine = load_machine(args.replay_machine)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--replay-machine {args.replay_machine}: {exc}") from None
        roots, storage_path, machine_name = machine.roots, machine.model_path, machine.name
    model_path = choice.path
    threads = args.threads or engine_default_threads(engine, os.cpu_count(), None)[0]
    ctx = ProbeContext(roots=roots, model_path=model_path, storage_path=storage_path, bench=args.bench,
                       threads=threads)
    only = (only_probes - {"trace"} or {"(trace only)"}) if only_probes else None
    chosen = registry.select(args.bench, only, skip_probes)
    machine_probes = [p for p in chosen if p.cost != "heavy" and p.name != "gguf"]
    gguf = [p for p in chosen if p.name == "gguf"]
    heavy = [p for p in chosen if p.cost == "heavy"]
    _progress(f"probing {machine_name or 'this machine'} ({', '.join(p.name for p in chosen) or 'no probes'})")
    # the machine probes (mostly waiting on the engine's child process) overlap the header check;
    # results merge in the same order as before
    machine_job = _Beside(registry.collect, ctx, machine_probes)
    header: dict[str, Any] = {}
    header_error = None
    try:  # read once: the GGUF probe below gets the same ModelFile (in-process, or the user's cache)
        metadata = read_model(model_path).metadata
        header["n_ctx_train"] = metadata.get(f"{metadata.get('general.architecture')}.context_length")
    except GgufCorrupt as exc:
        header_error = str(exc)  # the gguf probe reports it as model.corrupt
    facts = apply_budgets(machine_job.result(), budgets)
    plan = make_plan(args, engine, header, facts, choice.preset)
    want_trace = not args.no_trace and (not only_probes or "trace" in only_probes) and "trace" not in skip_probes
    if want_trace and (args.replay_machine or budgets.any or getattr(args, "url", None)):
        want_trace = False  # a recorded machine or a stated budget has no engine to run here; a server runs its own
    trace_result: dict[str, Any] = {}
    thread = None
    blocked = _trace_blocked(plan, facts, header_error) if want_trace else None
    if want_trace and blocked is None:
        def trace_job() -> None:
            try:
                trace_result["facts"], trace_result["errors"] = run_trace(model_path, plan, triage=not args.no_triage)
            except EngineError as exc:
                trace_result["errors"] = [f"trace: {exc.one_line()}"]
            except Exception as exc:  # the trace is one source among several: report, never crash
                trace_result["errors"] = [f"trace failed: {type(exc).__name__}: {exc}"]

        _progress("short real trace through llama-cpp-python (prefill + a few dozen decode steps)")
        thread = threading.Thread(target=trace_job, name="scan-trace", daemon=True)
        window = CpuWindow(roots.proc).start()
        thread.start()
    facts.merge(registry.collect(ctx, gguf))
    if mmproj is not None:
        facts.merge(mmproj)
    if thread is not None:
        # a trace that crashed may be followed by triage and by the trace made again
        thread.join(TRACE_TIMEOUT_S + (0 if args.no_triage else TRIAGE_BUDGET_S + TRACE_TIMEOUT_S) + 30)
    if "facts" in trace_result:  # the engine's own kernels for this model's types, timed once per machine
        facts.merge(kernel_probe(facts, trace_result["facts"], plan, roots, trace_result.setdefault("errors", []),
                                 bench=bool(args.bench)))
    if heavy:
        _progress("benchmarks (--bench): " + ", ".join(p.name for p in heavy))
        facts.merge(registry.collect(ctx, heavy, parallel=False))
    machine_facts = Facts()  # without the trace: --verify's re-runs bring their own
    machine_facts.merge(facts)
    errors: list[str] = list(trace_result.get("errors", []))
    errors += registry.unreadable_roots(ctx) if machine_probes else []
    if blocked is not None:
        errors.append(f"trace skipped: {blocked}")
    if "facts" in trace_result:
        facts.merge(trace_only(trace_result["facts"], facts))
        facts.merge(cores_facts(window.stop()))
    facts.merge(choice.facts)
    facts.merge(plan.facts())
    facts.inputs = [f"scan of {machine_name or 'this machine'}",
                    *(i for i in facts.inputs if not i.startswith("probe."))]
    report = diagnose(facts, rulebase, command="scan", mode="scan", engine=engine, errors=errors)
    from doctor.commands.model_choice import claim_vs_machine

    claim = claim_vs_machine(report.facts)
    report.notes.extend(choice.notes + ([claim] if claim else []))
    if claim:
        _progress(claim)
    if getattr(args, "verify", False):
        if "facts" not in trace_result:
            from doctor.core.report import Verification

            report.verification = Verification(0.0, args.verify_budget, 0, notes=[
                "nothing was tried, since the trace did not run" + (f" ({blocked})" if blocked else "")])
        else:
            verify_scan(report, model_path, plan, machine_facts, rulebase, engine, args.verify_budget,
                        not args.no_triage)
    if args.save:
        from doctor.sources.inputs import save_facts

        save_facts(facts, args.save, command="scan")
        _progress(f"facts saved to {args.save} (re-judge with: llm-doctor analyze {args.save})")
    _progress(f"done in {time.perf_counter() - started:.1f} s")
    return show_report(report, args)
