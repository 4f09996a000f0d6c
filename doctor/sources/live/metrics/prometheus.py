"""`fleet --prometheus URL`: every llama-server, vLLM and TGI instance a Prometheus scrapes, as facts.

A source, like metrics.py, but one level up: instead of scraping one /metrics page it asks the
Prometheus HTTP API (`/api/v1/targets`, `/api/v1/query`) about every instance at once. Each PromQL
query covers the whole fleet (grouped `by (instance)`), so the number of queries does not grow with
the number of servers. Each value becomes a fact of the same name `watch --metrics` sets, and the
fact's source text is the PromQL and the value, which the report shows as evidence.

Instances are found by their metric families, and read with their queries: each engine's row of the
engine table holds them (`Engine.metrics`, doctor/sources/engines/<engine>/metrics.py: `llamacpp:*`
for llama-server --metrics, `vllm:*`, `tgi_*`). A target Prometheus reports down, or whose last
scrape is older than three scrape intervals (and 30 s), becomes `server.target_up` /
`server.scrape_stale` facts (the rule base makes them a finding), never an exception.

llama-server's /metrics do not carry its slot count or slot size; when the instance answers on the
address Prometheus scrapes, `/props` (`total_slots`, `default_generation_settings.n_ctx`) adds
them (one bounded GET per llama-server; `props=False` skips it).

Machine access: HTTP GETs to the given Prometheus (and to llama-server instances for /props),
bounded in size and time.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from doctor.core import engines
from doctor.core.engines import Metrics
from doctor.core.errors import InputError, UsageError
from doctor.core.facts import Event, Facts, Source

MAX_BODY = 32 << 20
TIMEOUT_S = 10.0
STALE_INTERVALS = 3.0
PROPS_BUDGET_S = 15.0  # all /props reads together (2 s each at most)
STALE_MIN_S = 30.0  # a short scrape interval delayed by a busy Prometheus is not yet stale

_MATCHER = r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*'
_SELECTOR_RE = re.compile(rf"^(?:{_MATCHER}(?:,{_MATCHER})*,?)?$")


def served() -> list[tuple[str, Metrics]]:
    """The engines of the table that publish metrics, with what they publish (their rows, in table order):
    each one's metric names, a gauge it always exports (found with a range function per engine: one over
    a name regex would drop the names and collide), and its queries."""
    return [(e.name, e.metrics) for e in engines.table() if e.metrics is not None]


@dataclass(slots=True)
class QueryCost:
    """What one query cost Prometheus (from `stats=all`)."""

    promql: str
    series: int
    samples: int | None
    eval_ms: float | None
    wall_ms: float


@dataclass(slots=True)
class Instance:
    """One scraped server: its labels, health and the facts its series gave."""

    instance: str
    job: str | None
    engine: str | None
    facts: Facts
    health: str | None = None  # up | down | unknown (targets API), None: not scraped any more
    last_error: str | None = None
    scrape_age_s: float | None = None
    scrape_interval_s: float | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Fleet:
    prometheus: str
    window: str
    selector: str
    instances: list[Instance]
    costs: list[QueryCost]
    notes: list[str] = field(default_factory=list)


def parse_selector(text: str | None) -> str:
    """`--match` as PromQL label matchers (`job="llama",env=~"prod.*"`, braces optional)."""
    if not text:
        return ""
    inner = text.strip()
    if inner.startswith("{") and inner.endswith("}"):
        inner = inner[1:-1]
    if not _SELECTOR_RE.match(inner):
        raise UsageError(f'--match {text}: give label matchers such as job="llama-server" or {{env=~"prod.*"}}')
    return inner.strip().rstrip(",")


def window(seconds: float) -> str:
    """A PromQL duration for a window of `seconds` (whole seconds, at least 10 s)."""
    return f"{max(10, round(seconds))}s"


def _with(sel: str, extra: str) -> str:
    return ",".join(part for part in (extra, sel) if part)


class PrometheusClient:
    """GETs against the HTTP API; every error becomes an InputError with one line."""

    def __init__(self, base: str, *, timeout_s: float = TIMEOUT_S,
                 fetch: Callable[[str, float], bytes] | None = None) -> None:
        if not base.startswith(("http://", "https://")):
            raise UsageError(f"--prometheus {base}: give an http:// or https:// URL")
        self.base = base.rstrip("/")
        self.timeout_s = timeout_s
        self.fetch = fetch or _http_get
        self.costs: list[QueryCost] = []

    def api(self, path: str, params: dict[str, str] | None = None) -> Any:
        url = f"{self.base}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        try:
            body = self.fetch(url, self.timeout_s)
        except urllib.error.HTTPError as exc:
            detail = _error_detail(exc)
            raise InputError(f"Prometheus {self.base}: {path} answered {exc.code}{detail}") from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            raise InputError(f"Prometheus {self.base}: {getattr(exc, 'reason', None) or exc}") from None
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise InputError(f"Prometheus {self.base}: {path} did not answer JSON (is this a Prometheus?)") from None
        if not isinstance(data, dict) or data.get("status") != "success":
            error = data.get("error") if isinstance(data, dict) else None
            raise InputError(f"Prometheus {self.base}: {path}: {error or 'not a Prometheus API answer'}")
        return data.get("data")

    def query(self, promql: str, at: float) -> list[tuple[dict[str, str], float]]:
        """An instant query; (labels, value) per series. Its cost goes to `costs`."""
        start = time.monotonic()
        data = self.api("/api/v1/query", {"query": promql, "time": f"{at:.3f}", "stats": "all"})
        wall_ms = (time.monotonic() - start) * 1000.0
        rows: list[tuple[dict[str, str], float]] = []
        if isinstance(data, dict) and data.get("resultType") == "vector":
            for item in data.get("result") or []:
                try:
                    value = float(item["value"][1])
                except (KeyError, IndexError, TypeError, ValueError):
                    continue
                if value != value or value in (float("inf"), float("-inf")):
                    continue
                rows.append(({str(k): str(v) for k, v in (item.get("metric") or {}).items()}, value))
        stats = data.get("stats") if isinstance(data, dict) else None
        samples = eval_ms = None
        if isinstance(stats, dict):
            samples_part = stats.get("samples") or {}
            samples = samples_part.get("totalQueryableSamples") if isinstance(samples_part, dict) else None
            timings = stats.get("timings") or {}
            total = timings.get("evalTotalTime") if isinstance(timings, dict) else None
            eval_ms = float(total) * 1000.0 if isinstance(total, int | float) else None
        self.costs.append(QueryCost(promql, len(rows), samples if isinstance(samples, int) else None,
                                    eval_ms, wall_ms))
        return rows

    def targets(self) -> list[dict[str, Any]]:
        data = self.api("/api/v1/targets", {"state": "active"})
        targets = data.get("activeTargets") if isinstance(data, dict) else None
        return [t for t in targets or [] if isinstance(t, dict)]


def collect(client: PrometheusClient, *, duration_s: float, selector: str = "", props: bool = True,
            now: float | None = None, props_fetch: Callable[[str, float], bytes] | None = None) -> Fleet:
    """Every llama-server / vLLM / TGI instance in Prometheus, with its facts over the last `duration_s`."""
    at = time.time() if now is None else now
    d = window(duration_s)
    instances: dict[str, Instance] = {}

    publishing = served()  # the engine table's rows with metrics
    for engine, metrics in publishing:
        family = metrics.family
        matchers = _with(selector, f"__name__=~{json.dumps(family)}")
        promql = (f"group by (instance, job) ({{{matchers}}}) or "
                  f"group by (instance, job) (max_over_time({metrics.gauge}{{{selector}}}[{d}]))")
        for labels, _ in client.query(promql, at):
            name = labels.get("instance")
            if not name:
                continue
            inst = instances.get(name)
            if inst is None:
                inst = instances[name] = Instance(name, labels.get("job"), engine, Facts())
                inst.facts.set("engine.name", engine, Source("probe", "prometheus",
                                                             text=f"{promql} → metric family {family}"))

    _add_health(client, instances, selector, at)

    for engine, metrics in publishing:
        if not any(i.engine == engine for i in instances.values()):
            continue
        for q in metrics.queries:
            promql = q.promql.format(sel=selector, d=d).replace("{}", "")
            for labels, value in client.query(promql, at):
                inst = instances.get(labels.get("instance", ""))
                if inst is None or inst.engine != engine:
                    continue
                scaled = value * q.scale
                fact_value: int | float = round(scaled) if q.kind == "int" else round(scaled, 2)
                inst.facts.set(q.fact, fact_value, Source("probe", "prometheus",
                                                          text=f"{promql} = {_fmt(value)}"))
                if q.fact == "server.preemptions" and fact_value > 0:
                    inst.facts.add_event(Event(kind="preempted", line=None, text=f"{promql} = {_fmt(value)}",
                                               source="prometheus",
                                               data={"total": fact_value, "source": "prometheus"}))

    if props:
        deadline = time.monotonic() + PROPS_BUDGET_S
        answers_props = {engine for engine, metrics in publishing if metrics.props}  # llama-server's /props
        for inst in instances.values():
            if inst.engine not in answers_props or inst.health != "up":
                continue
            if time.monotonic() > deadline:
                inst.notes.append(f"/props not read: the {PROPS_BUDGET_S:.0f} s for all instances ran out "
                                  "(slot count and size unknown)")
                continue
            _add_props(inst, props_fetch)

    ordered = sorted(instances.values(), key=lambda i: i.instance)
    return Fleet(client.base, d, selector, ordered, list(client.costs))


def _add_health(client: PrometheusClient, instances: dict[str, Instance], selector: str, at: float) -> None:
    """Targets API: health, last error, scrape age. Engine targets only (matched by instance)."""
    by_instance: dict[str, dict[str, Any]] = {}
    for found in client.targets():
        labels = found.get("labels") or {}
        name = labels.get("instance") if isinstance(labels, dict) else None
        if isinstance(name, str):
            by_instance[name] = found
    # `up` for instances that never answered with engine metrics but match the selector
    up_promql = f"up{{{selector}}}"
    for labels, value in client.query(up_promql, at):
        name = labels.get("instance")
        if name and name not in instances and value == 0 and _job_has_engine(labels.get("job"), instances):
            instances[name] = Instance(name, labels.get("job"), None, Facts())
    for inst in instances.values():
        target = by_instance.get(inst.instance)
        src_text = f"{client.base}/api/v1/targets (instance {inst.instance})"
        if target is None:
            inst.health = None
            inst.facts.set("server.target_up", False, Source("probe", "prometheus",
                           text=f"{src_text}: not among the active targets any more"))
            inst.facts.set("server.scrape_stale", True, Source("probe", "prometheus",
                           text=f"{src_text}: had engine series in the window but is no longer scraped"))
            continue
        inst.health = str(target.get("health") or "unknown")
        inst.last_error = str(target.get("lastError") or "") or None
        interval = _seconds(target.get("scrapeInterval"))
        inst.scrape_interval_s = interval
        last = _timestamp(target.get("lastScrape"))
        if last is not None:
            inst.scrape_age_s = round(max(0.0, at - last), 1)
        up = inst.health == "up"
        why = f"health {inst.health}" + (f", last error: {inst.last_error}" if inst.last_error else "")
        inst.facts.set("server.target_up", up, Source("probe", "prometheus", text=f"{src_text}: {why}"))
        if inst.scrape_age_s is not None:
            inst.facts.set("server.scrape_age_s", inst.scrape_age_s, Source("probe", "prometheus",
                           text=f"{src_text}: lastScrape {target.get('lastScrape')}"))
            if interval:
                stale = inst.scrape_age_s > max(STALE_INTERVALS * interval, STALE_MIN_S)
                inst.facts.set("server.scrape_stale", stale, Source("probe", "prometheus", text=(
                    f"{src_text}: last scrape {inst.scrape_age_s} s ago, interval {interval:g} s")))


def _job_has_engine(job: str | None, instances: dict[str, Instance]) -> bool:
    """A down target with no engine series is reported when its job scrapes engines elsewhere."""
    return job is not None and any(i.job == job for i in instances.values())


def _add_props(inst: Instance, fetch: Callable[[str, float], bytes] | None) -> None:
    from doctor.sources.live.metrics.llama_props import read_props

    facts, problem = read_props(f"http://{inst.instance}/props", fetch)
    inst.facts.merge(facts)
    if problem:
        inst.notes.append(problem)


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def _seconds(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)", text):
        total += float(number) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800,
                                  "y": 31536000}[unit]
    return total or None


def _timestamp(text: Any) -> float | None:
    if not isinstance(text, str) or text.startswith("0001-"):
        return None
    cleaned = re.sub(r"(\.\d{6})\d+", r"\1", text.replace("Z", "+00:00"))
    try:
        return datetime.fromisoformat(cleaned).timestamp()
    except ValueError:
        return None


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        data = json.loads(exc.read(65536))
    except (ValueError, OSError):
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    return f": {error}" if isinstance(error, str) else ""


def _http_get(url: str, timeout_s: float) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        body = response.read(MAX_BODY + 1)
    if len(body) > MAX_BODY:
        raise ValueError(f"{url}: answer larger than {MAX_BODY >> 20} MiB")
    return body
