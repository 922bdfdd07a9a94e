"""Guided exploration: measure where a model of the board is unsure or promising, nowhere else.

After the maximizer, the model (``dse.search.board_model``) is fitted to what was measured and predicts every
candidate cut tuple of every option (an exhaustive pass over the model: each prediction is a few prefix-sum
lookups). Each round measures the few candidates with the highest expected gain over the best measured configuration
(the model's mean and uncertainty together), refits and repeats. It stops when the model's best candidate has
been measured and no candidate's expected gain reaches a quarter of one measurement's noise, or when the tuple
budget is spent. Every
candidate is measured at the cut search's parameters (the maximizer's bounds, the option's stream tuple); the
best and the measured tuples within twice the noise of it (at most three) go to the fine-tuner, whose best
tuned configuration is the answer.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from dse.configuration import Configuration
from dse.errors import DseError
from dse.measurement import Measurement
from dse.search.board_model import (
    BoardModel,
    NetworkFacts,
    Observation,
    Priors,
    StageRow,
    fit_board_model,
)
from dse.search.params import check_bounds, search_config
from dse.search.probe import Probe, as_probe, score
from dse.search.settings import SearchSettings
from dse.search.space import Evaluator, SearchSpace
from dse.search.streams import stream_tuple

PHASE = "guided"
STRATEGY = "guided"
FULL_ENUMERATION = 60_000   # cut tuples of one option predicted exhaustively; above, a coarser grid


@dataclass
class GuidedResult:
    """What the guided exploration measured, in rounds, and the configuration it hands to the fine-tuner."""

    best_config: Configuration
    best: Measurement
    option_fps: dict[str, float]
    tuples: list[tuple[str, tuple[int, ...]]]
    rounds: list[dict] = field(default_factory=list)
    stopped: str = ""
    candidates: dict[str, int] = field(default_factory=dict)
    finalists: list[Configuration] = field(default_factory=list)   # what the fine-tuner starts from

    @property
    def fps(self) -> float:
        return score(self.best)

    @property
    def selected(self) -> str:
        return self.best_config.option

    @property
    def unique_tuples(self) -> int:
        return len(set(self.tuples))

    def to_dict(self) -> dict:
        return {"strategy": STRATEGY, "option": self.selected, "selected": self.selected, "fps": self.fps,
                "best_config": self.best_config.to_dict(), "best_hash": self.best_config.hash,
                "option_fps": dict(self.option_fps), "refined": {},
                "tuples": [[o, list(c)] for o, c in self.tuples], "unique_tuples": self.unique_tuples,
                "candidates": dict(self.candidates), "rounds": self.rounds, "stopped": self.stopped,
                "finalists": [c.to_dict() for c in self.finalists]}


def candidate_tuples(space: SearchSpace, n_cuts: int, limit: int = FULL_ENUMERATION) -> np.ndarray:
    """Every feasible ``n_cuts``-tuple (rows), from pairwise feasibility of consecutive cuts (what
    ``NetworkAnalysis.check_cuts`` checks); above ``limit`` tuples, the cuts are thinned evenly first."""
    cuts = list(space.feasible_cuts)
    if n_cuts == 0:
        return np.zeros((1, 0), dtype=int)
    if n_cuts == 1:
        return np.array([[c] for c in cuts if space.feasibility((c,)) is None], dtype=int).reshape(-1, 1)
    pair = _pair_feasibility(space, cuts)
    step = 1
    while True:
        idx = list(range(0, len(cuts), step))
        sub = pair[np.ix_(idx, idx)]
        if _count_chains(sub, n_cuts) <= limit or len(idx) <= n_cuts:
            break
        step += 1
    chains = _chains(sub, n_cuts)
    grid = np.array(cuts)[idx]
    return grid[chains] if len(chains) else np.zeros((0, n_cuts), dtype=int)


def _pair_feasibility(space: SearchSpace, cuts: Sequence[int]) -> np.ndarray:
    f = len(cuts)
    ok = np.zeros((f, f), dtype=bool)
    for i in range(f):
        for j in range(i + 1, f):
            ok[i, j] = space.feasibility((cuts[i], cuts[j])) is None
    return ok


def _count_chains(pair: np.ndarray, n: int) -> int:
    ways = np.ones(len(pair))
    for _ in range(n - 1):
        ways = pair.astype(float).T @ ways
    return int(ways.sum())


def _chains(pair: np.ndarray, n: int) -> np.ndarray:
    out = np.array([[i] for i in range(len(pair))], dtype=int)
    for _ in range(n - 1):
        ii, jj = np.nonzero(pair[out[:, -1]])
        out = np.hstack([out[ii], jj[:, None]])
    return out


def _observations(space: SearchSpace, roles, measured: Sequence[Measurement]) -> tuple[list[StageRow], list[Observation]]:
    stages, obs = [], []
    for m in measured:
        c = m.config
        if not m.ok or c.option not in roles:
            continue
        obs.append(Observation(c.option, c.cuts, c.streams, c.buffers, float(m.fps)))
        if len(m.stage_ms) == c.n_stages:
            bounds = [-1, *c.cuts, space.n_layers - 1]
            for k, role in enumerate(roles[c.option]):
                if m.stage_ms[k] > 0:
                    stages.append(StageRow(role.cost_class, bounds[k] + 1, bounds[k + 1], float(m.stage_ms[k])))
    return stages, obs


@dataclass
class _Pool:
    """One option's candidates and the configuration each is measured at (the cut search's parameters do not
    depend on the cuts: only ``cuts`` changes)."""

    template: Configuration
    cuts: np.ndarray
    measured: dict[tuple[int, ...], float] = field(default_factory=dict)

    def config(self, cuts: tuple[int, ...]) -> Configuration:
        return self.template.with_(cuts=tuple(cuts))

    def predict(self, model: BoardModel) -> tuple[np.ndarray, np.ndarray]:
        t = self.template
        return model.predict(t.option, self.cuts, t.streams, t.buffers)


def guided_search(space: SearchSpace, evaluator: Evaluator | Probe, base: Configuration, bounds: Mapping[str, int],
                  settings: SearchSettings, facts: NetworkFacts, *, options: Sequence[str] | None = None,
                  known: Sequence[Measurement] = (), progress: Callable[[str], None] | None = None) -> GuidedResult:
    """Model-guided exploration of every option's cut tuples; ``known``: earlier measurements of the run (the
    maximizer's) the model learns from too."""
    probe = as_probe(evaluator, STRATEGY)
    bounds = check_bounds(bounds)
    roles = space.stage_roles
    if not roles:
        raise DseError("the guided search needs the stages' PE roles (a SearchSpace built for a platform)")
    options = [o for o in (options or space.options) if o in roles]
    pools: dict[str, _Pool] = {}
    for o in options:
        streams = stream_tuple(space.stages(o), bounds["streams"], dla_streams=settings.dla_streams,
                               main_pe=space.main_pe)
        cuts = candidate_tuples(space, space.n_cuts(o))
        if len(cuts):
            pools[o] = _Pool(search_config(base, o, (), streams, bounds, settings.pipeline_buffers), cuts)
    if not pools:
        raise DseError("no mapping option has a feasible cut tuple to explore")
    priors = Priors(dla_ratio=settings.dla_ratio, noise=settings.guided_noise)
    main_resource = next((r.resources[0] for rs in roles.values() for r in rs
                          if len(rs) == 1 and len(r.resources) == 1), "GPU")
    budget, batch, noise = settings.guided_budget, settings.guided_batch, settings.guided_noise
    seen: list[Measurement] = [m for m in known if m.ok]
    tuples: list[tuple[str, tuple[int, ...]]] = []
    rounds: list[dict] = []

    def measure(option: str, cuts: tuple[int, ...]) -> None:
        m = probe.measure(pools[option].config(cuts), PHASE)
        tuples.append((option, cuts))
        pools[option].measured[cuts] = score(m)
        seen.append(m)

    def fit() -> BoardModel:
        stages, obs = _observations(space, roles, seen)
        return fit_board_model(facts, roles, stages, obs, priors, seed=settings.seed + len(rounds),
                               main_resource=main_resource)

    stopped = "budget"
    checked = -math.inf      # the incumbent when the last check round ran
    while len(tuples) < budget:
        model = fit()
        preds = {o: p.predict(model) for o, p in pools.items()}
        incumbent, best_mean = _incumbent(pools, preds)
        picks, top = _pick(pools, preds, incumbent, batch, first=not tuples, threshold=noise / 4)
        kind = "gain"
        if not picks and incumbent > checked:
            # before stopping, one round on the best predicted unmeasured tuples: a model that is wrong near
            # the optimum shows it here, and the search goes on from what it measured
            picks, kind, checked = _check_round(pools, preds, batch), "check", incumbent
        rounds.append({"round": len(rounds), "kind": kind, "measured": len(tuples),
                       "incumbent_fps": round(math.exp(incumbent), 2) if incumbent > -math.inf else 0.0,
                       "model_best": [top[0], list(top[1]), round(best_mean, 2)],
                       "capacity": round(model.capacity, 3), "picks": [[o, list(c)] for o, c in picks]})
        if not picks:
            stopped = ("converged: the model's best is measured, no candidate's expected gain reaches a quarter of "
                       "the noise, and the best predicted unmeasured tuples did not beat the best measured one")
            break
        for option, cuts in picks[:budget - len(tuples)]:
            if space.feasibility(cuts) is not None:     # thinned 3+-cut grids are checked here
                pools[option].measured[cuts] = 0.0
                continue
            measure(option, cuts)
        if progress:
            progress(f"round {len(rounds)}: {len(tuples)} tuples measured, best {_best_measured(pools):.1f} FPS")
    finalists = _finalists(probe, pools, noise)
    if not finalists:
        raise DseError("the guided exploration measured no configuration that runs")
    return GuidedResult(finalists[0].config, finalists[0],
                        {o: max(p.measured.values(), default=0.0) for o, p in pools.items()}, tuples, rounds, stopped,
                        {o: len(p.cuts) for o, p in pools.items()}, [m.config for m in finalists])


