"""The child → parent message protocol of the embedded runner, and its translation to LiveEvents.

The child (doctor/sources/live/embedded/child.py) writes one compact JSON object per line on its message pipe;
`m` says what it is and `t` is milliseconds since the parent's watch start (both processes read
the same monotonic clock):

    hello    {pid, python}
    phase    {phase: load|warmup|prefill, ms, tokens?, token?, kv?}
    settings {settings: {...}}          what the engine reports after loading
    steps    {s: [[i, ms, tok, kv, t], ...]}   decode steps, batched (t: when step i ended)
    log      {lvl, text}                one line of the engine's log callback
    incident {event, text, data?}       ctx_full, decode_failed, ...
    perf     {load_ms, prefill_ms, prompt_tokens, decode_ms, decode_tokens, reused}
    error    {type, message}            a Python exception in the child (llama-cpp-python raised)
    abort    {text}                     GGML_ABORT's message, just before abort()
    end      {finish_reason, generated}

Pure.
"""

from __future__ import annotations

from typing import Any

from doctor.core.events import IncidentEvent, LiveEvent, LogEvent, PerfEvent, PhaseEvent, SettingsEvent, StepEvent
from doctor.core.sanitize import strip_controls

FLUSH_INTERVAL_S = 0.05
LEVELS = {0: "none", 1: "debug", 2: "info", 3: "warn", 4: "error"}
MAX_TEXT = 16 << 10


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str:
    return strip_controls(str(value))[:MAX_TEXT] if value is not None else ""


def token_text(value: Any) -> str:
    """Generated text keeps its line breaks; every other control and escape sequence is removed."""
    if not value:
        return ""
    return "\n".join(strip_controls(part) for part in str(value)[:MAX_TEXT].split("\n"))


def step_event(row: Any, n_ctx: int | None) -> StepEvent | None:
    """One row of a "steps" message: [i, ms, token text, kv used, t]."""
    if not isinstance(row, list) or len(row) < 5:
        return None
    i, ms, tok, kv, t = row[:5]
    return StepEvent(t_ms=_num(t) or 0.0, step=_int(i) or 0, ms=_num(ms) or 0.0,
                     token=token_text(tok), kv_used=_int(kv), n_ctx=n_ctx)


def to_event(msg: dict[str, Any], n_ctx: int | None, log_line: int) -> LiveEvent | None:
    """The LiveEvent a child message stands for (None for bookkeeping messages)."""
    kind = msg.get("m")
    t = _num(msg.get("t")) or 0.0
    if kind == "step":
        return StepEvent(t_ms=t, step=_int(msg.get("i")) or 0, ms=_num(msg.get("ms")) or 0.0,
                         token=token_text(msg.get("tok")), kv_used=_int(msg.get("kv")),
                         n_ctx=n_ctx)
    if kind == "log":
        return LogEvent(t_ms=t, line=log_line, text=_text(msg.get("text")), stream="log",
                        level=str(msg.get("lvl") or "info"))
    if kind == "phase":
        return PhaseEvent(t_ms=t, phase=str(msg.get("phase", "")), ms=_num(msg.get("ms")) or 0.0,
                          tokens=_int(msg.get("tokens")), token=token_text(msg.get("token")),
                          kv_used=_int(msg.get("kv")))
    if kind == "settings":
        settings = msg.get("settings")
        return SettingsEvent(t_ms=t, settings=dict(settings) if isinstance(settings, dict) else {}, stage="engine")
    if kind == "incident":
        data = msg.get("data")
        return IncidentEvent(t_ms=t, event=str(msg.get("event", "warning")), text=_text(msg.get("text")),
                             data={k: v for k, v in data.items() if isinstance(v, int | float | str | bool)}
                             if isinstance(data, dict) else {})
    if kind == "perf":
        return PerfEvent(t_ms=t, load_ms=_num(msg.get("load_ms")), prefill_ms=_num(msg.get("prefill_ms")),
                         prompt_tokens=_int(msg.get("prompt_tokens")), decode_ms=_num(msg.get("decode_ms")),
                         decode_tokens=_int(msg.get("decode_tokens")), graphs_reused=_int(msg.get("reused")),
                         tracer_ms=_num(msg.get("tracer_ms")))
    return None
