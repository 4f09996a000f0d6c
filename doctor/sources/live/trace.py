"""Traces: live events → Facts, for a run as it happens and for a recording read back later.

`TraceBuilder.add(event)` takes LiveEvents (doctor/core/events.py) in order and can give a Facts
snapshot at any time. The watch session (doctor/sources/live/session.py) adds them live;
`facts_from_recording` (doctor/sources/live/recording.py) adds them from a `--record` file. Because
both paths run the same events through the same builder, replaying a recording through `analyze`
gives the same facts, hence the same findings, as the live run. This is the one place a step
becomes facts: rates, KV fill, and decode spikes - `DecodeSteps` applies the rule of
run.decode_spikes (doctor/derive/run.py) step by step and the builder marks each StepEvent with it
(`p50_ms`, `spike_ms`, `spikes_added`, `spikes_removed`) before the session hands the event on, so
the watch screen shows the spikes the rule counts and computes none of its own.

What maps where:
- SettingsEvent → config.*, sampling.*, model.path, engine.* (the engine stage wins over requested);
- FactsEvent → the facts it carries (host probes, model file, metrics scrapes);
- PhaseEvent → run.load_ms, run.warmup_ms, run.prefill_ms, run.prompt_tokens;
- StepEvent → run.decode_ms (one value per decode step), run.kv_used / run.kv_fill, the output text;
  the event itself gets the steady median, the spike bar and the steps that became or stopped being spikes;
- SampleEvent → run.rss_max, run.vram_max, run.cpu_load_max, run.swap_in_use;
- LogEvent → the engine's own log lines, through the same LogAnalyzer `analyze` uses;
- IncidentEvent → events (ctx_full, decode_failed, crash, ...); a "triage" incident's final result →
  run.triage_* (doctor/sources/live/embedded/triage.py), and its restart marker starts the run's facts afresh (the
  run made again with the working setting replaces the one that crashed; host facts and the triage
  itself are kept);
- PerfEvent → run.engine_* (llama.cpp's own counters, for the cross-check);
- EndEvent → run.finish_reason, run.exit_status, run.crashed.
Trace facts win over facts parsed from the log, as they come from the engine's API.

Pure: events in, facts out (and StepEvents marked).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections import deque
from typing import Any

from doctor.core.events import (
    EndEvent,
    FactsEvent,
    IncidentEvent,
    LiveEvent,
    LogEvent,
    NoticeEvent,
    PerfEvent,
    PhaseEvent,
    SampleEvent,
    SettingsEvent,
    StepEvent,
)
from doctor.core.facts import Event, Fact, Facts, Source
from doctor.core.stats import ranked
from doctor.derive.run import spike_bar, steady_start
from doctor.sources.logs.analyze import LogAnalyzer

OUTPUT_KEEP = 8192  # characters of generated text kept for the facts (the loop detector's window)
STEPS_KEPT = 100_000  # decode steps kept in run.decode_ms (a day of decoding at 1 step/s)
LOG_BATCH = 1 << 20  # log bytes held before they are parsed even without a snapshot

# settings key → fact (its unit is the catalogue's); "requested" and "engine" stages use the same keys
SETTING_FACTS: dict[str, str] = {
    "engine": "config.engine",
    "n_ctx": "config.n_ctx",
    "n_ctx_requested": "config.n_ctx_requested",
    "n_ctx_seq": "config.n_ctx_seq",
    "n_parallel": "config.n_parallel",
    "n_gpu_layers": "config.n_gpu_layers",
    "n_threads": "config.n_threads",
    "n_threads_batch": "config.n_threads_batch",
    "n_batch": "config.n_batch",
    "n_ubatch": "config.n_ubatch",
    "use_mmap": "config.use_mmap",
    "use_extra_bufts": "config.use_extra_bufts",
    "flash_attn": "config.flash_attn",
    "type_k": "config.type_k",
    "type_v": "config.type_v",
    "max_tokens": "config.max_new_tokens",
    "prompt_tokens": "config.prompt_tokens",
    "temperature": "sampling.temperature",
    "top_p": "sampling.top_p",
    "top_k": "sampling.top_k",
    "min_p": "sampling.min_p",
    "repeat_penalty": "sampling.repeat_penalty",
    "repeat_last_n": "sampling.repeat_last_n",
    "seed": "sampling.seed",
    "model_path": "model.path",
    "model_bytes": "model.weights_bytes",
    "n_params": "model.n_params",
    "n_layer": "model.n_layer",
    "n_ctx_train": "model.n_ctx_train",
    "engine_name": "engine.name",
    "engine_version": "engine.version",
    "gpu_offload_supported": "engine.gpu_offload_supported",
    "mmap_supported": "engine.mmap_supported",
    "max_tokens_effective": "run.max_tokens_effective",
}
PHASE_FACTS = {"load": "run.load_ms", "warmup": "run.warmup_ms", "prefill": "run.prefill_ms"}
TRIAGE_FACTS: dict[str, str] = {
    "status": "run.triage_status", "change": "run.triage_change",
    "setting": "run.triage_setting", "summary": "run.triage_summary",
    "tried": "run.triage_tried", "crash": "run.triage_crash",
    "crash_phase": "run.triage_crash_phase", "runs": "run.triage_runs",
    "seconds": "run.triage_seconds", "budget_s": "run.triage_budget_s",
}
KEPT_MAX = 256  # events kept to replay after a triage restart (host facts, triage steps)
# facts an engine's log gives only once loading is over: its load time, the compute buffers (the last
# allocation of a llama.cpp load), or any request, prompt or decode figure
LOAD_DONE_FACTS = ("run.load_ms", "run.compute_bytes", "run.requests", "run.prompt_tokens_max", "run.prefill_ms",
                   "run.decode_tps", "run.decode_tps_max", "run.decode_tokens")


class DecodeSteps:
    """The decode step times kept for run.decode_ms, and which of them are spikes by the rule that
    counts run.decode_spikes (doctor/derive/run.py: steady steps above SPIKE_FACTOR x their median),
    kept up to date as each step comes: the steady times stay sorted, so the median is one look-up
    and a moving bar re-judges only the steps between the old bar and the new. Steps are numbered
    from 0 in the order they came."""

    def __init__(self, keep: int = STEPS_KEPT) -> None:
        self.times: deque[float] = deque(maxlen=keep)
        self.seen = 0  # steps added (the next step's number)
        self.steady_from = 0  # number of the first steady step
        self.p50: float | None = None
        self.bar: float | None = None  # a steady step slower than this is a spike
        self.spikes: set[int] = set()
        self._keys: list[tuple[float, int]] = []  # the steady steps as (ms, number), ascending
        self._values: list[float] = []  # their times, in the same order

    def __len__(self) -> int:
        return len(self.times)

    def add(self, ms: float) -> tuple[list[int], list[int]]:
        """Add the next step's time; returns (steps that became spikes, steps that no longer are)."""
        number = self.seen
        full = self.times.maxlen is not None and len(self.times) == self.times.maxlen
        dropped = (number - len(self.times), self.times[0]) if full and self.times else None
        self.times.append(ms)
        self.seen += 1
        first_kept = self.seen - len(self.times)
        steady_from = first_kept + steady_start(len(self.times))
        leaving = list(range(self.steady_from, steady_from))
        for n in leaving:  # no longer steady: the warm-up step, or a step that left the window
            value = dropped[1] if dropped is not None and n == dropped[0] else self.times[n - first_kept]
            at = bisect_left(self._keys, (value, n))
            del self._keys[at], self._values[at]
        self.steady_from = steady_from
        insort(self._keys, (ms, number))
        self._values.insert(bisect_left(self._keys, (ms, number)), ms)
        old_bar = self.bar
        self.p50 = ranked(self._values, 50)
        self.bar = spike_bar(self.p50)
        judged = {n: False for n in leaving}
        judged[number] = self.bar is not None and ms > self.bar
        if old_bar != self.bar:  # steps between the old bar and the new change sides
            bars = [b for b in (old_bar, self.bar) if b is not None]
            lo = bisect_right(self._values, min(bars))
            hi = len(self._values) if None in (old_bar, self.bar) else bisect_right(self._values, max(bars))
            for value, n in self._keys[lo:hi]:
                judged[n] = self.bar is not None and value > self.bar
        added = sorted(n for n, spike in judged.items() if spike and n not in self.spikes)
        removed = sorted(n for n, spike in judged.items() if not spike and n in self.spikes)
        self.spikes.update(added)
        self.spikes.difference_update(removed)
        return added, removed


