"""Text charts for the watch screen: proportional bars, gauges and a decode-step sparkline whose
columns remember whether they hold a spike, so the widget can mark them.

Pure: numbers in, strings out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BLOCKS = " ▁▂▃▄▅▆▇█"
EIGHTHS = " ▏▎▍▌▋▊▉█"


def bar(fraction: float, width: int) -> str:
    """A left-aligned bar `width` cells wide, filled to `fraction` with eighth-cell precision."""
    if width <= 0:
        return ""
    fraction = min(1.0, max(0.0, fraction))
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (EIGHTHS[part] if part and full < width else "")
    return text.ljust(width)


@dataclass(frozen=True, slots=True)
class Column:
    char: str
    spike: bool
    value: float  # the largest step in the column (ms)


def sparkline(values: list[float], width: int, spikes: set[int] | frozenset[int] = frozenset(),
              log_scale: bool = False) -> list[Column]:
    """One column per value, or per bucket when there are more values than columns.

    A bucket shows its largest value, so a single slow step stays visible however long the run;
    it is a spike column when any index in it is in `spikes`. With `log_scale`, heights follow
    the logarithm between the smallest and largest value, so ordinary step-to-step variation stays
    visible beside a spike a hundred times taller.
    """
    if width <= 0 or not values:
        return []
    n = len(values)
    buckets = min(width, n)
    peaks: list[tuple[float, bool]] = []
    for b in range(buckets):
        lo = b * n // buckets
        hi = max(lo + 1, (b + 1) * n // buckets)
        peaks.append((max(values[lo:hi]), any(i in spikes for i in range(lo, hi))))
    top = max(p for p, _ in peaks)
    positive = [p for p, _ in peaks if p > 0]
    bottom = min(positive) if positive else 0.0
    steps = len(BLOCKS) - 1
    out: list[Column] = []
    for peak, spike in peaks:
        if peak <= 0 or top <= 0:
            level = 0
        elif log_scale and top > bottom > 0:
            level = 1 + round(math.log(peak / bottom) / math.log(top / bottom) * (steps - 1))
        else:
            level = max(1, round(peak / top * steps))
        out.append(Column(BLOCKS[level], spike, peak))
    return out
