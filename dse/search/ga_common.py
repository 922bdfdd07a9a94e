"""What every genetic algorithm shares: settings, DEAP types, the seeded global ``random``, the stall rule, the
loops and cut repair.

DEAP does selection, crossover and mutation; the loops around it are
- ``run_ga``: DEAP's generational loop (what ``algorithms.eaSimple`` does), one objective;
- ``run_moea``: mu + lambda with SPEA2 or NSGA-II survivors, two or more objectives;
- ``run_pairs``: the genome GA of thesis Ch. 4 and 5: parents in pairs, two children per pair by uniform
  crossover and one resampled gene each, then a survival function (the best distinct genomes, or NSGA-II).
  ``evolve_genomes`` is its one-objective form: lexicase parents and the exhaustive shortcut.
"""
from __future__ import annotations

import itertools
import math
import random
from bisect import bisect_left
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np

from deap import algorithms, base, creator, tools

from dse.core.errors import DseError
from dse.core.validate import check_sizes
from dse.search.settings import SearchSettings
from dse.search.space import SearchSpace, stage_width


@dataclass(frozen=True)
class GASettings:
    """Population, generations and DEAP's crossover/mutation probabilities (small defaults: tests).

    ``stall``: stop once the best fitness has not improved for this many generations (0: run them all),
    so a GA that converged does not keep spending board time on the configurations it already knows."""

    population: int = 16
    generations: int = 10
    cxpb: float = 0.6
    mutpb: float = 0.3
    tournament: int = 3
    stall: int = 0
    seed: int = 0

    def __post_init__(self):
        check_sizes(vars(self), "GA", {"population": 2, "generations": 0, "stall": 0})
        if not (0 <= self.cxpb <= 1 and 0 <= self.mutpb <= 1):
            raise DseError(f"GA probabilities must be in [0, 1], got cxpb={self.cxpb} mutpb={self.mutpb}")

    @classmethod
    def from_dict(cls, d: Mapping | None, **defaults) -> "GASettings":
        d = {**defaults, **dict(d or {})}
        valid = set(cls.__dataclass_fields__)
        bad = [k for k in d if k not in valid]
        if bad:
            raise DseError(f"unknown GA setting(s) {bad}; valid: {', '.join(sorted(valid))}")
        return cls(**d)

    def to_dict(self) -> dict:
        return asdict(self)


def deap_types():
    """``creator.FitnessMax`` and ``creator.Individual`` (a list), created once per process."""
    if not hasattr(creator, "DseFitnessMax"):
        creator.create("DseFitnessMax", base.Fitness, weights=(1.0,))
    if not hasattr(creator, "DseIndividual"):
        creator.create("DseIndividual", list, fitness=creator.DseFitnessMax)
    return creator.DseFitnessMax, creator.DseIndividual


def min_types(n_obj: int = 1):
    """Fitness/individual types minimizing ``n_obj`` objectives (weights -1 each), created once per process."""
    return _list_types("Min", -1.0, n_obj)


def max_types(n_obj: int = 1):
    """Fitness/individual types maximizing ``n_obj`` objectives (weights +1 each), created once per process."""
    return _list_types("Max", 1.0, n_obj)


def _list_types(direction: str, weight: float, n_obj: int):
    fit, ind = f"DseFitness{direction}{n_obj}", f"DseIndividual{direction}{n_obj}"
    if not hasattr(creator, fit):
        creator.create(fit, base.Fitness, weights=(weight,) * n_obj)
    if not hasattr(creator, ind):
        creator.create(ind, list, fitness=getattr(creator, fit))
    return getattr(creator, fit), getattr(creator, ind)


@contextmanager
def seeded(seed: int | str, salt: str) -> Iterator[None]:
    """The global ``random`` seeded with ``f"{seed}:{salt}"`` inside the block, its previous state restored after:
    DEAP draws from the global generator, so a run repeats whatever ran before it and disturbs nothing after."""
    state = random.getstate()
    random.seed(f"{seed}:{salt}")
    try:
        yield
    finally:
        random.setstate(state)


@dataclass
class StallRule:
    """"Stop after ``limit`` generations without improvement" (0: never), with the direction of better: a GA
    that converged stops spending evaluations on what it already knows."""

    limit: int
    maximize: bool
    since: int = 0          # generations since the best last improved

    def better(self, a: float, b: float) -> bool:
        return a > b if self.maximize else a < b

    def rank(self, value: float) -> float:
        """Sort key that puts the best value first."""
        return -value if self.maximize else value

    def stop(self, best: float, previous: float) -> bool:
        """Count one generation whose best is ``best`` (``previous`` the one before); True once the run should end."""
        self.since = 0 if self.better(best, previous) else self.since + 1
        return bool(self.limit) and self.since >= self.limit