class TraceBuilder:
    """Accumulates LiveEvents into facts; `snapshot()` may be called any number of times."""

    def __init__(self, name: str = "trace") -> None:
        self.name = name
        self.analyzer = LogAnalyzer(name)
        self.facts = Facts()  # facts set by trace events (they win over log facts)
        self.facts.inputs.append(name)
        self.decode = DecodeSteps()
        self.output: deque[str] = deque()
        self.output_chars = 0
        self.generated = 0
        self.prompt_tokens: int | None = None
        self.n_ctx: int | None = None
        self.kv_used: int | None = None
        self.kv_source: Source | None = None
        self.rss_max: int | None = None
        self.vram_max: int | None = None
        self.others_load_max: float | None = None
        self.swap_in_max: int | None = None
        self.samples = 0
        self.log_lines = 0
        self.events_fed = 0
        self.last_t_ms = 0.0
        self.ended: EndEvent | None = None
        # what the sources were (SettingsEvent stage "source": a log, a command, a metrics URL) and what
        # of the engine they showed: only engine output makes a verdict more than "nothing to judge"
        self.source_settings: dict[str, Any] = {}
        self.engine_started = False  # an embedded engine was asked to start (requested settings)
        self.engine_seen: list[str] = []  # trace evidence of an engine: phases, steps, its own settings
        self.load_done: str | None = None  # why the load phase is known to have ended
        self.metrics_read = 0  # scrapes that carried an engine's metrics
        self.incidents = 0
        # log lines reach the parsers in batches (at each snapshot), so that a line wrapped by a
        # terminal is still joined with the next one, as `analyze` does over its big chunks
        self.pending_log: list[bytes] = []
        self.pending_bytes = 0
        # what survives a triage restart: facts given before the engine started, and the triage itself
        self.kept: list[LiveEvent] = []
        self.before_engine = True  # no engine event yet: facts given now (host, model file) are kept

    def drain_log(self) -> None:
        if self.pending_log:
            self.analyzer.feed(b"".join(self.pending_log))
            self.pending_log.clear()
            self.pending_bytes = 0

    # -- feeding ---------------------------------------------------------------------------
    def feed_log_block(self, block: bytes, count: int) -> None:
        """`count` complete log lines as read, each ending in LF: the same parsing a LogEvent per line
        gets, without building one — how a followed file or a wrapped command keeps up with tens of MB/s."""
        if not count:
            return
        self.log_lines += count
        self.pending_log.append(block)
        self.pending_bytes += len(block)
        if self.pending_bytes >= LOG_BATCH:
            self.drain_log()

    def log_read(self, count: int) -> None:
        """`count` log lines the analyzer read itself (a followed file read on with workers:
        doctor/sources/live/follow/catchup.py)."""
        self.log_lines += count

    def add(self, event: LiveEvent) -> None:
        """Take the next event. A StepEvent is marked with the decode spikes as they now stand."""
        if isinstance(event, IncidentEvent) and event.event == "triage":
            if event.data.get("restart") is True:
                self._restart(event)
                return
            self._keep(event)
        elif isinstance(event, FactsEvent) and self.before_engine:
            self._keep(event)
        elif not (isinstance(event, SettingsEvent) and event.stage == "requested"):
            self.before_engine = False
        self.events_fed += 1
        self.last_t_ms = max(self.last_t_ms, event.t_ms)
        if isinstance(event, StepEvent):
            self._step(event)
        elif isinstance(event, LogEvent):
            self.log_lines += 1
            self.pending_log.append(event.text.encode("utf-8", "replace") + b"\n")
            self.pending_bytes += len(self.pending_log[-1])
            if self.pending_bytes >= LOG_BATCH:
                self.drain_log()
        elif isinstance(event, SampleEvent):
            self._sample(event)
        elif isinstance(event, PhaseEvent):
            self._phase(event)
        elif isinstance(event, SettingsEvent):
            self._settings(event)
        elif isinstance(event, FactsEvent):
            self._facts(event)
        elif isinstance(event, IncidentEvent):
            self._incident(event)
        elif isinstance(event, PerfEvent):
            self._perf(event)
        elif isinstance(event, EndEvent):
            self._end(event)
        elif isinstance(event, NoticeEvent) and event.session in ("truncated", "rotated"):
            # the followed file started over: the lines so far are one session, the new file's another
            self.drain_log()
            self.analyzer.new_session(event.session, event.text, restart_lines=True)
        # FindingEvents are the rules' output, not input: they are not fed back.

    def _keep(self, event: LiveEvent) -> None:
        if len(self.kept) < KEPT_MAX:
            self.kept.append(event)

    def _restart(self, marker: IncidentEvent) -> None:
        """The crashed run is over and triage found a setting that works: the run made with it is the
        one the facts describe. Host facts and the triage steps are kept; the marker itself stays."""
        kept, t_ms = self.kept, self.last_t_ms
        self.__init__(self.name)  # type: ignore[misc]
        for event in kept:
            self.add(event)
        self.before_engine = False
        self.last_t_ms = t_ms
        self.facts.add_event(Event(kind="triage", line=None, text=marker.text, source="trace", data={"restart": True}))

    def _src(self, what: str, text: str | None = None) -> Source:
        return Source("trace", f"trace.{what}", text=text)

    def _seen(self, what: str) -> None:
        if what not in self.engine_seen:
            self.engine_seen.append(what)

    def _settings(self, event: SettingsEvent) -> None:
        stage = event.stage or "requested"
        if stage == "source":
            self.source_settings.update({k: v for k, v in event.settings.items() if v})
        elif stage == "requested":
            self.engine_started = True
        else:
            self._seen("the engine's own settings")
        for key, value in event.settings.items():
            name = SETTING_FACTS.get(key)
            if name is None or value is None or isinstance(value, dict | list):
                continue
            if stage == "requested" and name.startswith("config.n_ctx") and key == "n_ctx":
                name = "config.n_ctx_requested"
            how = "as asked" if stage == "requested" else "as the engine reports"
            src = self._src(f"settings.{stage}", f"{key} = {value} ({how})")
            if stage == "requested":
                self.facts.set_default(name, value, src)
            else:
                self.facts.set(name, value, src)
        n_ctx = event.settings.get("n_ctx")
        if stage != "requested" and isinstance(n_ctx, int):
            self.n_ctx = n_ctx
        prompt = event.settings.get("prompt_tokens")
        if isinstance(prompt, int):
            self.prompt_tokens = prompt

    def _facts(self, event: FactsEvent) -> None:
        engine_facts = False
        for name, raw in event.facts.items():
            if isinstance(raw, dict):
                fact = Fact.from_json(str(name), raw)
                self.facts.add(fact)
                # host and model-file probes describe the machine; a scrape's run/server figures or an
                # engine name describe the engine
                engine_facts = engine_facts or (fact.known and name.startswith(("run.", "server.", "engine.name")))
        if engine_facts:
            self.metrics_read += 1

    def _phase(self, event: PhaseEvent) -> None:
        name = PHASE_FACTS.get(event.phase)
        if name is None:
            return
        self._seen(f"the {event.phase} phase")
        self.load_done = self.load_done or f"the {event.phase} phase ended"
        src = self._src(f"phase.{event.phase}", f"{event.phase} took {event.ms:.1f} ms"
                        + (f" for {event.tokens} tokens" if event.tokens else ""))
        self.facts.set(name, round(event.ms, 3), src)
        if event.phase == "prefill":
            if event.tokens is not None:
                self.prompt_tokens = event.tokens
                self.facts.set("run.prompt_tokens", event.tokens, src)
                self.facts.set("run.prompt_tokens_max", event.tokens, src)
                if event.ms > 0:
                    self.facts.set("run.prefill_tps", round(event.tokens / (event.ms / 1000), 2), src)
            self.generated += 1
            self._append_output(event.token)
            if event.kv_used is not None:
                self._kv(event.kv_used, src)

    def _step(self, event: StepEvent) -> None:
        if not self.decode:
            self._seen("decode steps")
        added, removed = self.decode.add(round(event.ms, 3))
        bar = self.decode.bar
        event.p50_ms, event.spike_ms = self.decode.p50, round(bar, 3) if bar is not None else None  # to the µs
        event.spikes_added, event.spikes_removed = added, removed
        self.generated += 1
        if event.token:
            self._append_output(event.token)
        if event.n_ctx:
            self.n_ctx = event.n_ctx
        if event.kv_used is not None:
            self.kv_used = event.kv_used
            self.kv_source = None
        if event.rss_bytes is not None:
            self.rss_max = max(self.rss_max or 0, event.rss_bytes)
        if event.vram_bytes is not None:
            self.vram_max = max(self.vram_max or 0, event.vram_bytes)

    def _kv(self, used: int, src: Source) -> None:
        self.kv_used = used
        self.kv_source = src

    def _append_output(self, text: str) -> None:
        if not text:
            return
        self.output.append(text)
        self.output_chars += len(text)
        while self.output_chars - len(self.output[0]) >= OUTPUT_KEEP and len(self.output) > 1:
            self.output_chars -= len(self.output.popleft())

    def _sample(self, event: SampleEvent) -> None:
        self.samples += 1
        if event.rss_bytes is not None:
            self.rss_max = max(self.rss_max or 0, event.rss_bytes)
        if event.vram_bytes is not None:
            self.vram_max = max(self.vram_max or 0, event.vram_bytes)
        if event.others_load is not None:
            self.others_load_max = max(self.others_load_max or 0.0, event.others_load)
        if event.swap_in_bytes is not None:
            self.swap_in_max = max(self.swap_in_max or 0, event.swap_in_bytes)

    def _incident(self, event: IncidentEvent) -> None:
        self.incidents += 1
        data = {str(k): v for k, v in event.data.items() if isinstance(v, int | float | str | bool)}
        self.facts.add_event(Event(kind=event.event, line=None, text=event.text, source="trace",
                                   phase=event.phase, data=data))
        if event.event == "triage" and data.get("final") is True:
            src = self._src("triage", event.text)
            for key, name in TRIAGE_FACTS.items():
                value = data.get(key)
                if value is not None and value != "":
                    self.facts.set(name, value, src)

    def _perf(self, event: PerfEvent) -> None:
        self._seen("llama.cpp's own counters")
        src = self._src("perf", "llama_perf_context: llama.cpp's own counters")
        for name, value in (("run.engine_prefill_ms", event.prefill_ms),
                            ("run.engine_prompt_tokens", event.prompt_tokens),
                            ("run.engine_decode_ms", event.decode_ms),
                            ("run.engine_decode_tokens", event.decode_tokens)):
            if value is not None:
                self.facts.set(name, value, src)

    def _end(self, event: EndEvent) -> None:
        self.ended = event
        src = self._src("end", f"run ended: {event.reason}"
                        + (f", exit status {event.exit_status}" if event.exit_status is not None else ""))
        if event.finish_reason:
            self.facts.set("run.finish_reason", event.finish_reason, src)
        if event.exit_status is not None:
            self.facts.set("run.exit_status", event.exit_status, src)
        if event.exit_status is not None or event.reason == "crashed":
            # a process was watched (the embedded engine, a command): how it ended is evidence; a followed
            # log or a metrics URL has no process of ours to judge
            self.facts.set("run.crashed", event.reason == "crashed", src)
            self.facts.set("run.end_reason", event.reason, src)
        self.facts.set("run.total_ms", round(event.t_ms, 1), src)
        last = next((line for line in reversed(event.error_lines) if isinstance(line, str) and line.strip()), None)
        if last is not None:
            self.facts.set("run.last_line", last.strip()[:300], self._src("end", "the last line it printed"))

    # -- reading ---------------------------------------------------------------------------
    @property
    def output_text(self) -> str:
        return "".join(self.output)[-OUTPUT_KEEP:]

    def snapshot(self) -> Facts:
        """Facts so far: the engine log's facts, overlaid with the trace's own."""
        # with no log line seen there is nothing to detect an engine from: start empty
        self.drain_log()
        facts = self.analyzer.snapshot() if self.log_lines else Facts()
        log_seen = bool(self.log_lines) and self.analyzer.recognised()
        facts.merge(self.facts)
        facts.inputs = [self.name]
        # events are judged where an engine's log or trace was read (a metrics page reports only its own
        # counters; an unknown program's output reports nothing)
        facts.events_observed = log_seen or bool(self.engine_seen)
        recognised = facts.events_observed or self.metrics_read > 0 or self.incidents > 0
        facts.set("run.recognised", recognised, self._src("sources", self._recognised_text(facts, recognised)))
        self._run_facts(facts)
        self._loaded(facts)
        return facts

    def _recognised_text(self, facts: Facts, recognised: bool) -> str:
        seen = list(self.engine_seen)
        parts: list[str] = []
        command = self.source_settings.get("command")
        what = (f"{command[0]}'s output" if isinstance(command, list) and command and isinstance(command[0], str)
                else str(self.source_settings.get("log") or "the log"))
        if self.log_lines:
            fact = facts.get("run.recognised")
            log_text = fact.source.text if fact is not None and fact.source.text else f"{self.log_lines} line(s)"
            if self.analyzer.recognised():
                seen.append(log_text)
            else:
                parts.append(f"none of the {self.log_lines} line(s) of {what} is an engine's log line llm-doctor "
                             "knows")
        elif self.source_settings.get("command") or self.source_settings.get("log"):
            parts.append(f"{what} had no line to read")
        url = self.source_settings.get("metrics")
        if self.metrics_read:
            seen.append(f"{self.metrics_read} metrics scrape(s)")
        elif url:
            parts.append(f"no engine metrics were read from {url}")
        if recognised:
            return "read: " + "; ".join(seen or ["engine incidents"])
        return "; ".join(parts) or "no engine output was read"

    def _loaded(self, facts: Facts) -> None:
        """run.loaded: whether the engine's load phase is over. Until it is, facts read from the start-up
        lines can still change (a backend line after the system line, the engine's settings after the
        requested ones), so live findings judged on facts alone wait for it (doctor/judge/live_judge.py)."""
        why = self.load_done
        if why is None:
            done = next((name for name in LOAD_DONE_FACTS if facts.has(name)), None)
            why = f"{done} is known" if done else None
        if why is not None:
            facts.set("run.loaded", True, self._src("load", why))
        elif self.engine_started or self.log_lines:
            facts.set("run.loaded", False, self._src("load", "no sign yet that the engine finished loading"))

    def _run_facts(self, facts: Facts) -> None:
        if self.decode:
            steps = list(self.decode.times)
            facts.set("run.decode_ms", steps,
                      self._src("steps", f"{len(steps)} decode steps timed (eval + sample)"))
        if self.generated:
            src = self._src("steps", f"{self.generated} tokens generated")
            facts.set("run.generated_tokens", self.generated, src)
            if self.prompt_tokens is not None:
                used = self.prompt_tokens + self.generated
                facts.set("run.tokens_used", used, src)
                current = facts.value("run.tokens_used_max")
                if not isinstance(current, int) or used > current:
                    facts.set("run.tokens_used_max", used, src)
        if self.kv_used is not None:
            src = self.kv_source or self._src("kv", "llama_memory_seq_pos_max(seq 0) + 1 after the last step")
            facts.set("run.kv_used", self.kv_used, src)
            if self.n_ctx:
                facts.set("run.kv_fill", round(self.kv_used / self.n_ctx, 4),
                          self._src("kv", f"{self.kv_used} of {self.n_ctx} cells"))
        if self.output:
            facts.set("run.output_text", self.output_text, self._src("output", "generated text (last 8 KiB)"))
        if self.rss_max is not None:
            facts.set("run.rss_max", self.rss_max, self._src("sampler", "peak resident memory of the engine"))
        if self.vram_max is not None:
            facts.set("run.vram_max", self.vram_max,
                      self._src("sampler", "peak GPU memory of the engine (NVML)"))
        if self.others_load_max is not None:
            facts.set("run.cpu_load_max", round(self.others_load_max, 3),
                      self._src("sampler", "runnable threads of other processes per usable core, "
                                f"highest of {self.samples} samples"))
        if self.swap_in_max is not None:
            facts.set("run.swap_in_bytes", self.swap_in_max,
                      self._src("sampler", "bytes swapped in during the run"))
            facts.set("run.swap_in_use", self.swap_in_max > 0,
                      self._src("sampler", f"{self.swap_in_max} bytes swapped in during the run"))
