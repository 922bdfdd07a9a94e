"""Schedule-based multi-app analysis (seed 002 Sec. VI-A, Eqs. (10)/(11)): hand-computed examples, the ceil of
the demand bound, bad inputs, the single-app model's latency and the population variant."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from dse.core.errors import DseError
from dse.rt.schedule_based import (RESPONSES, MappedApp, MultiAppProblem, alap, asap, demand_bound, mobility)
from dse.rt.schedule_based import analyse as _analyse

CPU, GPU, NPU = 0, 1, 2
PREEMPTIVE = (True, False, False)      # CPU preemptive, GPU and NPU not


def analyse(apps, preemptive, response="per-task"):
    """The hand-computed examples below are one frame at a time unless they say "pipelined"."""
    return _analyse(apps, preemptive, response)


def app(name, period, prio, pe, t, preds):
    return MappedApp(name, period, prio, tuple(pe), tuple(t), tuple(tuple(p) for p in preds))


# -- one app alone ----------------------------------------------------------------------------------------------

# diamond on two PEs: a(PE0,10) -> b(PE0,20), a -> c(PE1,5), b,c -> d(PE1,8); e(PE0,25) after a only, but after
# b on PE0 in the ASAP order (that order, not a data edge, makes b critical)
DIAMOND = dict(pe=(0, 0, 1, 1, 0), t=(10, 20, 5, 8, 25), preds=((), (0,), (0,), (1, 2), (0,)))


def test_single_app_asap_alap_mobility_by_hand():
    a = app("x", 60, 0, **DIAMOND)
    # ASAP (list schedule, index order): a 0-10, b 10-30, c 10-15, d max(PE1 free 15, b 30) = 30-38, e waits for
    # PE0 after b: 30-55. Makespan 55.
    assert asap(a).tolist() == [0, 10, 10, 30, 30]
    # ALAP from 60: e 35 (last on PE0); d 52 (last on PE1); c: succ d 52, next on PE1 = d -> 47; b: succ d 52 but
    # next on PE0 = e 35 -> 15 (not 32); a: succs b 15, c 47, e 35, next on PE0 = b 15 -> 5.
    assert alap(a).tolist() == [5, 15, 47, 52, 35]
    assert mobility(a).tolist() == [5, 5, 37, 22, 5]
    res = analyse([a], [True, False])
    r = res.app("x")
    assert r.alone_us == 55 and r.response_us == 55
    assert r.slack_us == (5, 5, 37, 22, 5)             # alone: nothing to subtract, slack = MAI
    assert r.interference_us == (0,) * 5
    assert res.schedulable and res.response_us == (55,)


def test_single_app_schedulable_iff_makespan_within_period():
    assert analyse([app("x", 55, 0, **DIAMOND)], [True, True]).schedulable          # == makespan: ok
    tight = analyse([app("x", 54.9, 0, **DIAMOND)], [True, True])
    assert not tight.schedulable
    assert min(tight.apps[0].slack_us) == pytest.approx(-0.1)                      # the critical path's MAI
    assert tight.apps[0].response_us == 55


def _random_dag(rng, n, p_edge=0.2):
    """A chain plus random forward edges (p_edge = 0.02 is about DNN-like: ~1.6 predecessors per task)."""
    return tuple(tuple(sorted({j - 1} | {i for i in range(j - 1) if rng.random() < p_edge})) if j else ()
                 for j in range(n))


def test_asap_is_the_single_app_model_latency():
    from dse.taskgraph import AnalyticModel, LinearComm, PeSet, ProfileTable, TaskGraph
    rng = np.random.default_rng(3)
    py = random.Random(3)
    for n in (1, 7, 25):
        preds = _random_dag(py, n)
        src = [p for j in range(n) for p in preds[j]]
        dst = [j for j in range(n) for _ in preds[j]]
        g = TaskGraph(names=tuple(f"t{i}" for i in range(n)), layers=tuple((i,) for i in range(n)),
                      op_types=("Conv",) * n, macs=np.ones(n), src=src, dst=dst,
                      nbytes=rng.integers(1_000, 50_000, len(src)))
        t1 = rng.uniform(20, 400, n)
        prof = ProfileTable(kinds=("cpu1", "gpu"), time_us=np.column_stack([t1, t1 / 3]), source="test",
                            graph_digest=g.digest, tasks=g.names)
        model = AnalyticModel(g, prof, PeSet.build("1-1", ["gpu"]), LinearComm(1.0, 5.0))
        for _ in range(5):
            m = rng.integers(0, model.P, n)
            occ = model.occupancy(m)
            a = MappedApp("x", 1e9, 0, tuple(m.tolist()), tuple(occ.tolist()), preds)
            assert float((asap(a) + occ).max()) == pytest.approx(model.latency(m))
            assert analyse([a], [True] * model.P).apps[0].alone_us == pytest.approx(model.latency(m))
            # pipelined, an app alone answers in the single-app model's period: its longest PE cluster
            alone = analyse([a], [True] * model.P, "pipelined").apps[0]
            assert alone.alone_us == alone.response_us == pytest.approx(float(model.evaluate(m).period_raw))


# -- two apps in the shape of Fig. 10 ---------------------------------------------------------------------------

# A (priority 0, P 100): A1 CPU 10 -> A2 GPU 20, A1 -> A3 GPU 15, A2,A3 -> A4 CPU 5.
# B (priority 1, P 200): B1 CPU 10 -> B2 NPU 10, B1 -> B3 GPU 25, B1 -> B4 CPU 20, B2,B3 -> B5 NPU 15.
FIG10_A = app("A", 100, 0, (CPU, GPU, GPU, CPU), (10, 20, 15, 5), ((), (0,), (0,), (1, 2)))
FIG10_B = app("B", 200, 1, (CPU, NPU, GPU, CPU, NPU), (10, 10, 25, 20, 15), ((), (0,), (0,), (0,), (1, 2)))


def test_fig10_b3_delayed_by_a2_a3_and_b5_by_b3():
    res = analyse([FIG10_A, FIG10_B], PREEMPTIVE)
    a, b = res.app("A"), res.app("B")
    # alone: A 0-10, 10-30, 30-45, 45-50; B 0-10, 10-20, 10-35, 10-30, B5 after B3: 35-50
    assert a.asap_us == (0, 10, 30, 45) and a.alone_us == 50
    assert b.asap_us == (0, 10, 10, 10, 35) and b.alone_us == 50
    # MAI: A all on the critical path (100 - 50); B from 200: B5 185, B4 180, B3 160, B2 175, B1 150
    assert a.mai_us == (50, 50, 50, 50)
    assert b.mai_us == (150, 165, 150, 170, 150)
    # dbf_pe(A, P_B = 200) = ceil(200/100) = 2 jobs: CPU 2*(10+5) = 30, GPU 2*(20+15) = 70 (B3 waits for A2, A3
    # twice), NPU 0; B is the lowest priority: no blocking
    assert b.interference_us == (30, 0, 70, 30, 0)
    assert b.slack_us == (120, 165, 80, 140, 150)
    # B's response: B1 30-40, B2 40-50, B3 40+70 = 110-135, B4 max(40, 40)+30 = 70-90, B5 waits for B3: 135-150
    assert b.response_us == 150
    # A has no higher-priority app; on the non-preemptive GPU it can be blocked by B3 (25), on the CPU not
    assert a.interference_us == (0, 25, 25, 0)
    assert a.slack_us == (50, 25, 25, 50)
    # A: A1 0-10, A2 10+25 = 35-55, A3 55+25 = 80-95, A4 95-100 == P_A
    assert a.response_us == 100
    assert res.schedulable and a.schedulable and b.schedulable
    d = json.loads(json.dumps(res.to_dict()))
    assert d["schedulable"] is True and d["apps"][1]["slack_us"] == [120, 165, 80, 140, 150]
    assert d["apps"][0]["name"] == "A" and d["apps"][0]["response_us"] == 100


def test_fig10_with_a_on_the_cpu_only_the_delay_moves_to_b1_and_b4():
    # move A2, A3 to the CPU: B3 on the GPU is no longer delayed by A, B1 and B4 on the CPU are (twice A's load)
    a_cpu = app("A", 100, 0, (CPU, CPU, CPU, CPU), (10, 20, 15, 5), FIG10_A.preds)
    b = analyse([a_cpu, FIG10_B], PREEMPTIVE).app("B")
    # dbf_CPU(A, 200) = 2 * 50 = 100: B1 100-110, B2 110-120, B3 110-135, B4 max(110,110)+100 = 210-230, B5 135-150
    assert b.interference_us == (100, 0, 0, 100, 0)
    assert b.response_us == 230 and not b.schedulable
    assert b.slack_us == (50, 165, 150, 70, 150)        # all slacks >= 0, yet R > P: response decides


# -- Eq. (11) vs Eq. (10): blocking by a long lower-priority task ------------------------------------------------

H = app("H", 50, 0, (0,), (10,), ((),))
L = app("L", 200, 1, (0, 1), (45, 50), ((), (0,)))          # l1 on the shared PE 0, l2 (longer) on PE 1


def test_eq11_blocking_breaks_what_eq10_accepts():
    pre = analyse([H, L], [True, False])
    non = analyse([H, L], [False, False])
    assert pre.schedulable and not non.schedulable
    hp, hn = pre.app("H"), non.app("H")
    lp_, ln = pre.app("L"), non.app("L")
    # H: MAI 50 - 10 = 40; preemptive PE 0: nothing subtracted; non-preemptive: blocked by l1 (45), not by l2
    # (50, on the other PE)
    assert hp.slack_us == (40,) and hp.response_us == 10
    assert hn.interference_us == (45,) and hn.slack_us == (-5,) and hn.response_us == 55
    assert not hn.schedulable
    # L: MAI 200 - 95 = 105; only higher-priority demand dbf_0(H, 200) = 4 * 10 = 40, the same under both rules
    assert lp_.slack_us == ln.slack_us == (65, 105)
    assert lp_.interference_us == ln.interference_us == (40, 0)
    assert lp_.response_us == ln.response_us == 135 and ln.schedulable


def test_middle_priority_app_pays_summed_demand_and_largest_blocking():
    top = app("top", 100, 0, (0,), (10,), ((),))
    mid = app("mid", 300, 5, (0,), (20,), ((),))
    low1 = app("low1", 1000, 7, (0, 0), (30, 60), ((), (0,)))
    low2 = app("low2", 1000, 9, (0,), (40,), ((),))
    top2 = app("top2", 150, 1, (0, 1), (5, 99), ((), (0,)))
    res = analyse([low2, mid, top, low1, top2], [False, True])
    m = res.app("mid")
    # hp: top ceil(300/100)=3 * 10 + top2 ceil(300/150)=2 * 5 (its PE-0 task only) = 40; blocking max(30, 60, 40)
    assert m.interference_us == (100,)
    assert m.slack_us == (300 - 20 - 100,) and m.response_us == 120
    assert res.app("top").interference_us == (60,)            # only blocking: the largest lower task on PE 0
    # low2 (lowest): top 10*10 + top2 7*5 + mid 4*20 + low1 1*90, no blocking
    assert res.app("low2").interference_us == (100 + 35 + 80 + 90,)


# -- demand bound ----------------------------------------------------------------------------------------------

def test_demand_bound_ceil():
    a = app("A", 100, 0, (0, 1, 0), (10, 7, 5), ((), (0,), (1,)))
    assert demand_bound(a, 0, 0) == 0
    assert demand_bound(a, 0, 100) == 15                  # exactly one period: one job
    assert demand_bound(a, 0, 100.001) == 30              # just above: a second job
    assert demand_bound(a, 0, 300) == 45
    assert demand_bound(a, 0, (0.1 + 0.2) * 1000) == 45   # 300.00000000000006: float noise is not a job
    assert demand_bound(a, 0, 300.01) == 60
    assert demand_bound(a, 1, 250) == 21
    assert demand_bound(a, 2, 1000) == 0                  # nothing of A on PE 2
    with pytest.raises(DseError, match="-1"):
        demand_bound(a, 0, -1)


# -- bad inputs ------------------------------------------------------------------------------------------------

def test_bad_inputs_name_the_value():
    good = app("A", 100, 0, (0, 1), (10, 5), ((), (0,)))
    with pytest.raises(DseError, match="priority 3"):
        analyse([app("A", 100, 3, (0,), (1,), ((),)), app("B", 100, 3, (0,), (1,), ((),))], [True])
    with pytest.raises(DseError, match="PE id 2 out of range"):
        analyse([app("A", 100, 0, (0, 2), (10, 5), ((), (0,)))], [True, False])
    with pytest.raises(DseError, match="predecessor 1"):
        app("A", 100, 0, (0, 1), (10, 5), ((1,), ()))
    with pytest.raises(DseError, match="predecessor 2"):
        app("A", 100, 0, (0, 1, 0), (10, 5, 1), ((), (2,), ()))
    with pytest.raises(DseError, match="time -5"):
        app("A", 100, 0, (0, 1), (10, -5), ((), (0,)))
    with pytest.raises(DseError, match="time nan"):
        app("A", 100, 0, (0, 1), (10, float("nan")), ((), (0,)))
    with pytest.raises(DseError, match="period"):
        app("A", 0, 0, (0,), (1,), ((),))
    with pytest.raises(DseError, match="lengths 2, 1, 2"):
        app("A", 100, 0, (0, 1), (10,), ((), (0,)))
    with pytest.raises(DseError, match="PE id -1"):
        app("A", 100, 0, (-1,), (1,), ((),))
    with pytest.raises(DseError, match="unique"):
        analyse([good, app("A", 100, 1, (0,), (1,), ((),))], [True, True])
    prob = MultiAppProblem.from_apps([good], [True, True])
    with pytest.raises(DseError, match="PE id 7 out of range"):
        prob.analyse([(0, 7)], [(1, 1)])
    with pytest.raises(DseError, match="time -1"):
        prob.analyse([(0, 1)], [(1, -1)])
    with pytest.raises(DseError, match="PE id must be an integer, got 1.5"):
        prob.analyse([(0, 1.5)], [(1, 1)])
    with pytest.raises(DseError, match="PE id 2 out of range"):
        prob.analyse_population([np.array([[0, 1], [0, 2]])], [np.ones((2, 2))])


# -- the population variant and speed ----------------------------------------------------------------------------

def _random_apps(rng: random.Random, n_apps, n_tasks, n_pe, p_edge=0.2):
    prios = rng.sample(range(10), n_apps)
    return [app(f"a{k}", rng.uniform(0.5, 3.0) * 1000, prios[k],
                [rng.randrange(n_pe) for _ in range(n_tasks[k])], [rng.uniform(0, 80) for _ in range(n_tasks[k])],
                _random_dag(rng, n_tasks[k], p_edge)) for k in range(n_apps)]


@pytest.mark.parametrize("response", ["pipelined", "per-task"])
def test_population_equals_one_by_one_on_random_inputs(response):
    rng = random.Random(11)
    nrng = np.random.default_rng(11)
    verdicts = []
    for trial in range(6):
        n_pe = rng.randint(1, 4)
        preemptive = [rng.random() < 0.5 for _ in range(n_pe)]
        apps = _random_apps(rng, rng.randint(1, 4), [rng.randint(1, 20) for _ in range(4)], n_pe)
        prob = MultiAppProblem.from_apps(apps, preemptive, response)
        pop = 9
        pes = [nrng.integers(0, n_pe, (pop, a.n)) for a in apps]
        times = [nrng.uniform(0, 80, (pop, a.n)) * (nrng.random((pop, a.n)) < 0.9) for a in apps]
        out = prob.analyse_population(pes, times)
        for j in range(pop):
            one = prob.analyse([x[j] for x in pes], [x[j] for x in times])
            for k, r in enumerate(one.apps):
                assert out.response_us[j, k] == pytest.approx(r.response_us, rel=1e-12)
                assert out.alone_us[j, k] == pytest.approx(r.alone_us, rel=1e-12)
                assert out.slack_us[k][j] == pytest.approx(r.slack_us, rel=1e-12, abs=1e-9)
                assert out.min_slack_us[j, k] == pytest.approx(min(r.slack_us), rel=1e-12, abs=1e-9)
                assert out.app_schedulable[j, k] == r.schedulable
            assert out.schedulable[j] == one.schedulable
            verdicts.append(one.schedulable)
            # the one-shot API on MappedApps agrees with the prepared problem
            mapped = [MappedApp(a.name, a.period_us, a.priority, tuple(pes[k][j].tolist()),
                                tuple(times[k][j].tolist()), a.preds) for k, a in enumerate(apps)]
            assert analyse(mapped, preemptive, response) == one
    assert any(verdicts) and not all(verdicts)          # both outcomes exercised


def test_the_window_bound_charges_each_pe_once():
    """H (priority 0) holds the non-preemptive GPU 10 us per 100 us; L runs a 3-task chain of 5 us there. Per task,
    L's bound is 15 + 3 x 10 = 45; charged once per PE it is 15 + (ceil(R/100) + 1) x 10 = 35 (H carried in and
    one job of H released in the window), and L's chain is entered once, so H is blocked by one L task only."""
    apps = [app("H", 100, 0, [0], [10], [()]), app("L", 100, 1, [0, 0, 0], [5, 5, 5], [(), (0,), (1,)])]
    per_task, window = analyse(apps, [False]), analyse(apps, [False], response="window")
    assert per_task.app("L").response_us == pytest.approx(45) and window.app("L").response_us == pytest.approx(35)
    assert per_task.app("H").response_us == window.app("H").response_us == pytest.approx(15)
    assert window.app("L").slack_us == per_task.app("L").slack_us       # Eqs. (10)/(11) are the same either way
    with pytest.raises(DseError, match="unknown response bound 'busy'; valid choices: pipelined, per-task, window"):
        analyse(apps, [False], response="busy")