def stream_cap(stage_type: str, bounds: Mapping[str, int], settings: SearchSettings, main_pe: str) -> int:
    """Largest stream count the GAs try for a stage: the maximizer's for the main PE, twice the DLA default per
    PE of any other stage."""
    if stage_type == main_pe:
        return max(1, int(bounds["streams"]))
    return 2 * settings.dla_streams * stage_width(stage_type)


def run_ga(toolbox: base.Toolbox, ga: GASettings, salt: str, keep: int = 1, *, budget: int | None = None,
           hook: Callable | None = None, log: dict | None = None) -> tuple[list, list[float]]:
    """DEAP's generational loop (select, ``varAnd``, evaluate the changed individuals: what ``eaSimple``
    does) under a seeded global ``random`` (DEAP draws from it), ending early after ``ga.stall``
    generations without improvement or once ``budget`` fitness evaluations are spent. ``hook(pop, hof)``
    runs after each generation (a memetic local search). Returns the hall of fame (the ``keep`` best
    individuals ever seen) and the best fitness per generation; ``log`` receives evaluations/generations."""
    with seeded(ga.seed, salt):
        pop = toolbox.population(n=ga.population)
        hof = tools.HallOfFame(keep)
        spent = _evaluate(toolbox, pop)
        if hook is not None:
            hook(pop, hof)
        hof.update(pop)
        history = [hof[0].fitness.values[0]]
        gens = 0
        stall = StallRule(ga.stall, maximize=hof[0].fitness.weights[0] > 0)
        while gens < ga.generations and (budget is None or spent < budget):
            pop = algorithms.varAnd(toolbox.select(pop, len(pop)), toolbox, ga.cxpb, ga.mutpb)
            spent += _evaluate(toolbox, pop)
            if hook is not None:
                hook(pop, hof)
            hof.update(pop)
            gens += 1
            best = hof[0].fitness.values[0]
            stop = stall.stop(best, history[-1])
            history.append(best)
            if stop:
                break
    if log is not None:
        log.update(evaluations=spent, generations=gens)
    return hof, [float(h) for h in history]


def _evaluate(toolbox: base.Toolbox, pop: list) -> int:
    """Fitness of the individuals without one: one ``evaluate_batch(list)`` call when the toolbox has it
    (a vectorized evaluator), else ``evaluate`` per individual. Returns how many were evaluated."""
    todo = [ind for ind in pop if not ind.fitness.valid]
    if todo and hasattr(toolbox, "evaluate_batch"):
        for ind, values in zip(todo, toolbox.evaluate_batch(todo)):
            ind.fitness.values = values
        return len(todo)
    for ind in todo:
        ind.fitness.values = toolbox.evaluate(ind)
    return len(todo)


def run_moea(toolbox: base.Toolbox, ga: GASettings, salt: str, selector: str = "spea2", *,
             budget: int | None = None, ref: Sequence[float] | None = None, log: dict | None = None):
    """Multi-objective (mu + lambda) loop over k >= 2 objectives (the fitness type's weights), mu = lambda =
    ``ga.population``: offspring by ``varAnd`` on random parents (the rates may sum above 1, which ``varOr``
    forbids), then ``selSPEA2`` or ``selNSGA2(nd="log")`` on parents + offspring. Returns the Pareto archive
    (``non_dominated`` over everything seen) and its history per generation: with 2 objectives the 2-D
    hypervolume (reference point ``ref``, default 1.1 x the worst initial values), with more the archive's size
    (an exact k-D hypervolume costs more than the generation; ``ref`` is refused there)."""
    selectors = {"spea2": tools.selSPEA2, "nsga2": lambda p, k: tools.selNSGA2(p, k, nd="log")}
    if selector not in selectors:
        raise DseError(f"unknown MOEA selector {selector!r}; valid choices: {', '.join(selectors)}")
    select = selectors[selector]
    with seeded(ga.seed, salt):
        pop = toolbox.population(n=ga.population)
        k = len(pop[0].fitness.weights)
        if k < 2:
            raise DseError(f"run_moea needs a fitness of 2 or more objectives, got {k}; run_ga takes one")
        if ref is not None and (k != 2 or len(ref) != 2):
            raise DseError(f"a hypervolume reference point is for 2 objectives, got {list(ref)} for {k}")
        spent = _evaluate(toolbox, pop)
        front = non_dominated(pop)
        if k == 2 and ref is None:
            ref = [1.1 * max(ind.fitness.values[j] for ind in pop) for j in range(2)]

        def progress() -> float:
            return hypervolume_2d([i.fitness.values for i in front], ref) if k == 2 else float(len(front))

        history = [progress()]
        gens = 0
        while gens < ga.generations and (budget is None or spent < budget):
            kids = algorithms.varAnd(tools.selRandom(pop, ga.population), toolbox, ga.cxpb, ga.mutpb)
            spent += _evaluate(toolbox, kids)
            pop = select(pop + kids, ga.population)
            front = non_dominated(front + pop)
            gens += 1
            history.append(progress())
    if log is not None:
        log.update(evaluations=spent, generations=gens, ref=None if ref is None else list(ref))
    return front, history


