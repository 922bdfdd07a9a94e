"""The 002/004 solvers (spec 3.3, 3.4, 4.2): the ILPs against a chain DP and brute force, the GA against the ILP."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from dse.taskgraph import AnalyticModel, LayerMapError, PeSet, ProfileTable, TaskGraph
from dse.systems.layermap import chain_dp, run_layer_ga, solve_ilp
from dse.ilp import IlpError
from dse.systems.layermap import screen_finalists
from dse.systems.layermap.ga import FINALISTS, local_search, preset
from dse.search.ga_common import hypervolume_2d
from tests.unit.taskgraph.test_layermap_core import random_graph

pytest.importorskip("pulp")

FAST = dict(population=40, generations=60, stall=15)


def chain(n: int, seed: int) -> tuple[TaskGraph, ProfileTable]:
    rng = np.random.default_rng(seed)
    g = TaskGraph(names=tuple(f"t{i}" for i in range(n)), layers=tuple((i,) for i in range(n)),
                  op_types=("Conv",) * n, macs=np.ones(n), src=np.arange(n - 1), dst=np.arange(1, n),
                  nbytes=rng.integers(1_000, 300_000, n - 1))
    t1 = rng.uniform(20, 400, n)
    times = np.column_stack([t1, t1 / rng.uniform(1.3, 1.9, n), t1 / rng.uniform(1.5, 6.0, n)])
    return g, ProfileTable(kinds=("cpu1", "cpu2", "gpu"), time_us=times, source="test", graph_digest=g.digest,
                           tasks=g.names)


def clustered(g: TaskGraph, m, P: int, formulation: str, mode: str) -> bool:
    """The cluster rule written directly: a task starts a cluster of its PE when no predecessor is there."""
    starts = np.zeros(P, dtype=int)
    for i in range(g.n):
        preds = g.src[g.in_edges[i]]
        if not len(preds) or not (m[preds] == m[i]).any():
            starts[m[i]] += 1
    if formulation == "ha2018":
        total = starts.sum()
        return total == max(3, P) if mode == "exact" else total <= max(3, P)
    w = np.array([m[0] == j and m[-1] == j for j in range(P)], dtype=int)
    return bool((starts - w == 1).all()) if mode == "exact" else bool((starts - w <= 1).all())


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("charge", ["sender", "receiver"])
def test_ilp_linear_equals_chain_dp(seed, charge):
    n = 6 + 2 * seed
    g, prof = chain(n, seed)
    model = AnalyticModel(g, prof, PeSet.build("2-1-1", ["gpu"]), bandwidth_gbs=2.0, charge=charge)
    best, dp_map = chain_dp(model)
    assert np.all(np.diff(dp_map) >= 0)
    assert model.evaluate(dp_map).period == pytest.approx(best, rel=1e-12)
    res = solve_ilp(model, clusters=None, linear=True)
    assert res.status == "optimal" and res.objective == pytest.approx(best, rel=1e-6)
    assert np.all(np.diff(res.mapping) >= 0)
    # the 002 cluster rule (contiguous groups in any PE order, wrap-around) can only do better on a chain
    assert solve_ilp(model, clusters="at_most").objective <= best * (1 + 1e-6)


@pytest.mark.parametrize("formulation,mode", [("kang2020", "exact"), ("kang2020", "at_most"),
                                              ("ha2018", "exact"), ("ha2018", "at_most")])
def test_ilp_cluster_rule_matches_brute_force(formulation, mode):
    g, prof = random_graph(7, 3, p_edge=0.3)
    model = AnalyticModel(g, prof, PeSet.build("1-1", ["gpu"]), bandwidth_gbs=1.0, u_max=0.7)
    every = np.array(list(itertools.product(range(3), repeat=g.n)), dtype=np.int64)
    ok = np.array([clustered(g, m, 3, formulation, mode) for m in every])
    brute = model.evaluate(every[ok]).period.min()
    res = solve_ilp(model, formulation=formulation, clusters=mode)
    assert res.status == "optimal" and res.gap <= 1e-6
    assert res.objective == pytest.approx(brute, rel=1e-6)
    assert clustered(g, res.mapping, 3, formulation, mode)


@pytest.mark.parametrize("solver", ["highs", "cbc"])
@pytest.mark.parametrize("charge,cap", [("sender", None), ("receiver", 0.5)])
def test_ilp_period_is_the_evaluator_period(solver, charge, cap):
    g, prof = random_graph(9, 11)
    model = AnalyticModel(g, prof, PeSet.build("2-1", ["gpu"]), bandwidth_gbs=0.5, u_max=cap, charge=charge)
    res = solve_ilp(model, clusters="at_most", solver=solver, timing=(solver == "highs"))
    assert res.status == "optimal" and res.solver == solver
    assert model.evaluate(res.mapping).period == pytest.approx(res.objective, rel=1e-5)
    if cap is not None:
        assert model.evaluate(res.mapping).util_cpu <= cap + 1e-6


def test_ilp_time_limit_reports_gap_not_optimal():
    g, prof = random_graph(20, 7)
    model = AnalyticModel(g, prof, PeSet.build("1-1-1-1", ["gpu"]), bandwidth_gbs=1.0)
    res = solve_ilp(model, clusters=None, time_limit=1.0)
    assert res.status == "time limit" and res.seconds < 10
    assert 0 < res.gap < 1 and res.bound < res.objective
    assert model.evaluate(res.mapping).period == pytest.approx(res.objective, rel=1e-6)
    assert res.to_dict()["status"] == "time limit"


@pytest.mark.parametrize("seed", range(3))
def test_ga_within_two_percent_of_ilp_optimum(seed):
    g, prof = random_graph(12 + seed, seed)
    model = AnalyticModel(g, prof, PeSet.build("1-1", ["gpu"]), bandwidth_gbs=1.0, u_max=0.8)
    ilp = solve_ilp(model, clusters=None, time_limit=30)
    assert ilp.status == "optimal"
    ga = run_layer_ga(model, "kang2020", seed=seed, **FAST)
    assert model.evaluate(ga.mapping).period == pytest.approx(ga.fitness)
    assert ilp.objective * (1 - 1e-9) <= ga.fitness <= 1.02 * ilp.objective


def test_ga_beats_the_clustered_ilp_when_groups_must_interleave():
    """A fork-join (0 -> 1 -> 2 -> 5, 0 -> 3 -> 4 -> 5) whose odd tasks are fast on the GPU, even ones on the
    CPU: the best mapping alternates along both branches, three clusters per PE; the 002 rule (one cluster per
    PE, two for the wrap-around PE) excludes it."""
    n = 6
    g = TaskGraph(names=tuple(f"t{i}" for i in range(n)), layers=tuple((i,) for i in range(n)),
                  op_types=("Conv",) * n, macs=np.ones(n), src=[0, 1, 2, 0, 3, 4], dst=[1, 2, 5, 3, 4, 5],
                  nbytes=[100] * 6)
    fast, slow = 10.0, 100.0
    times = np.array([[fast, slow] if i % 2 == 0 else [slow, fast] for i in range(n)])
    prof = ProfileTable(kinds=("cpu1", "gpu"), time_us=times, source="test", graph_digest=g.digest, tasks=g.names)
    model = AnalyticModel(g, prof, PeSet.build("1", ["gpu"]), bandwidth_gbs=100.0)
    ilp = solve_ilp(model, clusters="at_most")
    free = solve_ilp(model, clusters=None)
    ga = run_layer_ga(model, "kang2020", seed=0, **FAST)
    assert ilp.status == free.status == "optimal"
    assert ga.fitness == pytest.approx(free.objective, rel=1e-9)
    assert ga.fitness < 0.8 * ilp.objective
    assert not clustered(g, ga.mapping, 2, "kang2020", "at_most")


def test_ga_is_deterministic_under_a_seed_and_respects_the_budget():
    g, prof = random_graph(15, 5)
    model = AnalyticModel(g, prof, PeSet.build("2-1", ["gpu"]), bandwidth_gbs=1.0, u_max=0.6, cap_mode="penalty")
    kw = {**FAST, "stall": 0}
    a = run_layer_ga(model, "ha2018", seed=3, budget=1000, **kw)
    b = run_layer_ga(model, "ha2018", seed=3, budget=1000, **kw)
    assert np.array_equal(a.mapping, b.mapping) and a.history == b.history and a.moves == b.moves
    assert a.evaluations <= 1000 + FAST["population"] and a.evaluations >= 1000
    assert all(x >= y for x, y in zip(a.history, a.history[1:]))      # elitist hall of fame
    ev = model.evaluate(a.mapping)
    assert a.fitness == pytest.approx(float(ev.period + ev.penalty))


def test_local_search_reaches_a_one_flip_optimum():
    g, prof = random_graph(10, 2)
    model = AnalyticModel(g, prof, PeSet.build("1-1", ["gpu"]), bandwidth_gbs=1.0)
    genes, fit, moves = local_search(model, [0] * g.n)
    assert moves >= g.n * 2 and fit < model.evaluate(np.zeros(g.n, dtype=np.int64)).period
    m = np.array(genes)
    flips = np.repeat(m[None], g.n * 3, axis=0)
    flips[np.arange(g.n * 3), np.repeat(np.arange(g.n), 3)] = np.tile(np.arange(3), g.n)
    assert model.evaluate(flips).period.min() >= fit * (1 - 1e-12)


def test_local_search_ends_where_no_run_moves_whole_helps():
    g, prof = random_graph(14, 6)
    model = AnalyticModel(g, prof, PeSet.build("1-1", ["gpu"]), bandwidth_gbs=0.5)
    genes, fit, _ = local_search(model, np.tile([0, 1, 2], g.n)[:g.n])
    m = np.array(genes)
    starts = np.flatnonzero(np.r_[True, m[1:] != m[:-1]])
    for a, b in zip(starts, np.r_[starts[1:], g.n]):
        for pe in range(3):
            c = m.copy()
            c[a:b] = pe
            assert model.evaluate(c).period >= fit * (1 - 1e-12)


def test_local_search_breaks_bottleneck_ties_by_the_load_spread():
    """Two CPUs tie at the bottleneck (100 us each), the GPU idles: no single flip (and no run move) lowers the
    period, but moving a task of one CPU to the GPU keeps it and spreads the loads; then the other CPU's can go."""
    n = 4
    g = TaskGraph(names=tuple(f"t{i}" for i in range(n)), layers=tuple((i,) for i in range(n)),
                  op_types=("Conv",) * n, macs=np.ones(n), src=[], dst=[], nbytes=[])
    times = np.array([[50.0, 30.0]] * n)
    prof = ProfileTable(kinds=("cpu1", "gpu"), time_us=times, source="test", graph_digest=g.digest, tasks=g.names)
    model = AnalyticModel(g, prof, PeSet.build("1-1", ["gpu"]), bandwidth_gbs=1.0)
    genes, fit, _ = local_search(model, [0, 0, 1, 1])
    assert fit == pytest.approx(60.0)         # one task per CPU (50 us), two on the GPU (60 us): optimal
    assert np.bincount(genes, minlength=3).tolist() == [1, 1, 2]


