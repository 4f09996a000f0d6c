"""`watch --metrics URL`: a server's Prometheus endpoint as one more source of facts.

vLLM and llama-server (`--metrics`) publish their own counters at /metrics; this reads them with
prometheus_client's text parser (the format's reference implementation, not a home-made one) and
maps the ones rules use:

- server.kv_usage_max (%): vLLM `vllm:kv_cache_usage_perc` (V1) or `vllm:gpu_cache_usage_perc` (V0 and
  early V1), a 0-1 fraction; llama-server `llamacpp:kv_cache_usage_ratio` (older builds only);
- server.preemptions: `vllm:num_preemptions_total` (a counter in V0 and V1); when it rises between two
  scrapes a `preempted` event is emitted, so the preemption rule fires from the metrics alone;
- server.waiting_max: `vllm:num_requests_waiting`, `llamacpp:requests_deferred`;
- server.running_max: `vllm:num_requests_running`, `llamacpp:requests_processing`;
- run.ttft_ms_mean: `vllm:time_to_first_token_seconds` (histogram sum / count);
- run.decode_tps_min / max: `llamacpp:predicted_tokens_seconds` (average generation throughput, per scrape);
- run.tokens_used_max: `llamacpp:n_tokens_max` (largest prompt + generation seen);
- config.n_parallel, config.n_ctx_seq: llama-server's `/props` next to its /metrics, read once
  (engine_adapter/llama_props.py), since the metrics carry neither the slot count nor the slot size.

llama-server's names are read from its source (tools/server/server-task.cpp `to_metrics`, every
metric prefixed `llamacpp:`); vLLM's from vllm/engine/metrics.py (V0) and vllm/v1/metrics/loggers.py
(V1). Maxima are kept across scrapes, so a spike between two reports is not lost.

Machine access: one HTTP GET per scrape (urllib), bounded in size and time.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from doctor.facts import Facts, Source
from doctor.live import FactsEvent, IncidentEvent, LiveEvent

MAX_BODY = 8 << 20
INTERVAL_S = 5.0
TIMEOUT_S = 3.0

KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "llamacpp:kv_cache_usage_ratio")
PREEMPTIONS = ("vllm:num_preemptions_total", "vllm:num_preemptions")
WAITING = ("vllm:num_requests_waiting", "llamacpp:requests_deferred")
RUNNING = ("vllm:num_requests_running", "llamacpp:requests_processing")
TTFT = "vllm:time_to_first_token_seconds"
GEN_RATE = "llamacpp:predicted_tokens_seconds"
# declared a counter without the _total suffix; prometheus_client's parser adds it
TOKENS_MAX = ("llamacpp:n_tokens_max", "llamacpp:n_tokens_max_total")


@dataclass(slots=True)
class MetricsState:
    """What the scrapes so far showed (maxima across scrapes)."""

    kv_usage_max: float | None = None
    preemptions: float | None = None
    waiting_max: float | None = None
    running_max: float | None = None
    ttft_sum: float | None = None
    ttft_count: float | None = None
    gen_rates: list[float] = field(default_factory=list)
    tokens_max: float | None = None
    scrapes: int = 0
    engine: str | None = None


def parse_samples(text: str) -> dict[str, float]:
    """Sample name → value, labels summed (several engines or models behind one endpoint add up,
    except that gauges like usage take the largest: see `update`)."""
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, float] = {}
    maxima: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            value = float(sample.value)
            if value != value:  # NaN
                continue
            values[name] = values.get(name, 0.0) + value
            maxima[name] = max(maxima.get(name, value), value)
    for name in KV_USAGE:
        if name in maxima:
            values[name] = maxima[name]
    return values


def first_of(samples: dict[str, float], names: tuple[str, ...]) -> float | None:
    return next((samples[n] for n in names if n in samples), None)


def update(state: MetricsState, samples: dict[str, float]) -> None:
    state.scrapes += 1
    if any(k.startswith("vllm:") for k in samples):
        state.engine = "vllm"
    elif any(k.startswith("llamacpp:") for k in samples):
        state.engine = "llama.cpp"

    def bigger(old: float | None, new: float | None) -> float | None:
        if new is None:
            return old
        return new if old is None else max(old, new)

    kv = first_of(samples, KV_USAGE)
    state.kv_usage_max = bigger(state.kv_usage_max, kv * 100.0 if kv is not None else None)
    state.preemptions = bigger(state.preemptions, first_of(samples, PREEMPTIONS))
    state.waiting_max = bigger(state.waiting_max, first_of(samples, WAITING))
    state.running_max = bigger(state.running_max, first_of(samples, RUNNING))
    if f"{TTFT}_sum" in samples and f"{TTFT}_count" in samples:
        state.ttft_sum = samples[f"{TTFT}_sum"]
        state.ttft_count = samples[f"{TTFT}_count"]
    rate = samples.get(GEN_RATE)
    if rate is not None and rate > 0:
        state.gen_rates.append(rate)
        del state.gen_rates[:-1000]
    state.tokens_max = bigger(state.tokens_max, first_of(samples, TOKENS_MAX))


def to_facts(state: MetricsState, url: str) -> Facts:
    facts = Facts()

    def src(metric: str) -> Source:
        return Source("probe", "metrics", text=f"{metric} at {url} ({state.scrapes} scrape(s))")

    if state.kv_usage_max is not None:
        facts.set("server.kv_usage_max", round(state.kv_usage_max, 2), src("KV cache usage"), "%")
    if state.preemptions is not None:
        facts.set("server.preemptions", int(state.preemptions), src("vllm:num_preemptions_total"), "count")
    if state.waiting_max is not None:
        facts.set("server.waiting_max", int(state.waiting_max), src("requests waiting"), "requests")
    if state.running_max is not None:
        facts.set("server.running_max", int(state.running_max), src("requests running"), "requests")
    if state.ttft_count:
        facts.set("run.ttft_ms_mean", round((state.ttft_sum or 0.0) / state.ttft_count * 1000.0, 1),
                  src(f"{TTFT} sum / count"), "ms")
    if len(state.gen_rates) > 1:
        facts.set("run.decode_tps_min", round(min(state.gen_rates), 2), src(GEN_RATE), "tokens/s")
        facts.set("run.decode_tps_max", round(max(state.gen_rates), 2), src(GEN_RATE), "tokens/s")
    if state.tokens_max:
        facts.set("run.tokens_used_max", int(state.tokens_max), src(TOKENS_MAX[0]), "tokens")
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
            samples = parse_samples(text)
        except (urllib.error.URLError, OSError, ValueError, TimeoutError) as exc:
            self.failures += 1
            reason = getattr(exc, "reason", None) or exc
            message = f"metrics {self.url}: {reason}"
            first_time = message != self.last_error
            self.last_error = message
            return [], message if first_time else None
        self.last_error = None
        before = self.state.preemptions
        update(self.state, samples)
        facts = to_facts(self.state, self.url)
        if self.state.engine == "llama.cpp" and self.props is None:
            self.props = self._read_props()
        if self.props is not None:
            facts.merge(self.props)
        events: list[LiveEvent] = [FactsEvent(facts=facts.to_json()["facts"])]
        now = first_of(samples, PREEMPTIONS)
        if now is not None and now > (before or 0.0) and (before is not None or now > 0):
            usage = self.state.kv_usage_max
            events.append(IncidentEvent(
                event="preempted",
                text=f"{self.url}: vllm:num_preemptions_total rose from {int(before or 0)} to {int(now)}"
                     + (f" (KV cache usage up to {usage:.1f}%)" if usage is not None else ""),
                data={"total": int(now), "new": int(now - (before or 0.0)), "source": "metrics"}))
        return events, None

    def _read_props(self) -> Facts:
        """llama-server's /metrics lack the slot count and size; its /props has them (once, bounded)."""
        from engine_adapter.llama_props import props_url, read_props

        url = props_url(self.url)
        if url is None or self.fetch is not http_get:
            return Facts()
        facts, _ = read_props(url)
        return facts


def follow_metrics(poller: MetricsPoller, session: Any, *, stop: Callable[[], bool], duration_s: float | None = None,
                   on_note: Callable[[str], None] | None = None, max_scrapes: int | None = None) -> Any:
    """Scrape until stopped or `duration_s` passes (`watch --metrics URL` alone); returns the EndEvent."""
    from doctor.live import EndEvent, SettingsEvent

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
