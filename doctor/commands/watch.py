"""`llm-doctor watch`: a run traced live — the embedded engine, a growing log, or an engine command.

    llm-doctor watch                                  the default model on a default prompt
    llm-doctor watch --prompt "..." --temperature 0   the embedded engine with your settings
    llm-doctor watch --log /var/log/llama-server.log  follow a server's log (tail -F)
    llm-doctor watch -- llama-server -m model.gguf    start an engine, pass its output through, read it
    llm-doctor watch --metrics http://host:8000/metrics   a server's Prometheus counters

Findings are re-judged as the run goes and announced when they fire or resolve. Output: the TUI on a
terminal; `--format text` a live ticker on stderr and the report on stdout; `--format ndjson` one
JSON object per event on stdout (steps, phases, samples, log lines, findings, and the end with the
report); `--format json` the final report. `--record FILE` keeps every event (NDJSON, flushed as it
goes) so `llm-doctor analyze FILE` replays it through the rules.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doctor.commands.options import DEFAULT_MAX_TOKENS, VERIFY_BUDGET_S, add_options, by_dest, default_ctx
from doctor.commands.output import after_tui, check_writable, emit, exit_code, redacted, wants_tui, write_stdout
from doctor.commands.selection import select_rules
from doctor.core.errors import EngineError, InputError, UsageError

if TYPE_CHECKING:  # the events, the report and the rule base are imported by the run, not with the parser
    from doctor.core.events import EndEvent, LiveEvent
    from doctor.core.facts import Facts
    from doctor.core.report import Report

HELP = "watch a run live: the embedded engine, a growing log, or an engine command"
MAX_PROMPT_FILE = 4 << 20

# option → RunSettings field (embedded engine only)
ENGINE_OPTIONS = {
    "model": "model_path", "prompt": "prompt", "prompt_file": "prompt", "chat": "chat", "ctx_size": "n_ctx",
    "max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
    "min_p": "min_p", "repeat_penalty": "repeat_penalty", "repeat_last_n": "repeat_last_n",
    "threads": "n_threads", "threads_batch": "n_threads_batch", "n_gpu_layers": "n_gpu_layers",
    "batch_size": "n_batch", "ubatch_size": "n_ubatch", "no_mmap": "use_mmap", "type_k": "type_k",
    "type_v": "type_v", "flash_attn": "flash_attn", "seed": "seed", "context_full": "context_full",
    "no_repack": "use_extra_bufts",
}

def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "watch", help=HELP, description=HELP + ". Without --log or a command it runs the embedded "
        "llama-cpp-python engine on the default model (SmolLM2-135M) and a default prompt. Options share "
        "their names with scan and with llama.cpp (-m, -c, -ngl, -t, -tb, -b, -ub, -ctk, -ctv, -fa, -n, -p, -f).",
        epilog="examples:\n  llm-doctor watch -p 'Write a haiku' --temp 0\n"
               "  llm-doctor watch --log server.log --from-end\n"
               "  llm-doctor watch --duration 10m -- llama-server -m model.gguf -c 8192\n"
               "  llm-doctor watch --record run.jsonl && llm-doctor analyze run.jsonl",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(p, "watch")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS",
                   help="an engine to start and watch (llama-server, llama-cli, ollama serve, vllm serve, ...)")
    p.set_defaults(run=run)


@dataclass
class Outcome:
    report: Report | None
    end: EndEvent | None
    errors: list[str] = field(default_factory=list)


def _command(args: argparse.Namespace) -> list[str]:
    cmd = list(args.command or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    return cmd


def _engine_options_given(args: argparse.Namespace) -> list[str]:
    given = []
    for name in ENGINE_OPTIONS:
        value = getattr(args, name, None)
        if value is not None and value is not False:  # 0 and 0.0 are given values
            given.append(by_dest(name).name)
    return given


def _training_context(path: str) -> int | None:
    """The context the model was trained for, from its GGUF header (None when the header cannot say:
    the engine then reports the file itself)."""
    from doctor.sources.probes.gguf_header import GgufCorrupt
    from doctor.sources.probes.gguf_model import read_model

    try:
        metadata = read_model(path).metadata
    except (GgufCorrupt, OSError):
        return None
    value = metadata.get(f"{metadata.get('general.architecture')}.context_length")
    return value if isinstance(value, int) else None


def _settings(args: argparse.Namespace) -> Any:
    from doctor.sources.live.embedded.runner import RunSettings
    from doctor.sources.models.resolve import resolve_model

    model = resolve_model(args.model)
    # scan's defaults (doctor/commands/options.py): the training context up to 4096, the same reply length
    settings = RunSettings(model_path=str(model), n_ctx=default_ctx(_training_context(str(model)))[0],
                           max_tokens=DEFAULT_MAX_TOKENS)
    if args.prompt_file:
        try:
            with open(args.prompt_file, "rb") as handle:
                data = handle.read(MAX_PROMPT_FILE + 1)
        except OSError as exc:
            raise InputError(f"{args.prompt_file}: cannot read ({exc.strerror or exc})") from None
        if len(data) > MAX_PROMPT_FILE:
            raise InputError(f"{args.prompt_file}: prompt larger than {MAX_PROMPT_FILE >> 20} MiB")
        settings.prompt = data.decode("utf-8", "replace")
    for option, target in ENGINE_OPTIONS.items():
        value = getattr(args, option, None)
        if value is None or option in ("model", "prompt_file"):
            continue
        if option == "no_mmap":
            settings.use_mmap = not value
        elif option == "no_repack":
            settings.use_extra_bufts = not value
        elif option == "flash_attn":
            if value != "auto":  # auto: the engine's own default (llama-cpp-python: off)
                settings.flash_attn = value == "on"
        else:
            setattr(settings, target, value)
    settings.validate()
    return settings


def run(args: argparse.Namespace) -> int:
    cmd = _command(args)
    sources = [name for name, on in (("--log", bool(args.log)), ("a command", bool(cmd))) if on]
    if len(sources) > 1:
        raise UsageError("give --log FILE or a command after --, not both")
    embedded = not sources and not args.metrics
    if not embedded and _engine_options_given(args):
        raise UsageError(f"{', '.join(_engine_options_given(args))} apply to the embedded engine only "
                         "(drop --log / --metrics / the command to use them)")
    if getattr(args, "verify", False) and not embedded:
        raise UsageError("--verify re-runs the embedded engine: it cannot re-run a followed log, a command or "
                         "/metrics (save the log and use: llm-doctor analyze FILE --verify --model PATH)")
    if args.verify_budget is None:
        args.verify_budget = VERIFY_BUDGET_S
    if args.verify_budget <= 0:
        raise UsageError(f"--verify-budget must be positive (got {args.verify_budget:g})")
    if args.from_end and not args.log:
        raise UsageError("--from-end goes with --log")
    if args.metrics and not args.metrics.startswith(("http://", "https://")):
        raise UsageError(f"--metrics {args.metrics}: give an http:// or https:// URL")
    from doctor.judge.rulebase import load_rulebase

    rulebase = select_rules(args, load_rulebase(args.rules), "watch")
    for note in rulebase.notes:
        print(f"note: {note}", file=sys.stderr)
    settings = _settings(args) if embedded else None
    if cmd and shutil.which(cmd[0]) is None:
        raise EngineError(f"{cmd[0]}: command not found")
    if args.record:
        check_writable(args.record, "--record")

    from doctor.judge.live_judge import LiveJudge

    judge = LiveJudge(rulebase, engine=args.engine)
    stop = threading.Event()
    pause = threading.Event()
    if args.redact:  # the recording and the ndjson stream too, not only the report
        from doctor.core.redact import for_this_machine

        args.redactor = for_this_machine()

    def produce(on_event: Callable[[LiveEvent], None], note: Callable[[str], None]) -> Outcome:
        if settings is not None:
            return _run_embedded(settings, args, judge, on_event, stop, pause, note)
        return _run_source(args, cmd, judge, on_event, stop, note)

    with _stop_on_sigterm(stop):
        if wants_tui(args):
            tui = _tui()
            if tui is not None:
                return _with_tui(tui, produce, stop, pause, args)
        return _with_stream(produce, args)


@contextlib.contextmanager
def _stop_on_sigterm(stop: threading.Event) -> Iterator[None]:
    """SIGTERM (systemd stopping a unit, `timeout`) ends the watch as Ctrl-C does: the source is stopped
    (a wrapped command or the embedded engine gets SIGINT), and the report is printed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: Any) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_embedded(settings: Any, args: argparse.Namespace, judge: Any, on_event: Callable[[LiveEvent], None],
                  stop: threading.Event, pause: threading.Event, note: Callable[[str], None]) -> Outcome:
    from doctor.core.events import EndEvent, IncidentEvent
    from doctor.sources.live.embedded.runner import run_embedded

    # triage's steps are IncidentEvents: the text ticker and the TUI show them; other formats get a note
    progress = None if getattr(args, "format", None) in (None, "text") else note
    result = run_embedded(settings, on_event=on_event, record=args.record, timeout_s=args.duration, judge=judge,
                          stop=stop, pause=pause, redactor=getattr(args, "redactor", None),
                          triage=not args.no_triage, on_progress=progress)
    end = next((e for e in reversed(result.events) if isinstance(e, EndEvent)), None)
    if getattr(args, "verify", False) and result.report is not None and not stop.is_set():
        def to_feed(text: str) -> None:  # the TUI: --verify's steps in its incidents feed
            on_event(IncidentEvent(event="verify", text=text))

        verify_embedded(result.report, result.settings or settings, judge.rulebase,
                        to_feed if args.line_events == "tail" else note, engine=args.engine,
                        budget_s=args.verify_budget, stop=stop, triage=not args.no_triage)
        if end is not None and args.line_events in ("tail", "all"):
            # the TUI and the ndjson stream take the report from the end event: a second one carries the fixes tried
            on_event(dataclasses.replace(end, report=result.report.to_json()))
    return Outcome(result.report, end, result.errors)