Genes = tuple[int, ...]


@dataclass
class GenomeResult:
    """One run of the genome GA: the best genome and its value (None in a multi-objective run, whose answer is
    its population), the best value per generation, how many distinct genomes were evaluated, the generations run,
    whether the space was enumerated instead, and the last population in the survival's order (seeds for
    another run)."""

    genes: Genes | None
    value: float | None
    history: list[float] = field(default_factory=list)
    evaluations: int = 0
    generations: int = 0
    exhaustive: bool = False
    population: list[Genes] = field(default_factory=list)


def random_genes(sizes: Sequence[int]) -> list[int]:
    """One gene per position, uniform over its ``sizes[i]`` values."""
    return [random.randrange(n) for n in sizes]


def mutate_one_gene(ind: list, sizes: Sequence[int]) -> tuple[list]:
    """The thesis' "one-point mutation": resample exactly one gene (it may draw its old value again)."""
    i = random.randrange(len(ind))
    ind[i] = random.randrange(sizes[i])
    return (ind,)


def sel_two_tournament(individuals: list, k: int, key: Callable) -> list:
    """``k`` winners of 2-tournaments, each between two individuals drawn without replacement: the smaller
    ``key``, the first of a tie."""
    return [min(random.sample(individuals, 2), key=key) for _ in range(k)]


def sel_best_distinct(individuals: list, k: int, key: Callable) -> list:
    """The ``k`` smallest by ``key`` with one individual per genome (ties keep their order): a duplicate would
    crowd the population without adding anything."""
    distinct = {tuple(ind): ind for ind in individuals}
    return sorted(distinct.values(), key=key)[:k]


def pairs_toolbox(sizes: Sequence[int], individual: Callable, evaluate: Callable, select: Callable,
                  survive: Callable) -> base.Toolbox:
    """The operators ``run_pairs`` calls: ``individual(genes)`` builds one (a ``creator`` type),
    ``evaluate(ind)`` gives its fitness values, ``select(pop, k)`` the parents, ``survive(pop, k)`` the next
    generation; DEAP's uniform crossover swaps each gene with probability 1/2 and the mutation resamples one."""
    sizes = list(sizes)
    tb = base.Toolbox()
    tb.register("individual", individual)
    tb.register("random_genes", random_genes, sizes)
    tb.register("evaluate", evaluate)
    tb.register("select", select)
    tb.register("mate", tools.cxUniform, indpb=0.5)
    tb.register("mutate", mutate_one_gene, sizes=sizes)
    tb.register("survive", survive)
    return tb


