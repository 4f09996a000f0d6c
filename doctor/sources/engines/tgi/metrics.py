"""What TGI publishes to Prometheus, as fleet-wide queries (`llm-doctor fleet`): the same facts as
doctor/sources/live/metrics/endpoint.py sets from one /metrics page, over a window. Metric names:
backends/v2/src/queue.rs (tgi_queue_size) and backend.rs (tgi_batch_current_size).
"""

from __future__ import annotations

from doctor.core.engines import MetricQuery

QUERIES: tuple[MetricQuery, ...] = (
    MetricQuery("server.waiting_max", "max by (instance) (max_over_time(tgi_queue_size{{{sel}}}[{d}]))", "int"),
    MetricQuery("server.running_max", "max by (instance) (max_over_time(tgi_batch_current_size{{{sel}}}[{d}]))", "int"),
)