VERIFY_MAX_TOKENS = 256  # the re-runs' job is the first run's, up to this many tokens


def verify_embedded(report: Report, settings: Any, rulebase: Any, note: Callable[[str], None],
                    engine: str | None = None, budget_s: float = 120.0, stop: threading.Event | None = None,
                    triage: bool = True) -> None:
    """--verify for a run of the embedded engine: re-run the same job (same prompt and seed, at most
    VERIFY_MAX_TOKENS tokens) in fresh children with each fix applied, judged by the same rules."""
    from doctor.commands.verify import verify
    from doctor.judge.live_judge import LiveJudge
    from doctor.sources.live.embedded import TRIAGE_BUDGET_S
    from doctor.sources.live.embedded.runner import run_embedded

    seed = report.facts.value("sampling.seed")
    if settings.seed is None and isinstance(seed, int):
        settings = dataclasses.replace(settings, seed=seed)  # the same seed as the first run
    base = settings
    if base.max_tokens == 0 or base.max_tokens > VERIFY_MAX_TOKENS:
        base = dataclasses.replace(base, max_tokens=VERIFY_MAX_TOKENS)

    carried: dict[str, Any] = {}  # a setting a crash triage needed in a re-run (AMX: repacking off)

    def run_job(changes: dict[str, Any], max_tokens: int | None, timeout_s: float) -> Report:
        job = dataclasses.replace(base, **{**carried, **changes})
        if max_tokens is not None:
            job = dataclasses.replace(job, max_tokens=max_tokens)
        if job.n_ubatch > job.n_batch:
            job = dataclasses.replace(job, n_ubatch=job.n_batch)
        # a fix's setting may reach a crash the first run did not (the AMX kernel crashes at some sizes
        # only): triage it as the first run would be, so the fix is judged, and carry the working setting
        run = run_embedded(job, timeout_s=timeout_s, judge=LiveJudge(rulebase, engine=engine), triage=triage,
                           triage_budget_s=min(TRIAGE_BUDGET_S, timeout_s), stop=stop)
        if run.triage is not None and run.triage.settings is not None:
            working = dataclasses.asdict(run.triage.settings)
            asked = dataclasses.asdict(job)
            carried.update({k: v for k, v in working.items()
                            if k not in ("seed", "max_tokens", *changes) and asked.get(k) != v})
        assert run.report is not None
        return run.report

    verify(report, dataclasses.asdict(base), run_job, budget_s=budget_s, progress=note,
           stopped=stop.is_set if stop is not None else None, rules=rulebase)


