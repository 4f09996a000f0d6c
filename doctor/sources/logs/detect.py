"""Say which engine wrote a log, and how sure we are, from the parsers' signature votes.

Wrappers win over what they wrap: Ollama, llama-cpp-python and TGI's llama.cpp backend print
llama.cpp's own lines, so a log with their signatures is theirs even when most lines are
llama.cpp's. Engines that do not wrap each other (vLLM and llama.cpp, Ollama and TGI) in one input
make it *mixed*: a paste holding two logs, or one engine's lines quoted inside another tool's log.
The leading engine is the one with the most signature lines; confidence falls when the input is
short (a few lines quoted from a long log) or when another engine's lines are close in number.
Which names (and aliases) are engines, and which engine wraps which: the engine table
(doctor/core/engines.py).

Pure.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from doctor.core import engines


@dataclass(frozen=True, slots=True)
class Detection:
    engine: str | None
    confidence: str  # high | medium | low
    seen: list[str]  # every engine with signature lines, strongest first
    scores: dict[str, int]
    mixed: bool = False  # lines of engines that do not wrap each other
    others: list[str] = field(default_factory=list)  # the engines besides the leader, after wrapping


def detect(votes: Counter[str]) -> Detection:
    scores: Counter[str] = Counter()
    for key, count in votes.items():
        name = engines.canonical(key)  # the engine table: names, and aliases such as llama-server
        if name is not None and count > 0:
            scores[name] += count
    seen = [e for e, c in scores.most_common() if c > 0]
    if not seen:
        return Detection(None, "low", [], dict(scores))
    effective = _fold_wrapped(scores)
    ranked = effective.most_common()
    engine, top = ranked[0]
    second = ranked[1][1] if len(ranked) > 1 else 0
    mixed = second > 0
    if top >= 3 and second * 3 <= top and (not mixed or second * 10 <= top):
        confidence = "high"
    elif top >= 2 and second < top:
        confidence = "medium"
    else:
        confidence = "low"
    seen = [engine] + [e for e in seen if e != engine]
    return Detection(engine, confidence, seen, dict(scores), mixed, [e for e, _ in ranked[1:]])


def _fold_wrapped(scores: Counter[str]) -> Counter[str]:
    """Give a wrapper the lines of the engine it wraps (the strongest wrapper present takes them)."""
    effective = Counter({e: c for e, c in scores.items() if c > 0})
    wrapping = engines.wrappers()  # wrapper -> wrapped, from the engine table
    for inner in set(wrapping.values()):
        wrappers = [w for w, i in wrapping.items() if i == inner and effective[w] > 0]
        if wrappers and effective[inner] > 0:
            strongest = max(wrappers, key=lambda w: effective[w])
            effective[strongest] += effective.pop(inner)
    return effective
