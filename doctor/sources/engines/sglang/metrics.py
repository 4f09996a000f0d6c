"""What SGLang publishes to Prometheus, as fleet-wide queries (`llm-doctor fleet`): the same facts as
doctor/sources/live/metrics/endpoint.py sets from one /metrics page, over a window. Metric names:
srt/metrics/collector.py (0.4), srt/observability/metrics_collector.py (0.5), every one prefixed `sglang:`.
"""

from __future__ import annotations

from doctor.core.engines import MetricQuery

QUERIES: tuple[MetricQuery, ...] = (
    MetricQuery("server.waiting_max", "max by (instance) (max_over_time(sglang:num_queue_reqs{{{sel}}}[{d}]))",
                "int"),
    MetricQuery("server.running_max", "max by (instance) (max_over_time(sglang:num_running_reqs{{{sel}}}[{d}]))",
                "int"),
    MetricQuery("server.kv_usage_max", "max by (instance) (max_over_time(sglang:token_usage{{{sel}}}[{d}]))",
                scale=100.0),
    MetricQuery("server.preemptions",
                "sum by (instance) (increase(sglang:num_retracted_requests_total{{{sel}}}[{d}]))", "int"),
    MetricQuery("run.ttft_ms_mean",
                "sum by (instance) (rate(sglang:time_to_first_token_seconds_sum{{{sel}}}[{d}])) / "
                "sum by (instance) (rate(sglang:time_to_first_token_seconds_count{{{sel}}}[{d}]))", scale=1000.0),
    MetricQuery("server.gen_tps_rate", "sum by (instance) (rate(sglang:generation_tokens_total{{{sel}}}[{d}]))"),
    MetricQuery("server.prompt_tps_rate", "sum by (instance) (rate(sglang:prompt_tokens_total{{{sel}}}[{d}]))"),
)
