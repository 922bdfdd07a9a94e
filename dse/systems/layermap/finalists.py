"""Choosing among the GA's finalists by measuring them.

The analytic period of 002/004 ranks mappings, but on a real host two mappings it plans equal can run 25 %
apart (MobileNet v1 on two cores of a shared host: 8.97 and 8.98 ms planned, 12.3 and 10.2 ms measured, the slower one
scattering mid-network layers over both cores). So, as the pipeline DSE's fine-tuner does, the distinct
finalists whose planned period is within ``within`` of the best are measured and the fastest measured wins.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from dse.taskgraph.errors import LayerMapError


@dataclass(frozen=True)
class Screened:
    mapping: np.ndarray
    planned: float       # the analytic period (fitness), as the GA reported it
    measured: float      # what ``measure`` returned (same unit as planned)


def screen_finalists(finalists: Sequence[tuple[np.ndarray, float]], measure: Callable[[np.ndarray], float],
                     within: float = 0.05) -> list[Screened]:
    """Measure the finalists planned within ``within`` (a fraction) of the best; fastest measured first."""
    if not finalists:
        raise LayerMapError("no finalists to screen (a single-objective GaResult lists them)")
    if not 0 <= within <= 1:
        raise LayerMapError(f"within must be a fraction in [0, 1], got {within!r}")
    best = min(f for _, f in finalists)
    kept = [(np.asarray(m), float(f)) for m, f in finalists if f <= best * (1 + within)]
    return sorted((Screened(m, f, float(measure(m))) for m, f in kept), key=lambda s: (s.measured, s.planned))


__all__ = ["Screened", "screen_finalists"]
