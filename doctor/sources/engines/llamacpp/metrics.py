"""What llama-server (--metrics) publishes to Prometheus, as fleet-wide queries (`llm-doctor fleet`): the same facts as
doctor/sources/live/metrics/endpoint.py sets from one /metrics page, over a window. Metric names:
tools/server/server-task.cpp `to_metrics`, every metric prefixed `llamacpp:`.
"""

from __future__ import annotations

from doctor.core.engines import MetricQuery

QUERIES: tuple[MetricQuery, ...] = (
    MetricQuery("server.waiting_max", "max by (instance) (max_over_time(llamacpp:requests_deferred{{{sel}}}[{d}]))",
                "int"),
    MetricQuery("server.running_max",
                "max by (instance) (max_over_time(llamacpp:requests_processing{{{sel}}}[{d}]))", "int"),
    MetricQuery("server.busy_slots_per_decode",
                "max by (instance) (last_over_time(llamacpp:n_busy_slots_per_decode{{{sel}}}[{d}]))"),
    MetricQuery("run.tokens_used_max", "max by (instance) (max_over_time(llamacpp:n_tokens_max{{{sel}}}[{d}]))", "int"),
    MetricQuery("server.kv_usage_max",
                "max by (instance) (max_over_time(llamacpp:kv_cache_usage_ratio{{{sel}}}[{d}]))", scale=100.0),
    # generation speed reported while tokens were generated (0 when idle is left out)
    MetricQuery("run.decode_tps_min",
                "min by (instance) (min_over_time((llamacpp:predicted_tokens_seconds{{{sel}}} > 0)[{d}:]))"),
    MetricQuery("run.decode_tps_max",
                "max by (instance) (max_over_time((llamacpp:predicted_tokens_seconds{{{sel}}} > 0)[{d}:]))"),
    # rates over the window
    MetricQuery("server.gen_tps_rate", "sum by (instance) (rate(llamacpp:tokens_predicted_total{{{sel}}}[{d}]))"),
    MetricQuery("server.prompt_tps_rate", "sum by (instance) (rate(llamacpp:prompt_tokens_total{{{sel}}}[{d}]))"),
    MetricQuery("server.decode_tps_per_request",
                "sum by (instance) (rate(llamacpp:tokens_predicted_total{{{sel}}}[{d}])) / "
                "sum by (instance) (rate(llamacpp:tokens_predicted_seconds_total{{{sel}}}[{d}]))"),
)
