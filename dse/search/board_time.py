"""What a search's board runs cost, by the report's model (``dse.platform.BoardCosts``), and the bound on re-runs.

A measurement costs a start-up, the run's frames at its FPS and a build of every stage engine not built before (an
engine is a PE type and a layer range; a PND stage builds a DLA engine); a re-run of a measured configuration costs
the start-up and the frames only. On a Jetson the builds dominate (45-135 s an engine against 10 s + 5,200 frames
at 150-900 FPS a run); on a host's CPU cores an engine is a 5 s session, so a re-run costs about what a measurement
does and races that run to their cap there spent 1.4-3 times the thesis' search's board time (`python -m bench.guided_quality --platform host-cpu`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from dse.core.configuration import Configuration
from dse.core.measurement import Measurement
from dse.search.study import Study, score


class BoardTime:
    """Board seconds a candidate would cost given the engines built so far (``built``)."""

    def __init__(self, space, measured: Iterable[Configuration] = ()):
        from dse.platform import BoardCosts

        self.space = space
        self.costs = space.board_costs or BoardCosts()
        self.frames = space.run_frames or 5000
        self.engines: set[tuple[str, int, int]] = set()
        for c in measured:
            if c.option in space.stage_pe_types:
                self.built(c.option, c.cuts)

    def _stages(self, option: str, cuts: tuple[int, ...]):
        edges = [-1, *cuts, self.space.n_layers - 1]
        for k, t in enumerate(self.space.stages(option)):
            yield ("DLA" if t == "PND" else t, edges[k] + 1, edges[k + 1])

    def built(self, option: str, cuts: tuple[int, ...]) -> None:
        self.engines.update(self._stages(option, cuts))

    def run(self, fps: float) -> float:
        """One board run of the measurement's frames at ``fps`` (a re-run: nothing to build)."""
        return self.costs.run_s(self.frames, fps)

    def __call__(self, option: str, cuts: tuple[int, ...], fps: float) -> float:
        builds = sum(self.costs.build_s(t) for t, a, b in self._stages(option, cuts) if (t, a, b) not in self.engines)
        return self.run(fps) + builds


class RerunBudget:
    """Races may add a batch of re-runs while every re-run of the search, with the batch, costs at most ``share`` of
    the board seconds its measurements cost (both by ``BoardTime``). The account: ``carried`` (``account()`` of an
    earlier phase: its measurements' and re-runs' seconds and the configurations and re-runs it counted, which a
    later phase may ask for again without a run), ``known`` measurements of earlier phases not counted there (the
    maximizer's, which the guided search learns from), then what ``study`` asks from here on; ``built``:
    configurations whose engines are built (the fine-tuner's starts). The first batch of a race is not asked: a
    ranking needs it."""

    def __init__(self, space, study: Study, share: float, *, carried: Mapping | None = None,
                 known: Iterable[Measurement] = (), built: Iterable[Configuration] = ()):
        carried = carried or {}
        self.study, self.share = study, share
        self.cost = BoardTime(space, built)
        self.counted = set(carried.get("measured", ()))     # configuration hashes whose measurement is counted
        self.rerun_counted = set(carried.get("reruns", ()))  # "hash:repeat" of the re-runs counted
        self.measured_s, self.rerun_s = float(carried.get("measured_s", 0.0)), float(carried.get("rerun_s", 0.0))
        for m in known:
            self._measured(m)
        self._memo_seen, self._reruns_seen = study.measured, len(study.reruns)
        self.refused = 0        # batches a race wanted and this budget refused

    def _measured(self, m: Measurement) -> None:
        c = m.config
        if c.hash in self.counted:
            return
        self.counted.add(c.hash)
        if c.option in self.cost.space.stage_pe_types:
            self.measured_s += self.cost(c.option, c.cuts, score(m))
            self.cost.built(c.option, c.cuts)
        else:
            self.measured_s += self.cost.run(score(m))

    def spent(self) -> tuple[float, float]:
        """(the measurements', the re-runs') board seconds so far."""
        memo, reruns = list(self.study.memo.values()), self.study.rerun_items
        for m in memo[self._memo_seen:]:
            self._measured(m)
        for (h, r), m in reruns[self._reruns_seen:]:
            key = f"{h}:{r}"
            if key not in self.rerun_counted:
                self.rerun_counted.add(key)
                self.rerun_s += self.cost.run(score(m))
        self._memo_seen, self._reruns_seen = len(memo), len(reruns)
        return self.measured_s, self.rerun_s

    def account(self) -> dict:
        """What a later phase carries on from (``carried``)."""
        measured_s, rerun_s = self.spent()
        return {"measured_s": round(measured_s, 3), "rerun_s": round(rerun_s, 3), "measured": sorted(self.counted),
                "reruns": sorted(self.rerun_counted)}

    def allows(self, fps: Sequence[float]) -> bool:
        """Whether a batch of runs at these FPS (one per re-run) fits; a refusal is counted."""
        measured_s, rerun_s = self.spent()
        if rerun_s + sum(self.cost.run(f) for f in fps) <= self.share * measured_s:
            return True
        self.refused += 1
        return False
