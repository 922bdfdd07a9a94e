"""A probe that remembers what one comparison method asked for, in order (points, anytime curve).

Every method of the comparison shares one evaluator cache, so a configuration another method measured
first is not measured again; it still counts as a point of this method (the method asked for it).
"""
from __future__ import annotations

from dse.configuration import Configuration
from dse.measurement import Measurement
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

    def measure(self, config: Configuration, phase: str) -> Measurement:
        new = config.hash not in self._memo
        if self.phase_prefix:
            phase = f"{self.phase_prefix}/{phase}"
        m = super().measure(config, phase)
        if new:
            self.asked.append((phase, m))
        return m

    def anytime(self) -> list[float]:
        """Best FPS after each distinct configuration asked for (the anytime curve)."""
        return anytime(self.asked)

    def best(self) -> Measurement | None:
        ok = [m for _, m in self.asked if m.ok]
        return max(ok, key=lambda m: m.fps) if ok else None

    def points(self, phases: tuple[str, ...] | None = None) -> int:
        """Distinct configurations asked for (in the given unprefixed phases, or all)."""
        if phases is None:
            return len(self.asked)
        wanted = {f"{self.phase_prefix}/{p}" if self.phase_prefix else p for p in phases}
        return sum(1 for ph, _ in self.asked if ph in wanted)
