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

from dse.layermap.errors import LayerMapError
from dse.layermap.evaluate import AnalyticModel, Incremental
from dse.search.ga_common import GASettings, min_types, run_ga, run_moea


@dataclass(frozen=True)
class Preset:
    """GA parameters. 002 and 004 give none (spec 6.2 #14 suggests population 200, 300 generations, cxpb 0.8,
    mutpb 0.3, tournament 3, gene flip probability 2/n, stall 30, half the initial population clustered).
    Population 400 and stall 100 here: with 200/30 the GA ended 1-3 % above the optimal clustered ILP on MobileNet v1
    (galaxy-s9-sim, (3,1) at caps 70 % and 60 %); with 400/100 it matched or beat it on all five instances tried,
    in about 40,000 evaluations (2 s)."""

    population: int = 400
    generations: int = 300
    cxpb: float = 0.8
    mutpb: float = 0.3
    tournament: int = 3
    indpb: float | None = None          # None: 2 / n_tasks
    stall: int = 100
    clustered: float = 0.5              # share of clustered initial individuals (004 L256)
    local_search: bool = True
    charge: str = "sender"              # the comm charge the paper's model uses (002 Eq. 7 / 004 L290)


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

    def to_dict(self) -> dict:
        return {"mapping": self.mapping.tolist(), "fitness": self.fitness, "evaluations": self.evaluations,
                "moves": self.moves, "generations": self.generations, "seconds": self.seconds,
                "history": self.history, "pareto": [(m.tolist(), list(f)) for m, f in self.pareto]}


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


def local_search(model: AnalyticModel, genes, fitness: float | None = None) -> tuple[list[int], float, int]:
    """One-bit-flip local optimization (004 ``one_bit_flip_local_optimization`` + ``calc_delta``): try every
    task on every other PE, keep a move that lowers period + penalty (first improvement), repeat until no
    move helps. Returns (genes, fitness, moves tried)."""
    inc = Incremental(model, np.asarray(genes, dtype=np.int64))
    cur = _score(inc) if fitness is None else fitness
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
                if val < cur - 1e-9 * max(1.0, abs(cur)):
                    inc.commit()
                    cur, home, improved = val, pe, True
                else:
                    inc.undo()
    return inc.m.tolist(), cur, moves


def _score(inc: Incremental) -> float:
    ev = inc.evaluation
    return float(ev.period + ev.penalty)


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
    _, individual = min_types(1)
    tb = _toolbox(model, p, individual)
    tb.register("evaluate_batch", lambda inds: [(float(f),) for f in _fitness(model, np.array(inds))])
    moves = [0]
    last: list = [None]

    def memetic(pop, hof):
        best = min(pop, key=lambda ind: ind.fitness.values[0])
        if list(best) == last[0] or not np.isfinite(best.fitness.values[0]):
            return
        genes, fit, tried = local_search(model, best, best.fitness.values[0])
        moves[0] += tried
        best[:] = genes
        best.fitness.values = (fit,)
        last[0] = list(genes)

    hof, history = run_ga(tb, ga, f"layermap-{preset_name}", budget=budget,
                          hook=memetic if p.local_search else None, log=log)
    best = np.array(hof[0], dtype=np.int64)
    return GaResult(best, float(hof[0].fitness.values[0]), history, log["evaluations"], moves[0],
                    log["generations"], time.perf_counter() - t0)


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
