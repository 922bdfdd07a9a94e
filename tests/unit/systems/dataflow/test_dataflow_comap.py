"""Co-mapping of thesis Ch. 5 on toy problems: DL placement (sort + round robin + repair), Algorithm 7, the group
CPA, the DLA limit, and the three methods (Heuristic+GA, Entire-GA, Baseline) against exhaustive enumeration."""
from __future__ import annotations

import itertools

import pytest

from dse.systems.dataflow.comap import (Candidates, Group, Problem, algorithm7, baseline, build_apps, dataflow_wcrt, entire_ga,
                                evaluate, heuristic_ga, place_dl, run_method, utilization)
from dse.systems.dataflow.graphs import DataflowGraph, DataflowTask
from dse.core.errors import DseError
from dse.rt.cpa import CpaProblem
from dse.rt.model import App, Stage, Task


def T(w):
    return Task(float(w), float(w), float(w))


def chain(pre, *mid, post=300):
    """pre (CPU) -> inference stages ('g', [kernels]) / ('d', w) -> post (CPU)."""
    stages = [Stage("cpu", (T(pre),), "pre")]
    for kind, w in mid:
        stages.append(Stage("gpu", tuple(T(x) for x in w), "GPU") if kind == "g" else Stage("dla", (T(w),), "DLA"))
    stages.append(Stage("cpu", (T(post),), "post"))
    return tuple(stages)


def cands():
    """Per network: E (GPU only), A (DLA then GPU), C (DLA, DLA, GPU)."""
    def net(scale):
        return Candidates(
            chains=[chain(500, ("g", [800 * scale] * 4)),
                    chain(500, ("d", 2500 * scale), ("g", [300 * scale] * 2)),
                    chain(500, ("d", 1500 * scale), ("d", 1500 * scale), ("g", [200 * scale]))],
            n_dla=[0, 1, 2], labels=["E", "A 5", "C 3-7"])
    return {"big": net(2.0), "small": net(1.0)}


def pipeline(name="img"):
    tasks = (DataflowTask("read", {"cpu": 400}), DataflowTask("cvt", {"cpu": 600, "gpu": 80}),
             DataflowTask("filt", {"cpu": 3000, "gpu": 300}), DataflowTask("save", {"cpu": 300}))
    return DataflowGraph(name, tasks, (("read", "cvt"), ("cvt", "filt"), ("cvt", "save")))


def problem(dla_limit=4):
    groups = [Group("G1", 0, (pipeline(),), ("d1",), "filt"), Group("G2", 1, (pipeline(),), ("d2",), "filt")]
    return Problem(groups, {"d1": "big", "d2": "small"}, cands(), [0, 1, 2, 3], 2, dla_limit)


GA = {"population": 24, "generations": 30, "stall": 8, "seed": 0}


def test_dl_placement_sorts_and_round_robins_and_repairs_dla_sharing():
    c = cands()
    chains = {"a": c["big"].chains[2], "b": c["small"].chains[2]}      # two C apps: four DLA stages
    pl = place_dl(chains, [0, 1], 2)
    # CPU: the four pre/post tasks sorted by WCET (500, 500, 300, 300) alternate CPU0, CPU1
    assert [pl["a", 0], pl["b", 0], pl["a", 4], pl["b", 4]] == ["CPU0", "CPU1", "CPU0", "CPU1"]
    # DLA: sorted 3000, 3000, 1500, 1500 -> DLA0, DLA1, DLA0, DLA1 would give each app one per core already;
    # every app's two DLA stages end on different cores
    for a in "ab":
        assert pl[a, 1] != pl[a, 2]
    assert {pl["a", 1], pl["a", 2], pl["b", 1], pl["b", 2]} == {"DLA0", "DLA1"}


def test_repair_moves_a_colliding_dla_stage():
    big = chain(500, ("d", 5000), ("d", 4000), ("g", [100]))
    small = chain(500, ("d", 100), ("g", [100]))
    # sorted 5000 (a), 4000 (a), 100 (b): round robin gives a: DLA0, DLA1 -> no collision; make one with 3 apps
    chains = {"a": big, "b": small, "c": chain(500, ("d", 4500), ("g", [100]))}
    pl = place_dl(chains, [0], 2)
    # round robin: a1 5000 -> DLA0, c1 4500 -> DLA1, a2 4000 -> DLA0 (collision with a1) -> swapped with c1
    assert pl["a", 1] != pl["a", 2]
    assert sorted([pl["a", 1], pl["a", 2]]) == ["DLA0", "DLA1"]


def test_algorithm7_greedy_least_worst_utilization():
    p = problem()
    util = {"CPU0": 0.5, "CPU1": 0.1, "CPU2": 0.1, "CPU3": 0.1, "GPU": 0.05}
    out = algorithm7(p, dict(util), 10_000.0)
    by_name = {f"{p.groups[gi].name}/{t.name}": pe for (gi, _, t), pe in zip(p.df, out)}
    # the filters (largest WCET, 3000 us CPU = 0.3 vs 300 us GPU = 0.03) go to the GPU: max U 0.08 < 0.4
    assert by_name["G1/filt"] == "GPU" and by_name["G2/filt"] == "GPU"
    # CPU-only tasks go to the least-utilized cores, never CPU0 while others are far below it
    assert by_name["G1/read"] != "CPU0" and by_name["G1/save"] != "CPU0"
    # a hand check of the rule for one task: value = max over the type's PEs after adding it
    u = dict(util)
    single = Problem([Group("G", 0, (DataflowGraph("g", (DataflowTask("x", {"cpu": 1000, "gpu": 9000}),)),), ())],
                     {}, {}, [0, 1, 2, 3])
    assert algorithm7(single, u, 10_000.0) == ["CPU1"]            # CPU: max(0.5, 0.2) = 0.5 < GPU 0.95
    assert u["CPU1"] == pytest.approx(0.2)