def run_pairs(toolbox: base.Toolbox, population: int, generations: int, seed: int | str, salt: str, *,
              seeds: Sequence[Sequence[int]] = (), value: Callable[[list], float] | None = None,
              stall: StallRule | None = None) -> GenomeResult:
    """The genome GA under a seeded global ``random``: the ``seeds``, then random genomes, make the first
    population; each generation picks ``2 * population`` parents, makes two children per pair (crossover, then
    one resampled gene in each) and keeps ``survive(parents + children, population)``. With ``value`` (a genome's
    scalar, better in ``stall``'s direction) it follows the best genome ever and ends after ``stall.limit``
    generations without improvement; without it (a multi-objective run) every generation runs and the answer is
    the last population."""
    if value is not None and stall is None:
        raise DseError("run_pairs: a value needs a stall rule (its direction of better)")
    seen: set[Genes] = set()

    def evaluate(inds: list) -> None:
        _evaluate(toolbox, inds)
        seen.update(tuple(ind) for ind in inds)

    def rank(ind) -> float:
        return stall.rank(value(ind))

    best, history = None, []
    with seeded(seed, salt):
        pop = [toolbox.individual(list(g)) for g in seeds[:population]]
        pop += [toolbox.individual(toolbox.random_genes()) for _ in range(population - len(pop))]
        evaluate(pop)
        if value is not None:
            best = min(pop, key=rank)
            history.append(value(best))
        done = 0
        while done < generations:
            parents = toolbox.select(pop, 2 * population)
            kids = []
            for a, b in zip(parents[::2], parents[1::2]):
                c1, c2 = toolbox.mate(toolbox.individual(a), toolbox.individual(b))
                toolbox.mutate(c1)
                toolbox.mutate(c2)
                evaluate([c1, c2])
                kids += [c1, c2]
            pop = toolbox.survive(pop + kids, population)
            done += 1
            if value is not None:
                leader = min(pop, key=rank)
                if stall.better(value(leader), value(best)):
                    best = leader
                stop = stall.stop(value(best), history[-1])
                history.append(value(best))
                if stop:
                    break
    if best is None:
        return GenomeResult(None, None, history, len(seen), done, population=[tuple(ind) for ind in pop])
    return GenomeResult(tuple(best), value(best), history, len(seen), done, population=[tuple(ind) for ind in pop])


def evolve_genomes(sizes: Sequence[int], evaluate: Callable[[Genes], tuple[float, Sequence[float]]], *,
                   maximize: bool, population: int, generations: int, stall: int, seed: int | str, salt: str,
                   seeds: Sequence[Genes] = ()) -> GenomeResult:
    """The one-objective genome GA (thesis l. 1375) over ``evaluate(genes) -> (value, cases)``, each genome
    evaluated once: lexicase parents over the cases, the best ``population`` distinct genomes of parents +
    children survive, ``stall`` generations without improvement end it. A space no larger than the GA's budget
    (population x generations) is enumerated instead: the exact optimum for the same effort."""
    memo: dict[Genes, tuple[float, Sequence[float]]] = {}

    def scored(genes) -> tuple[float, Sequence[float]]:
        g = tuple(genes)
        if g not in memo:
            memo[g] = evaluate(g)
        return memo[g]

    rule = StallRule(stall, maximize)
    if math.prod(sizes) <= population * max(1, generations):
        genes = min(itertools.product(*[range(n) for n in sizes]), key=lambda g: rule.rank(scored(g)[0]))
        v = scored(genes)[0]
        return GenomeResult(genes, v, [v], len(memo), 0, exhaustive=True, population=[genes])

    types = max_types if maximize else min_types
    worst = -1e18 if maximize else 1e18        # an infinite (or NaN) case loses to every finite one

    def individual(genes):
        # the fitness type has one weight per case and only the evaluation (memoized) tells how many cases
        return types(len(scored(genes)[1]))[1](genes)

    def cases(ind) -> tuple[float, ...]:
        return tuple(c if math.isfinite(c) else worst for c in scored(ind)[1])

    def value(ind) -> float:
        return scored(ind)[0]

    def rank(ind) -> float:
        return rule.rank(value(ind))

    def select(pop: list, k: int) -> list:
        # lexicase needs several cases; with one or two it degenerates into picking the best only
        if len(pop[0].fitness.values) >= 3:
            return tools.selLexicase(pop, k)
        return sel_two_tournament(pop, k, rank)

    toolbox = pairs_toolbox(sizes, individual, cases, select, lambda pop, k: sel_best_distinct(pop, k, rank))
    return run_pairs(toolbox, population, generations, seed, salt, seeds=seeds, value=value, stall=rule)