def test_ga_restarts_keep_the_best_run():
    g, prof = random_graph(16, 8)
    model = AnalyticModel(g, prof, PeSet.build("1-1", ["gpu"]), bandwidth_gbs=1.0, u_max=0.6)
    one = run_layer_ga(model, "ha2018", seed=2, restarts=1, **FAST)
    three = run_layer_ga(model, "ha2018", seed=2, restarts=3, **FAST)
    assert three.fitness <= one.fitness and three.evaluations > one.evaluations
    assert three.history[:len(one.history)] == one.history          # the first run is the single run
    with pytest.raises(LayerMapError, match="restarts must be >= 1"):
        run_layer_ga(model, restarts=0)
    # the finalists: distinct mappings of all restarts, best first, each with its own fitness
    fin = three.finalists
    assert 1 < len(fin) <= FINALISTS and np.array_equal(fin[0][0], three.mapping) and fin[0][1] == three.fitness
    assert len({tuple(m) for m, _ in fin}) == len(fin) and [f for _, f in fin] == sorted(f for _, f in fin)
    for m, f in fin:
        ev = model.evaluate(m)
        assert f == pytest.approx(float(ev.period + ev.penalty))


def test_screen_finalists_measures_the_near_best_and_ranks_by_measurement():
    fin = [(np.array([0, 0]), 100.0), (np.array([0, 1]), 104.0), (np.array([1, 1]), 120.0)]
    asked = []

    def measure(m):
        asked.append(tuple(m))
        return {(0, 0): 130.0, (0, 1): 110.0}[tuple(m)]

    ranked = screen_finalists(fin, measure, within=0.05)
    assert asked == [(0, 0), (0, 1)]                                   # 120 is over 5 % above the best
    assert [tuple(s.mapping) for s in ranked] == [(0, 1), (0, 0)] and ranked[0].planned == 104.0
    assert ranked[0].measured == 110.0
    with pytest.raises(LayerMapError, match="no finalists"):
        screen_finalists([], measure)
    with pytest.raises(LayerMapError, match=r"within must be a fraction in \[0, 1\], got 2"):
        screen_finalists(fin, measure, within=2)


