"""The GA scheduler of 002 (Sec. V-B) with the operators of 004 (L212-225), spec 3.4: one gene per task (its
PE id), clustered + random initialization, tournament selection, uniform crossover, multi-flip mutation,
generational replacement and a one-bit-flip local search on the best individual each generation (004's
``eaSimpleWithLocalSearch``: the memetic step that makes the GA competitive with the ILP).

Fitness = the AnalyticModel's period (+ penalty in penalty mode), computed for the whole population in one
vectorized call; the local search uses ``Incremental`` (O(deg) per move). The two-objective variant (period,
energy) keeps a Pareto archive under SPEA2 selection (002 L245). Runs are seeded (DEAP draws from ``random``,
seeded per run) and stop at ``generations``, ``stall`` or an evaluation budget (full evaluations; local-search
moves are counted apart).
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace

import numpy as np
from deap import base, tools

from dse.taskgraph.errors import LayerMapError
from dse.taskgraph.model import AnalyticModel, Incremental
from dse.search.ga_common import GASettings, min_types, run_ga, run_moea


@dataclass(frozen=True)
class Preset:
    """GA parameters. 002 and 004 give none (spec 6.2 #14 suggests population 200, 300 generations, cxpb 0.8,
    mutpb 0.3, tournament 3, gene flip probability 2/n, stall 30, half the initial population clustered).
    One run's answer depends on its seed by up to 7 % on 004's capped instances (it converges into one basin),
    so the GA runs ``restarts`` times with different seeds and keeps the best. Three runs of population 400 and
    stall 50 came within 2 % of every optimal ILP of the Fig. 14 bench (12 instances) and of the default
    ``layermap`` target (20); one run of population 400 and stall 100 missed 7 of the 12 by up to 7 %, three of
    population 200 one of the 20 (by 2.3 %)."""

    population: int = 400
    generations: int = 300
    cxpb: float = 0.8
    mutpb: float = 0.3
    tournament: int = 3
    indpb: float | None = None          # None: 2 / n_tasks
    stall: int = 50
    clustered: float = 0.5              # share of clustered initial individuals (004 L256)
    local_search: bool = True
    restarts: int = 3                   # independent runs, best kept (one run's answer varies up to 7 % by seed)
    charge: str = "sender"              # the comm charge the paper's model uses (002 Eq. 7 / 004 L290)


FINALISTS = 8       # distinct best mappings a single-objective run reports (``GaResult.finalists``)

PRESETS = {"kang2020": Preset(), "ha2018": Preset(charge="receiver")}


def preset(name: str, **overrides) -> Preset:
    """A named preset with some fields replaced (e.g. ``generations=50`` in tests)."""
    if name not in PRESETS:
        raise LayerMapError(f"unknown GA preset {name!r}; valid choices: {', '.join(PRESETS)}")
    bad = [k for k in overrides if k not in Preset.__dataclass_fields__]
    if bad:
        raise LayerMapError(f"unknown GA preset field(s) {bad}; valid: {', '.join(Preset.__dataclass_fields__)}")
    return replace(PRESETS[name], **overrides)


@dataclass
class GaResult:
    """Best mapping and its fitness (single objective) or the Pareto set (two objectives)."""

    mapping: np.ndarray
    fitness: float
    history: list[float]
    evaluations: int
    moves: int
    generations: int
    seconds: float
    pareto: list[tuple[np.ndarray, tuple[float, float]]] = field(default_factory=list)
    #: ``mapping`` and the next distinct best mappings of all restarts (``FINALISTS`` in all): what to measure
    finalists: list[tuple[np.ndarray, float]] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"mapping": self.mapping.tolist(), "fitness": self.fitness, "evaluations": self.evaluations,
                "moves": self.moves, "generations": self.generations, "seconds": self.seconds,
                "history": self.history, "pareto": [(m.tolist(), list(f)) for m, f in self.pareto],
                "finalists": [(m.tolist(), f) for m, f in self.finalists]}


def _fitness(model: AnalyticModel, maps) -> np.ndarray:
    ev = model.evaluate(maps)
    return np.asarray(ev.period + ev.penalty, dtype=float)


def _toolbox(model: AnalyticModel, p: Preset, individual) -> base.Toolbox:
    n, P = model.n, model.P
    indpb = p.indpb if p.indpb is not None else min(1.0, 2.0 / max(n, 1))

    def random_ind():
        return individual(random.randrange(P) for _ in range(n))

    def clustered_ind():
        """Adjacent genes share a PE: S ~ U{1..2P} segments, each on a random PE."""
        s = min(n, random.randint(1, 2 * P))
        cuts = sorted(random.sample(range(1, n), s - 1)) if s > 1 else []
        genes = []
        for a, b in zip([0] + cuts, cuts + [n]):
            genes += [random.randrange(P)] * (b - a)
        return individual(genes)

    tb = base.Toolbox()
    tb.register("individual", lambda: clustered_ind() if random.random() < p.clustered else random_ind())
    tb.register("population", tools.initRepeat, list, tb.individual)
    tb.register("mate", tools.cxUniform, indpb=0.5)
    tb.register("mutate", tools.mutUniformInt, low=0, up=P - 1, indpb=indpb)
    tb.register("select", tools.selTournament, tournsize=p.tournament)
    return tb


def local_search(model: AnalyticModel, genes) -> tuple[list[int], float, int]:
    """One-bit-flip local optimization (004 ``one_bit_flip_local_optimization`` + ``calc_delta``): try every
    task on every other PE, keep a move that lowers period + penalty (first improvement), repeat until no
    move helps; then try moving each run (a maximal range of consecutive tasks on one PE) whole to another PE,
    and flip again after the best run move that helps.

    Ties on the period are broken by the sum of squared PE loads: where two PEs share the bottleneck, no single
    move lowers the period, but one that unloads one of them without raising it is the first step of one that
    does. Run moves reach what flips cannot: a GPU range in the middle of CPU work costs two transfers, and
    moving its tasks one by one raises the period at every step. The pair (score, sum of squares) strictly
    decreases, so the search ends. Returns (genes, fitness, moves tried)."""
    m = np.asarray(genes, dtype=np.int64)
    moves = 0
    while True:
        m, cur, tried = _flip_descent(model, m)
        moves += tried
        cand = _run_moves(m, model.P)
        if not len(cand):
            break
        moves += len(cand)
        ev = model.evaluate(cand)
        vals, sq = ev.period + ev.penalty, _spread(ev.loads)
        better = _improves(vals, sq, cur)
        if not better.any():
            break
        idx = np.flatnonzero(better)
        m = cand[idx[np.lexsort((sq[idx], vals[idx]))[0]]]
    return m.tolist(), cur[0], moves


def _flip_descent(model: AnalyticModel, m: np.ndarray) -> tuple[np.ndarray, tuple[float, float], int]:
    """First-improvement one-bit flips until none helps (lexicographic score, see ``local_search``)."""
    inc = Incremental(model, m)
    cur = _score(inc)
    moves, improved = 0, True
    while improved:
        improved = False
        for t in range(model.n):
            home = int(inc.m[t])
            for pe in range(model.P):
                if pe == home:
                    continue
                inc.move(t, pe)
                moves += 1
                val = _score(inc)
                if _improves(*val, cur):
                    inc.commit()
                    cur, home, improved = val, pe, True
                else:
                    inc.undo()
    return inc.m.copy(), cur, moves


def _run_moves(m: np.ndarray, P: int) -> np.ndarray:
    """Every mapping that puts one run of ``m`` (maximal range of consecutive tasks on one PE) on another PE."""
    starts = np.flatnonzero(np.r_[True, m[1:] != m[:-1]])
    ends = np.r_[starts[1:], len(m)]
    out = [np.where((np.arange(len(m)) >= a) & (np.arange(len(m)) < b), pe, m)
           for a, b in zip(starts, ends) for pe in range(P) if pe != m[a]]
    return np.array(out, dtype=np.int64).reshape(len(out), len(m))


def _score(inc: Incremental) -> tuple[float, float]:
    """(period + penalty, sum of squared PE loads): the local search's lexicographic objective."""
    ev = inc.evaluation
    return float(ev.period + ev.penalty), float(_spread(inc.loads))