def non_dominated(inds: list) -> list:
    """The individuals no other one dominates (all objectives minimized), one per distinct objective vector, sorted
    lexicographically (by the first objective, then the next): for 2 objectives an O(n log n) sweep, for more a
    numpy comparison of each point with the ones before it in that order (a dominator sorts first). DEAP's
    ParetoFront archive compares every pair in Python (a 5000-individual NSGA-II with a growing front spent
    minutes in it)."""
    if not inds:
        return []
    obj = np.array([ind.fitness.values for ind in inds], dtype=float)
    order = np.lexsort(obj.T[::-1])
    if obj.shape[1] == 2:
        keep, best = [], np.inf
        for i in order:
            if obj[i, 1] < best:
                keep.append(inds[i])
                best = obj[i, 1]
        return keep
    obj = obj[order]
    distinct = np.r_[True, (obj[1:] != obj[:-1]).any(axis=1)]          # equal vectors are next to each other
    obj, order = obj[distinct], order[distinct]
    keep = np.ones(len(obj), dtype=bool)
    for lo in range(0, len(obj), 512):                                  # [block, n, k] stays small
        block = obj[lo:lo + 512]
        weak = (obj[None, :, :] <= block[:, None, :]).all(axis=2)       # weak[i, j]: j is <= i everywhere
        weak &= np.arange(len(obj))[None, :] < np.arange(lo, lo + len(block))[:, None]   # distinct: one is <
        keep[lo:lo + len(block)] = ~weak.any(axis=1)
    return [inds[i] for i in order[keep]]


def pareto_mask(fps, energy) -> np.ndarray:
    """The 2-D front of (FPS up, energy down): True where no other point has fps >= and energy <= with one strict."""
    fps, energy = np.asarray(fps, float), np.asarray(energy, float)
    keep = np.ones(len(fps), dtype=bool)
    for i in range(len(fps)):
        dom = (fps >= fps[i]) & (energy <= energy[i]) & ((fps > fps[i]) | (energy < energy[i]))
        keep[i] = not dom.any()
    return keep


def hypervolume_2d(points: Sequence[Sequence[float]], ref: Sequence[float]) -> float:
    """Area dominated by ``points`` (both objectives minimized) inside the box up to ``ref``: exact sweep."""
    pts = sorted((float(a), float(b)) for a, b in points if a < ref[0] and b < ref[1])
    area, y_prev = 0.0, float(ref[1])
    for x, y in pts:
        if y < y_prev:
            area += (ref[0] - x) * (y_prev - y)
            y_prev = y
    return area


def int_vector_toolbox(lows: Sequence[int], highs: Sequence[int], evaluate: Callable, ga: GASettings,
                       mutate_indpb: float) -> base.Toolbox:
    """DEAP toolbox over integer vectors with per-gene bounds: uniform crossover, uniform-int mutation,
    tournament selection (the comprehensive and fine-tuning GAs)."""
    _, individual_type = deap_types()

    def individual():
        return individual_type(random.randint(lo, hi) for lo, hi in zip(lows, highs))

    tb = base.Toolbox()
    tb.register("individual", individual)
    tb.register("population", tools.initRepeat, list, tb.individual)
    tb.register("evaluate", evaluate)
    tb.register("mate", tools.cxUniform, indpb=0.5)
    tb.register("mutate", tools.mutUniformInt, low=list(lows), up=list(highs), indpb=mutate_indpb)
    tb.register("select", tools.selTournament, tournsize=ga.tournament)
    return tb


def repair_cuts(space: SearchSpace, wanted: Sequence[int], n: int, budget: int = 400) -> tuple[int, ...] | None:
    """The feasible ``n``-cut tuple closest to ``wanted`` (depth-first over nearby feasible positions).

    Each cut tries the feasible positions nearest its wish, in order of distance; the search stops after
    ``budget`` feasibility checks. None when no feasible tuple was found (sparse feasibility)."""
    if n == 0:
        return ()
    pos = space.feasible_cuts
    if len(pos) < n:
        return None
    wanted = sorted(int(w) for w in wanted)[:n]
    while len(wanted) < n:
        wanted.append(wanted[-1] if wanted else pos[0])
    checks = [0]

    def near(target: int, lo: int) -> list[int]:
        i = bisect_left(pos, target)
        left, right, out = i - 1, i, []
        while len(out) < 6 and (left >= 0 or right < len(pos)):
            cand = []
            if right < len(pos):
                cand.append(pos[right])
            if left >= 0:
                cand.append(pos[left])
            cand.sort(key=lambda c: abs(c - target))
            out.extend(c for c in cand if c > lo)
            left, right = left - 1, right + 1
        return out

    def dfs(prefix: tuple[int, ...]) -> tuple[int, ...] | None:
        k = len(prefix)
        if k == n:
            checks[0] += 1
            return prefix if space.feasibility(prefix) is None else None
        for c in near(wanted[k], prefix[-1] if prefix else -1):
            if checks[0] >= budget:
                return None
            found = dfs(prefix + (c,))
            if found is not None:
                return found
        return None

    return dfs(())
