"""Step 1 (thesis 4.4.1, l. 1167-1202): the Pareto-optimal pipeline mappings of one network alone.

A candidate is a mapping option (A-E of Table 4.3) with a cut tuple, run with one frame in flight. Its objectives
(all minimized) are the average latency and, per processor (GPU, DLAs):
- ``energy`` (Ch. 4, l. 1169): the dynamic energy per frame. In a fixed-period run each processor's average
  power is P_static + e_dyn / T, so they rank like the thesis' "average power of each processor" (spec 2.6 #2);
- ``time`` (Ch. 5, eq. 5.1): the execution time per frame. Candidates whose DLA stage falls back to the GPU are rejected: the
analysis assumes one task per DLA stage (l. 1188, 1194). Small spaces are enumerated (the exact front); larger
ones are searched with the thesis' GA (uniform crossover, one-point mutation, random parents in Ch. 4,
lexicase in Ch. 5, l. 1824) with NSGA-II survivors and an archive of every evaluated candidate. Each front member is then profiled task by task (per-kernel
GPU times, one time per DLA stage, CPU pre/post) for its WCETs.

Every profile is a board measurement through the evaluator (``dse.systems.multi.backend``): the search profiles
each candidate it looks at and then records them all in one write (the GA asks for one candidate at a time, and a
rewrite of the job's file per candidate would cost more than the profiles).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dse.core.configuration import Configuration
from dse.core.errors import DseError, choices_error

OBJECTIVE_SETS = {"energy": ("latency_us", "e_gpu_j", "e_dla_j"), "time": ("latency_us", "et_gpu_us", "et_dla_us")}
METRICS = ("latency_us", "e_gpu_j", "e_dla_j", "et_gpu_us", "et_dla_us", "e_cpu_j")
SELECTIONS = ("random", "lexicase")


@dataclass
class Candidate:
    option: str
    cuts: tuple[int, ...]
    objectives: tuple[float, ...] | None     # None: rejected (reason)
    reason: str = ""
    n_dla: int = 0
    metrics: dict[str, float] | None = None  # every METRICS value (the objectives are some of them)


def objective_names(settings) -> tuple[str, ...]:
    name = settings.pareto.get("objectives", "energy")
    if name not in OBJECTIVE_SETS:
        raise choices_error("pareto.objectives", name, OBJECTIVE_SETS)
    return OBJECTIVE_SETS[name]


def config_of(backend, option: str, cuts, settings) -> Configuration:
    n = len(cuts) + 1
    return Configuration(benchmark=backend.settings.benchmark, platform=backend.platform.name, option=option,
                         cuts=tuple(cuts), streams=(1,) * n, buffers=1, precision=settings.precision, batch=1,
                         input_size=settings.input_size, model_digest=getattr(backend.analysis, "digest", ""))


PROFILES = {"objectives": ("objective_runs", 20), "wcet": ("runs", 300)}   # profile -> (its runs' key, default)


def profile_evaluator(backend, settings, profile: str, store=None):
    """The evaluator of one of a network's step-1 profiles: a candidate's short one (``objectives``, at
    ``objective_runs``) or a front member's WCET profile (``wcet``, at ``runs``), recording into ``store`` (None: in
    memory only)."""
    from dse.evaluate import Evaluator
    from dse.systems.multi.backend import TaskProfileBackend

    key, default = PROFILES[profile]
    profiler = TaskProfileBackend(backend, int(settings.pareto.get(key, default)),
                                  settings.pareto.get("wcet_rule", "max6sigma"))
    return Evaluator(profiler, store, seed=backend.settings.seed, context=profiler.context)


def evaluators(backend, settings, store=None):
    """(objectives, wcet): both step-1 evaluators of a network over one store."""
    return tuple(profile_evaluator(backend, settings, p, store) for p in PROFILES)


def evaluate_candidate(profiler, option: str, cuts, settings) -> Candidate:
    """Objectives of one candidate from its short task profile (``profiler``: a
    ``dse.systems.multi.backend.TaskProfileBackend``), or why it is rejected."""
    cfg = config_of(profiler.board, option, cuts, settings)
    n_dla = sum(1 for s in profiler.platform.options[option].stages if s.pe_type == "dla")
    reason, prof = profiler.take_profile(cfg)
    if reason:
        return Candidate(option, tuple(cuts), None, reason, n_dla)
    e, busy = prof.energy_j, prof.busy_us
    m = {"latency_us": float(prof.latency_us), "e_gpu_j": float(e.get("gpu", 0.0)), "e_dla_j": float(e.get("dla", 0.0)),
         "et_gpu_us": float(busy.get("gpu", 0.0)), "et_dla_us": float(busy.get("dla", 0.0)),
         "e_cpu_j": float(e.get("cpu", 0.0))}
    return Candidate(option, tuple(cuts), tuple(m[k] for k in objective_names(settings)), n_dla=n_dla, metrics=m)


def nondominated(points: np.ndarray) -> np.ndarray:
    """Indices of the points no other point dominates (all objectives minimized; duplicates keep the first)."""
    order = np.lexsort(points.T[::-1])
    keep: list[int] = []
    for i in order:
        p = points[i]
        if not any(np.all(points[j] <= p) for j in keep):
            keep.append(int(i))
    return np.array(sorted(keep), dtype=int)


def candidate_space(analysis, platform, options) -> dict[str, int]:
    """Option -> number of cut tuples over the network's feasible positions (an upper bound: some are infeasible)."""
    from math import comb

    n = len(analysis.feasible_cuts)
    return {o: comb(n, len(platform.options[o].stages) - 1) for o in options}


