"""Frequency choice per scenario (thesis Ch. 4, Algorithm 6) and its brute-force reference.

Frequencies are handled as level indices into ascending per-kind MHz lists; the callbacks receive
{kind: MHz}. Both searches memoize the callbacks per vector, so `calls` counts distinct schedulability checks
(each one is a CPA run in the GA).
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dse.core.errors import DseError


@dataclass
class FreqChoice:
    """Result of a frequency search: best schedulable vector and its energy (inf and all-max when none)."""

    ok: bool
    watts: float
    freqs_mhz: dict[str, float] = field(default_factory=dict)
    calls: int = 0


class _Search:
    """Shared bookkeeping: validated levels, memoized callbacks, call counter."""

    def __init__(self, levels, schedulable, energy, order=()):
        self.levels = {k: [float(f) for f in v] for k, v in levels.items()}
        for k, v in self.levels.items():
            if not v:
                raise DseError(f"no frequency levels for {k!r}")
            if any(b <= a for a, b in itertools.pairwise(v)):
                raise DseError(f"frequency levels of {k!r} must be strictly ascending MHz, got {v}")
        # the given order first (kinds without levels skipped), then any other kind with levels
        self.procs = [k for k in order if k in self.levels] + [k for k in self.levels if k not in order]
        self._sched, self._energy = schedulable, energy
        self._seen: dict[tuple, bool] = {}
        self.calls = 0

    def freqs(self, idx: Mapping[str, int]) -> dict[str, float]:
        return {k: self.levels[k][idx[k]] for k in self.procs}

    def ok(self, idx: Mapping[str, int]) -> bool:
        key = tuple(idx[k] for k in self.procs)
        if key not in self._seen:
            self.calls += 1
            self._seen[key] = bool(self._sched(self.freqs(idx)))
        return self._seen[key]

    def top(self, k: str) -> int:
        return len(self.levels[k]) - 1


def set_freq(levels: Mapping[str, Sequence[float]], schedulable: Callable[[dict], bool],
             energy: Callable[[dict], float], order: Sequence[str] = ("gpu", "cpu", "dla")) -> FreqChoice:
    """Algorithm 6: two passes of greedy coordinate descent; each processor restarts from its top level and goes
    down while the scenario stays schedulable (stopping one level above the first failure); every schedulable
    vector visited is a candidate and the lowest-energy one is kept. The second pass lets a processor run
    faster again if that lets another one go lower. Stops at once when all-max fails (the best case)."""
    s = _Search(levels, schedulable, energy, order)
    lvl = {k: s.top(k) for k in s.procs}
    if not s.ok(lvl):
        return FreqChoice(False, math.inf, s.freqs(lvl), s.calls)
    best, best_e = dict(lvl), float(energy(s.freqs(lvl)))
    for _ in range(2):
        for p in s.procs:
            lvl[p] = s.top(p)
            while True:
                if s.ok(lvl):
                    e = float(energy(s.freqs(lvl)))
                    if e < best_e:
                        best, best_e = dict(lvl), e
                else:
                    if lvl[p] != s.top(p):
                        lvl[p] += 1             # back to the last schedulable level
                    break
                if lvl[p] == 0:
                    break
                lvl[p] -= 1
    return FreqChoice(True, best_e, s.freqs(best), s.calls)


def brute_force(levels: Mapping[str, Sequence[float]], schedulable: Callable[[dict], bool],
                energy: Callable[[dict], float], order: Sequence[str] = (), *, prune: bool = False) -> FreqChoice:
    """Exhaustive reference over the full product of levels (``order`` is accepted and ignored, so it can stand in
    for ``set_freq``). With prune=True, vectors dominated by a known
    unschedulable one (every frequency <=) are skipped: valid because response times never grow with f.
    Vectors are visited from the top down, so a dominating vector is always seen first."""
    s = _Search(levels, schedulable, energy)
    best, best_e = None, math.inf
    failed: list[tuple[int, ...]] = []
    for key in itertools.product(*(range(s.top(k), -1, -1) for k in s.procs)):
        if prune and any(all(a <= b for a, b in zip(key, u)) for u in failed):
            continue
        idx = dict(zip(s.procs, key))
        if not s.ok(idx):
            if prune:
                failed.append(key)
            continue
        e = float(energy(s.freqs(idx)))
        if e < best_e:
            best, best_e = idx, e
    if best is None:
        return FreqChoice(False, math.inf, s.freqs({k: s.top(k) for k in s.procs}), s.calls)
    return FreqChoice(True, best_e, s.freqs(best), s.calls)


def scales(levels_max: Mapping[str, float], freqs: Mapping[str, float]) -> dict[str, float]:
    """Per-kind execution-time scales fmax/f (WCETs are measured at fmax and scale with 1/f)."""
    out = {}
    for k, f in freqs.items():
        if k not in levels_max:
            raise DseError(f"no maximum frequency for {k!r}; known: {sorted(levels_max)}")
        if f <= 0:
            raise DseError(f"frequency of {k!r} must be > 0 MHz, got {f}")
        out[k] = float(levels_max[k]) / float(f)
    return out
