"""The strategies' window on the evaluator: memoized asks, counts and a trajectory.

``Probe`` wraps an ``Evaluator`` for a whole search run so a strategy never asks for the same
configuration twice (even if the evaluator had no cache) and counts what it asked for. ``Tracker`` is one exploration's view of it: which cut tuples and configurations this
exploration looked at, and its (step, fps, cuts) trajectory for plots.
"""
from __future__ import annotations

from typing import NamedTuple

from dse.core.configuration import Configuration
from dse.core.measurement import Measurement
from dse.search.space import Evaluator

STRATEGY = "proposed"


def score(m: Measurement) -> float:
    """FPS of a measurement; a failed build or run scores 0 so the search simply moves on."""
    return float(m.fps) if m.ok else 0.0


class Probe:
    """Memoizing front of an evaluator, shared by every phase of one search run."""

    def __init__(self, evaluator: Evaluator, strategy: str = STRATEGY):
        self.evaluator = evaluator
        self.strategy = strategy
        self._memo: dict[str, Measurement] = {}
        self._phases: dict[str, str] = {}          # hash -> the phase it was first asked in
        self._reruns: dict[tuple[str, int], Measurement] = {}

    def measure(self, config: Configuration, phase: str, strategy: str | None = None) -> Measurement:
        """``strategy`` labels the row when it is not this probe's (the Base(G) baseline of the maximize phase)."""
        key = config.hash
        m = self._memo.get(key)
        if m is None:
            m = self.evaluator.evaluate(config, phase=phase, strategy=strategy or self.strategy)
            self._memo[key] = m
            self._phases[key] = phase
        return m

    def remeasure(self, config: Configuration, phase: str, repeats: range) -> list[float]:
        """FPS of ``config`` on independent re-runs ``repeats`` (indices >= 1; repeat 0 is the search's own sample,
        which a search picked for being high): what near-equal candidates are ranked on, never their best sample."""
        return [score(m) for m in self.rerun(config, phase, repeats)]

    def rerun(self, config: Configuration, phase: str, repeats: range) -> list[Measurement]:
        """The measurements of ``remeasure`` (when more than the FPS ranks: energy, power)."""
        if repeats and repeats[0] < 1:
            raise ValueError("re-runs start at repeat 1: repeat 0 is the search's own sample")
        out = []
        for r in repeats:
            m = self._reruns.get((config.hash, r))
            if m is None:
                m = self.evaluator.evaluate(config, phase=phase, strategy=self.strategy, repeat=r)
                self._reruns[(config.hash, r)] = m
            out.append(m)
        return out

    @property
    def reruns(self) -> list[Measurement]:
        """Re-runs asked through ``remeasure`` (each a board run of an already built configuration)."""
        return list(self._reruns.values())

    @property
    def rerun_items(self) -> list[tuple[tuple[str, int], Measurement]]:
        """``reruns`` with the (configuration hash, repeat) each ran as, in ask order."""
        return list(self._reruns.items())

    @property
    def measured(self) -> int:
        return len(self._memo)

    def asked_since(self, mark: int) -> list[tuple[str, Measurement]]:
        """(phase, measurement) of the configurations first asked after ``mark`` (``measured`` then), in ask order:
        what one strategy asked for through a probe it may share with others."""
        return [(self._phases[h], m) for h, m in list(self._memo.items())[mark:]]

    @property
    def memo(self) -> dict[str, Measurement]:
        """Every configuration asked through this probe (hash -> its measurement), in ask order."""
        return self._memo


def as_probe(evaluator: Evaluator | Probe, strategy: str = STRATEGY) -> Probe:
    return evaluator if isinstance(evaluator, Probe) else Probe(evaluator, strategy)


class TracePoint(NamedTuple):
    """One configuration an exploration looked at, in order (first three fields: step, fps, cuts)."""

    step: int
    fps: float
    cuts: tuple[int, ...]
    kind: str
    streams: tuple[int, ...]


class Tracker:
    """One exploration's record of the configurations and cut tuples it asked for."""

    def __init__(self, probe: Probe, phase: str, budget: int):
        self.probe = probe
        self.phase = phase
        self.budget = budget
        self.seen: set[str] = set()
        self.tuples: set[tuple[int, ...]] = set()
        self.trajectory: list[TracePoint] = []

    def measure(self, config: Configuration, kind: str) -> Measurement:
        m = self.probe.measure(config, self.phase)
        if config.hash not in self.seen:
            self.seen.add(config.hash)
            self.tuples.add(config.cuts)
            self.trajectory.append(TracePoint(len(self.trajectory), score(m), config.cuts, kind, config.streams))
        return m

    @property
    def exhausted(self) -> bool:
        return len(self.seen) >= self.budget
