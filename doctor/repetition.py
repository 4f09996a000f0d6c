"""Find looping output: a span of generated text repeated back to back.

Works on words (and single CJK characters), so "the the the", a sentence said five times, or a
paragraph that keeps coming back all count. Two measures:

- the periodic tail: the longest run at the end of the text made of one span repeated; a model that
  loops usually loops until max_tokens;
- the most repeated n-gram anywhere, for loops the model escaped from.

Pure.
"""

from __future__ import annotations

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


def find_loop(text: str, min_repeats: int = 3, min_tokens: int = 12) -> Repetition | None:
    """The strongest loop in `text`, or None when there is none worth reporting."""
    toks = tokens_of(text)
    n = len(toks)
    if n < min_tokens:
        return None
    best = _periodic_tail(toks, min_repeats)
    ngram = _repeated_ngram(toks, min_repeats)
    candidates = [c for c in (best, ngram) if c is not None]
    if not candidates:
        return None
    pick = max(candidates, key=lambda r: (r.share, r.count))
    if pick.period * pick.count < min_tokens:
        return None
    return pick


def _periodic_tail(toks: list[str], min_repeats: int) -> Repetition | None:
    n = len(toks)
    best: tuple[int, int, int] | None = None  # (covered, period, repeats)
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
                best = (covered, period, repeats)
    if best is None:
        return None
    covered, period, repeats = best
    span = _join(toks[n - period:])
    return Repetition(round(covered / n, 3), span, repeats, period, n, n - covered)


def _repeated_ngram(toks: list[str], min_repeats: int) -> Repetition | None:
    n = len(toks)
    best: Repetition | None = None
    for size in (16, 10, 6):
        if n < size * min_repeats:
            continue
        grams = Counter(tuple(toks[i:i + size]) for i in range(n - size + 1))
        gram, count = grams.most_common(1)[0]
        if count < min_repeats or len(set(gram)) < 2:
            continue
        share = min(1.0, count * size / n)
        cand = Repetition(round(share, 3), _join(list(gram)), count, size, n, _index(toks, gram))
        if best is None or cand.share > best.share:
            best = cand
    return best


def _index(toks: list[str], gram: tuple[str, ...]) -> int:
    size = len(gram)
    for i in range(len(toks) - size + 1):
        if tuple(toks[i:i + size]) == gram:
            return i
    return 0


def _join(toks: list[str]) -> str:
    out = ""
    for tok in toks:
        if out and (tok[0].isalnum() or tok[0] in "([{\"'") and not _is_cjk(tok) and not out.endswith(("(", "[", "{")):
            out += " "
        out += tok
    return out.strip()[:300]


def _is_cjk(tok: str) -> bool:
    return len(tok) == 1 and ("\u3040" <= tok <= "\u9fff" or "\uac00" <= tok <= "\ud7af")