def _spread(loads) -> np.ndarray:
    """Sum of squared PE loads over the last axis (an unsupported PE's inf or nan load counts as inf)."""
    loads = np.where(np.isfinite(loads), loads, np.inf)
    return (loads * loads).sum(axis=-1)


def _improves(score, spread, cur: tuple[float, float]):
    """Whether (score, spread) is lexicographically below ``cur``: a lower score, or an equal one with a lower
    spread (scalars or arrays)."""
    tol = 1e-9 * max(1.0, abs(cur[0]))
    return (score < cur[0] - tol) | ((score <= cur[0] + tol) & (spread < cur[1] * (1 - 1e-12)))


def run_layer_ga(model: AnalyticModel, preset_name: str = "kang2020", *, seed: int = 0, budget: int | None = None,
                 objectives: str = "period", **overrides) -> GaResult:
    """Best mapping of ``model`` by the preset's GA; ``objectives="period+energy"``: SPEA2 Pareto set
    (needs the model's ``p_busy``). ``budget``: fitness evaluations (default: population x (generations + 1))."""
    p = preset(preset_name, **overrides)
    if objectives not in ("period", "period+energy"):
        raise LayerMapError(f"unknown GA objectives {objectives!r}; valid choices: period, period+energy")
    if budget is not None and budget < p.population:
        raise LayerMapError(f"GA budget {budget} is below one population ({p.population})")
    ga = GASettings(population=p.population, generations=p.generations, cxpb=p.cxpb, mutpb=p.mutpb,
                    tournament=p.tournament, stall=p.stall, seed=seed)
    t0 = time.perf_counter()
    log: dict = {}
    if objectives == "period+energy":
        return _run_pareto(model, p, ga, budget, t0)
    if p.restarts < 1:
        raise LayerMapError(f"GA restarts must be >= 1, got {p.restarts}")
    _, individual = min_types(1)
    tb = _toolbox(model, p, individual)
    tb.register("evaluate_batch", lambda inds: [(float(f),) for f in _fitness(model, np.array(inds))])
    moves = [0]
    last: list = [None]

    def memetic(pop):
        best = min(pop, key=lambda ind: ind.fitness.values[0])
        if list(best) == last[0] or not np.isfinite(best.fitness.values[0]):
            return
        genes, fit, tried = local_search(model, best)
        moves[0] += tried
        best[:] = genes
        best.fitness.values = (fit,)
        last[0] = list(genes)

    finals = tools.HallOfFame(FINALISTS)      # apart from run_ga's, whose single best keeps the first of ties

    def generation(pop, hof):
        if p.local_search:
            memetic(pop)
        finals.update(pop)

    best_ind, history, evaluations, generations = None, [], 0, 0
    for r in range(p.restarts):
        last[0] = None
        share = None if budget is None else max(p.population, (budget - evaluations) // (p.restarts - r))
        salt = f"layermap-{preset_name}" + (f"-r{r}" if r else "")
        hof, hist = run_ga(tb, ga, salt, budget=share, hook=generation, log=log)
        if best_ind is None or hof[0].fitness.values[0] < best_ind.fitness.values[0]:
            best_ind = hof[0]
        floor = history[-1] if history else float("inf")
        history += [min(floor, h) for h in hist]
        evaluations += log["evaluations"]
        generations += log["generations"]
        if budget is not None and evaluations >= budget:
            break
    others = [ind for ind in finals if list(ind) != list(best_ind)]
    finalists = [(np.array(ind, dtype=np.int64), float(ind.fitness.values[0])) for ind in [best_ind, *others]]
    return GaResult(finalists[0][0], finalists[0][1], history, evaluations, moves[0], generations,
                    time.perf_counter() - t0, finalists=finalists[:FINALISTS])


def _run_pareto(model: AnalyticModel, p: Preset, ga: GASettings, budget, t0) -> GaResult:
    """(period + penalty, energy + penalty x 1e-6 J/us) minimized under SPEA2; the archive is the answer."""
    if model.p_busy is None:
        raise LayerMapError("the period+energy GA needs a model with p_busy (per-PE busy power)")
    _, individual = min_types(2)
    tb = _toolbox(model, p, individual)

    def batch(inds):
        ev = model.evaluate(np.array(inds))
        return list(zip((ev.period + ev.penalty).tolist(), (ev.energy_j + ev.penalty * 1e-6).tolist()))

    tb.register("evaluate_batch", batch)
    log: dict = {}
    front, history = run_moea(tb, ga, "layermap-spea2", "spea2", budget=budget, log=log)
    pareto = sorted(((np.array(ind, dtype=np.int64), tuple(ind.fitness.values)) for ind in front),
                    key=lambda t: t[1])
    best_map, best_fit = pareto[0]
    return GaResult(best_map, float(best_fit[0]), history, log["evaluations"], 0, log["generations"],
                    time.perf_counter() - t0, pareto)


__all__ = ["Preset", "PRESETS", "preset", "GaResult", "run_layer_ga", "local_search"]