def test_identical_pes_are_the_interchangeable_ones():
    from dse.systems.layermap.ilp import identical_pes

    g, prof = random_graph(8, 1)
    assert identical_pes(AnalyticModel(g, prof, PeSet.build("1-1-1-1", ["gpu"]), bandwidth_gbs=1.0)) == [[0, 1, 2, 3]]
    assert identical_pes(AnalyticModel(g, prof, PeSet.build("2-1-1", ["gpu"]), bandwidth_gbs=1.0)) == [[1, 2]]
    hot = AnalyticModel(g, prof, PeSet.build("1-1", ["gpu"]), bandwidth_gbs=1.0, p_busy=[1.0, 2.0, 5.0])
    assert identical_pes(hot) == []          # same speed, different power: not interchangeable


def test_spea2_pareto_set_is_nondominated():
    g, prof = random_graph(10, 4)
    model = AnalyticModel(g, prof, PeSet.build("1-1", ["gpu"]), bandwidth_gbs=1.0, p_busy=[1.0, 1.0, 4.0])
    res = run_layer_ga(model, seed=1, objectives="period+energy", population=30, generations=10)
    pts = np.array([f for _, f in res.pareto])
    assert len(pts) >= 2 and np.all(np.diff(pts[:, 0]) >= 0) and np.all(np.diff(pts[:, 1]) <= 0)
    for m, (per, en) in res.pareto:
        ev = model.evaluate(m)
        assert per == pytest.approx(ev.period) and en == pytest.approx(ev.energy_j)
    assert all(x <= y + 1e-12 for x, y in zip(res.history, res.history[1:]))   # archive hypervolume grows
    assert hypervolume_2d([(1, 3), (2, 1)], (4, 4)) == pytest.approx(3 * 1 + 2 * 3 - 2)   # two boxes minus their overlap


