"""The multi-application GA of 002 Sec. VI-B (``dse.systems.layermap.multiapp``) and the k-objective ``run_moea``:
the GA against exhaustive enumeration on hand-sized apps, the penalty, determinism, 4 objectives."""
from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from deap import base, tools

from dse.rt.schedule_based import MappedApp, analyse
from dse.search.ga_common import GASettings, min_types, non_dominated, run_moea
from dse.core.errors import DseError
from dse.systems.layermap.multiapp import (UNMAPPABLE, App, JointProblem, min_response_alone, preemptive_of,
                                           run_multiapp_ga)
from dse.taskgraph import AnalyticModel, LayerMapError, LinearComm, PeSet, ProfileTable, TaskGraph
from dse.taskgraph.mapping import decode_ids

PES = PeSet.build("1-1", ["gpu"])                    # CPU0, CPU1 (preemptive), GPU (not)
POWER = dict(p_busy={"cpu1": 1.0, "gpu": 3.0}, p_idle={"cpu1": 0.1, "gpu": 0.2})


def tiny_model(times, edges, nbytes, **kw) -> AnalyticModel:
    """A hand-sized app: per task (cpu1 us, gpu us), edges (src, dst) with their bytes, on ``PES``."""
    n = len(times)
    src, dst = zip(*edges) if edges else ((), ())
    g = TaskGraph(names=tuple(f"t{i}" for i in range(n)), layers=tuple((i,) for i in range(n)),
                  op_types=("Conv",) * n, macs=np.ones(n), src=list(src), dst=list(dst), nbytes=list(nbytes))
    prof = ProfileTable(kinds=("cpu1", "gpu"), time_us=times, source="test", graph_digest=g.digest, tasks=g.names)
    return AnalyticModel(g, prof, PES, LinearComm(bandwidth_gbs=1.0, fixed_us=2.0), **{**POWER, **kw})


def two_apps(period_b: float = 700.0, period_a: float = 400.0) -> list[App]:
    """A (3 tasks, fork) has the higher priority; B (3-task chain) the lower; both prefer the GPU."""
    a = tiny_model([[100, 40], [80, 30], [60, 50]], [(0, 1), (0, 2)], [20_000, 30_000])
    b = tiny_model([[120, 50], [90, 60], [150, 40]], [(0, 1), (1, 2)], [10_000, 40_000])
    return [App("A", a, period_a, 0), App("B", b, period_b, 1)]


# per reading: periods (A, B) that leave some of the 729 joint mappings schedulable, and the true front's size
CASES = {"per-task": (400.0, 700.0, 9), "pipelined": (200.0, 300.0, 8)}


def everything(joint: JointProblem):
    """Every joint chromosome (3^6) and its evaluation."""
    genes = np.array(list(itertools.product(range(joint.P), repeat=joint.n_genes)), dtype=np.int64)
    return genes, joint.evaluate(genes)


def dominated_mask(obj: np.ndarray) -> np.ndarray:
    """Brute force: True where another row is <= everywhere and < somewhere."""
    le = (obj[None, :, :] <= obj[:, None, :]).all(axis=2)
    lt = (obj[None, :, :] < obj[:, None, :]).any(axis=2)
    return (le & lt).any(axis=1)


