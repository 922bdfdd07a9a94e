"""One result type for every strategy: the configuration it answers with, its measurement, what it asked for.

The comparison (``dse.workflow.compare``) ranks methods on exactly these: the answer's FPS, and the distinct
configurations asked for (points, engines, board hours, the anytime curve). What only one method knows (a GA's
history, the exhaustive sweep's coverage) goes in ``extra``, JSON-able where it is written to a file.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from dse.core.configuration import Configuration
from dse.core.measurement import Measurement
from dse.search.study import score


@dataclass
class StrategyResult:
    """``asked``: (phase, measurement) of each distinct configuration asked for, in ask order; ``reruns``: re-runs
    of configurations it had measured (board runs that build no engine, counted in its board time).
    ``config``/``measurement`` are None only where a method has no answer to show (a run without its best.yaml)."""

    config: Configuration | None
    measurement: Measurement | None
    asked: list[tuple[str, Measurement]] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    reruns: list[Measurement] = field(default_factory=list)

    @property
    def fps(self) -> float:
        return score(self.measurement) if self.measurement is not None else 0.0

    def to_dict(self) -> dict:
        return {"config": self.config.to_dict() if self.config is not None else None, "fps": self.fps,
                "asked": len(self.asked), **self.extra}
