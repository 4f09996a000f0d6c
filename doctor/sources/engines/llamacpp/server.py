"""llama-server as the source of the plan (`scan --url URL`): its /props and /slots.

Room: sources (imports core and doctor/sources/live/metrics/server_plan.py). The answers' shapes are
read from tools/server/server-context.cpp in the llama.cpp vendored by llama-cpp-python: GET /props ->
get_res_props: model_path, total_slots (--parallel), default_generation_settings.n_ctx (the context one
slot gets), build_info; GET /slots -> one object per slot with its n_ctx.
"""

from __future__ import annotations

from typing import Any

from doctor.sources.engines.llamacpp.engine import ENGINE
from doctor.sources.live.metrics.server_plan import Fetch, ServerPlan, ServerReader, as_int, get_json, src


def read(base: str, fetch: Fetch) -> ServerPlan | None:
    props = get_json(fetch, base + "/props")
    if isinstance(props, dict) and "default_generation_settings" in props:
        return _plan(base, props, get_json(fetch, base + "/slots"))
    return None


def _plan(base: str, props: dict[str, Any], slots: Any) -> ServerPlan:
    path = props.get("model_path")
    plan = ServerPlan(base, ENGINE.name, str(path or props.get("model_alias") or ""),
                      model_path=str(path) if isinstance(path, str) and path else None)
    n_slots = as_int(props.get("total_slots"))
    settings = props.get("default_generation_settings")
    slot_ctx = as_int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    if isinstance(slots, list) and slots and isinstance(slots[0], dict):
        slot_ctx = as_int(slots[0].get("n_ctx")) or slot_ctx
        n_slots = n_slots or len(slots)
    if n_slots:
        plan.settings["parallel"] = (n_slots, f"llama-server /props: total_slots = {n_slots}")
        plan.facts.set("config.n_parallel", n_slots, src(base, "/props", f"total_slots = {n_slots}"))
    if slot_ctx:
        total = slot_ctx * (n_slots or 1)
        plan.settings["ctx_size"] = (total, f"llama-server: {n_slots or 1} slot(s) x n_ctx {slot_ctx} (/slots, /props)")
        plan.facts.set("config.n_ctx_seq", slot_ctx, src(base, "/props", f"n_ctx = {slot_ctx} per slot"))
    build = props.get("build_info")
    if isinstance(build, str) and build:
        plan.notes.append(f"llama-server build {build}")
    plan.notes.append("llama-server does not report its -ngl, batch or KV cache type: those are the plan's defaults")
    return plan


READER = ServerReader("llama-server /props", read)