def _run_source(args: argparse.Namespace, cmd: list[str], judge: Any, on_event: Callable[[LiveEvent], None],
                stop: threading.Event, note: Callable[[str], None]) -> Outcome:
    from doctor.sources.live.metrics.endpoint import MetricsPoller, follow_metrics
    from doctor.sources.live.session import TraceSession
    from doctor.sources.probes.cpustat import CpuWindow

    metrics = MetricsPoller(args.metrics, args.metrics_interval) if args.metrics else None
    if args.log:
        name, source = Path(args.log).name or args.log, "log"
    elif cmd:
        name, source = Path(cmd[0]).name, "command"
    else:
        name, source = args.metrics, "metrics"
    session = TraceSession(name, source=source, settings={"log": args.log, "command": cmd, "metrics": args.metrics},
                           on_event=on_event, record=args.record, judge=judge, keep_events=False,
                           redactor=getattr(args, "redactor", None), line_events=getattr(args, "line_events", "all"),
                           # the other processes' share of the cores while the run was traced: a wrapped
                           # command is our child; a followed log's engine is not (its busiest process)
                           cores=CpuWindow(engine_not_ours=bool(args.log)).start() if args.log or cmd else None,
                           machine=_kept_bandwidth() if args.log or cmd else None)
    if args.log:
        from doctor.sources.live.follow.follower import follow_log

        end = follow_log(args.log, session, stop=stop.is_set, duration_s=args.duration, from_start=not args.from_end,
                         on_note=note, metrics=metrics)
    elif cmd:
        from doctor.sources.live.follow.wrapper import wrap_command

        to_stderr = args.format in ("json", "ndjson", "markdown")
        end = wrap_command(cmd, session, stop=stop.is_set, duration_s=args.duration, stdout_fd=2 if to_stderr else 1,
                           stderr_fd=2, metrics=metrics, on_note=note)
    else:
        assert metrics is not None
        end = follow_metrics(metrics, session, stop=stop.is_set, duration_s=args.duration, on_note=note)
    failed = metrics.last_error if metrics is not None else None
    if failed and session.report is not None and failed not in session.report.errors:
        session.report.errors.append(failed)  # the scrapes failed to the end: the report says why it has no metrics
    errors = list(session.report.errors if session.report is not None else [])
    if session.recording_problem and session.recording_problem not in errors:
        errors.append(session.recording_problem)
    return Outcome(session.report, end, errors)


