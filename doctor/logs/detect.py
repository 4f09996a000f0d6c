"""Say which engine wrote a log, and how sure we are, from the parsers' signature votes.

Wrappers win over what they wrap: Ollama and llama-cpp-python print llama.cpp's own lines, so a
log with Ollama or llama-cpp-python signatures is theirs even when most lines are llama.cpp's.

Pure.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

ENGINES = ("ollama", "llama-cpp-python", "vllm", "tgi", "llama.cpp")
WRAPPERS = {"ollama": "llama.cpp", "llama-cpp-python": "llama.cpp"}


@dataclass(frozen=True, slots=True)
class Detection:
    engine: str | None
    confidence: str  # high | medium | low
    seen: list[str]  # every engine with signature lines, strongest first
    scores: dict[str, int]


def detect(votes: Counter[str]) -> Detection:
    scores: Counter[str] = Counter()
    for key, count in votes.items():
        if key in ("llama-server", "llama.cpp-library"):
            scores["llama.cpp"] += count
        elif key in ENGINES:
            scores[key] += count
    seen = [e for e, c in scores.most_common() if c > 0]
    if not seen:
        return Detection(None, "low", [], dict(scores))
    # a wrapper whose own lines are present takes the lines of what it wraps
    effective = Counter(scores)
    for wrapper, inner in WRAPPERS.items():
        if scores[wrapper] > 0 and scores[inner] > 0:
            effective[wrapper] += effective.pop(inner)
    ranked = effective.most_common()
    engine, top = ranked[0]
    second = ranked[1][1] if len(ranked) > 1 else 0
    if top >= 3 and second * 3 <= top:
        confidence = "high"
    elif top >= 2 and second < top:
        confidence = "medium"
    else:
        confidence = "low"
    return Detection(engine, confidence, seen, dict(scores))