def test_the_window_bound_counts_entries_on_each_pe():
    """A task whose predecessor ran on another PE can find a lower-priority task running: L's chain GPU -> CPU ->
    GPU enters the GPU twice, so H pays blocking once and L's window bound sees H's demand on the GPU once."""
    apps = [app("H", 1000, 0, [1, 1, 1], [10, 10, 10], [(), (0,), (1,)]),
            app("L", 1000, 1, [1, 0, 1], [5, 7, 5], [(), (0,), (1,)])]
    res = analyse(apps, [True, False], response="window")
    assert res.app("H").response_us == pytest.approx(30 + 5)          # one entry: H's chain stays on the GPU
    assert res.app("L").response_us == pytest.approx(17 + 2 * 30)     # (ceil(R/1000) + 1) x 30 on the GPU


def test_the_window_population_equals_one_by_one():
    rng = random.Random(7)
    nrng = np.random.default_rng(7)
    for _ in range(5):
        apps = _random_apps(rng, 3, [6, 9, 5], 3)
        preemptive = [True, False, False]
        prob = MultiAppProblem.from_apps(apps, preemptive, response="window")
        pes = [nrng.integers(0, 3, (12, a.n)) for a in apps]
        times = [nrng.uniform(0, 300, (12, a.n)) for a in apps]
        out = prob.analyse_population(pes, times)
        for j in range(12):
            one = prob.analyse([p[j] for p in pes], [t[j] for t in times])
            for k, r in enumerate(one.apps):
                assert out.response_us[j, k] == pytest.approx(r.response_us, rel=1e-12)
                assert out.app_schedulable[j, k] == r.schedulable


