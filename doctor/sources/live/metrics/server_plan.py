"""A running server as the source of the plan (`scan --url URL`): the model it has loaded and the
settings it runs with, asked of its own endpoints.

Room: sources (imports core only). The answers' shapes are read from the engines' sources:
- llama-server (tools/server/server-context.cpp in the llama.cpp vendored by llama-cpp-python):
  GET /props -> get_res_props: model_path, total_slots (--parallel), default_generation_settings.n_ctx
  (the context one slot gets), build_info; GET /slots -> one object per slot with its n_ctx.
- Ollama (ollama/ollama api/types.go, server/routes.go): GET /api/ps -> ProcessResponse {models:
  [{name, model, size, digest, details, expires_at, size_vram, context_length}]}; POST /api/show
  {"model": name} -> ShowResponse {parameters: one `%-*s %#v` line per Modelfile PARAMETER,
  details {quantization_level, ...}, model_info {"<arch>.context_length", ...}}.
- vLLM (vllm/entrypoints/openai/models/serving.py) and SGLang (sglang/srt/entrypoints/http_server.py,
  openai/protocol.py): GET /v1/models -> {data: [ModelCard {id, root (the model path or repo id),
  owned_by ("vllm" / "sglang"), max_model_len}]}.
Every request is bounded (time and size); an answer that is none of these is a UsageError.
"""

from __future__ import annotations

import json
import shlex
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from doctor.core.errors import UsageError
from doctor.core.facts import Facts, Source

TIMEOUT_S = 5.0
MAX_BODY = 16 << 20
Fetch = Callable[[str, "bytes | None", float], bytes]  # (url, body to POST or None, timeout) -> body
GIB = 1 << 30


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


def _json(fetch: Fetch, url: str, body: dict[str, Any] | None = None) -> Any:
    """The JSON at `url`, or None when there is none (not found, not JSON)."""
    try:
        data = fetch(url, json.dumps(body).encode() if body is not None else None, TIMEOUT_S)
        return json.loads(data)
    except urllib.error.HTTPError:
        return None
    except (ValueError, UnicodeDecodeError):
        return None


def read_server(url: str, fetch: Fetch | None = None) -> ServerPlan:
    """Ask the server what it runs. Raises UsageError when it cannot be reached or is not one of these."""
    fetch = fetch or _get
    base = base_url(url)
    try:
        props = _json(fetch, base + "/props")
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise UsageError(f"--url {url}: cannot reach the server ({getattr(exc, 'reason', None) or exc})") from None
    if isinstance(props, dict) and "default_generation_settings" in props:
        return _llama_server(base, props, _json(fetch, base + "/slots"))
    ps = _json(fetch, base + "/api/ps")
    if isinstance(ps, dict) and isinstance(ps.get("models"), list):
        return _ollama(base, ps, fetch)
    models = _json(fetch, base + "/v1/models")
    if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
        return _openai(base, models["data"])
    raise UsageError(f"--url {url}: no llama-server /props, Ollama /api/ps or /v1/models answer there")


def _src(base: str, endpoint: str, text: str) -> Source:
    return Source("probe", f"server{endpoint}", text=f"{base}{endpoint}: {text}")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _llama_server(base: str, props: dict[str, Any], slots: Any) -> ServerPlan:
    path = props.get("model_path")
    plan = ServerPlan(base, "llama.cpp", str(path or props.get("model_alias") or ""),
                      model_path=str(path) if isinstance(path, str) and path else None)
    n_slots = _int(props.get("total_slots"))
    settings = props.get("default_generation_settings")
    slot_ctx = _int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    if isinstance(slots, list) and slots and isinstance(slots[0], dict):
        slot_ctx = _int(slots[0].get("n_ctx")) or slot_ctx
        n_slots = n_slots or len(slots)
    if n_slots:
        plan.settings["parallel"] = (n_slots, f"llama-server /props: total_slots = {n_slots}")
        plan.facts.set("config.n_parallel", n_slots, _src(base, "/props", f"total_slots = {n_slots}"))
    if slot_ctx:
        total = slot_ctx * (n_slots or 1)
        plan.settings["ctx_size"] = (total, f"llama-server: {n_slots or 1} slot(s) x n_ctx {slot_ctx} (/slots, /props)")
        plan.facts.set("config.n_ctx_seq", slot_ctx, _src(base, "/props", f"n_ctx = {slot_ctx} per slot"))
    build = props.get("build_info")
    if isinstance(build, str) and build:
        plan.notes.append(f"llama-server build {build}")
    plan.notes.append("llama-server does not report its -ngl, batch or KV cache type: those are the plan's defaults")
    return plan


