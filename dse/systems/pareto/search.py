"""Seed 001's search and its baseline, both judged on the board.

- ``nsga2``: NSGA-II (DEAP, ``selNSGA2(nd="log")``) over genomes of ``TangModel`` with the paper's settings (L172:
  population 5000, 100 generations, 5 % mutation; two-point crossover, 0.9 as the spec chooses), a one-gene
  mutation (L92), fitness = (phi1, phi2) from Eqs. 1-13; every non-dominated genome is kept.
- ``trt_baseline``: TensorRT = every task on the GPU with one host core, exhaustive over the host-CPU x GPU clock
  pairs (12 x 13 = 156 on TX2, L216).
- ``remeasure``: each point measured ``repeats`` times on the board with fresh noise, through the evaluator (the
  store's rows, its cache); fronts and hypervolumes are compared on those means, never on the model's numbers or a
  lucky sample.
"""
from __future__ import annotations

import random
import time

import numpy as np

from dse.core.errors import DseError
from dse.search.ga_common import pareto_mask
from dse.systems.pareto.model import TangModel

PHASE = "remeasure"      # the store's phase of every board measurement of this target


def nsga2(model: TangModel, ga) -> tuple[np.ndarray, dict]:
    """The non-dominated genomes [k, L] NSGA-II found (on the model; ``ga``: a ``dse.search.ga_common.GASettings``,
    the paper's in ``config/pareto/default.yaml``) and a log (evaluations, seconds, front
    hypervolume per generation in (-img/s, J/img) against the initial population's worst values)."""
    from deap import base, tools

    from dse.search.ga_common import min_types, run_moea

    _, individual = min_types(2)
    highs = model.genome_highs

    def new():
        return individual(random.randint(0, h) for h in highs)

    def mutate(ind):
        g = random.randrange(len(ind))
        ind[g] = random.randint(0, highs[g])
        return (ind,)

    def evaluate_batch(inds):
        obj = model.evaluate(np.array(inds, dtype=np.int64))
        return list(zip((-obj.fps).tolist(), obj.energy_j.tolist()))

    tb = base.Toolbox()
    tb.register("individual", new)
    tb.register("population", tools.initRepeat, list, tb.individual)
    tb.register("mate", tools.cxTwoPoint)
    tb.register("mutate", mutate)
    tb.register("evaluate", lambda ind: evaluate_batch([ind])[0])
    tb.register("evaluate_batch", evaluate_batch)
    log: dict = {}
    t0 = time.perf_counter()
    front, history = run_moea(tb, ga, "tang-nsga2", selector="nsga2", log=log)
    log.update(seconds=time.perf_counter() - t0, hypervolume=history)
    return np.array([list(ind) for ind in front], dtype=np.int64), log


def trt_baseline(model: TangModel) -> np.ndarray:
    """Genomes of the TensorRT reference at every (host CPU level, GPU level); the other clusters at the same
    level index (idle: their clock costs only their idle power)."""
    b = model.board
    out = []
    for i in range(len(model.levels[model.host_cluster])):
        for j in range(len(model.gpu_levels)):
            out.append([*b.gpu_only, *([min(i, len(lv) - 1) for lv in model.levels]), j])
    return np.array(out, dtype=np.int64)


def remeasure(evaluator, model: TangModel, genomes, repeats: int = 5, *, strategy: str,
              ) -> tuple[np.ndarray, np.ndarray]:
    """Board means over ``repeats`` noisy measurements of each genome: (fps [k], J/image [k]). ``evaluator``: a
    ``dse.evaluate.Evaluator`` of a ``ClockedBackend`` on ``model``'s board; the i-th genome draws from noise
    stream i, and ``strategy`` names the batch in the store."""
    if repeats < 1:
        raise DseError(f"repeats must be >= 1, got {repeats}")
    genomes = np.atleast_2d(genomes)
    configs = [evaluator.backend.configuration(*model.decode(g), stream=i) for i, g in enumerate(genomes)]
    runs = evaluator.evaluate_many([(c, r) for c in configs for r in range(repeats)], phase=PHASE, strategy=strategy)
    fps, energy = [], []
    for i, g in enumerate(genomes):
        mine = runs[i * repeats:(i + 1) * repeats]
        failed = [m for m in mine if not m.ok]
        if failed:
            raise DseError(f"the board answered {failed[0].status} for genome {g.tolist()}: {failed[0].reason}")
        fps.append(np.mean([m.fps for m in mine]))
        energy.append(np.mean([m.energy_j_per_frame for m in mine]))
    return np.array(fps), np.array(energy)


def hypervolume(fps, energy, ref: tuple[float, float]) -> float:
    """Area dominated in (img/s up, J/img down) up to ``ref`` = (min img/s, max J/img)."""
    from dse.search.ga_common import hypervolume_2d

    return hypervolume_2d([(-f, e) for f, e in zip(fps, energy)], (-ref[0], ref[1]))


def dominates_front(a_fps, a_e, b_fps, b_e, tol: float = 0.0) -> float:
    """Share of front B's points that front A dominates or equals (within ``tol`` relative)."""
    a_fps, a_e = np.asarray(a_fps), np.asarray(a_e)
    ok = [bool(((a_fps >= f * (1 - tol)) & (a_e <= e * (1 + tol))).any()) for f, e in zip(b_fps, b_e)]
    return float(np.mean(ok)) if ok else 1.0


__all__ = ["PHASE", "dominates_front", "hypervolume", "nsga2", "pareto_mask",
           "remeasure", "trt_baseline"]
