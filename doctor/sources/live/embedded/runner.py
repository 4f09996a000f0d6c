"""The embedded engine runner: llama-cpp-python on a model, traced step by step, in a child process.

    run = run_embedded(RunSettings(model_path=...), on_event=print, record="run.jsonl")
    run.facts      # config.*, sampling.*, run.* (load, prefill, decode steps, KV fill, memory, output),
                   # events, and every fact the llama.cpp log parser reads from the engine's own log
    run.events     # the LiveEvents, in order (doctor/core/events.py)

The child (doctor/sources/live/embedded/child.py) loads the model and generates; this parent reads its messages
and its stdout/stderr, samples its CPU, memory and GPU memory, turns everything into LiveEvents,
records them, and — when a judge is given — re-runs the rules as the run goes. An abort inside the
engine (GGML_ABORT, a CUDA error) kills only the child: the run ends with reason "crashed", the
signal, and the engine's last error lines. `timeout_s` and `stop` end the run cleanly (the child
finishes its current step and reports).

Machine access (a process, pipes, psutil, NVML).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.core.errors import EngineError
from doctor.core.events import (
    EndEvent,
    FactsEvent,
    IncidentEvent,
    LiveEvent,
    LogEvent,
    PhaseEvent,
    SettingsEvent,
    StepEvent,
)
from doctor.core.facts import Facts
from doctor.core.report import Report
from doctor.core.sanitize import strip_controls
from doctor.sources.live.embedded import TRIAGE_BUDGET_S
from doctor.sources.live.embedded.messages import step_event, to_event
from doctor.sources.live.embedded.sampler import ResourceSampler
from doctor.sources.live.embedded.settings import RunSettings as RunSettings  # read from here by the commands
from doctor.sources.live.embedded.triage import Attempt, TriagePlan, TriageResult
from doctor.sources.live.embedded.triage import eligible as triage_eligible
from doctor.sources.live.session import Judge, TraceSession
from doctor.sources.probes.cpustat import CpuWindow

SAMPLE_INTERVAL_S = 0.5
STOP_GRACE_S = 5.0
ERROR_LINES_KEPT = 12
FATAL_HEAD = "Fatal Python error:"  # CPython's faulthandler, before the reason and the stack
FATAL_REASON = re.compile(r"(Segmentation fault|Bus error|Aborted|Floating point exception|Illegal instruction"
                          r"|[A-Za-z_][\w.]*: .+)")
FRAME = re.compile(r"\s+File \".+\", line \d+ in ")
FRAME_PATH = re.compile(r'File "([^"]*/)?([^"/]+/[^"/]+)"')
REPO_ROOT = str(Path(__file__).resolve().parents[4])  # the folder that holds doctor/


@dataclass
class EmbeddedRun:
    facts: Facts
    events: list[LiveEvent]
    log_lines: list[str]
    exit_status: int | None
    crashed: bool
    reason: str = "finished"  # finished | crashed | interrupted | timeout | error
    finish_reason: str | None = None
    error_lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # one-line descriptions for the report
    report: Report | None = None
    record_path: str | None = None
    triage: TriageResult | None = None  # the crash triage, when the engine died and triage ran
    settings: RunSettings | None = None  # the settings of the run reported (triage may have changed one)

    @property
    def final_events(self) -> list[LiveEvent]:
        """The events of the run reported: after crash triage restarted it with a working setting,
        those from the restart on (the events before it are the run that crashed, and the triage)."""
        for i in range(len(self.events) - 1, -1, -1):
            event = self.events[i]
            if isinstance(event, IncidentEvent) and event.event == "triage" and event.data.get("restart") is True:
                return self.events[i + 1:]
        return self.events

    @property
    def steps(self) -> list[StepEvent]:
        return [e for e in self.final_events if isinstance(e, StepEvent)]


def child_command() -> list[str]:
    """The engine child's command line; LLM_DOCTOR_ENGINE_CHILD (shell words) replaces it — how the
    command-line tests put a stand-in child (one that crashes under a given setting) under scan and watch."""
    override = os.environ.get("LLM_DOCTOR_ENGINE_CHILD", "").strip()
    if override:
        import shlex

        return shlex.split(override)
    return [sys.executable, "-m", "doctor.sources.live.embedded.child"]


def run_embedded(settings: RunSettings, *, on_event: Callable[[LiveEvent], None] | None = None,
                 record: str | None = None, timeout_s: float | None = None, judge: Judge | None = None,
                 stop: threading.Event | None = None, pause: threading.Event | None = None, host: bool = True,
                 sample_interval_s: float = SAMPLE_INTERVAL_S, command: list[str] | None = None,
                 redactor: Any = None, triage: bool = True, triage_budget_s: float = TRIAGE_BUDGET_S,
                 on_progress: Callable[[str], None] | None = None) -> EmbeddedRun:
    """Run one traced generation in a child process and return what it showed.

    judge: re-run the rules while running (FindingEvents) and build the final report;
    stop: set it to end the run early (the report is still made); pause: while set, the child holds
    between two decode steps (the wait is in no step's time); host: read host facts (cores,
    RAM, swap, model file) for the rules; command: the child's command line (tests substitute one);
    redactor: a doctor.core.redact.Redactor for the recording (`--redact`).
    triage: when the engine dies (doctor/sources/live/embedded/triage.py says which deaths), re-run a short job in
    fresh children, one setting changed at a time, within `triage_budget_s` seconds; its progress is
    an IncidentEvent "triage" per step (and a line to `on_progress`). When a change makes the job
    complete, the whole run is made again with it, in the same session, and reported; otherwise the
    crash is reported with what was tried. Nothing of this happens when nothing crashes.
    """
    settings.validate()
    if not os.path.isfile(settings.model_path):
        raise EngineError(f"{settings.model_path}: no such model file")
    if command is None and importlib.util.find_spec("llama_cpp") is None:
        raise EngineError("llama-cpp-python is not installed: pip install 'llm-doctor[engine]'")
    session = TraceSession(os.path.basename(settings.model_path) or "embedded", source="embedded",
                           settings=settings.requested(), on_event=on_event, record=record, judge=judge,
                           redactor=redactor, cores=CpuWindow().start() if host else None)
    session.emit(SettingsEvent(settings=settings.requested(), stage="requested"))
    if host:
        from doctor.sources.live.embedded.hostinfo import facts_payload, host_facts

        host_now = host_facts(settings.model_path, threads=settings.n_threads, settings=settings)
        session.emit(FactsEvent(facts=facts_payload(host_now)))
    session.flush()
    command = command or child_command()
    parent = _Parent(settings, session, timeout_s, stop, pause, sample_interval_s, command)
    ended = parent.run()
    result = None
    if triage and not (stop is not None and stop.is_set()) and triage_eligible(
            ended.reason, ended.status, exception_type=parent.exception_type, model_changed=bool(ended.model_changed)):
        result = _triage(parent, ended, session, command, triage_budget_s, stop, on_progress)
        if result.settings is not None:
            working = result.settings
            session.emit(IncidentEvent(event="triage", text=f"triage: carrying on with {result.change.label}"
                                       if result.change else "triage: carrying on", data={"restart": True}))
            session.emit(SettingsEvent(settings=working.requested(), stage="requested"))
            session.flush()
            parent = _Parent(working, session, timeout_s, stop, pause, sample_interval_s, command)
            ended = parent.run()
    run = parent.close(ended)
    run.triage = result
    return run


def _triage(first: _Parent, ended: _Ended, session: TraceSession, command: list[str], budget_s: float,
            stop: threading.Event | None, on_progress: Callable[[str], None] | None) -> TriageResult:
    """Re-run a short job in fresh children until one completes (doctor/sources/live/embedded/triage.py decides)."""

    def say(text: str, data: dict[str, Any] | None = None) -> None:
        session.emit(IncidentEvent(event="triage", text=f"triage: {text}", data=data or {}))
        session.flush()
        if on_progress is not None:
            on_progress(f"triage: {text}")

    settings = first.settings
    if settings.seed is None and isinstance(first.seed, int):
        settings = dataclasses.replace(settings, seed=first.seed)  # the same seed as the run that crashed
    crashed = first.attempt(ended, None, "the original settings", short=False)
    plan = TriagePlan(settings, crashed, budget_s)
    tokens = plan.short_job(settings).max_tokens
    say(f"the engine {crashed.outcome_text()}; re-running a short job ({tokens} tokens, same prompt and seed)"
        f" in fresh processes, one setting changed at a time (at most {budget_s:.0f} s)")
    start = time.monotonic()
    while (step := plan.next(time.monotonic() - start)) is not None:
        change, label, short, limit = step
        scratch = TraceSession("triage", source="embedded", keep_events=False, t0=session.t0)
        began = time.monotonic()
        parent = _Parent(short, scratch, limit, stop, None, SAMPLE_INTERVAL_S, command)
        attempt = parent.attempt(parent.run(), change.key if change else None, label)
        attempt.seconds = round(time.monotonic() - began, 2)
        plan.record(attempt, time.monotonic() - start)
        say(f"run {plan.runs}: {label}: {attempt.outcome_text()}",
            {"run": plan.runs, "change": change.key if change else "", "outcome": attempt.outcome})
        if stop is not None and stop.is_set():
            plan.abandon("stopped")
            break
    result = plan.result()
    say(result.summary(), result.data())
    return result


class _Parent:
    """Reads the child, samples it, and ends the session; one instance per run."""

    def __init__(self, settings: RunSettings, session: TraceSession, timeout_s: float | None,
                 stop: threading.Event | None, pause: threading.Event | None, sample_interval_s: float,
                 command: list[str]) -> None:
        self.settings = settings
        self.session = session
        self.timeout_s = timeout_s
        self.stop = stop
        self.pause = pause
        self.sample_interval_s = sample_interval_s
        self.command = command
        self.n_ctx: int | None = None
        self.log_line = 0
        self.log_lines: deque[str] = deque(maxlen=20_000)
        self.error_lines: deque[str] = deque(maxlen=ERROR_LINES_KEPT)  # engine warn/error lines
        self.stderr_tail: deque[str] = deque(maxlen=ERROR_LINES_KEPT)  # raw fd 1/2 output
        self.finish_reason: str | None = None
        self.exception: str | None = None
        self.abort_text: str | None = None
        self.fatal_text: str | None = None  # "Fatal Python error: Bus error" (faulthandler, before its stack)
        self.fatal_cut = False  # the header came without its reason (another write in between): join the next
        self.fatal_context: list[str] = []  # the lines around it: the one before, the stack frames after
        self.last_engine_line: str | None = None
        self.model_stat = _file_stat(settings.model_path)  # to tell, at the end, whether the file changed
        self.ended = False
        self.last_rss: int | None = None
        self.last_vram: int | None = None
        self.paused = False
        self.ready = False  # the child said hello: its signal handlers are in place
        self.exception_type: str | None = None
        self.seed: int | None = None  # the seed the engine used (reported after loading)
        self.phase = "load"  # how far the run got: load | warm-up | prefill | decode
        self.prefill_ms: float | None = None
        self.steps_done = 0
        self.decode_ms = 0.0

    # -- process --------------------------------------------------------------------------
    def _spawn(self) -> tuple[subprocess.Popen[bytes], int]:
        msg_r, msg_w = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        try:
            proc = subprocess.Popen(
                [*self.command, "--msg-fd", str(msg_w), "--t0", repr(self.session.t0)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                pass_fds=(msg_w,), env=env, start_new_session=True,
            )
        except OSError as exc:
            os.close(msg_r)
            os.close(msg_w)
            raise EngineError(f"cannot start the engine process: {exc.strerror or exc}") from None
        os.close(msg_w)
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(self.settings.to_json()).encode("utf-8"))
            proc.stdin.close()
        except OSError:
            pass  # the child died at once; its exit status says why
        return proc, msg_r

    def run(self) -> _Ended:
        proc, msg_r = self._spawn()
        sampler = ResourceSampler(proc.pid, tree=False)  # the engine child starts no processes
        reason = "finished"
        try:
            reason = self._loop(proc, msg_r, sampler)
        except KeyboardInterrupt:
            reason = "interrupted"
            self._stop_child(proc)
        finally:
            sampler.close()
            os.close(msg_r)
            if proc.stdout is not None:
                proc.stdout.close()
        return self._ended(proc, reason)

    def _loop(self, proc: subprocess.Popen[bytes], msg_r: int, sampler: ResourceSampler) -> str:
        sel = selectors.DefaultSelector()
        assert proc.stdout is not None
        out_fd = proc.stdout.fileno()
        sel.register(msg_r, selectors.EVENT_READ, "msg")
        sel.register(out_fd, selectors.EVENT_READ, "out")
        bufs = {"msg": b"", "out": b""}
        open_fds = 2
        start = time.monotonic()
        next_sample = start
        stop_sent_at: float | None = None
        reason = "finished"
        while open_fds:
            now = time.monotonic()
            if now >= next_sample:
                self._sample(sampler)
                next_sample = now + self.sample_interval_s
            if stop_sent_at is None:
                if self.timeout_s is not None and now - start > self.timeout_s:
                    reason = "timeout"
                    stop_sent_at = now
                    self._signal(proc, signal.SIGINT)
                elif self.stop is not None and self.stop.is_set():
                    reason = "interrupted"
                    stop_sent_at = now
                    self._signal(proc, signal.SIGINT)
            elif now - stop_sent_at > STOP_GRACE_S:
                self._signal(proc, signal.SIGKILL)
                stop_sent_at = now + 3600  # once
            if self.ready and self.pause is not None and self.pause.is_set() != self.paused \
                    and hasattr(signal, "SIGUSR1"):
                self.paused = self.pause.is_set()
                self._signal(proc, signal.SIGUSR1 if self.paused else signal.SIGUSR2)
            timeout = max(0.0, min(next_sample - now, 0.25))
            for key, _ in sel.select(timeout):
                fd = key.fileobj
                try:
                    data = os.read(fd, 1 << 16)  # type: ignore[arg-type]
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(fd)
                    open_fds -= 1
                    tail = bufs[key.data]
                    if tail:
                        self._lines(key.data, [tail])
                        bufs[key.data] = b""
                    continue
                buf = bufs[key.data] + data
                *lines, bufs[key.data] = buf.split(b"\n")
                if lines:
                    self._lines(key.data, lines)
            self.session.flush()
            self.session.evaluate()
        sel.close()
        return reason

    def _signal(self, proc: subprocess.Popen[bytes], sig: int) -> None:
        with contextlib.suppress(OSError):
            proc.send_signal(sig)

    def _stop_child(self, proc: subprocess.Popen[bytes]) -> None:
        self._signal(proc, signal.SIGINT)
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self._signal(proc, signal.SIGKILL)

    def _sample(self, sampler: ResourceSampler) -> None:
        if self.ended:
            # the job is done and the engine is tearing down: its shrinking memory is not the run's (the
            # watch screen and the ticker would show it as the run's RSS beside the report's peak)
            return
        event = sampler.sample(self.session.now_ms())
        self.last_rss = event.rss_bytes if event.rss_bytes is not None else self.last_rss
        self.last_vram = event.vram_bytes if event.vram_bytes is not None else self.last_vram
        self.session.emit(event)

    # -- messages -------------------------------------------------------------------------
    def _lines(self, stream: str, lines: list[bytes]) -> None:
        if stream == "out":
            for raw in lines:
                text = strip_controls(raw.decode("utf-8", "replace")).rstrip()
                if not text:
                    continue
                if self.fatal_cut:
                    # faulthandler writes "Fatal Python error: ", the reason and the stack in separate
                    # writes; when a line break from elsewhere fell in between, the reason is this line
                    self.fatal_cut = False
                    if FATAL_REASON.fullmatch(text):
                        self._log(LogEvent(text=f"{FATAL_HEAD} {text}", stream="stderr"))
                        continue
                    self._log(LogEvent(text=FATAL_HEAD, stream="stderr"))
                if text == FATAL_HEAD and self.fatal_text is None:
                    self.fatal_cut = True  # held until the next line says whether it is the reason
                    continue
                self._log(LogEvent(text=text, stream="stderr"))
            return
        for raw in lines:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            if isinstance(msg, dict):
                self._message(msg)

    def _log(self, event: LogEvent) -> None:
        self.log_line += 1
        event.line = self.log_line
        self.log_lines.append(event.text)
        if event.level in ("warn", "error"):
            self.error_lines.append(event.text)
        elif event.stream == "stderr":
            self.stderr_tail.append(event.text)
            if event.text.startswith(FATAL_HEAD) and self.fatal_text is None:
                self.fatal_text = event.text
                if self.last_engine_line:
                    self.fatal_context.append(self.last_engine_line)
            elif self.fatal_text is not None and FRAME.match(event.text) and len(self.fatal_context) < 4:
                self.fatal_context.append(event.text.strip())  # the top of the Python stack: where it died
        if self.fatal_text is None:
            self.last_engine_line = event.text
        self.session.emit(event)

    def _crash_incident(self, status: int) -> None:
        """A crash with faulthandler's line: the line itself, with what was logged just before it and
        the stack frames after it, as the crash's evidence (the parsers see the lines one by one)."""
        if self.fatal_text is None:
            return
        text = self.fatal_text if self.fatal_text.strip() != FATAL_HEAD else \
            f"{FATAL_HEAD} (reason cut off) {describe_status(status)}"
        context = "; ".join(FRAME_PATH.sub(r'File "…/\2"', c)[:160] for c in self.fatal_context)
        self.session.emit(IncidentEvent(event="crash", text=text + (f" — around it: {context}" if context else ""),
                                        data={"status": status}))

    def _message(self, msg: dict[str, Any]) -> None:
        kind = msg.get("m")
        if kind == "hello":
            self.ready = True
            return
        if kind == "error":
            self.exception_type = str(msg.get("type") or "Error")
            text = f"{msg.get('type', 'Error')}: {msg.get('message', '')}"
            self.exception = strip_controls(text)[:2000]
            self._log(LogEvent(t_ms=float(msg.get("t") or 0), text=self.exception, stream="log", level="error"))
            return
        if kind == "abort":
            self.abort_text = strip_controls(str(msg.get("text", "")))
            self._log(LogEvent(t_ms=float(msg.get("t") or 0), text=self.abort_text, stream="log", level="error"))
            return
        if kind == "end":
            self.ended = True
            self.finish_reason = str(msg.get("finish_reason") or "") or None
            return
        if kind == "steps":
            rows = msg.get("s")
            for row in rows if isinstance(rows, list) else []:
                step = step_event(row, self.n_ctx)
                if step is not None:
                    self.steps_done += 1
                    self.decode_ms += step.ms
                    step.rss_bytes = self.last_rss
                    step.vram_bytes = self.last_vram
                    self.session.emit(step)
            return
        event = to_event(msg, self.n_ctx, self.log_line + 1)
        if event is None:
            return
        if isinstance(event, LogEvent):
            self._log(event)
            return
        if isinstance(event, SettingsEvent):
            n_ctx = event.settings.get("n_ctx")
            self.n_ctx = n_ctx if isinstance(n_ctx, int) else self.n_ctx
            seed = event.settings.get("seed")
            self.seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else self.seed
        elif isinstance(event, PhaseEvent):
            self.phase = {"load": "warm-up", "warmup": "prefill", "prefill": "decode"}.get(event.phase, self.phase)
            if event.phase == "prefill":
                self.prefill_ms = event.ms
        elif isinstance(event, StepEvent):
            event.rss_bytes = self.last_rss
            event.vram_bytes = self.last_vram
        self.session.emit(event)

    # -- the end --------------------------------------------------------------------------
    def _ended(self, proc: subprocess.Popen[bytes], reason: str) -> _Ended:
        """How the child ended (the session stays open: triage may go on in it)."""
        try:
            status = proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self._signal(proc, signal.SIGKILL)
            status = proc.wait()
        our_signals = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
        stopped_by_us = reason in ("timeout", "interrupted") and -status in our_signals
        crashed = status < 0 and not stopped_by_us
        errors: list[str] = []
        error_lines = list(self.error_lines) + list(self.stderr_tail)
        headline = self.abort_text or self.exception or self.fatal_text \
            or (self.error_lines[-1] if self.error_lines else None) \
            or (self.stderr_tail[-1] if self.stderr_tail else None)
        if self.fatal_cut:  # the header was the last thing it wrote
            self.fatal_cut = False
            self._log(LogEvent(text=FATAL_HEAD, stream="stderr"))
        if crashed:
            reason = "crashed"
            self._crash_incident(status)
            errors.append(f"the engine process died: {describe_status(status)}"
                          + (f"; the engine's last error: {headline}" if headline else ""))
        elif reason == "finished" and (self.exception or self.finish_reason == "error"):
            reason = "error"
            if self.exception:
                errors.append(f"the engine raised {self.exception}")
        elif reason == "finished" and not self.ended:
            reason = "exited"
            errors.append(f"the engine process exited ({describe_status(status)}) before the run ended"
                          + (f"; its last output: {headline}" if headline else ""))
        changed = _model_change(self.settings.model_path, self.model_stat)
        if changed:
            errors.append(changed)
        return _Ended(reason, status, errors, error_lines, changed)

    def attempt(self, ended: _Ended, change: str | None, label: str, short: bool = True) -> Attempt:
        """This run as triage sees it: how it ended, how far it got, its figures."""
        if ended.reason == "finished":
            outcome, detail = "completed", ""
        elif ended.reason == "crashed":
            outcome = "crashed"
            detail = f"{_signal_name(ended.status)} in the {self.phase}"
        elif ended.reason == "timeout":
            outcome, detail = "timeout", f"did not finish in time (stopped in the {self.phase})"
        else:
            outcome = "failed"
            what = self.exception or describe_status(ended.status)
            detail = f"failed in the {self.phase}: {what[:200]}"
        per_token = round(self.decode_ms / self.steps_done, 2) if self.steps_done else None
        return Attempt(change=change, label=label, outcome=outcome, detail=detail, phase=self.phase,
                       steps=self.steps_done, prefill_ms=self.prefill_ms, decode_ms_per_token=per_token, short=short)

    def close(self, ended: _Ended) -> EmbeddedRun:
        """End the session with this run's end and final report."""
        reason = ended.reason
        finish = self.finish_reason or ("error" if reason in ("crashed", "error", "exited") else reason)
        end = EndEvent(reason=reason, exit_status=ended.status, finish_reason=finish,
                       error_lines=ended.error_lines if reason != "finished" else [])
        self.session.finish(end, ended.errors)
        facts = self.session.snapshot()
        return EmbeddedRun(
            facts=facts, events=self.session.events, log_lines=list(self.log_lines), exit_status=ended.status,
            crashed=reason == "crashed", reason=reason, finish_reason=finish, error_lines=ended.error_lines,
            errors=ended.errors, report=self.session.report,
            record_path=self.session.recorder.path if self.session.recorder is not None else None,
            settings=self.settings,
        )


