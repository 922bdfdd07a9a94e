"""The genome GA engine of ``dse.search.ga_common``: the seeded global ``random``, the stall rule, the one-gene
mutation, the pairs loop (reproducible per seed, both survival functions) and the exhaustive shortcut."""
import itertools
import random

import pytest
from deap import tools

from dse.search.ga_common import (StallRule, evolve_genomes, min_types, mutate_one_gene, pairs_toolbox, run_pairs,
                                  seeded, sel_best_distinct)


def test_seeded_repeats_its_draws_and_restores_the_global_state():
    random.seed(7)
    before = random.getstate()
    with seeded(3, "a"):
        first = [random.random() for _ in range(5)]
    assert random.getstate() == before
    with seeded(3, "a"):
        assert [random.random() for _ in range(5)] == first
    with seeded(3, "b"):
        assert [random.random() for _ in range(5)] != first
    with pytest.raises(RuntimeError), seeded(3, "a"):
        raise RuntimeError("a failing run")
    assert random.getstate() == before


@pytest.mark.parametrize("maximize, values", [(True, [1, 2, 2, 2, 3, 3, 3]), (False, [9, 8, 8, 8, 7, 7, 7])])
def test_stall_rule_stops_after_limit_generations_without_improvement(maximize, values):
    rule = StallRule(2, maximize)
    stops = [rule.stop(b, a) for a, b in zip(values, values[1:])]
    assert stops == [False, False, True, False, False, True]
    never = StallRule(0, maximize)
    assert not any(never.stop(v, v) for v in values)
    assert sorted(values, key=rule.rank)[0] == (max(values) if maximize else min(values))


def test_mutation_resamples_exactly_one_gene_within_its_size():
    sizes = [3, 5, 1, 7]
    wide = [1000] * 4
    changed = []
    with seeded(0, "mutate"):
        for _ in range(200):
            (out,) = mutate_one_gene([0, 4, 0, 6], sizes)
            assert sum(a != b for a, b in zip(out, [0, 4, 0, 6])) <= 1
            assert all(0 <= g < n for g, n in zip(out, sizes))
            (out,) = mutate_one_gene([0] * 4, wide)      # a redraw of the old value is rare here
            changed.append([i for i, g in enumerate(out) if g])
    assert all(len(c) <= 1 for c in changed) and sum(len(c) == 1 for c in changed) >= 195
    assert {c[0] for c in changed if c} == set(range(4))


def test_best_distinct_keeps_one_per_genome_in_order_of_key():
    _, ind = min_types(1)
    pop = [ind(g) for g in ([2, 0], [1, 1], [2, 0], [0, 3], [1, 1])]
    out = sel_best_distinct(pop, 2, key=lambda i: sum(i))
    assert [list(i) for i in out] == [[2, 0], [1, 1]]


def sphere(genes):
    """Value and three cases (lexicase parents); one genome over the deadline is infeasible (inf)."""
    cases = [float((g - 3) ** 2) for g in genes[:3]]
    return (float("inf"), [float("inf")] * 3) if tuple(genes[:2]) == (0, 0) else (sum(cases), cases)


def test_pairs_loop_with_a_fixed_seed_is_reproducible_and_leaves_random_alone():
    sizes = [7] * 6
    kw = dict(maximize=False, population=10, generations=15, stall=0, seed=1, salt="t")
    random.seed(11)
    before = random.getstate()
    a = evolve_genomes(sizes, sphere, **kw)
    assert random.getstate() == before
    b = evolve_genomes(sizes, sphere, **kw)
    assert (a.genes, a.value, a.history, a.evaluations, a.population) == \
        (b.genes, b.value, b.history, b.evaluations, b.population)
    assert not a.exhaustive and a.generations == 15 and len(a.population) == 10
    assert a.history == sorted(a.history, reverse=True) and a.value == a.history[-1] == sphere(a.genes)[0]
    other = evolve_genomes(sizes, sphere, **{**kw, "seed": 2})
    assert other.history != a.history or other.population != a.population


def flat(genes):
    """Nothing ever improves; one case (2-tournament parents)."""
    return 0.0, [0.0]


def test_pairs_loop_ends_on_a_stall_and_seeds_come_first():
    out = evolve_genomes([9] * 5, flat, maximize=True, population=6, generations=50, stall=3, seed=0, salt="s",
                         seeds=[(1, 2, 3, 4, 5)])
    assert out.generations == 3 and out.history == [0.0] * 4 and out.genes == (1, 2, 3, 4, 5)


def test_small_spaces_are_enumerated():
    sizes = [3, 4]
    out = evolve_genomes(sizes, lambda g: (float(g[0] * g[1]), [0.0]), maximize=True, population=4,
                         generations=3, stall=0, seed=0, salt="e")
    assert out.exhaustive and out.genes == (2, 3) and out.evaluations == 12
    assert out.value == max(a * b for a, b in itertools.product(range(3), range(4)))


def test_pairs_loop_with_nsga2_survivors_runs_every_generation():
    _, ind = min_types(2)
    toolbox = pairs_toolbox([8] * 4, ind, lambda i: (float(sum(i)), float(sum(7 - g for g in i[:2]))),
                            tools.selRandom, tools.selNSGA2)
    a = run_pairs(toolbox, 8, 6, 0, "mo")
    b = run_pairs(toolbox, 8, 6, 0, "mo")
    assert a.genes is None and a.value is None and a.history == []
    assert a.generations == 6 and len(a.population) == 8 and a.population == b.population