# -- the pipelined reading (the seed's) -------------------------------------------------------------------------

def test_pipelined_stages_by_hand():
    """H (priority 0, P 100) holds the non-preemptive GPU 10 us; L (priority 1, P 100) runs GPU 5 -> CPU 7 -> GPU 5.
    Pipelined, L's stages are GPU 10 and CPU 7: alone it answers in 10 (its longest stage). On the GPU, L waits for
    one job of H: R = 10 + ceil(R / 100) x 10 = 20; H is blocked by one L task: 10 + 5 = 15. Eq. (11): MAI = P - C
    of the task's stage, minus the same interference as one frame at a time."""
    apps = [app("H", 100, 0, [1], [10], [()]), app("L", 100, 1, [1, 0, 1], [5, 7, 5], [(), (0,), (1,)])]
    res = _analyse(apps, [True, False])
    h, lo = res.app("H"), res.app("L")
    assert (h.alone_us, h.response_us, h.slack_us) == (10, 15, (100 - 10 - 5,))
    assert (lo.alone_us, lo.response_us) == (10, 20) and res.schedulable
    assert lo.asap_us == (0, 0, 5) and lo.mai_us == (90, 93, 90)        # offsets within each PE's stage
    assert lo.slack_us == (80, 93, 80)
    assert _analyse(apps, [True, False]) == _analyse(apps, [True, False], "pipelined")     # the default


