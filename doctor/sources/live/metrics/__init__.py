"""Servers read through their HTTP endpoints: one server's Prometheus /metrics (endpoint.py), every
server a Prometheus scrapes (prometheus.py), llama-server's /props (llama_props.py), and the model and
settings a running server has loaded, as the plan for `scan --url` (server_plan.py)."""