def enumerate_candidates(analysis, platform, options):
    for o in options:
        k = len(platform.options[o].stages) - 1
        for cuts in itertools.combinations(analysis.feasible_cuts, k):
            if analysis.check_cuts(list(cuts)) is None:
                yield o, cuts


def search_front(profiler, settings, *, progress=None) -> tuple[list[Candidate], dict]:
    """Every candidate evaluated (exhaustive mode) or every one the GA evaluated, and a summary of the search;
    ``profiler`` profiles them (the objectives evaluator's backend)."""
    analysis, platform = profiler.board.analysis, profiler.platform
    options = list(settings.pareto.get("options") or ["A", "B", "C", "D", "E"])
    sizes = candidate_space(analysis, platform, options)
    total = sum(sizes.values())
    limit = int(settings.pareto.get("exhaustive_max", 20000))
    if total <= limit:
        cands = [evaluate_candidate(profiler, o, c, settings)
                 for o, c in _progress(enumerate_candidates(analysis, platform, options), total, progress)]
        return cands, {"mode": "exhaustive", "space": total, "evaluated": len(cands)}
    return _ga_front(profiler, settings, options, total, progress)


def _progress(it, total, progress):
    for i, x in enumerate(it):
        if progress is not None and i % 200 == 0:
            progress(i, total)
        yield x


def _ga_front(profiler, settings, options, total, progress) -> tuple[list[Candidate], dict]:
    """The thesis' step-1 GA: chromosome [c1, c2, c3, option] over the feasible cut positions (l. 1188-1192)."""
    from deap import tools

    from dse.search.ga_common import min_types, pairs_toolbox, repair_cuts, run_pairs
    from dse.search.space import SearchSpace

    analysis, platform = profiler.board.analysis, profiler.platform
    space = SearchSpace(n_layers=len(analysis.layers), feasible_cuts=analysis.feasible_cuts,
                        check_cuts=lambda c: analysis.check_cuts(list(c)),
                        stage_pe_types={o: [s.pe_type.upper() for s in platform.options[o].stages] for o in options})
    pos = space.feasible_cuts
    memo: dict[tuple, Candidate] = {}

    def decode(ind) -> tuple[str, tuple[int, ...]] | None:
        option = options[ind[3]]
        k = space.n_cuts(option)
        wanted = sorted({pos[g] for g in ind[:3]})[:k]
        cuts = tuple(wanted) if len(wanted) == k and space.feasibility(wanted) is None else \
            repair_cuts(space, [pos[g] for g in ind[:3]][:k], k)
        return None if cuts is None else (option, tuple(cuts))

    n_obj = len(objective_names(settings))
    selection = settings.pareto.get("selection", "random")
    if selection not in SELECTIONS:
        raise choices_error("pareto.selection", selection, SELECTIONS)

    def evaluate(ind):
        key = decode(ind)
        if key is None:
            return (float("inf"),) * n_obj
        if key not in memo:
            memo[key] = evaluate_candidate(profiler, *key, settings)
            if progress is not None and len(memo) % 200 == 0:
                progress(len(memo), None)
        c = memo[key]
        return c.objectives if c.objectives is not None else (float("inf"),) * n_obj

    _, ind_t = min_types(n_obj)
    sizes = [len(pos)] * 3 + [len(options)]
    select = tools.selRandom if selection == "random" else tools.selLexicase
    toolbox = pairs_toolbox(sizes, ind_t, evaluate, select, tools.selNSGA2)
    pop_n = int(settings.pareto.get("population", 65))
    out = run_pairs(toolbox, pop_n, int(settings.pareto.get("generations", 200)), settings.ga.get("seed", 0),
                    f"pareto:{profiler.settings.benchmark}")
    return list(memo.values()), {"mode": "ga", "space": total, "evaluated": len(memo),
                                 "generations": out.generations, "population": pop_n}