def test_pipelined_response_is_a_least_fixed_point():
    """H: 3 us every 10 us on a preemptive CPU; L: 12 us there per 100 us. R = 12 + ceil(R / 10) x 3: from 15,
    ceil(1.5) = 2 -> 18, a fixed point. At P_L = 17 the CPU's utilization is 12/17 + 3/10 > 1: no R <= P exists,
    the response is 10 periods x that utilization, and Eq. (10) fails: 17 - 12 - ceil(17 / 10) x 3 = -1."""
    hi = app("H", 10, 0, [0], [3], [()])
    lo = app("L", 100, 1, [0, 0], [4, 8], [(), (0,)])
    res = _analyse([hi, lo], [True])
    assert res.app("L").response_us == 18 and res.app("L").slack_us == (100 - 12 - 30,) * 2 and res.schedulable
    tight = _analyse([hi, MappedApp("L", 17, 1, lo.pe, lo.time_us, lo.preds)], [True]).app("L")
    assert tight.response_us == pytest.approx(170 * (12 / 17 + 0.3)) and tight.slack_us == (-1, -1)
    assert not tight.schedulable
    roomy = _analyse([hi, MappedApp("L", 20, 1, lo.pe, lo.time_us, lo.preds)], [True]).app("L")
    assert roomy.response_us == 18 and roomy.slack_us == (2, 2) and roomy.schedulable
    assert set(RESPONSES) == {"pipelined", "per-task", "window"}
