"""The study: one search run's memo of what it asked for, in ask order, and its re-runs.

Strategies never see a backend. They ask a ``Measurer`` (the evaluator) for measurements through a ``Study``
(Optuna's sampler/study split): the evaluator owns caching, building engines and persistence; the study owns
what this search looked at. A strategy never asks for one configuration twice (even if the evaluator had no
cache), every method of a comparison has its own study over one shared evaluator (a configuration another
method measured first is not measured again, and still counts as asked by this one), and re-runs on fresh noise
(repeat >= 1) are kept apart from the search's own samples. ``StudyView`` is one exploration's view of it: the
cut tuples and configurations it looked at, and its (step, fps, cuts) trajectory for plots.
"""
from __future__ import annotations

from typing import NamedTuple, Protocol

from dse.core.configuration import Configuration
from dse.core.measurement import Measurement

STRATEGY = "proposed"


class Measurer(Protocol):
    """Measures one configuration; implementations cache by ``(config.hash, repeat)`` (never measure twice);
    ``repeat`` > 0 asks for an independent re-run."""

    def evaluate(self, config: Configuration, *, phase: str, strategy: str, repeat: int = 0) -> Measurement: ...


def score(m: Measurement) -> float:
    """FPS of a measurement; a failed build or run scores 0 so the search simply moves on."""
    return float(m.fps) if m.ok else 0.0


def anytime(asked) -> list[float]:
    """Best FPS so far after each of the (phase, measurement) pairs, in order."""
    out, best = [], 0.0
    for _, m in asked:
        best = max(best, score(m))
        out.append(best)
    return out


class Study:
    """Memoizing front of a measurer, shared by every phase of one search run (or one method of a comparison).

    ``phase_prefix`` labels its rows "<prefix>/<phase>" so no method's rows pass for another's."""

    def __init__(self, evaluator: Measurer, strategy: str = STRATEGY, phase_prefix: str = ""):
        self.evaluator = evaluator
        self.strategy = strategy
        self.phase_prefix = phase_prefix
        self._memo: dict[str, Measurement] = {}
        self._phases: dict[str, str] = {}          # hash -> the phase it was first asked in
        self._reruns: dict[tuple[str, int], Measurement] = {}

    def _label(self, phase: str) -> str:
        return f"{self.phase_prefix}/{phase}" if self.phase_prefix else phase

    def measure(self, config: Configuration, phase: str, strategy: str | None = None) -> Measurement:
        """``strategy`` labels the row when it is not this study's (the Base(G) baseline of the maximize phase)."""
        key = config.hash
        m = self._memo.get(key)
        if m is None:
            phase = self._label(phase)
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
                m = self.evaluator.evaluate(config, phase=self._label(phase), strategy=self.strategy, repeat=r)
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

    @property
    def asked(self) -> list[tuple[str, Measurement]]:
        """(phase, measurement) of every distinct configuration asked for, in ask order."""
        return self.asked_since(0)

    def asked_since(self, mark: int) -> list[tuple[str, Measurement]]:
        """``asked`` after the first ``mark`` (``measured`` then): what one strategy asked for through a study it
        shares with others."""
        return [(self._phases[h], m) for h, m in list(self._memo.items())[mark:]]

    @property
    def memo(self) -> dict[str, Measurement]:
        """Every configuration asked through this study (hash -> its measurement), in ask order."""
        return self._memo


def as_study(source: Measurer | Study, strategy: str = STRATEGY) -> Study:
    return source if isinstance(source, Study) else Study(source, strategy)


class TracePoint(NamedTuple):
    """One configuration an exploration looked at, in order (first three fields: step, fps, cuts)."""

    step: int
    fps: float
    cuts: tuple[int, ...]
    kind: str
    streams: tuple[int, ...]


class StudyView:
    """One exploration's record of the configurations and cut tuples it asked for through its study."""

    def __init__(self, study: Study, phase: str, budget: int):
        self.study = study
        self.phase = phase
        self.budget = budget
        self.seen: set[str] = set()
        self.tuples: set[tuple[int, ...]] = set()
        self.trajectory: list[TracePoint] = []
        self.asked: list[tuple[str, Measurement]] = []   # (phase, measurement) of each configuration it first asked

    def measure(self, config: Configuration, kind: str) -> Measurement:
        m = self.study.measure(config, self.phase)
        if config.hash not in self.seen:
            self.seen.add(config.hash)
            self.asked.append((self.phase, m))
            self.tuples.add(config.cuts)
            self.trajectory.append(TracePoint(len(self.trajectory), score(m), config.cuts, kind, config.streams))
        return m

    @property
    def exhausted(self) -> bool:
        return len(self.seen) >= self.budget
