"""llama-server's `/props`: the slot count and slot size its /metrics do not carry.

`total_slots` (--parallel) and `default_generation_settings.n_ctx` (the context one slot gets) are
what the context rules need to judge `llamacpp:n_tokens_max`. Read from tools/server/server-context.cpp
`get_res_props` in the llama.cpp vendored by llama-cpp-python. One bounded GET; a failure is a note.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable

from doctor.core.facts import Facts, Source

TIMEOUT_S = 2.0
MAX_BODY = 4 << 20


def props_url(metrics_url: str) -> str | None:
    """http://host:port/props for a llama-server http://host:port/metrics URL (None for another path)."""
    base, sep, tail = metrics_url.partition("/metrics")
    if not sep or tail not in ("", "/"):
        return None
    return f"{base}/props"


def read_props(url: str, fetch: Callable[[str, float], bytes] | None = None) -> tuple[Facts, str | None]:
    """Facts config.n_parallel and config.n_ctx_seq from `url`, or empty facts and why not."""
    facts = Facts()
    try:
        data = json.loads((fetch or _get)(url, TIMEOUT_S))
    except (urllib.error.URLError, OSError, TimeoutError, ValueError, UnicodeDecodeError) as exc:
        return facts, f"{url}: {getattr(exc, 'reason', None) or exc} (slot count and size unknown)"
    if not isinstance(data, dict):
        return facts, f"{url}: not llama-server's /props"
    slots = data.get("total_slots")
    settings = data.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0:
        facts.set("config.n_parallel", slots, Source("probe", "llama-server.props",
                                                     text=f"{url}: total_slots = {slots}"))
    if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0:
        facts.set("config.n_ctx_seq", n_ctx, Source("probe", "llama-server.props",
                  text=f"{url}: default_generation_settings.n_ctx = {n_ctx}"))
    return facts, None


def _get(url: str, timeout_s: float) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        body = response.read(MAX_BODY + 1)
    if len(body) > MAX_BODY:
        raise ValueError("answer too large")
    return body
