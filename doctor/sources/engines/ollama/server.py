"""Ollama as the source of the plan (`scan --url URL`): the model /api/ps has loaded, its /api/show
PARAMETERs, and what `ollama ps` claims of VRAM.

Room: sources (imports core and doctor/sources/live/metrics/server_plan.py). The answers' shapes are
read from ollama/ollama api/types.go and server/routes.go: GET /api/ps -> ProcessResponse {models:
[{name, model, size, digest, details, expires_at, size_vram, context_length}]}; POST /api/show
{"model": name} -> ShowResponse {parameters: one `%-*s %#v` line per Modelfile PARAMETER,
details {quantization_level, ...}, model_info {"<arch>.context_length", ...}}.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from doctor.core.errors import UsageError
from doctor.sources.engines.ollama.engine import ENGINE
from doctor.sources.engines.ollama.store import ollama_settings
from doctor.sources.live.metrics.server_plan import Fetch, ServerPlan, ServerReader, as_int, get_json, src

GIB = 1 << 30


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


def read(base: str, fetch: Fetch) -> ServerPlan | None:
    ps = get_json(fetch, base + "/api/ps")
    if isinstance(ps, dict) and isinstance(ps.get("models"), list):
        return _plan(base, ps, fetch)
    return None


def _plan(base: str, ps: dict[str, Any], fetch: Fetch) -> ServerPlan:
    loaded = [m for m in ps["models"] if isinstance(m, dict) and m.get("name")]
    if not loaded:
        raise UsageError(f"--url {base}: Ollama has no model loaded (/api/ps is empty); run one, or scan -m NAME")
    first = loaded[0]
    name = str(first.get("model") or first["name"])
    plan = ServerPlan(base, ENGINE.name, name)
    if len(loaded) > 1:
        plan.notes.append(f"Ollama has {len(loaded)} models loaded; this scan is of {name}")
    show = get_json(fetch, base + "/api/show", {"model": name})
    params = parse_parameters(show.get("parameters", "")) if isinstance(show, dict) else {}
    plan.settings.update(ollama_settings(params, f"Ollama /api/show {name}"))
    ctx = as_int(first.get("context_length"))
    if ctx:
        plan.settings["ctx_size"] = (ctx, f"Ollama /api/ps: context_length {ctx} (what the runner was started with)")
        plan.facts.set("server.ollama.num_ctx", ctx, src(base, "/api/ps", f"context_length = {ctx}"))
    size, vram = as_int(first.get("size")), as_int(first.get("size_vram"))
    if size:
        plan.facts.set("server.ollama.ps_size_bytes", size, src(base, "/api/ps", f"size = {size}"))
        plan.facts.set("server.ollama.ps_vram_bytes", vram or 0, src(base, "/api/ps", f"size_vram = {vram or 0}"))
        share = (vram or 0) / size
        claim = f"`ollama ps`: {(vram or 0) / GIB:.2f} of {size / GIB:.2f} GiB in VRAM ({share:.0%} on the GPU)"
        plan.notes.append(claim)
        if vram == 0 and "n_gpu_layers" not in plan.settings:
            plan.settings["n_gpu_layers"] = (0, f"Ollama /api/ps: size_vram 0, the model runs on the CPU ({claim})")
        elif vram is not None and vram >= size and "n_gpu_layers" not in plan.settings:
            plan.settings["n_gpu_layers"] = (-1, f"Ollama /api/ps: all of it in VRAM ({claim})")
    return plan


READER = ServerReader("Ollama /api/ps", read)
