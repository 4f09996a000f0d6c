"""What vLLM publishes to Prometheus, as fleet-wide queries (`llm-doctor fleet`): the same facts as
doctor/sources/live/metrics/endpoint.py sets from one /metrics page, over a window. Metric names:
vllm/v1/metrics/loggers.py, V0 vllm/engine/metrics.py.
"""

from __future__ import annotations

from doctor.core.engines import MetricQuery

QUERIES: tuple[MetricQuery, ...] = (
    MetricQuery("server.waiting_max", "max by (instance) (max_over_time(vllm:num_requests_waiting{{{sel}}}[{d}]))",
                "int"),
    MetricQuery("server.running_max", "max by (instance) (max_over_time(vllm:num_requests_running{{{sel}}}[{d}]))",
                "int"),
    MetricQuery("server.kv_usage_max",
                "max by (instance) (max_over_time({{__name__=~\"vllm:kv_cache_usage_perc|vllm:gpu_cache_usage_perc\","
                "{sel}}}[{d}]))", scale=100.0),
    MetricQuery("server.preemptions", "sum by (instance) (increase(vllm:num_preemptions_total{{{sel}}}[{d}]))", "int"),
    MetricQuery("run.ttft_ms_mean",
                "sum by (instance) (rate(vllm:time_to_first_token_seconds_sum{{{sel}}}[{d}])) / "
                "sum by (instance) (rate(vllm:time_to_first_token_seconds_count{{{sel}}}[{d}]))", scale=1000.0),
    MetricQuery("server.gen_tps_rate", "sum by (instance) (rate(vllm:generation_tokens_total{{{sel}}}[{d}]))"),
    MetricQuery("server.prompt_tps_rate", "sum by (instance) (rate(vllm:prompt_tokens_total{{{sel}}}[{d}]))"),
)