def test_group_is_one_dag_with_the_dl_chain_grafted():
    p = problem()
    e = evaluate(p, 20.0, [0, 0])
    assert e.feasible, e.reason
    # G1's path: read -> cvt -> filt -> pre -> GPU -> post; save is a parallel branch
    assert set(e.wcrt_us) == {"G1", "G2"}
    assert e.max_ratio == pytest.approx(max(e.wcrt_us.values()) / 50_000)
    apps = [App("x", 50_000.0, 0, tuple(Stage("cpu", (T(1),)) for _ in range(2)))]
    assert utilization(apps, {("x", 0): "CPU0", ("x", 1): "CPU0"}) == {"CPU0": pytest.approx(2 / 50_000)}
    assert e.max_u == pytest.approx(max(e.util.values()))


def test_dla_limit_is_infeasible():
    p = problem(dla_limit=3)
    e = evaluate(p, 20.0, [2, 2])                       # 4 DLA stages
    assert not e.feasible and "engine limit" in e.reason and e.value == float("inf")
    late, later = evaluate(p, 100.0, [0, 0]), evaluate(p, 150.0, [0, 0])    # ranked by lateness, above 1e3
    assert not late.feasible and 1e3 < late.value < later.value < float("inf")
    assert evaluate(p, 20.0, [2, 1]).feasible           # 3


def exhaustive_heuristic(p, fps):
    best = None
    for g in itertools.product(*[range(n) for n in p.sizes()]):
        e = evaluate(p, fps, g)
        if e.feasible and (best is None or e.value < best.value):
            best = e
    return best


def test_heuristic_ga_finds_the_exhaustive_optimum_of_its_space():
    p = problem()
    out = heuristic_ga(p, 20.0, {**GA, "population": 4, "generations": 20})
    ref = exhaustive_heuristic(p, 20.0)
    assert out.best.feasible and out.best.value == pytest.approx(ref.value)


def test_entire_ga_is_at_least_as_good_as_heuristic_ga_and_baseline_is_feasible():
    p = problem()
    for fps in (20.0, 40.0):
        h, e, b = (run_method(p, m, fps, GA) for m in ("heuristic-ga", "entire-ga", "baseline"))
        assert e.best.feasible
        if h.best.feasible:             # seeded with Heuristic+GA's population: never worse
            assert e.best.value <= h.best.value + 1e-12
        assert e.seeded_from_fps == fps
        if b.best.feasible:
            assert e.best.max_u <= b.best.max_u + 1e-9 or e.best.value <= b.best.value


def test_entire_ga_seeds_from_a_looser_deadline_when_heuristic_finds_none():
    p = problem()
    # find a deadline where Algorithm 7 never is feasible but some explicit mapping is
    fps = 80.0
    h = heuristic_ga(p, fps, GA)
    e = entire_ga(p, fps, GA, loose_fps=10.0)
    if not h.best.feasible:
        assert e.seeded_from_fps == 10.0
    else:
        assert e.seeded_from_fps == fps


def test_dataflow_wcrt_is_the_longest_path_of_the_graph_tasks_alone():
    p = problem()
    df = ["CPU0", "CPU1", "CPU1", "CPU2"] * 2           # read, cvt, filt, save of G1 then G2
    e = evaluate(p, 20.0, [0, 0], df)
    apps, placement = build_apps(p, 50_000.0, p.chains_of([0, 0]), df, e.dl_placement)
    r = CpaProblem(apps, placement).analyse().stage_r_us
    for gi, g in enumerate(p.groups):
        # read -> cvt -> {filt, save}: the grafted pre -> GPU -> post behind filt is not part of it
        by_hand = r[g.name, 0] + r[g.name, 1] + max(r[g.name, 2], r[g.name, 3])
        assert dataflow_wcrt(p, gi, r) == pytest.approx(by_hand)
        assert e.df_ratios[g.name] == pytest.approx(by_hand / 50_000.0)
        assert e.df_ratios[g.name] < e.ratios[g.name]
    # a slower DL candidate moves the groups' WCRT but not the dataflow applications' (no shared PE here)
    slow = evaluate(p, 20.0, [1, 1], df)
    assert slow.ratios != e.ratios and slow.df_ratios == pytest.approx(e.df_ratios)


def test_baseline_first_phase_ignores_dataflow_tasks():
    p = problem()
    b = baseline(p, 20.0, GA)
    assert "dl_only_max_u" in b.phases and b.phases["dl_only_max_u"] <= b.best.max_u + 1e-12


def test_methods_are_deterministic_per_seed():
    p = problem()
    a = run_method(p, "entire-ga", 30.0, GA)
    b = run_method(p, "entire-ga", 30.0, GA)
    assert a.best.value == b.best.value and a.best.df_pes == b.best.df_pes
    with pytest.raises(DseError, match="valid choices"):
        run_method(p, "annealing", 30.0, GA)


def test_bad_problems_are_named():
    with pytest.raises(DseError, match="graft task 'nope'"):
        Problem([Group("G", 0, (pipeline(),), ("d1",), "nope")], {"d1": "big"}, cands(), [0])
    with pytest.raises(DseError, match="DL app 'd9'"):
        Problem([Group("G", 0, (pipeline(),), ("d9",), "filt")], {"d1": "big"}, cands(), [0])
    with pytest.raises(DseError, match="period"):
        evaluate(problem(), 0.0 or -1.0, [0, 0])