@pytest.mark.parametrize("response", CASES)
def test_joint_evaluation_is_the_one_mapping_analysis_and_the_average_power(response):
    period_a, period_b, _ = CASES[response]
    apps = two_apps(period_b, period_a)
    joint = JointProblem(apps, response=response)
    assert preemptive_of(PES) == (True, True, False) and joint.n_genes == 6
    rng = np.random.default_rng(0)
    genes = rng.integers(0, 3, size=(30, 6))
    ev = joint.evaluate(genes)
    for k, g in enumerate(genes):
        parts = joint.split(g)
        mapped = [MappedApp(a.name, a.period_us, a.priority, tuple(m), tuple(a.model.occupancy(m)),
                            tuple(tuple(int(p) for p in a.model.graph.preds(i)) for i in range(a.model.n)))
                  for a, m in zip(apps, parts)]
        one = analyse(mapped, preemptive_of(PES), response)
        assert ev.response_us[k] == pytest.approx(one.response_us)
        assert ev.schedulable[k].tolist() == [x.schedulable for x in one.apps]
        util = sum(np.bincount(m, a.model.occupancy(m), minlength=3) / a.period_us for a, m in zip(apps, parts))
        util = np.clip(util, 0.0, 1.0)                  # an overloaded PE is busy all the time, not longer
        assert ev.power_w[k] == pytest.approx(util @ [1, 1, 3] + (1 - util) @ [0.1, 0.1, 0.2])
        late = 10 * (~ev.schedulable[k]).sum()          # every term pays for every late app
        assert ev.objectives[k].tolist() == pytest.approx([*(ev.response_us[k] + late * joint.periods),
                                                           ev.power_w[k] + late * joint.full_power])
    assert ev.schedulable.all(axis=1).any() and not ev.schedulable.all()
    # without idle powers, and no PE overloaded, the average power is each app's energy per iteration over its period
    bare = [App(a.name, AnalyticModel(a.model.graph, a.model.profile, PES, a.model.comm, p_busy=POWER["p_busy"]),
                a.period_us, a.priority) for a in two_apps()]
    joint = JointProblem(bare, response=response)
    per_app = [a.model.evaluate(m).energy_j / (a.period_us * 1e-6) for a, m in zip(bare, joint.split(genes))]
    assert joint.evaluate(genes).power_w == pytest.approx(sum(per_app))


@pytest.mark.parametrize("response", CASES)
def test_ga_finds_the_exhaustive_extremes_and_only_non_dominated_solutions(response):
    period_a, period_b, front_size = CASES[response]
    apps = two_apps(period_b, period_a)
    joint = JointProblem(apps, response=response)
    genes, ev = everything(joint)
    ok = ev.schedulable.all(axis=1)
    true = ~dominated_mask(ev.objectives) & ok
    best_a, best_b = ev.response_us[ok, 0].min(), ev.response_us[ok, 1].min()
    alone = [min_response_alone(a.model, population=30, generations=30, response=response).response_us
             for a in apps]
    # alone = the least period (pipelined) or ASAP makespan over every mapping of the app by itself
    for a, x in zip(apps, alone):
        every = np.array(list(itertools.product(range(3), repeat=3)))
        of = a.model.latency if response == "per-task" else (lambda m, a=a: float(a.model.evaluate(m).period_raw))
        assert x == pytest.approx(min(of(m) for m in every))
    # seed 3: under seeds 1 and 2 the pipelined run keeps two of its nine solutions that one front point it never
    # evaluated dominates (the GA, not the archive: everything it evaluated is filtered)
    res = run_multiapp_ga(apps, alone, population=40, generations=40, seed=3, response=response)
    got = np.array([[g for m in s.mappings for g in m] for s in res.solutions])
    obj = joint.evaluate(got).objectives
    assert all(all(s.schedulable) for s in res.solutions) and len(res.solutions) >= 3
    # every GA solution is non-dominated among all 729 mappings, most of the front and its extremes are found
    assert not dominated_mask(np.vstack([obj, ev.objectives[true]]))[:len(obj)].any()
    front = {tuple(np.round(r, 9)) for r in ev.objectives[true]}
    assert len(front) == front_size and 3 * len({tuple(np.round(r, 9)) for r in obj} & front) >= 2 * len(front)
    assert min(s.response_us[0] for s in res.solutions) == pytest.approx(best_a)
    assert min(s.response_us[1] for s in res.solutions) == pytest.approx(best_b)
    assert min(s.power_w for s in res.solutions) == pytest.approx(ev.power_w[ok].min())
    assert res.min_relative()["A"] == pytest.approx(best_a / alone[0])
    assert res.min_relative()["A"] >= 1 - 1e-9 and res.min_relative()["B"] >= 1 - 1e-9
    assert 40 < res.evaluations <= 40 * 41 and res.generations == 40 and len(res.history) == 41
    assert res.history[-1] == res.archive and res.archive >= len(res.solutions)
    frame = res.to_frame()
    assert list(frame.columns) == ["solution", "A_response_us", "A_relative", "A_mapping", "A_schedulable",
                                   "B_response_us", "B_relative", "B_mapping", "B_schedulable", "power_w",
                                   "schedulable"]
    assert len(frame) == len(res.solutions) and frame["schedulable"].all()
    row = frame.iloc[0]
    assert decode_ids(row["A_mapping"]) == res.solutions[0].mappings[0]
    assert row["B_relative"] == pytest.approx(row["B_response_us"] / alone[1])


