"""One result type for every strategy and every phase of the search: the configuration it answers with, its
measurement, what it asked for, and what only it knows.

The comparison (``dse.workflow.compare``) ranks methods on exactly these: the answer's FPS, and the distinct
configurations asked for (points, engines, board hours, the anytime curve). What only one method or phase knows
(the maximizer's bounds, an exploration's trajectory, the fine-tuner's confirmed re-runs, a GA's history) goes in
``extra``; ``to_dict`` is what a phase writes to its JSON file, so the next job reads the same keys.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from dse.core.configuration import Configuration
from dse.core.measurement import Measurement
from dse.search.study import score


@dataclass
class StrategyResult:
    """``asked``: (phase, measurement) of each distinct configuration asked for, in ask order; ``reruns``: re-runs
    of configurations it had measured (board runs that build no engine, counted in its board time).
    ``config``/``measurement`` are None only where a method has no answer to show (a run without its best.yaml,
    a clock phase whose floor nothing reached)."""

    config: Configuration | None
    measurement: Measurement | None
    asked: list[tuple[str, Measurement]] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    reruns: list[Measurement] = field(default_factory=list)

    @property
    def fps(self) -> float:
        return score(self.measurement) if self.measurement is not None else 0.0

    def with_extra(self, **changes) -> "StrategyResult":
        """A copy with ``extra`` updated by ``changes``."""
        return dataclasses.replace(self, extra={**self.extra, **changes})

    def to_dict(self) -> dict:
        return {"config": self.config.to_dict() if self.config is not None else None,
                "config_hash": self.config.hash if self.config is not None else None, "fps": self.fps,
                "asked": len(self.asked), **{k: jsonable(v) for k, v in self.extra.items()}}


def jsonable(value: Any) -> Any:
    """``value`` as JSON types: configurations and results by their ``to_dict``, named tuples and dataclasses as
    objects, tuples as lists."""
    if isinstance(value, (StrategyResult, Configuration)) or (dataclasses.is_dataclass(value)
                                                              and hasattr(value, "to_dict")):
        return value.to_dict()
    if hasattr(value, "_asdict"):
        return {k: jsonable(v) for k, v in value._asdict().items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value
