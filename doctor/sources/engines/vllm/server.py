"""vLLM (and SGLang, which answers the same) as the source of the plan (`scan --url URL`): /v1/models.

Room: sources (imports core and doctor/sources/live/metrics/server_plan.py). The answer's shape is read
from vllm/entrypoints/openai/models/serving.py and SGLang's sglang/srt/entrypoints/http_server.py,
openai/protocol.py: GET /v1/models -> {data: [ModelCard {id, root (the model path or repo id), owned_by
("vllm" / "sglang"), max_model_len}]}.
An SGLang server is reported as SGLang (its row of the table); vLLM stands in where a plan needs it.
"""

from __future__ import annotations

from typing import Any

from doctor.core import engines
from doctor.core.errors import UsageError
from doctor.sources.engines.vllm.engine import ENGINE
from doctor.sources.live.metrics.server_plan import Fetch, ServerPlan, ServerReader, as_int, get_json, src


def read(base: str, fetch: Fetch) -> ServerPlan | None:
    models = get_json(fetch, base + "/v1/models")
    if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
        return _plan(base, models["data"])
    return None


def _plan(base: str, cards: list[Any]) -> ServerPlan:
    card = next((c for c in cards if isinstance(c, dict) and not c.get("parent")), None)
    if card is None:
        raise UsageError(f"--url {base}: /v1/models lists no base model")
    owner = str(card.get("owned_by") or "")
    engine = engines.canonical(owner) or ENGINE.name  # owned_by names the server ("vllm", SGLang's name)
    root = str(card.get("root") or card.get("id") or "")
    plan = ServerPlan(base, engine, root, stands_in=ENGINE.name)
    length = as_int(card.get("max_model_len"))
    if length:
        plan.settings["ctx_size"] = (length, f"{engine} /v1/models: max_model_len {length}")
        plan.facts.set("config.max_model_len", length, src(base, "/v1/models", f"max_model_len = {length}"))
    return plan


READER = ServerReader("/v1/models", read)