def candidates_frame(network: str, cands: list[Candidate], front: list[Candidate]) -> pd.DataFrame:
    """Every evaluated candidate (the board measurements of step 1): its metrics or why it was rejected."""
    on_front = {(c.option, c.cuts) for c in front}
    return pd.DataFrame([{"network": network, "option": c.option, "cuts": list(c.cuts), "n_dla": c.n_dla,
                          **{k: (c.metrics or {}).get(k) for k in METRICS},
                          "rejected": c.reason, "pareto": (c.option, c.cuts) in on_front} for c in cands])


def step1(objectives, wcet, settings, *, progress=None) -> tuple[pd.DataFrame, pd.DataFrame, dict, pd.DataFrame]:
    """(pareto, tasks, summary, candidates) of one network: one row per Pareto mapping, one row per task of each,
    one row per evaluated candidate. ``objectives``, ``wcet``: the evaluators of ``evaluators``."""
    profiler = objectives.backend
    backend = profiler.board
    cands, summary = search_front(profiler, settings, progress=progress)
    objectives.evaluate_many([(config_of(backend, c.option, c.cuts, settings), 0) for c in cands],
                             phase="objectives", strategy=summary["mode"])
    ok = [c for c in cands if c.objectives is not None]
    summary.update(feasible=len(ok), rejected=len(cands) - len(ok))
    if not ok:
        reasons = sorted({c.reason for c in cands})[:3]
        raise DseError(f"{backend.settings.benchmark}: no mapping candidate runs without DLA fallback "
                       f"({'; '.join(reasons)})")
    front = [ok[i] for i in nondominated(np.array([c.objectives for c in ok]))]
    front.sort(key=lambda c: c.objectives)
    configs = [config_of(backend, c.option, c.cuts, settings) for c in front]
    wcet.evaluate_many([(cfg, 0) for cfg in configs], phase="wcet", strategy=summary["mode"])
    prow, trows = [], []
    for mid, (c, cfg) in enumerate(zip(front, configs)):
        _, prof = wcet.backend.take_profile(cfg)
        stages = prof.to_stage_models()
        dla_wcets = [s.wcet_us for s in stages if s.kind == "dla"]
        prow.append({"network": backend.settings.benchmark, "mapping": mid, "option": c.option,
                     "cuts": list(c.cuts), "n_dla": c.n_dla, **c.metrics, "acet_us": float(prof.latency_us),
                     "wcet_us": float(sum(s.wcet_us for s in stages)),
                     "max_dla_wcet_us": max(dla_wcets) if dla_wcets else 0.0,
                     **{f"busy_{k}_us": float(v) for k, v in prof.busy_us.items()},
                     **{f"e_{k}_full_j": float(v) for k, v in prof.energy_j.items()}})
        for r in prof.records():
            trows.append({"network": backend.settings.benchmark, "mapping": mid, **r})
    summary.update(pareto=len(front), share=len(front) / max(1, len(ok)))
    return pd.DataFrame(prow), pd.DataFrame(trows), summary, \
        candidates_frame(backend.settings.benchmark, cands, front)


def task_chains(tasks: pd.DataFrame) -> tuple[list[tuple], list[tuple]]:
    """One network's ``tasks.parquet`` read back, per mapping id: its stage chain for the analysis
    (``dse.rt.model.Stage``: WCET/ACET/BCET at fmax) and for the periodic simulation (``PeriodicStage``: the
    noise-free base times the simulation draws around)."""
    from dse.backends.sim.periodic import PeriodicStage
    from dse.rt.model import Stage, Task

    n = int(tasks.mapping.max()) + 1
    chains: list = [None] * n
    bases: list = [None] * n
    for mid, gm in tasks.sort_values(["mapping", "stage", "kernel"]).groupby("mapping", sort=True):
        stages = list(gm.groupby("stage", sort=True))
        chains[int(mid)] = tuple(
            Stage(str(gs.kind.iloc[0]), tuple(Task(float(r.wcet_us), float(r.acet_us), float(r.bcet_us))
                                              for r in gs.itertuples()), str(gs.label.iloc[0])) for _, gs in stages)
        bases[int(mid)] = tuple(PeriodicStage(str(gs.kind.iloc[0]), tuple(float(x) for x in gs.base_us),
                                              str(gs.label.iloc[0])) for _, gs in stages)
    return chains, bases