@dataclass
class _Ended:
    reason: str  # finished | crashed | interrupted | timeout | error | exited
    status: int
    errors: list[str]
    error_lines: list[str]
    model_changed: str | None = None


def _signal_name(status: int | None) -> str:
    if status is None or status >= 0:
        return f"exit status {status}"
    try:
        return signal.Signals(-status).name
    except ValueError:
        return f"signal {-status}"


def _file_stat(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _model_change(path: str, before: tuple[int, int, int] | None) -> str | None:
    """What happened to the model file while the engine had it open (deleted, cut short, replaced)."""
    if before is None:
        return None
    after = _file_stat(path)
    if after is None:
        return f"the model file {path} was deleted during the run (the engine went on with the copy it had open)"
    if after[0] != before[0]:
        return f"the model file {path} was replaced during the run (the engine went on with the file it had open)"
    if after[1] < before[1]:
        return (f"the model file {path} was cut short during the run ({before[1]} -> {after[1]} bytes): the engine "
                "maps it, and reading a page past the cut ends the process with SIGBUS")
    if after[1:] != before[1:]:
        return f"the model file {path} was written to during the run ({before[1]} -> {after[1]} bytes)"
    return None


def describe_status(status: int | None) -> str:
    if status is None:
        return "status unknown"
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"killed by {name}" + (" (abort: GGML_ABORT / assert / CUDA error)" if -status == signal.SIGABRT else
                                      " (the kernel's OOM killer, or kill -9)" if -status == signal.SIGKILL else
                                      " (a memory-mapped file, such as the model, was cut short or became "
                                      "unreadable)" if -status == signal.SIGBUS else "")
    return f"exit status {status}"