def _kept_bandwidth() -> Facts | None:
    """The all-cores read bandwidth an earlier scan kept here (the engine's thread count is the log's, not
    known yet: all cores' figure is a bound at any count), for a run traced live on this machine."""
    from doctor.core.facts import Facts
    from doctor.sources.probes.ceilings import kept_facts

    try:
        kept = kept_facts(None)
    except Exception:  # a cache that cannot be read is no ceiling, never a failed watch
        return None
    out = Facts()
    fact = kept.get("host.ram.read_bw_all_gbs")
    if fact is not None and fact.known:
        out.add(fact)
    return out if len(out) else None


def _final_code(outcome: Outcome, args: argparse.Namespace) -> int:
    if outcome.report is None:
        return 1 if outcome.end is not None and outcome.end.reason == "crashed" else 0
    code = exit_code(outcome.report, args.fail_on)
    if outcome.end is not None and outcome.end.reason in ("crashed",) and args.fail_on != "none":
        code = max(code, 1)
    return code


def _with_stream(produce: Callable[..., Outcome], args: argparse.Namespace) -> int:
    from doctor.views.render.style import choose_style
    from doctor.views.render.ticker import Ticker

    fmt = args.format or "text"
    args.line_events = "all" if fmt == "ndjson" else "none"  # the ticker and the final report show no log lines
    style = choose_style(sys.stderr.isatty(), sys.stderr.encoding, args.color)
    ticker = Ticker(style, show_output=not args.redact)
    if fmt == "ndjson":
        redactor = getattr(args, "redactor", None)

        def on_event(event: LiveEvent) -> None:
            doc = event.to_json() if redactor is None else redactor.event(event.to_json())
            write_stdout(json.dumps(doc, separators=(",", ":"), ensure_ascii=False, default=str) + "\n")

        def note(text: str) -> None:
            print(f"llm-doctor: {text}", file=sys.stderr)
    elif fmt == "text":
        on_event, note = ticker, ticker.note
    else:
        def on_event(event: LiveEvent) -> None:
            return None

        def note(text: str) -> None:
            print(f"llm-doctor: {text}", file=sys.stderr)

    outcome = produce(on_event, note)
    if outcome.report is not None and fmt != "ndjson":
        if fmt == "text":
            sys.stderr.flush()
            write_stdout("\n")
        emit(outcome.report, args)
    return _final_code(outcome, args)


def _tui() -> Any:
    try:
        from doctor.views.tui import app
    except ImportError:
        return None
    return app if hasattr(app, "run_watch_app") else None


def _with_tui(tui: Any, produce: Callable[..., Outcome], stop: threading.Event, pause: threading.Event,
              args: argparse.Namespace) -> int:
    try:
        from doctor.views.tui.event_queue import EventQueue
    except ImportError:
        return _with_stream(produce, args)
    feed = EventQueue()
    args.line_events = "tail"  # the log pane shows the newest lines; a flood must not queue up behind it
    result: dict[str, Any] = {}
    notes: list[str] = []

    def work() -> None:
        try:
            result["outcome"] = produce(feed.put, notes.append)
        except BaseException as exc:  # handed to the UI thread, raised again below
            result["error"] = exc
        finally:
            feed.close()

    thread = threading.Thread(target=work, name="watch-source", daemon=True)
    thread.start()

    def on_pause(paused: bool) -> None:
        if paused:
            pause.set()
        else:
            pause.clear()

    r = getattr(args, "redactor", None)
    outcome_tui = tui.run_watch_app(feed, on_stop=stop.set, on_pause=on_pause, title="watch",
                                    redact=None if r is None else r.report)
    stop.set()
    thread.join(30)
    if "error" in result:
        raise result["error"]
    outcome: Outcome = result.get("outcome") or Outcome(getattr(outcome_tui, "report", None), None)
    if outcome.report is None:
        outcome.report = getattr(outcome_tui, "report", None)
    for note in notes[-3:]:
        print(f"llm-doctor: {note}", file=sys.stderr)
    if outcome.report is not None:
        after_tui(redacted(outcome.report, args), args)
    return _final_code(outcome, args)
