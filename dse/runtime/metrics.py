"""Run metrics from raw timestamps: percentiles, busy time (union of intervals) and CPU time.

Standard library + numpy only, Python 3.8 grammar (shared with the board agent).
"""
from __future__ import annotations

import os
from typing import Dict, Iterable, List, Sequence, Tuple

Interval = Tuple[float, float]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (linear interpolation, like numpy's default); 0 for no values."""
    if not values:
        return 0.0
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q))


PERIOD_WINDOW = 10


def period_ms(done: Sequence[float], q: float, images_per_job: int = 1, window: int = PERIOD_WINDOW) -> float:
    """The q-th percentile, over every window of ``window`` consecutive completion times (sorted), of the
    window's span per image: a steady-state time per image that a noisy neighbour cannot shift while it
    slows less than q % (q=50) or more than 100-q % (q=10) of the run. Windows rather than single intervals,
    because a pipeline may complete frames in bursts."""
    w = min(window, len(done) - 1)
    if w < 1:
        return 0.0
    spans = [done[i + w] - done[i] for i in range(len(done) - w)]
    return percentile(spans, q) / (w * images_per_job) * 1e3


def busy_time(intervals: Iterable[Interval], lo: float, hi: float) -> float:
    """Length of the union of ``intervals`` clipped to [lo, hi]: time a PE had at least one task running."""
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi)
    total, cur_a, cur_b = 0.0, None, None
    for a, b in clipped:
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


def utilization(intervals_by_key: Dict[str, List[Interval]], lo: float, hi: float) -> Dict[str, float]:
    """Busy fraction of every key (PE or stage) over the window [lo, hi]."""
    span = hi - lo
    if span <= 0:
        return {k: 0.0 for k in intervals_by_key}
    return {k: min(1.0, busy_time(v, lo, hi) / span) for k, v in intervals_by_key.items()}


def cpu_seconds() -> float:
    """User + system CPU seconds of this process (all threads) so far."""
    t = os.times()
    return float(t.user + t.system)


def usable_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
