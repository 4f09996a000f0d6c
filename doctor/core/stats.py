"""Small statistics shared by the floors above (the decode ticker, run summaries, live decode spikes). Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    return ranked(sorted(values), q)


def ranked(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list already in ascending order."""
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]