def test_an_app_whose_period_is_too_short_is_penalized():
    apps = two_apps(period_b=60.0)                   # B needs >= 150 us even alone
    joint = JointProblem(apps, penalty=10.0)
    genes, ev = everything(joint)
    assert not ev.schedulable[:, 1].any() and ev.schedulable[:, 0].any()
    late = 10.0 * (~ev.schedulable).sum(axis=1)         # B is always late
    assert np.allclose(ev.objectives[:, 1], ev.response_us[:, 1] + late * 60.0)
    assert np.allclose(ev.objectives[:, 0], ev.response_us[:, 0] + late * 400.0)
    assert np.allclose(ev.objectives[:, 2], ev.power_w + late * joint.full_power)
    res = run_multiapp_ga(apps, [100.0, 100.0], population=20, generations=5)
    assert res.solutions and all(not s.schedulable[1] for s in res.solutions)       # none schedulable: all kept
    assert not res.to_frame()["schedulable"].any()
    assert all(s.objectives[1] == pytest.approx(s.response_us[1] + 600.0) for s in res.solutions)
    # a task on a PE that cannot run it: finite worst objectives, inf response
    apps[0] = App("A", tiny_model([[100, np.inf], [80, 30], [60, 50]], [(0, 1), (0, 2)], [20_000, 30_000]), 400.0, 0)
    bad = JointProblem(apps).evaluate([[2, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
    assert bad.objectives[0].tolist() == [UNMAPPABLE] * 3 and np.isinf(bad.response_us[0]).all()
    assert not bad.schedulable[0].any() and np.isfinite(bad.objectives[1]).all()


def test_seeded_runs_repeat():
    apps = two_apps()
    one = run_multiapp_ga(apps, [100.0, 150.0], population=16, generations=8, seed=3)
    two = run_multiapp_ga(apps, [100.0, 150.0], population=16, generations=8, seed=3)
    assert one.solutions == two.solutions and one.history == two.history
    assert one.to_frame().equals(two.to_frame())
    # a seed is in the first population: with no generation at all the exhaustive best of A is there
    genes, ev = everything(JointProblem(apps))
    ok = ev.schedulable.all(axis=1)
    k = np.flatnonzero(ok)[ev.response_us[ok, 0].argmin()]
    seed = JointProblem(apps).split(genes[k])
    seeded = run_multiapp_ga(apps, [100.0, 150.0], population=16, generations=0, seeds=[seed])
    assert min(s.response_us[0] for s in seeded.solutions) == pytest.approx(ev.response_us[ok, 0].min())
    plain = run_multiapp_ga(apps, [100.0, 150.0], population=16, generations=0)
    assert min(s.response_us[0] for s in plain.solutions) > ev.response_us[ok, 0].min()
    runs = [min_response_alone(apps[1].model, seed=2, population=10, generations=5) for _ in range(2)]
    assert runs[0].mapping == runs[1].mapping and runs[0].response_us == runs[1].response_us


def test_inputs_are_checked():
    a, b = two_apps()
    other = PeSet.build("1-1-1", ["gpu"])
    m = AnalyticModel(b.model.graph, b.model.profile, other, b.model.comm, **POWER)
    with pytest.raises(LayerMapError, match="every app must share one PeSet"):
        JointProblem([a, App("C", m, 500.0, 2)])
    with pytest.raises(LayerMapError, match="needs a model with p_busy"):
        JointProblem([App("A", AnalyticModel(a.model.graph, a.model.profile, PES), 400.0, 0)])
    with pytest.raises(LayerMapError, match="one board has one set"):
        JointProblem([a, App("B", tiny_model([[1, 1]], [], [], p_busy=[1, 2, 3]), 500.0, 1)])
    with pytest.raises(LayerMapError, match="one finite response > 0 us per app"):
        run_multiapp_ga([a, b], [100.0])
    with pytest.raises(LayerMapError, match=r"a seed needs per app one PE id in 0..2 per task \(apps of 3, 3"):
        run_multiapp_ga([a, b], [100.0, 100.0], seeds=[[[0, 0, 0], [0, 0]]])
    with pytest.raises(LayerMapError, match="a seed needs"):
        run_multiapp_ga([a, b], [100.0, 100.0], seeds=[[[0, 0, 3], [0, 0, 0]]])
    with pytest.raises(DseError, match="priorities must be distinct"):
        JointProblem([a, ("B", b.model, 500.0, 0)])
    with pytest.raises(LayerMapError, match=r"\[pop, 6\]"):
        JointProblem([a, b]).evaluate(np.zeros((2, 5), dtype=np.int64))


# -- run_moea over k objectives --------------------------------------------------------------------------------
def test_non_dominated_in_k_dimensions_is_the_brute_force_front():
    _, individual = min_types(4)
    rng = np.random.default_rng(5)
    pts = rng.integers(0, 6, size=(300, 4)).astype(float)           # many ties and duplicates
    inds = []
    for p in pts:
        ind = individual([0])
        ind.fitness.values = tuple(p)
        inds.append(ind)
    front = non_dominated(inds)
    vals = {tuple(i.fitness.values) for i in front}
    expect = {tuple(p) for p in pts[~dominated_mask(pts)]}
    assert vals == expect and len(front) == len(vals)               # one per distinct vector
    assert [i.fitness.values for i in front] == sorted(i.fitness.values for i in front)
    assert non_dominated(inds[:1]) == inds[:1] and non_dominated([]) == []


def test_run_moea_with_four_objectives_records_the_archive_size():
    """4 objectives f_j(x) = |x - c_j|^2 over integer vectors: a known front (the box between the centers)."""
    centers = np.array([[0, 0], [9, 0], [0, 9], [9, 9]])
    _, individual = min_types(4)
    tb = base.Toolbox()
    tb.register("individual", lambda: individual(random.randint(0, 9) for _ in range(2)))
    tb.register("population", tools.initRepeat, list, tb.individual)
    tb.register("mate", tools.cxUniform, indpb=0.5)
    tb.register("mutate", tools.mutUniformInt, low=0, up=9, indpb=0.5)
    tb.register("evaluate_batch", lambda inds: [tuple(((np.array(x) - centers) ** 2).sum(axis=1).tolist())
                                                for x in inds])
    log: dict = {}
    ga = GASettings(population=30, generations=25, cxpb=0.8, mutpb=0.3, seed=4)
    front, history = run_moea(tb, ga, "k4", "spea2", log=log)
    assert len(history) == 26 and history[-1] == len(front) and all(h >= 1 for h in history)
    assert log["ref"] is None and log["generations"] == 25
    # every point of the 10 x 10 grid is Pareto-optimal for these four objectives: the archive only grows
    assert history == sorted(history)
    assert len({tuple(i) for i in front}) == len(front) == history[-1] > 50
    again, hist2 = run_moea(tb, ga, "k4", "spea2")
    assert [list(i) for i in again] == [list(i) for i in front] and hist2 == history
    nsga, _ = run_moea(tb, ga, "k4", "nsga2")
    assert len(nsga) > 1
    with pytest.raises(DseError, match="reference point is for 2 objectives"):
        run_moea(tb, ga, "k4", ref=[1.0, 1.0])
    _, one = min_types(1)
    tb.register("population", tools.initRepeat, list, lambda: one([0, 0]))
    with pytest.raises(DseError, match="2 or more objectives"):
        run_moea(tb, ga, "k1")
