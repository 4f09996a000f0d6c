"""Where a derived fact came from: the `estimate` source every derive step writes.

A fact set by a step of doctor/derive/ says `estimate.<step>` (kv, budget, context, decode, ...) and,
in its text, how it was computed; reports show it as the evidence ("estimate: ...").
"""

from __future__ import annotations

from doctor.core.facts import Source


def step_src(step: str, text: str) -> Source:
    return Source("estimate", f"estimate.{step}", text=text)
