"""A running server as the source of the plan (`scan --url URL`): the model it has loaded and the
settings it runs with, asked of its own endpoints.

Room: sources (imports core only). Engine-neutral: what a reader answers (ServerPlan) and the one
dispatch over the readers, each named by its engine row's `server` (doctor/core/engines.py) and asked
in table order (llama-server /props, Ollama /api/ps, vLLM's and SGLang's /v1/models: each reader in
its engine's folder, server.py, says which answers of which sources it reads). Every request is
bounded (time and size); an answer that is none of these is a UsageError.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from doctor.core import engines
from doctor.core.errors import UsageError
from doctor.core.facts import Facts, Source

TIMEOUT_S = 5.0
MAX_BODY = 16 << 20
Fetch = Callable[[str, "bytes | None", float], bytes]  # (url, body to POST or None, timeout) -> body


@dataclass
class ServerPlan:
    """What the server says it runs: the engine, the model (a local path, or a name to resolve here),
    and the settings as scan option -> (value, why)."""

    url: str
    engine: str
    model: str
    model_path: str | None = None
    settings: dict[str, tuple[Any, str]] = field(default_factory=dict)
    facts: Facts = field(default_factory=Facts)
    notes: list[str] = field(default_factory=list)
    stands_in: str | None = None  # the table engine whose plan stands for `engine` when that is not in the table


@dataclass(frozen=True)
class ServerReader:
    """An engine's reader of its running server: what it asks (for the error naming what was tried)
    and the reading, None when the server there is not its engine's."""

    asks: str  # "Ollama /api/ps"
    read: Callable[[str, Fetch], ServerPlan | None]  # (base URL, fetch) -> the plan


def base_url(url: str) -> str:
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--url {url}: not an http(s) URL")
    path = parts.path.rstrip("/")
    for tail in ("/metrics", "/props", "/slots", "/v1/models", "/v1", "/api/ps", "/api"):
        if path.endswith(tail):
            path = path[:-len(tail)]
            break
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _get(url: str, body: bytes | None, timeout_s: float) -> bytes:
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST" if body is not None else "GET")
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        data = response.read(MAX_BODY + 1)
    if len(data) > MAX_BODY:
        raise ValueError("answer too large")
    return data


def get_json(fetch: Fetch, url: str, body: dict[str, Any] | None = None) -> Any:
    """The JSON at `url`, or None when there is none (not found, not JSON)."""
    try:
        data = fetch(url, json.dumps(body).encode() if body is not None else None, TIMEOUT_S)
        return json.loads(data)
    except urllib.error.HTTPError:
        return None
    except (ValueError, UnicodeDecodeError):
        return None


def readers() -> list[ServerReader]:
    """The engines' server readers, in table order."""
    return engines.pieces(ServerReader, lambda e: e.server)


def read_server(url: str, fetch: Fetch | None = None) -> ServerPlan:
    """Ask the server what it runs. Raises UsageError when it cannot be reached or is not one of these."""
    fetch = fetch or _get
    base = base_url(url)
    asked = readers()
    try:
        for reader in asked:
            plan = reader.read(base, fetch)
            if plan is not None:
                return plan
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise UsageError(f"--url {url}: cannot reach the server ({getattr(exc, 'reason', None) or exc})") from None
    tried = [r.asks for r in asked]
    named = ", ".join(tried[:-1]) + " or " + tried[-1] if len(tried) > 1 else "".join(tried)
    raise UsageError(f"--url {url}: no {named} answer there")


def src(base: str, endpoint: str, text: str) -> Source:
    return Source("probe", f"server{endpoint}", text=f"{base}{endpoint}: {text}")


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