def _best_measured(pools: Mapping[str, _Pool]) -> float:
    return max((v for p in pools.values() for v in p.measured.values()), default=0.0)


def _incumbent(pools, preds) -> tuple[float, float]:
    """(log FPS of the best measured candidate, the model's best predicted FPS)."""
    best = _best_measured(pools)
    return (math.log(best) if best > 0 else -math.inf), max(float(preds[o][0].max()) for o in pools)


def expected_gain(log_mean: np.ndarray, sd: np.ndarray, incumbent: float) -> np.ndarray:
    """Expected relative improvement over the incumbent (log scale) of a candidate whose log FPS is normal."""
    from scipy.stats import norm

    sd = np.maximum(sd, 1e-9)
    z = (log_mean - incumbent) / sd
    return sd * (z * norm.cdf(z) + norm.pdf(z))


def _pick(pools, preds, incumbent: float, k: int, first: bool, threshold: float) -> tuple[list, tuple]:
    """The next candidates by expected gain over the incumbent, at most half the batch from one option and
    none next to another pick; the model's best first while unmeasured. The first round takes the model's
    best of every option. Empty when the model's best is measured and no candidate's expected gain reaches
    ``threshold``."""
    scored = []
    top = None
    for o, p in pools.items():
        mean, sd = preds[o]
        lm = np.log(np.maximum(mean, 1e-9))
        i_best = int(np.argmax(lm))
        cand = (float(lm[i_best]), o, tuple(int(c) for c in p.cuts[i_best]))
        top = cand if top is None or cand[0] > top[0] else top
        gain = expected_gain(lm, sd, incumbent)
        for i in np.argsort(-gain)[:200]:
            cuts = tuple(int(c) for c in p.cuts[i])
            if cuts not in p.measured:
                scored.append((float(gain[i]), o, cuts))
    model_best = (top[1], top[2], math.exp(top[0]))
    if first:
        return [(o, tuple(int(c) for c in p.cuts[int(np.argmax(preds[o][0]))])) for o, p in pools.items()], model_best
    top_measured = top[2] in pools[top[1]].measured
    scored.sort(reverse=True)
    if top_measured and (not scored or scored[0][0] < threshold):
        return [], model_best
    picks = [] if top_measured else [(top[1], top[2])]
    return _spread(scored, k, max(1, k // 2), picks, floor=threshold), model_best


def _check_round(pools, preds, k: int) -> list[tuple[str, tuple[int, ...]]]:
    """The ``k`` unmeasured tuples with the best predicted mean, none next to another."""
    ranked = []
    for o, p in pools.items():
        mean = preds[o][0]
        for i in np.argsort(-mean)[:50]:
            cuts = tuple(int(c) for c in p.cuts[i])
            if cuts not in p.measured:
                ranked.append((float(mean[i]), o, cuts))
    ranked.sort(reverse=True)
    return _spread(ranked, k, k, [])


def _spread(ranked, k: int, per_option: int, picks: list, floor: float = -math.inf) -> list[tuple[str, tuple[int, ...]]]:
    """Up to ``k`` picks from ``ranked`` ((value, option, cuts), best first) after ``picks``: at most
    ``per_option`` from one option, none next to another pick of its option, none under ``floor`` once one
    is picked."""
    picks = list(picks)
    for value, o, cuts in ranked:
        if len(picks) >= k or (value < floor and picks):
            break
        if sum(po == o for po, _ in picks) >= per_option or any(po == o and _near(pc, cuts) for po, pc in picks):
            continue
        picks.append((o, cuts))
    return picks


def _near(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Two tuples whose cuts are all within two layers of each other (one measurement tells the model about
    both)."""
    return all(abs(x - y) <= 2 for x, y in zip(a, b)) if len(a) == len(b) and a else a == b


FINALISTS = 3


def _finalists(probe: Probe, pools, noise: float) -> list[Measurement]:
    """The best measured candidate and up to two more of other cut tuples within twice the noise of it: a
    measurement, not a prediction, is what the search hands on, and which of near-equal tuples tunes best
    only the fine-tuner finds out (its gains differ by tuple)."""
    ranked = sorted(((fps, o, cuts) for o, p in pools.items() for cuts, fps in p.measured.items() if fps > 0),
                    reverse=True)
    if not ranked:
        return []
    top = ranked[0][0]
    out = []
    for fps, o, cuts in ranked[:FINALISTS]:
        if fps >= top * (1 - 2 * noise):
            out.append(probe.measure(pools[o].config(cuts), PHASE))
    return out
