"""`watch --metrics URL`: a server's Prometheus endpoint as one more source of facts.

vLLM and llama-server (`--metrics`) publish their own metrics at /metrics; this reads them with
prometheus_client's text parser (the format's reference implementation, not a home-made one). Each
metric is read as what it is:

- counters (and a histogram's _sum, _count and buckets) as counters: the baseline is the first
  scrape, and what is reported is the *increase over the window* (and its rate), never the value the
  counter had when we arrived; a counter that goes down was reset (the server restarted) and counts on
  from its new value. A counter already at 120 at the first scrape that never moves saw nothing in the
  window (`server.preemptions` 0; `server.preemptions_total` keeps the 120, "since the server started");
- gauges as gauges: the largest value across scrapes (so a spike between two reports is not lost) and
  the last one;
- histograms as rates over the window: the mean (increase of _sum / increase of _count) and p50/p95
  from the bucket increases (linear inside a bucket, as Prometheus' histogram_quantile does). With one
  scrape there is no window: the figures are since the server started, and the source says so.

What is mapped (names from the engines' source: llama-server tools/server/server-task.cpp
`to_metrics`, every metric prefixed `llamacpp:`; vLLM vllm/v1/metrics/loggers.py, V0 vllm/engine/metrics.py):

- server.kv_usage_max (%): `vllm:kv_cache_usage_perc` / `vllm:gpu_cache_usage_perc` (0-1), llama-server
  `llamacpp:kv_cache_usage_ratio` (older builds);
- server.preemptions (in the window), server.preemptions_total: `vllm:num_preemptions_total`; a rise
  between two scrapes emits a `preempted` event with the increase;
- server.waiting_max / waiting_last, server.running_max: `vllm:num_requests_waiting|running`,
  `llamacpp:requests_deferred|processing` (gauges);
- run.ttft_ms_mean/p50/p95: `vllm:time_to_first_token_seconds`;
- run.itl_ms_mean/p50/p95 (time per output token): `vllm:inter_token_latency_seconds` (or the older
  `vllm:time_per_output_token_seconds`); llama-server: `llamacpp:tokens_predicted_seconds_total` /
  `llamacpp:tokens_predicted_total` (mean only: it has no histograms);
- server.queue_ms_mean/p95: `vllm:request_queue_time_seconds`; run.prefill_request_ms_mean:
  `vllm:request_prefill_time_seconds`; run.prefill_ms_per_token: `llamacpp:prompt_seconds_total` /
  `llamacpp:prompt_tokens_total`;
- server.gen_tps: `vllm:generation_tokens_total`, `llamacpp:tokens_predicted_total` over the window;
- run.decode_tps_min / max: `llamacpp:predicted_tokens_seconds` (a gauge, per scrape);
- run.tokens_used_max: `llamacpp:n_tokens_max` (largest prompt + generation seen).
- SGLang (srt/metrics/collector.py to 0.4, srt/observability/metrics_collector.py in 0.5, every metric
  prefixed `sglang:`): `sglang:token_usage` (0-1) as KV usage, `sglang:num_queue_reqs` /
  `sglang:num_running_reqs` as waiting / running, `sglang:time_to_first_token_seconds`,
  `sglang:inter_token_latency_seconds` (0.5; `sglang:time_per_output_token_seconds` before),
  `sglang:queue_time_seconds`, `sglang:generation_tokens_total`, and
  `sglang:num_retracted_requests_total` (requests sent back to the queue when the KV pool filled) as
  preemptions.
- config.n_parallel, config.n_ctx_seq: llama-server's `/props` next to its /metrics, read once
  (doctor/sources/live/metrics/llama_props.py), since the metrics carry neither the slot count nor the slot size.

Machine access: one HTTP GET per scrape (urllib), bounded in size and time.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from doctor.core import engines
from doctor.core.events import FactsEvent, IncidentEvent, LiveEvent
from doctor.core.facts import Facts, Source

MAX_BODY = 8 << 20
INTERVAL_S = 5.0
TIMEOUT_S = 3.0

KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "llamacpp:kv_cache_usage_ratio",
            "sglang:token_usage")
PREEMPTIONS = ("vllm:num_preemptions_total", "vllm:num_preemptions", "sglang:num_retracted_requests_total")
WAITING = ("vllm:num_requests_waiting", "llamacpp:requests_deferred", "sglang:num_queue_reqs")
RUNNING = ("vllm:num_requests_running", "llamacpp:requests_processing", "sglang:num_running_reqs")
TTFT = ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds")
ITL = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
       "vllm:request_time_per_output_token_seconds", "sglang:inter_token_latency_seconds",
       "sglang:time_per_output_token_seconds")
QUEUE = ("vllm:request_queue_time_seconds", "sglang:queue_time_seconds")
PREFILL = "vllm:request_prefill_time_seconds"
GEN_TOKENS = ("vllm:generation_tokens_total", "llamacpp:tokens_predicted_total", "sglang:generation_tokens_total")
LCPP_GEN_S, LCPP_GEN_N = "llamacpp:tokens_predicted_seconds_total", "llamacpp:tokens_predicted_total"
LCPP_PROMPT_S, LCPP_PROMPT_N = "llamacpp:prompt_seconds_total", "llamacpp:prompt_tokens_total"
GEN_RATE = "llamacpp:predicted_tokens_seconds"
# declared a counter without the _total suffix; prometheus_client's parser adds it
TOKENS_MAX = ("llamacpp:n_tokens_max", "llamacpp:n_tokens_max_total")


@dataclass(slots=True)
class Scrape:
    """One /metrics page: sample values by name (labels summed, usage gauges: the largest), which
    samples are counters (a counter's value, a histogram's _sum and _count), and histogram buckets
    (upper bound → cumulative count, labels other than `le` summed)."""

    values: dict[str, float] = field(default_factory=dict)
    counters: set[str] = field(default_factory=set)
    buckets: dict[str, dict[float, float]] = field(default_factory=dict)
    t: float = 0.0


def parse_scrape(text: str, t: float | None = None) -> Scrape:
    from prometheus_client.parser import text_string_to_metric_families

    scrape = Scrape(t=time.monotonic() if t is None else t)
    values = scrape.values
    maxima: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        kind = family.type
        for sample in family.samples:
            name = sample.name
            if name.endswith("_created"):
                continue  # a timestamp, not a value
            value = float(sample.value)
            if value != value:  # NaN
                continue
            if kind == "histogram" and name.endswith("_bucket"):
                le = sample.labels.get("le")
                try:
                    bound = float(le) if le is not None else None
                except ValueError:
                    bound = None
                if bound is not None:
                    table = scrape.buckets.setdefault(family.name, {})
                    table[bound] = table.get(bound, 0.0) + value
                continue
            values[name] = values.get(name, 0.0) + value
            maxima[name] = max(maxima.get(name, value), value)
            if kind == "counter" or (kind in ("histogram", "summary") and name.endswith(("_sum", "_count"))):
                scrape.counters.add(name)
    for name in KV_USAGE:
        if name in maxima:
            values[name] = maxima[name]
    return scrape


def parse_samples(text: str) -> dict[str, float]:
    """Sample name → value, labels summed (usage gauges: the largest)."""
    return parse_scrape(text).values


def first_of(samples: dict[str, float], names: tuple[str, ...]) -> float | None:
    return next((samples[n] for n in names if n in samples), None)


def _name_of(samples: dict[str, float], names: tuple[str, ...]) -> str | None:
    return next((n for n in names if n in samples), None)


@dataclass(slots=True)
class MetricsState:
    """What the scrapes so far showed: counters as increases since the first scrape, gauges as their
    largest and last values, histogram buckets as increases."""

    first: Scrape | None = None
    last: Scrape | None = None
    increase: dict[str, float] = field(default_factory=dict)
    bucket_increase: dict[str, dict[float, float]] = field(default_factory=dict)
    resets: int = 0
    gauge_max: dict[str, float] = field(default_factory=dict)
    gen_rates: list[float] = field(default_factory=list)
    scrapes: int = 0
    engine: str | None = None

    @property
    def window_s(self) -> float:
        return self.last.t - self.first.t if self.first is not None and self.last is not None else 0.0

    def counter(self, name: str) -> tuple[float | None, float | None]:
        """(value at the first scrape, increase since) for a counter sample, or (None, None)."""
        if self.first is None or self.last is None or name not in self.last.values:
            return None, None
        return self.first.values.get(name), self.increase.get(name, 0.0)

    # compatibility for callers that read the largest gauges
    @property
    def kv_usage_max(self) -> float | None:
        value = next((self.gauge_max[n] for n in KV_USAGE if n in self.gauge_max), None)
        return value * 100.0 if value is not None else None


def _engine_of(values: dict[str, float]) -> str | None:
    """The engine whose metric names the page holds (each row's `metrics.prefix`, the engine table)."""
    for engine in engines.table():
        prefix = engine.metrics.prefix if engine.metrics is not None else ""
        if prefix and any(k.startswith(prefix) for k in values):
            return engine.name
    return None


def _answers_props(name: str | None) -> bool:
    """The engine answers /props beside its /metrics (llama-server: the slot count and size)."""
    engine = engines.get(name)
    return engine is not None and engine.metrics is not None and engine.metrics.props


def _spells(name: str | None, setting: str) -> bool:
    """The engine has this setting (its row spells it)."""
    engine = engines.get(name)
    return engine is not None and engine.spelling is not None and setting in engine.spelling.forms


def _grow(old: float, new: float) -> float:
    """A counter's increase between two scrapes: a fall is a reset (it counts on from the new value)."""
    return new - old if new >= old else new


def update(state: MetricsState, samples: dict[str, float] | Scrape) -> None:
    scrape = samples if isinstance(samples, Scrape) else Scrape(values=dict(samples), t=time.monotonic())
    if not isinstance(samples, Scrape):
        # bare values: names that read as counters are counters
        scrape.counters = {n for n in scrape.values if n.endswith(("_total", "_sum", "_count"))}
    state.scrapes += 1
    values = scrape.values
    engine = _engine_of(values)
    if engine is not None:
        state.engine = engine
    prev = state.last
    if state.first is None:
        state.first = scrape
    elif prev is not None:
        # a series missing from the previous scrape was created since (its first request): it counts from 0
        for name in scrape.counters:
            old = prev.values.get(name, 0.0)
            if values[name] < old:
                state.resets += 1
            state.increase[name] = state.increase.get(name, 0.0) + _grow(old, values[name])
        for hist, table in scrape.buckets.items():
            before = prev.buckets.get(hist, {})
            acc = state.bucket_increase.setdefault(hist, {})
            for bound, count in table.items():
                acc[bound] = acc.get(bound, 0.0) + _grow(before.get(bound, 0.0), count)
    state.last = scrape
    for name, value in values.items():
        if name not in scrape.counters:
            state.gauge_max[name] = max(state.gauge_max.get(name, value), value)
    rate = values.get(GEN_RATE)
    if rate is not None and rate > 0:
        state.gen_rates.append(rate)
        del state.gen_rates[:-1000]


def quantile(buckets: dict[float, float], q: float) -> float | None:
    """The q-quantile of a cumulative histogram (upper bound → count), interpolated linearly inside
    its bucket as Prometheus' histogram_quantile does; None without observations."""
    bounds = sorted(buckets)
    if not bounds:
        return None
    total = buckets[bounds[-1]]
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if bound == float("inf"):
                return lower  # in the open top bucket: the highest finite bound is what can be said
            inside = count - below
            return lower + (bound - lower) * ((rank - below) / inside if inside > 0 else 1.0)
        lower, below = bound, count
    return lower


@dataclass(slots=True)
class Latency:
    """A histogram read over the window (or since the server started, with one scrape)."""

    mean_s: float
    count: float
    p50_s: float | None
    p95_s: float | None
    scope: str  # "in the window" | "since the server started"


def histogram(state: MetricsState, name: str) -> Latency | None:
    if state.last is None:
        return None
    total_sum = state.last.values.get(f"{name}_sum")
    total_count = state.last.values.get(f"{name}_count")
    if total_sum is None or not total_count:
        return None
    count = state.increase.get(f"{name}_count", 0.0)
    if state.scrapes > 1 and count > 0:
        window = state.bucket_increase.get(name, {})
        return Latency(state.increase.get(f"{name}_sum", 0.0) / count, count,
                       quantile(window, 0.5), quantile(window, 0.95), "in the window")
    if state.scrapes > 1:
        return None  # no request finished in the window: nothing to say about it
    table = state.last.buckets.get(name, {})
    return Latency(total_sum / total_count, total_count, quantile(table, 0.5), quantile(table, 0.95),
                   "since the server started")


def to_facts(state: MetricsState, url: str) -> Facts:
    facts = Facts()
    window = state.window_s
    span = f"{state.scrapes} scrape(s) over {window:.0f} s" if state.scrapes > 1 else "1 scrape"

    def src(metric: str) -> Source:
        return Source("probe", "metrics", text=f"{metric} at {url} ({span})")

    last = state.last.values if state.last is not None else {}
    usage = state.kv_usage_max
    if usage is not None:
        facts.set("server.kv_usage_max", round(usage, 2), src("KV cache usage (gauge, largest)"))
    preempt = _name_of(last, PREEMPTIONS)
    if preempt is not None:
        base, grown = state.counter(preempt)
        total = last[preempt]
        facts.set("server.preemptions_total", int(total), src(f"{preempt} (counter, since the server started)"))
        if state.scrapes > 1 and grown is not None:
            text = (f"{preempt} {base:.0f} -> {total:.0f}: {grown:.0f} in the window"
                    if not state.resets else f"{preempt}: {grown:.0f} in the window (the counter was reset)")
            facts.set("server.preemptions", int(grown), src(text))
            if window > 0:
                facts.set("server.preemptions_per_min", round(grown / window * 60.0, 2), src(text))
    waiting = _name_of(last, WAITING)
    if waiting is not None:
        facts.set("server.waiting_max", int(state.gauge_max[waiting]), src(f"{waiting} (gauge, largest)"))
        facts.set("server.waiting_last", int(last[waiting]), src(f"{waiting} (gauge, last scrape)"))
    running = _name_of(last, RUNNING)
    if running is not None:
        peak = int(state.gauge_max[running])
        facts.set("server.running_max", peak, src(f"{running} (gauge, largest)"))
        if peak > 0 and _spells(state.engine, "max_num_seqs"):  # a server with a sequence limit (vLLM's)
            facts.set("server.max_num_seqs_suggested", max(1, peak // 2),
                      src(f"half the {running} peak of {peak}"))
    itl = next((n for n in ITL if f"{n}_sum" in last), None)
    ttft = next((n for n in TTFT if f"{n}_sum" in last), None)
    queue = next((n for n in QUEUE if f"{n}_sum" in last), None)
    for name, prefix in ((ttft, "run.ttft_ms"), (itl, "run.itl_ms"), (queue, "server.queue_ms"),
                         (PREFILL, "run.prefill_request_ms")):
        if name is None:
            continue
        lat = histogram(state, name)
        if lat is None:
            continue
        text = f"{name} (histogram; {lat.count:.0f} requests {lat.scope})"
        facts.set(f"{prefix}_mean", round(lat.mean_s * 1000.0, 1), src(text))
        if prefix != "run.prefill_request_ms":
            if lat.p50_s is not None:
                facts.set(f"{prefix}_p50", round(lat.p50_s * 1000.0, 1), src(text))
            if lat.p95_s is not None:
                facts.set(f"{prefix}_p95", round(lat.p95_s * 1000.0, 1), src(text))
        if prefix == "run.ttft_ms":
            facts.set("run.ttft_requests", int(lat.count), src(text))
    for secs, count, fact, what in ((LCPP_GEN_S, LCPP_GEN_N, "run.itl_ms_mean", "generation"),
                                    (LCPP_PROMPT_S, LCPP_PROMPT_N, "run.prefill_ms_per_token", "prompt processing")):
        if secs not in last or count not in last or facts.has(fact):
            continue
        if state.scrapes > 1:
            d_s, d_n, scope = state.increase.get(secs, 0.0), state.increase.get(count, 0.0), "in the window"
        else:
            d_s, d_n, scope = last[secs], last[count], "since the server started"
        if d_n > 0:
            facts.set(fact, round(d_s / d_n * 1000.0, 2),
                      src(f"{secs} / {count} (counters: {what} time per token, {d_n:.0f} tokens {scope})"))
    gen = _name_of(last, GEN_TOKENS)
    if gen is not None and state.scrapes > 1 and window > 0:
        facts.set("server.gen_tps", round(state.increase.get(gen, 0.0) / window, 2),
                  src(f"{gen} (counter, increase / window)"))
    if state.scrapes > 1:
        facts.set("server.metrics_window_s", round(window, 1), src("first to last scrape"))
    if len(state.gen_rates) > 1:
        facts.set("run.decode_tps_min", round(min(state.gen_rates), 2), src(f"{GEN_RATE} (gauge, smallest)"))
        facts.set("run.decode_tps_max", round(max(state.gen_rates), 2), src(f"{GEN_RATE} (gauge, largest)"))
    tokens_max = _name_of(last, TOKENS_MAX)
    if tokens_max is not None and last[tokens_max]:
        facts.set("run.tokens_used_max", int(last[tokens_max]), src(TOKENS_MAX[0]))
    if state.engine:
        facts.set("engine.name", state.engine, src("metric name prefix"))
    return facts


def http_get(url: str, timeout_s: float = TIMEOUT_S) -> str:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{url}: only http:// and https:// metrics URLs are read")
    request = urllib.request.Request(url, headers={"Accept": "text/plain"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        body = response.read(MAX_BODY + 1)
    if len(body) > MAX_BODY:
        raise ValueError(f"{url}: metrics page larger than {MAX_BODY >> 20} MiB")
    return body.decode("utf-8", "replace")


class MetricsPoller:
    """Scrapes `url` every `interval_s`; `poll()` returns a FactsEvent, or a note when it failed."""

    def __init__(self, url: str, interval_s: float = INTERVAL_S, fetch: Callable[[str], str] | None = None) -> None:
        self.url = url
        self.interval_s = interval_s
        self.fetch = fetch or http_get
        self.state = MetricsState()
        self.next_at = 0.0
        self.failures = 0
        self.last_error: str | None = None
        self.props: Facts | None = None  # llama-server /props (slot count and size), read once

    def due(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) >= self.next_at

    def poll(self) -> tuple[list[LiveEvent], str | None]:
        """Scrape once: the facts (and a `preempted` incident when the preemption counter rose since
        the previous scrape), or a note saying why the scrape failed (each new reason once)."""
        self.next_at = time.monotonic() + self.interval_s
        try:
            text = self.fetch(self.url)
            samples = parse_scrape(text)
        except (urllib.error.URLError, OSError, ValueError, TimeoutError) as exc:
            self.failures += 1
            reason = getattr(exc, "reason", None) or exc
            message = f"metrics {self.url}: {reason}"
            first_time = message != self.last_error
            self.last_error = message
            return [], message if first_time else None
        self.last_error = None
        name = _name_of(samples.values, PREEMPTIONS)
        prev = self.state.last.values.get(name) if name is not None and self.state.last is not None else None
        update(self.state, samples)
        facts = to_facts(self.state, self.url)
        if self.props is None and _answers_props(self.state.engine):
            self.props = self._read_props()
        if self.props is not None:
            facts.merge(self.props)
        events: list[LiveEvent] = [FactsEvent(facts=facts.to_json()["facts"])]
        if name is not None and prev is not None:
            now = samples.values[name]
            new = _grow(prev, now)
            if new > 0:
                usage = self.state.kv_usage_max
                events.append(IncidentEvent(
                    event="preempted",
                    text=f"{self.url}: {new:.0f} preemption(s) since the last scrape ({name} {prev:.0f} -> {now:.0f})"
                         + (f"; KV cache usage up to {usage:.1f}%" if usage is not None else ""),
                    data={"total": int(now), "new": int(new), "source": "metrics"}))
        return events, None

    def _read_props(self) -> Facts:
        """llama-server's /metrics lack the slot count and size; its /props has them (once, bounded)."""
        from doctor.sources.live.metrics.llama_props import props_url, read_props

        url = props_url(self.url)
        if url is None or self.fetch is not http_get:
            return Facts()
        facts, _ = read_props(url)
        return facts


def follow_metrics(poller: MetricsPoller, session: Any, *, stop: Callable[[], bool], duration_s: float | None = None,
                   on_note: Callable[[str], None] | None = None, max_scrapes: int | None = None) -> Any:
    """Scrape until stopped or `duration_s` passes (`watch --metrics URL` alone); returns the EndEvent."""
    from doctor.core.events import EndEvent, SettingsEvent

    session.emit(SettingsEvent(settings={"metrics": poller.url, "interval_s": poller.interval_s}, stage="source"))
    start = time.monotonic()
    reason = "finished"
    scrapes = 0
    try:
        while True:
            if poller.due():
                events, note = poller.poll()
                scrapes += 1
                for event in events:
                    session.emit(event)
                if note and on_note is not None:
                    on_note(note)
                session.flush()
                session.evaluate(force=True)
            if stop():
                reason = "interrupted"
                break
            if duration_s is not None and time.monotonic() - start >= duration_s:
                break
            if max_scrapes is not None and scrapes >= max_scrapes:
                break
            time.sleep(min(0.25, poller.interval_s))
    except KeyboardInterrupt:
        reason = "interrupted"
    return session.finish(EndEvent(reason=reason))