def parse_parameters(text: str) -> dict[str, Any]:
    """Ollama's ShowResponse.parameters: `name  value` lines (%#v: strings quoted); repeated names
    (stop) become lists."""
    out: dict[str, Any] = {}
    for line in (text or "").splitlines():
        name, _, raw = line.strip().partition(" ")
        if not name or not raw.strip():
            continue
        try:
            value: Any = json.loads(raw.strip())
        except ValueError:
            try:
                value = shlex.split(raw.strip())[0]
            except (ValueError, IndexError):
                value = raw.strip()
        if name in out:
            out[name] = (out[name] if isinstance(out[name], list) else [out[name]]) + [value]
        else:
            out[name] = value
    return out


def ollama_settings(params: dict[str, Any], where: str) -> dict[str, tuple[Any, str]]:
    """Modelfile PARAMETERs (or an /api/show answer's) as scan settings: num_ctx, num_gpu (-1 = Ollama
    decides, left to the plan), num_thread, num_batch."""
    out: dict[str, tuple[Any, str]] = {}
    for param, dest in (("num_ctx", "ctx_size"), ("num_gpu", "n_gpu_layers"), ("num_thread", "threads"),
                        ("num_batch", "batch_size")):
        value = _int(params.get(param))
        if value is None or (param == "num_gpu" and value < 0) or (param != "num_gpu" and value <= 0):
            continue
        out[dest] = (value, f"{where}: PARAMETER {param} {value}")
    return out


def _ollama(base: str, ps: dict[str, Any], fetch: Fetch) -> ServerPlan:
    loaded = [m for m in ps["models"] if isinstance(m, dict) and m.get("name")]
    if not loaded:
        raise UsageError(f"--url {base}: Ollama has no model loaded (/api/ps is empty); run one, or scan -m NAME")
    first = loaded[0]
    name = str(first.get("model") or first["name"])
    plan = ServerPlan(base, "ollama", name)
    if len(loaded) > 1:
        plan.notes.append(f"Ollama has {len(loaded)} models loaded; this scan is of {name}")
    show = _json(fetch, base + "/api/show", {"model": name})
    params = parse_parameters(show.get("parameters", "")) if isinstance(show, dict) else {}
    plan.settings.update(ollama_settings(params, f"Ollama /api/show {name}"))
    ctx = _int(first.get("context_length"))
    if ctx:
        plan.settings["ctx_size"] = (ctx, f"Ollama /api/ps: context_length {ctx} (what the runner was started with)")
        plan.facts.set("server.ollama.num_ctx", ctx, _src(base, "/api/ps", f"context_length = {ctx}"))
    size, vram = _int(first.get("size")), _int(first.get("size_vram"))
    if size:
        plan.facts.set("server.ollama.ps_size_bytes", size, _src(base, "/api/ps", f"size = {size}"))
        plan.facts.set("server.ollama.ps_vram_bytes", vram or 0, _src(base, "/api/ps", f"size_vram = {vram or 0}"))
        share = (vram or 0) / size
        claim = f"`ollama ps`: {(vram or 0) / GIB:.2f} of {size / GIB:.2f} GiB in VRAM ({share:.0%} on the GPU)"
        plan.notes.append(claim)
        if vram == 0 and "n_gpu_layers" not in plan.settings:
            plan.settings["n_gpu_layers"] = (0, f"Ollama /api/ps: size_vram 0, the model runs on the CPU ({claim})")
        elif vram is not None and vram >= size and "n_gpu_layers" not in plan.settings:
            plan.settings["n_gpu_layers"] = (-1, f"Ollama /api/ps: all of it in VRAM ({claim})")
    return plan


def _openai(base: str, cards: list[Any]) -> ServerPlan:
    card = next((c for c in cards if isinstance(c, dict) and not c.get("parent")), None)
    if card is None:
        raise UsageError(f"--url {base}: /v1/models lists no base model")
    owner = str(card.get("owned_by") or "")
    engine = "sglang" if owner == "sglang" else "vllm"
    root = str(card.get("root") or card.get("id") or "")
    plan = ServerPlan(base, engine, root)
    length = _int(card.get("max_model_len"))
    if length:
        plan.settings["ctx_size"] = (length, f"{engine} /v1/models: max_model_len {length}")
        plan.facts.set("config.max_model_len", length, _src(base, "/v1/models", f"max_model_len = {length}"))
    return plan
