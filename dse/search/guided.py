"""Guided exploration: measure where a model of the board is unsure or promising, nowhere else.

After the maximizer, the model (``dse.search.board_model``) is fitted to what was measured and predicts every
candidate cut tuple of every option (an exhaustive pass over the model: each prediction is a few prefix-sum
lookups). Each round measures the candidate with the highest expected gain over the best measured configuration (the
model's mean and uncertainty together; ``search.guided_batch`` of them, one by default: a board measures one at a
time, and every pick then sees every measurement before it), refits and repeats. The first round measures the
model's best of every option. It stops when the model's best candidate has been measured and no candidate's expected
gain reaches a quarter of one measurement's noise, or when the tuple budget is spent; before it stops, a local round
measures the neighbours of the best measured tuples (of a far option, one step outwards where its samples rise
towards an edge). Candidates are ranked by expected gain per board second (engines already built cost nothing) and
measured at the cut search's parameters, with pre/post threads raised to clear the best FPS in sight (and every
buffer where the PEs are the host's cores: ``host_buffers``). The best
measured tuples within three times the noise of the best (at most four, the best of each option first) are raced on
fresh re-runs (``guided_repeats`` per batch, more until a 1 % difference is resolved) and ranked on them: the best
single sample of near-equal tuples is mostly luck. The top two (again the best of each option before a second tuple
of one) go to the fine-tuner; the answer is the best of them and their tuned configurations on fresh re-runs, raced
(``pipeline.finetune_phase``, ``dse.search.race``).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.core.measurement import Measurement
from dse.search.board_model import (
    BoardModel,
    NetworkFacts,
    Observation,
    Priors,
    StageRow,
    fit_board_model,
)
from dse.search.board_time import BoardTime, RerunBudget
from dse.search.params import check_bounds, full_stream_config, search_config
from dse.search.race import race
from dse.search.result import StrategyResult
from dse.search.study import Measurer, Study, as_study, score
from dse.search.settings import SearchSettings
from dse.search.space import SearchSpace

PHASE = "guided"
STRATEGY = "guided"
FULL_ENUMERATION = 60_000   # cut tuples of one option predicted exhaustively; above, a coarser grid
HOST_HEADROOM = 1.2         # candidates get pre/post threads for this much more than the best FPS in sight
LOCAL_WITHIN = 3            # local rounds around options whose best measured is within this many noises of the best
# a local round's neighbour predicted further than this below the incumbent (plus two noises: the incumbent is a best
# single sample) is not measured: the model misses by 3.7 % rms next to its measurements (`python -m bench.guided_gap`), so it
# ranks a step that costs 10 % and more (Yolov4 INT8's 31-layer steps: predicted 0.68-0.90 of the incumbent, measured
# within 3 % of that) without a board run; outward steps past an edge are measured whatever it predicts
LOCAL_REACH = 0.10
# tuples of a check round and, at most, of a local round: they test the model where it is sure, so their size is set
# by how wrong it may be there, not by ``guided_batch`` (with one tuple a check saw too little: Orin yolov4-csp FP16
# stopped at E, 0.87 of PND-A (23), with two PND-A samples, one short of the local round's outward step)
CHECK_TUPLES = 4
LOCAL_TUPLES = 8


def candidate_tuples(space: SearchSpace, n_cuts: int, limit: int = FULL_ENUMERATION) -> np.ndarray:
    """Every feasible ``n_cuts``-tuple (rows), from pairwise feasibility of consecutive cuts (what
    ``NetworkAnalysis.check_cuts`` checks); above ``limit`` tuples, the cuts are thinned evenly first."""
    cuts = list(space.feasible_cuts)
    if n_cuts == 0:
        return np.zeros((1, 0), dtype=int)
    if n_cuts == 1:
        return np.array([[c] for c in cuts if space.is_feasible((c,))], dtype=int).reshape(-1, 1)
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
            ok[i, j] = space.is_feasible((cuts[i], cuts[j]))
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
        # the busiest accelerator (none where a stage runs on CPU cores: the host is then what runs the stages)
        pes = [pe for role in roles[c.option] for pe in role.resources]
        on_cores = any(role.cost_class.startswith("cpu") for role in roles[c.option])
        accel = max(m.util[pe] for pe in pes) if not on_cores and all(pe in m.util for pe in pes) else 0.0
        obs.append(Observation(c.option, c.cuts, c.streams, c.buffers, float(m.fps),
                               c.pre_threads, c.post_threads, float(m.cpu_util or 0.0), float(accel)))
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
    _rows: dict | None = field(default=None, repr=False)

    def config(self, cuts: tuple[int, ...]) -> Configuration:
        return self.template.with_(cuts=tuple(cuts))

    def row(self, cuts: tuple[int, ...]) -> int | None:
        """The index of ``cuts`` in ``self.cuts`` (None: not one of this option's candidates)."""
        if self._rows is None:
            self._rows = {tuple(int(c) for c in row): i for i, row in enumerate(self.cuts)}
        return self._rows.get(tuple(cuts))

    def has(self, cuts: tuple[int, ...]) -> bool:
        return self.row(cuts) is not None

    def ran(self) -> list[int]:
        """Rows of the measured tuples that ran."""
        return [i for c, v in self.measured.items() if v > 0 and (i := self.row(c)) is not None]

    def predict(self, model: BoardModel, host_bound: bool = True) -> tuple[np.ndarray, np.ndarray]:
        t = self.template
        threads = (t.pre_threads, t.post_threads) if host_bound else None
        return model.predict(t.option, self.cuts, t.streams, t.buffers, threads)


def guided_search(space: SearchSpace, evaluator: Measurer | Study, base: Configuration, bounds: Mapping[str, int],
                  settings: SearchSettings, facts: NetworkFacts, *, options: Sequence[str] | None = None,
                  known: Sequence[Measurement] = (), progress: Callable[[str], None] | None = None) -> StrategyResult:
    """Model-guided exploration of every option's cut tuples; ``known``: earlier measurements of the run (the
    maximizer's) the model learns from too. The answer is the best finalist; ``extra``: the best FPS per option
    (``option_fps``), the (option, cuts) measured in order (``tuples``), the ``rounds`` and why it ``stopped``,
    the ``finalists`` the fine-tuner starts from, the near-best ``contenders`` (search sample, re-run mean), the
    relative ``noise`` assumed or estimated (and the ``noise_runs`` it was estimated from), ``reruns_used`` (repeat
    indices 1.. this many ranked the finalists: the fine-tuner's re-runs start after them), the re-run budget's
    ``rerun_account`` so far and the race batches it refused."""
    study = as_study(evaluator, STRATEGY)
    mark = study.measured
    bounds = host_buffers(space, check_bounds(bounds), settings)
    roles = space.stage_roles
    if not roles:
        raise DseError("the guided search needs the stages' PE roles (a SearchSpace built for a platform)")
    options = [o for o in (options or space.options) if o in roles]
    pools: dict[str, _Pool] = {}
    for o in options:
        cuts = candidate_tuples(space, space.n_cuts(o))
        if len(cuts):
            pools[o] = _Pool(full_stream_config(space, base, o, (), bounds, settings), cuts)
    if not pools:
        raise DseError("no mapping option has a feasible cut tuple to explore")
    main_resource = next((r.resources[0] for rs in roles.values() for r in rs
                          if len(rs) == 1 and len(r.resources) == 1), "GPU")
    # in hash order: the model's fit (bootstrap members) must not depend on the order a caller kept them in
    seen: list[Measurement] = sorted((m for m in known if m.ok), key=lambda m: m.config.hash)
    rerun_budget = RerunBudget(space, study, settings.guided_rerun_share, known=known)
    noise, noise_runs = ((settings.guided_noise, []) if settings.guided_noise != "auto"
                         else estimate_noise(study, seen))
    priors = Priors(dla_ratio=settings.dla_ratio, noise=noise)
    budget, batch = settings.guided_budget, settings.guided_batch
    n_known = len(seen)
    tuples: list[tuple[str, tuple[int, ...]]] = []
    rounds: list[dict] = []

    cost = BoardTime(space, [m.config for m in seen])

    def measure(option: str, cuts: tuple[int, ...]) -> None:
        m = study.measure(pools[option].config(cuts), PHASE)
        tuples.append((option, cuts))
        pools[option].measured[cuts] = score(m)
        seen.append(m)
        cost.built(option, cuts)

    def fit() -> BoardModel:
        stages, obs = _observations(space, roles, seen)
        return fit_board_model(facts, roles, stages, obs, priors, seed=settings.seed + len(rounds),
                               main_resource=main_resource)

    def raise_threads(model: BoardModel) -> None:
        """Candidates are measured with enough pre and post threads for the best FPS in sight: the maximizer
        found its thread bounds on the main PE alone, and a pipeline that outruns them would measure the
        threads, not its cuts (every tuple the same FPS). Threads only go up, at most to ``max_pre``/``max_post``
        (where the threads share the PEs' cores, host-cpu, the resolved settings stop those at the cores: the
        model sees the pools' cost but not their time-slicing with the inference, and would ask for 8); the
        fine-tuner removes extras."""
        nonlocal bounds
        sight = max([_best_measured(pools)]
                    + [float(p.predict(model, host_bound=False)[0].max()) for p in pools.values()])
        pre_need, post_need = model.threads_for(HOST_HEADROOM * sight)
        pre = max(bounds["pre"], min(pre_need, settings.max_pre))
        post = max(bounds["post"], min(post_need, settings.max_post))
        if (pre, post) != (bounds["pre"], bounds["post"]):
            bounds = {**bounds, "pre": pre, "post": post, "buffers": max(bounds["buffers"], pre, post)}
            for o, p in pools.items():
                p.template = search_config(base, o, (), p.template.streams, bounds, settings.pipeline_buffers)

    stopped = "budget"
    checked = -math.inf      # the incumbent when the last check round ran
    polished: set[tuple[str, tuple[int, ...]]] = set()   # tuples whose neighbours a local round measured
    while len(tuples) < budget:
        model = fit()
        raise_threads(model)
        preds = {o: p.predict(model) for o, p in pools.items()}
        incumbent, best_mean = _incumbent(pools, preds)
        ceilings = {o: model.host_ceiling((p.template.pre_threads, p.template.post_threads), o)
                    for o, p in pools.items()}
        picks, top = _pick(pools, preds, incumbent, batch, first=not tuples, threshold=noise / 4, cost=cost,
                           ceilings=ceilings)
        kind = "gain"
        if not picks and incumbent > checked + noise:
            # before stopping, one round on the best predicted unmeasured tuples: a model that is wrong near
            # the optimum shows it here, and the search goes on from what it measured (again only once the
            # incumbent has risen by more than the noise: a rise within it is no news about the model)
            picks, kind, checked = _check_round(pools, preds, CHECK_TUPLES, noise, cost), "check", incumbent
        if not picks:
            # then the neighbours of the best measured tuples, measured: where the model's shape is wrong by a
            # few percent (a bottleneck it places a few layers off), the data near the optimum correct it
            picks, kind = _local_round(pools, model, preds, incumbent, noise, LOCAL_TUPLES, polished), "local"
        rounds.append({"round": len(rounds), "kind": kind, "measured": len(tuples),
                       "incumbent_fps": round(math.exp(incumbent), 2) if incumbent > -math.inf else 0.0,
                       "model_best": [top[0], list(top[1]), round(best_mean, 2)],
                       "capacity": round(model.capacity, 3), "threads": [bounds["pre"], bounds["post"]],
                       "picks": [[o, list(c)] for o, c in picks]})
        if not picks:
            stopped = ("converged: the model's best is measured, no candidate's expected gain reaches a quarter of "
                       "the noise, and neither the best predicted unmeasured tuples nor the best measured ones' "
                       "neighbours beat the best measured one")
            break
        for option, cuts in picks[:budget - len(tuples)]:
            if space.feasibility(cuts) is not None:     # thinned 3+-cut grids are checked here
                pools[option].measured[cuts] = 0.0
                continue
            measure(option, cuts)
        if progress:
            progress(f"round {len(rounds)}: {len(tuples)} tuples measured, best {_best_measured(pools):.1f} FPS")
    # the best configuration measured before the search (the maximizer's; its parameters may beat the template's)
    earlier = max(seen[:n_known], key=score, default=None)
    finalists, contenders = _finalists(study, pools, noise, settings.guided_repeats,
                                       [earlier] if earlier is not None else [], rerun_budget)
    if not finalists:
        raise DseError("the guided exploration measured no configuration that runs")
    selected = finalists[0].config.option
    return StrategyResult(finalists[0].config, finalists[0], study.asked_since(mark), {
        "strategy": STRATEGY, "option": selected, "selected": selected,
        "option_fps": {o: max(p.measured.values(), default=0.0) for o, p in pools.items()}, "refined": {},
        "tuples": tuples, "unique_tuples": len(set(tuples)), "candidates": {o: len(p.cuts) for o, p in pools.items()},
        "rounds": rounds, "stopped": stopped, "finalists": [m.config for m in finalists], "contenders": contenders,
        "noise": round(noise, 5), "noise_runs": [round(x, 3) for x in noise_runs],
        "reruns_used": reruns_used(contenders),
        "rerun_account": rerun_budget.account(), "batches_refused": rerun_budget.refused})


def reruns_used(contenders: Sequence[dict]) -> int:
    """Repeat indices 1.. this many ranked the finalists: the fine-tuner's re-runs start after them."""
    return max((len(c["reruns"]) for c in contenders), default=0)


NOISE_RUNS = 8                   # fresh re-runs that estimate the noise (guided_noise=auto): +-27 % of it
NOISE_PRIOR = 0.01               # ... when nothing ran to re-run; also the least noise assumed: an estimate
NOISE_RANGE = (NOISE_PRIOR, 0.2)  # from 8 runs below it is as likely luck as a quiet board


def host_buffers(space: SearchSpace, bounds: dict[str, int], settings: SearchSettings) -> dict[str, int]:
    """``bounds`` with every buffer the settings allow where the PEs are the host's cores (``shared_cores``:
    host-cpu): there a frame in flight costs host memory only, and on host-cpu 32 buffers beat 4-6 on every
    answer raced (1.5-4.6 %, 30 paired rounds each; E answers with 32 buffers judged 1.013 of the exhaustive
    reference, with 3-7 buffers 0.967: `python -m bench.guided_rejudge`, host-cpu). Measuring the cuts there at the answer's buffers spares the
    buffer race after the fine-tuner, which the re-run budget mostly refused. Elsewhere more buffers can lose
    (``pipeline._more_buffers``), and the maximizer's bound stands."""
    if not space.shared_cores:
        return bounds
    return {**bounds, "buffers": max(bounds["buffers"], settings.max_buffers)}


def estimate_noise(study: Study, known: Sequence[Measurement]) -> tuple[float, list[float]]:
    """(relative noise of one measurement, the re-runs' FPS): the spread of ``NOISE_RUNS`` fresh re-runs of the
    best configuration measured so far (the maximizer's: built, so a re-run costs a board run and no engine).
    Its own sample is left out: it was kept for being high."""
    ok = [m for m in known if m.ok and score(m) > 0]
    if not ok:
        return NOISE_PRIOR, []
    runs = study.remeasure(max(ok, key=score).config, PHASE, range(1, NOISE_RUNS + 1))
    logs = [math.log(x) for x in runs if x > 0]
    if len(logs) < 2:
        return NOISE_PRIOR, runs
    return float(np.clip(np.std(logs, ddof=1), *NOISE_RANGE)), runs


def _best_measured(pools: Mapping[str, _Pool]) -> float:
    return max((v for p in pools.values() for v in p.measured.values()), default=0.0)


def _incumbent(pools, preds) -> tuple[float, float]:
    """(log FPS of the best measured candidate, the model's best predicted FPS)."""
    best = _best_measured(pools)
    return (math.log(best) if best > 0 else -math.inf), max(float(preds[o][0].max()) for o in pools)


def expected_gain(log_mean: np.ndarray, sd: np.ndarray, incumbent: float, ceiling: float = math.inf) -> np.ndarray:
    """Expected relative improvement over the incumbent (log scale) of a candidate whose log FPS is normal, and
    no higher than ``ceiling`` (log FPS the host lets through: ``BoardModel.host_ceiling``): (X - I)+ - (X - c)+
    for c >= I."""
    from scipy.special import ndtr   # the normal CDF (what scipy.stats.norm.cdf computes, without its import)

    def above(level: float) -> np.ndarray:
        z = (log_mean - level) / s
        return s * (z * ndtr(z) + np.exp(-z * z / 2) / math.sqrt(2 * math.pi))

    s = np.maximum(sd, 1e-9)
    if ceiling <= incumbent:
        return np.zeros_like(s)
    return above(incumbent) - (above(ceiling) if ceiling < math.inf else 0.0)


def _pick(pools, preds, incumbent: float, k: int, first: bool, threshold: float,
          cost: Callable[[str, tuple[int, ...], float], float] | None = None,
          ceilings: Mapping[str, float] | None = None) -> tuple[list, tuple]:
    """The next candidates by expected gain over the incumbent per second of board time (``cost``: engine
    builds + the run; none: gain alone), among those whose gain reaches ``threshold``, at most half the batch
    from one option and none next to another pick; the model's best first while unmeasured. The first round
    takes the model's best of every option. Empty when the model's best is measured (or a measured tuple's
    predicted log FPS is within ``threshold`` of it: on a plateau flatter than the noise the argmax wanders over
    equal tuples, one measurement each, yolov4 INT8 PND-B) and no candidate's expected gain reaches
    ``threshold``."""
    scored = []
    top = None
    settled = -math.inf        # the model's best value at a measured tuple
    for o, p in pools.items():
        mean, sd = preds[o]
        lm = np.log(np.maximum(mean, 1e-9))
        i_best = int(np.argmax(lm))
        cand = (float(lm[i_best]), o, tuple(int(c) for c in p.cuts[i_best]))
        top = cand if top is None or cand[0] > top[0] else top
        ran = p.ran()
        if ran:
            settled = max(settled, float(lm[ran].max()))
        gain = expected_gain(lm, sd, incumbent, math.log((ceilings or {}).get(o, math.inf)))
        for i in np.argsort(-gain)[:200]:
            cuts = tuple(int(c) for c in p.cuts[i])
            if cuts not in p.measured and gain[i] >= threshold:
                g = float(gain[i])
                scored.append((g / cost(o, cuts, float(mean[i])) if cost else g, o, cuts))
    model_best = (top[1], top[2], math.exp(top[0]))
    if first:
        return [(o, tuple(int(c) for c in p.cuts[int(np.argmax(preds[o][0]))])) for o, p in pools.items()], model_best
    top_measured = top[2] in pools[top[1]].measured or settled >= top[0] - threshold
    scored.sort(reverse=True)
    if top_measured and not scored:
        return [], model_best
    picks = [] if top_measured else [(top[1], top[2])]
    return _spread(scored, k, max(1, k // 2), picks), model_best


def _check_round(pools, preds, k: int, noise: float, cost: Callable[[str, tuple[int, ...], float], float]
                 ) -> list[tuple[str, tuple[int, ...]]]:
    """``k`` unmeasured tuples among the best predicted, none next to another: the model's best first, then
    those predicted within the noise of it, the cheapest to measure (``cost``: engines already built cost
    nothing) of them first, then the rest by predicted mean. Within the noise the model cannot rank them, and a
    PND-B tuple that shares a cut with a measured one builds one GPU engine instead of two; but its best is what
    the check tests (at 3 % noise the band held cheaper tuples than Yolov2 INT8's best, PND-B (12,38), which was
    never measured: the search answered PND-A (19), 0.98 of it)."""
    ranked = []
    for o, p in pools.items():
        mean = preds[o][0]
        for i in np.argsort(-mean)[:50]:
            cuts = tuple(int(c) for c in p.cuts[i])
            if cuts not in p.measured:
                ranked.append((float(mean[i]), o, cuts))
    if not ranked:
        return []
    ranked.sort(reverse=True)
    top, band = ranked[0], ranked[0][0] * (1 - noise)
    rest = sorted(ranked[1:], key=lambda r: (r[0] < band, cost(r[1], r[2], r[0]) if r[0] >= band else 0.0))   # stable
    return _spread(rest, k, k, [(top[1], top[2])])


def _local_round(pools, model: BoardModel, preds, incumbent: float, noise: float, k: int,
                 polished: set) -> list[tuple[str, tuple[int, ...]]]:
    """Unmeasured candidates one step along each cut axis from the best measured tuple of every option within
    three times the noise of the incumbent (log FPS), once per such tuple (``polished`` records them); a step
    is half the option's residual length scale, and one predicted (``preds``) more than ``LOCAL_REACH`` and two
    noises below the incumbent is left out. An option further below steps only outwards, where its best
    measured tuple is the last of three or more along an axis: its measurements rise towards an edge the model
    does not extrapolate past (Orin yolov4-csp FP16: PND-A rose from 150 to 233 FPS as its cut fell to 31, the
    model kept E's 254 best, and PND-A (23) runs 293)."""
    picks = []
    floor = math.exp(incumbent) * (1 - LOCAL_REACH - 2 * noise)     # FPS
    near = sorted(((max(p.measured.values()), o) for o, p in pools.items() if p.measured), reverse=True)
    for fps, o in near:
        p = pools[o]
        centre = max(p.measured, key=p.measured.get)
        step = max(2, round(model.lengths.get(o, model.length) / 2))
        if fps <= 0 or any(po == o and all(abs(a - b) < step for a, b in zip(pc, centre))
                           for po, pc in polished):
            continue        # a new best within a step of a polished one has the same neighbours
        within = math.log(fps) >= incumbent + math.log(1 - LOCAL_WITHIN * noise)
        ran = [c for c, v in p.measured.items() if v > 0]
        outward = {(i, sign) for i in range(len(centre)) for sign, edge in ((-1, min), (1, max))
                   if len(ran) >= 3 and centre[i] == edge(c[i] for c in ran)
                   and sum(c[i] == centre[i] for c in ran) == 1}
        if not within and not outward:
            continue
        polished.add((o, centre))
        for i in range(len(centre)):
            for sign in (-1, 1):
                if not within and (i, sign) not in outward:
                    continue
                for d in (step, step + 1, step - 1):       # the nearest candidate at about one step
                    cuts = centre[:i] + (centre[i] + sign * d,) + centre[i + 1:]
                    if cuts in p.measured:
                        break
                    if p.has(cuts):
                        if (i, sign) in outward or preds[o][0][p.row(cuts)] >= floor:
                            picks.append((o, cuts))
                        break
    return picks[:k]


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


FINALISTS = 2     # tuples handed to the fine-tuner
CONTENDERS = 4    # near-best measured tuples re-run to pick them
# the contenders are raced (``dse.search.race``) until a 1 % difference is resolved (or its rounds run out), not
# the fine-tuner's 2 %: they are tuples, and a tuple 1 % behind is what the fine-tuner cannot make up (Yolov4-csp
# INT8 on the Xavier at 1 % noise: PND-A (75), (77), (80) and (78), true 251.8-255.3 FPS, ranked on three re-runs
# each 254.2, 252.8, 252.4 and 250.2; (80) was left out and the answer, (77), was 0.988 of it); only pairs whose
# order changes the finalists are raced (Yolov4 INT8: PND-A (86) and (89), both finalists, took 12 re-runs each)
CONTENDER_RESOLUTION = 0.01


def _finalists(study: Study, pools, noise: float, repeats: int, earlier: Sequence[Measurement] = (),
               budget: RerunBudget | None = None) -> tuple[list[Measurement], list[dict]]:
    """The fine-tuner's starts: the best measured tuples (``CONTENDERS``, the best of each option first), and
    ``earlier`` measurements (the maximizer's best, at its own parameters), within three times the noise of the
    best tuple, ranked on fresh re-runs raced to ``CONTENDER_RESOLUTION`` (``repeats`` per batch; on the search's own
    sample when 0; ``budget`` bounds the batches), then ``FINALISTS`` of them within twice the noise of the first,
    again the best of each option first. A measurement, not a prediction, is what the search hands on, and which
    tuple tunes best only the fine-tuner finds out (its gains differ by option most)."""
    ranked = sorted(((fps, pools[o].config(cuts)) for o, p in pools.items() for cuts, fps in p.measured.items()
                     if fps > 0), key=lambda r: -r[0])
    if not ranked:
        return [], []
    floor = ranked[0][0] * (1 - 3 * noise)
    window = [(fps, config) for fps, config in ranked if fps >= floor]
    near = _option_first(window, lambda r: r[1].option)[:CONTENDERS]
    near += [(score(m), m.config) for m in earlier
             if m.ok and score(m) >= floor and all(m.config.hash != c.hash for _, c in near)]
    options = [config.option for _, config in near]

    def choose(means: Sequence[float]) -> list[int]:
        order = sorted(range(len(means)), key=lambda i: -means[i])
        return _option_first([i for i in order if means[i] >= means[order[0]] * (1 - 2 * noise)],
                             options.__getitem__)[:FINALISTS]

    runs, raced = race(study, [c for _, c in near], PHASE, repeats, noise, resolution=CONTENDER_RESOLUTION, pick=choose,
                 budget=budget)
    means = [float(mean) if r else fps for r, mean, (fps, _) in zip(runs, raced, near)]
    contenders = [{"option": config.option, "cuts": list(config.cuts), "config_hash": config.hash,
                   "search_fps": round(fps, 3), "reruns": [round(x, 3) for x in r], "mean": round(mean, 3)}
                  for (fps, config), r, mean in zip(near, runs, means)]
    order = sorted(range(len(near)), key=lambda i: -means[i])
    return [study.measure(near[i][1], PHASE) for i in choose(means)], [contenders[i] for i in order]


def _option_first(ranked: list, option_of: Callable) -> list:
    """``ranked`` (best first) with the best of each mapping option ahead of the rest: near-equal tuples of one
    option tune alike, and another option's best may gain more from the fine-tuner (PND-B's streams)."""
    seen: set = set()
    later = []                  # whether an entry's option came earlier in ``ranked``
    for r in ranked:
        later.append(option_of(r) in seen)
        seen.add(option_of(r))
    return [r for _, r in sorted(zip(later, ranked), key=lambda x: x[0])]    # stable: rank order kept within