def test_bad_inputs_name_the_value_and_the_choices():
    g, prof = random_graph(5, 0)
    pes = PeSet.build("1-1", ["gpu"])
    with pytest.raises(LayerMapError, match=r"u_max 1.5 is outside \(0, 1\]"):
        AnalyticModel(g, prof, pes, u_max=1.5)
    with pytest.raises(LayerMapError, match=r"u_max 0 is outside"):
        AnalyticModel(g, prof, pes, u_max=0)
    model = AnalyticModel(g, prof, pes)
    with pytest.raises(LayerMapError, match="'kang2021'.*kang2020, ha2018"):
        run_layer_ga(model, "kang2021")
    with pytest.raises(IlpError, match="'gurobi'.*highs, cbc"):
        solve_ilp(model, solver="gurobi")
    with pytest.raises(LayerMapError, match="'lp2020'.*kang2020, ha2018"):
        solve_ilp(model, formulation="lp2020")
    with pytest.raises(LayerMapError, match="'some'.*exact, at_most, None"):
        solve_ilp(model, clusters="some")
    with pytest.raises(LayerMapError, match="'stretch'.*'penalty'"):
        solve_ilp(AnalyticModel(g, prof, pes, u_max=0.5, cap_mode="penalty"))
    with pytest.raises(LayerMapError, match="needs a chain"):
        chain_dp(model)
    with pytest.raises(LayerMapError, match="'colour'.*period, period\\+energy"):
        run_layer_ga(model, objectives="colour")
    with pytest.raises(LayerMapError, match="p_busy"):
        run_layer_ga(model, objectives="period+energy")
    with pytest.raises(LayerMapError, match="pop"):
        preset("kang2020", pop=3)


def test_missing_pulp_names_the_extra(monkeypatch):
    import sys

    g, prof = random_graph(4, 0)
    monkeypatch.setitem(sys.modules, "pulp", None)
    with pytest.raises(IlpError, match=r"dse\[ilp\]"):
        solve_ilp(AnalyticModel(g, prof, PeSet.build("1-1", ["gpu"])))
