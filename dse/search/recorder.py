"""A probe that remembers what one comparison method asked for, in order (points, anytime curve).

Every method of the comparison shares one evaluator cache, so a configuration another method measured
first is not measured again; it still counts as a point of this method (the method asked for it).
"""
from __future__ import annotations

from dse.core.configuration import Configuration
from dse.core.measurement import Measurement
from dse.search.probe import Probe, score


def anytime(asked) -> list[float]:
    """Best FPS so far after each of the (phase, measurement) pairs, in order."""
    out, best = [], 0.0
    for _, m in asked:
        best = max(best, score(m))
        out.append(best)
    return out


class RecordingProbe(Probe):
    """``Probe`` plus the distinct configurations asked for, in ask order."""

    def __init__(self, evaluator, strategy: str, phase_prefix: str = ""):
        super().__init__(evaluator, strategy)
        self.phase_prefix = phase_prefix  # rows get "<prefix>/<phase>": no method's rows pass for another's
        self.asked: list[tuple[str, Measurement]] = []   # (phase, measurement), first ask of each config

    def _label(self, phase: str) -> str:
        return f"{self.phase_prefix}/{phase}" if self.phase_prefix else phase

    def measure(self, config: Configuration, phase: str, strategy: str | None = None) -> Measurement:
        new = config.hash not in self._memo
        phase = self._label(phase)
        m = super().measure(config, phase, strategy)
        if new:
            self.asked.append((phase, m))
        return m

    def remeasure(self, config: Configuration, phase: str, repeats: range) -> list[float]:
        return super().remeasure(config, self._label(phase), repeats)
