"""The context a run needs: tokens needed, the context to recommend, what is left for the reply.

From the planned prompt and reply (config.*), else the most tokens a run, a request or a prompt
was seen to hold, else the overflow events (the context ran out): derived.tokens_needed,
derived.ctx_recommended and its per-slot total, tokens over, headroom, and a smaller context to
try after a KV-cache OOM (derived.ctx_reduced, after the budget knows what fits).
"""

from __future__ import annotations

from doctor.core.facts import Facts
from doctor.derive.memory import pad
from doctor.derive.source import step_src


def asked_ctx(facts: Facts) -> int | None:
    """The context as asked (llama.cpp clamps the batch to it before padding): config.n_ctx_requested
    where a source knows it, else config.n_ctx (an engine log prints the padded value, and the batch
    it prints is already clamped)."""
    for name in ("config.n_ctx_requested", "config.n_ctx"):
        value = facts.value(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


PLANNED = "planned prompt + max new tokens"


def _needed_tokens(facts: Facts) -> tuple[int | None, str]:
    prompt = facts.value("config.prompt_tokens")
    new = facts.value("config.max_new_tokens")
    if isinstance(prompt, int) and isinstance(new, int):
        return prompt + new, PLANNED
    seen = [(facts.value(name), how) for name, how in (
        ("run.tokens_used_max", "most tokens a sequence held in the input"),
        ("server.request_tokens_max", "largest request seen"),
        ("run.prompt_tokens_max", "largest prompt seen"))]
    known = [(value, how) for value, how in seen if isinstance(value, int)]
    if not known:
        return None, ""
    return max(known, key=lambda vh: vh[0])


def _needed_from_events(facts: Facts, n_seq_ctx: object) -> tuple[int | None, str]:
    """When no counts were printed, the overflow events still say the context was too small."""
    asked = [e.data.get("n_tokens") for kind in ("prompt_too_long", "truncation") for e in facts.events(kind)]
    numbers = [a for a in asked if isinstance(a, int) and a > 0]
    if numbers:
        return max(numbers), "tokens the rejected or truncated request asked for"
    full = facts.events("ctx_full") or facts.events("context_shift") or [
        e for e in facts.events("decode_failed") if e.data.get("ret") == 1]
    if full and isinstance(n_seq_ctx, int) and n_seq_ctx > 0:
        return 2 * n_seq_ctx, "the context ran out: at least double it"
    return None, ""


def derive_context(facts: Facts) -> None:
    n_ctx = facts.value("config.n_ctx")
    n_par = facts.value("config.n_parallel", 1)
    n_par = n_par if isinstance(n_par, int) and n_par > 0 else 1
    n_seq_ctx = facts.value("config.n_ctx_seq")
    if not isinstance(n_seq_ctx, int) and isinstance(n_ctx, int):
        unified = bool(facts.value("config.kv_unified", False))
        n_seq_ctx = n_ctx if unified or n_par == 1 else n_ctx // n_par
        facts.set("derived.n_ctx_seq", n_seq_ctx, step_src("context", f"n_ctx {n_ctx} / {n_par} slot(s)"))
    elif isinstance(n_seq_ctx, int):
        facts.set("derived.n_ctx_seq", n_seq_ctx, step_src("context", "engine's per-sequence context"))
    planned_prompt, planned_reply = facts.value("config.prompt_tokens"), facts.value("config.max_new_tokens")
    if isinstance(planned_prompt, int) and isinstance(planned_reply, int):
        facts.set("derived.plan_tokens_needed", planned_prompt + planned_reply,
                  step_src("context", f"planned prompt {planned_prompt} + reply {planned_reply}"))
    need, how = _needed_tokens(facts)
    if need is None:
        need, how = _needed_from_events(facts, n_seq_ctx)
    if need is None:
        return
    facts.set("derived.tokens_needed", need, step_src("context", how))
    train = facts.value("model.n_ctx_train")
    recommended = pad(need + max(64, need // 10))  # room for the reply's end and the chat template
    how_rec = f"{need} tokens needed + 10% headroom, rounded up to 256"
    if how != PLANNED and isinstance(n_seq_ctx, int) and n_seq_ctx - 1 <= need <= n_seq_ctx:
        # what was seen filled the context, so the real need is unknown and larger: double it
        recommended, how_rec = pad(2 * n_seq_ctx), f"the {n_seq_ctx}-token context filled up: double it"
    elif (how != PLANNED and isinstance(n_seq_ctx, int) and need < n_seq_ctx - 1
          and (facts.events("ctx_full") or [e for e in facts.events("decode_failed") if e.data.get("ret") == 1])):
        # the KV cache filled although no sequence filled its own context: sequences sharing one
        # buffer (llama-server --kv-unified) filled it together, so one sequence's need says too little
        recommended = pad(2 * n_seq_ctx)
        how_rec = f"the {n_seq_ctx}-token KV buffer the sequences share filled up: double it"
    if isinstance(train, int) and train > 0:
        recommended = min(recommended, train)
    facts.set("derived.ctx_recommended", recommended,
              step_src("context", how_rec + (f", capped at n_ctx_train {train}" if isinstance(train, int) else "")))
    facts.set("derived.ctx_slot_recommended", recommended * n_par,
              step_src("context", f"{recommended} per slot x {n_par} slot(s)"))
    if isinstance(n_seq_ctx, int) and n_seq_ctx > 0:
        facts.set("derived.tokens_over", max(0, need - n_seq_ctx),
                  step_src("context", f"{need} needed - {n_seq_ctx} per sequence"))
        facts.set("derived.ctx_headroom", round(n_seq_ctx / max(need, 1), 3),
                  step_src("context", f"{n_seq_ctx} / {need}"))
        kv_tok = facts.value("derived.kv_bytes_per_token")
        if isinstance(kv_tok, int) and isinstance(n_ctx, int):
            need_cells = pad(need) * n_par
            facts.set("derived.kv_bytes_at_need", kv_tok * need_cells,
                      step_src("context", f"{kv_tok} B/token x {need_cells} cells"))
    prompt = facts.value("config.prompt_tokens", facts.value("run.prompt_tokens"))
    if isinstance(prompt, int) and isinstance(n_seq_ctx, int):
        facts.set("derived.safe_max_new_tokens", max(0, n_seq_ctx - prompt),
                  step_src("context", f"{n_seq_ctx} per sequence - {prompt} prompt tokens"))


def derive_pool_limits(facts: Facts) -> None:
    """A server whose KV pool is sized apart (TGI): the longest prompt a request of the pool's length may
    have, for a fix that shortens the longest request (the launcher refuses --max-input-tokens at or above
    --max-total-tokens)."""
    fit = facts.value("server.max_len_fit")
    if isinstance(fit, int) and not isinstance(fit, bool) and fit > 1:
        facts.set("derived.max_input_fit", fit - 1, step_src("context", f"{fit} tokens the pool holds - 1"))


def derive_ctx_reduced(facts: Facts) -> None:
    """A smaller context to try after a KV-cache OOM: the largest that fits when memory is known,
    otherwise half of what failed."""
    n_ctx = facts.value("config.n_ctx")
    if not isinstance(n_ctx, int) or n_ctx <= 256:
        return
    fit = facts.value("derived.max_ctx_fit")
    if isinstance(fit, int) and 0 < fit < n_ctx:
        reduced = fit
        facts.set("derived.ctx_reduced", fit, step_src("context", "the largest context that fits in free memory"))
    else:
        reduced = pad(n_ctx // 2)
        facts.set("derived.ctx_reduced", reduced,
                  step_src("context", f"half of n_ctx {n_ctx} (free memory unknown: try, then adjust)"))
    n_par = facts.value("config.n_parallel", 1)
    n_par = n_par if isinstance(n_par, int) and n_par > 0 else 1
    # an engine whose context setting counts per request (Ollama's num_ctx: the runner holds it x the slots)
    facts.set("derived.ctx_reduced_seq", max(256, reduced // n_par // 256 * 256),
              step_src("context", f"{reduced} / {n_par} slot(s), rounded down to 256"))
