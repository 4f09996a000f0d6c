"""Find looping output: a span of generated text repeated back to back.

Works on words (and single CJK characters), so "the the the", a sentence said five times, or a
paragraph that keeps coming back all count. Two measures:

- the periodic tail: the longest run at the end of the text made of one span repeated; a model that
  loops usually loops until max_tokens;
- the most repeated n-gram anywhere, for loops the model escaped from.

Pure.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass

_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]|\w+|[^\w\s]")
MAX_TOKENS = 6000
MAX_PERIOD = 120


@dataclass(frozen=True, slots=True)
class Repetition:
    share: float  # tokens inside the repeated run / all tokens
    span: str  # one copy of the looping span
    count: int  # times it repeats back to back (or occurs, for n-grams)
    period: int  # tokens in the span
    tokens: int  # tokens analysed
    start_token: int  # where the run starts


def tokens_of(text: str) -> list[str]:
    return _TOKEN.findall(text)[-MAX_TOKENS:]


def _spans(text: str) -> list[tuple[int, int]]:
    spans = [m.span() for m in _TOKEN.finditer(text)]
    return spans[-MAX_TOKENS:]


def find_loop(text: str, min_repeats: int = 3, min_tokens: int = 12) -> Repetition | None:
    """The strongest loop in `text`, or None when there is none worth reporting."""
    spans = _spans(text)
    toks = [text[a:b] for a, b in spans]
    n = len(toks)
    if n < min_tokens:
        return None
    tail = _periodic_tail(toks, min_repeats)
    ngram = _repeated_ngram(toks, min_repeats)
    pick: Repetition | None
    if tail is not None and ngram is not None:
        # a loop that runs to the end is reported by its period; an n-gram only when it covers clearly more
        pick = ngram if ngram.share > tail.share + 0.1 else tail
    else:
        pick = tail or ngram
    if pick is None or pick.period * pick.count < min_tokens:
        return None
    start = _sentence_aligned(toks, pick.start_token, pick.period)
    first, last = spans[start], spans[start + pick.period - 1]
    span = " ".join(text[first[0]:last[1]].split())[:300]
    return Repetition(pick.share, span, pick.count, pick.period, pick.tokens, pick.start_token)


def _sentence_aligned(toks: list[str], start: int, period: int) -> int:
    """Rotate a copy of the loop so it starts where a sentence starts, when one does."""
    for k in range(period):
        i = start + k
        if i + period > len(toks):
            break
        if i > 0 and toks[i - 1] in (".", "!", "?", ":") and toks[i][:1].isalnum():
            return i
    return start


def _periodic_tail(toks: list[str], min_repeats: int) -> Repetition | None:
    n = len(toks)
    best: tuple[int, int, int, int] | None = None  # (covered, period, repeats, run start)
    for period in range(1, min(MAX_PERIOD, n // min_repeats) + 1):
        # grow the run backwards from the end while toks[i] == toks[i + period]
        i = n - period - 1
        while i >= 0 and toks[i] == toks[i + period]:
            i -= 1
        run = n - (i + 1)  # tokens that are periodic with this period, counting the last copy
        repeats = run // period
        if repeats >= min_repeats:
            covered = repeats * period
            if best is None or covered > best[0] or (covered == best[0] and period < best[1]):
                best = (covered, period, repeats, i + 1)
    if best is None:
        return None
    covered, period, repeats, start = best
    return Repetition(round(covered / n, 3), "", repeats, period, n, start)


def _repeated_ngram(toks: list[str], min_repeats: int, size: int = 6) -> Repetition | None:
    """The most repeated 6-gram, widened to the loop's period (the usual gap between its copies):
    a loop the model escaped from, or one that does not run to the end."""
    n = len(toks)
    if n < size * min_repeats:
        return None
    positions: dict[tuple[str, ...], list[int]] = {}
    for i in range(n - size + 1):
        positions.setdefault(tuple(toks[i:i + size]), []).append(i)
    gram, starts = max(positions.items(), key=lambda kv: len(kv[1]))
    if len(starts) < min_repeats or len(set(gram)) < 2:
        return None
    gaps = Counter(b - a for a, b in itertools.pairwise(starts))
    period = min(gaps.most_common(1)[0][0], MAX_PERIOD) if gaps else size
    # the longest stretch of copies exactly one period apart: tokens it covers / period = copies
    best_first, best_last, first = starts[0], starts[0], starts[0]
    for a, b in itertools.pairwise(starts):
        if b - a != period:
            first = b
        elif b - first > best_last - best_first:
            best_first, best_last = first, b
    count = -(-(best_last - best_first + size) // period)  # copies touched, the last one partly
    if count < min_repeats:
        return None
    return Repetition(round(min(1.0, count * period / n), 3), "", count, period, n, best_first)
