"""CPA engine (thesis eqs. 4.1, 4.2, jitter): worked examples, a textbook RTA, and monotonicity properties."""
from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np
import pytest

from dse.core.errors import DseError
from dse.rt.cpa import CpaProblem, analyse, fifo_blocking, max_fps
from dse.rt.model import App, Stage, Task

OPTIONS = {"A": "dg", "B": "gdg", "C": "ddg", "D": "gddg", "E": "g"}


def T(w, b=None, a=None):
    return Task(float(w), float(a if a is not None else w), float(b if b is not None else w))


def S(kind, *wcets):
    return Stage(kind, tuple(T(w) for w in wcets))


def random_scenario(rng: random.Random, n_apps=(2, 3), cpu_cores=2, period_factor=(1.0, 2.5)):
    """Random pipelined apps (pre CPU, option A-E inference stages, post CPU) with an Alg.-5-like round-robin
    placement and a common period = factor x the largest all-max WCRT (so DVFS has something to trade)."""
    apps, placement, cpu_i, dla_i = [], {}, 0, 0
    n = rng.randint(*n_apps)
    prios = list(range(n))
    rng.shuffle(prios)
    for a in range(n):
        stages = []
        for si, k in enumerate("c" + OPTIONS[rng.choice("ABCDE")] + "c"):
            if k == "c":
                w = rng.uniform(300, 2000)
                st, pe, cpu_i = Stage("cpu", (T(w, 0.5 * w, 0.8 * w),)), f"CPU{cpu_i}", (cpu_i + 1) % cpu_cores
            elif k == "g":
                ws = [rng.uniform(100, 1500) for _ in range(rng.randint(2, 10))]
                st, pe = Stage("gpu", tuple(T(w, 0.5 * w, 0.8 * w) for w in ws)), "GPU"
            else:
                w = rng.uniform(2000, 8000)
                st, pe, dla_i = Stage("dla", (T(w, 0.5 * w, 0.8 * w),)), f"DLA{dla_i}", (dla_i + 1) % 2
            stages.append(st)
            placement[f"app{a}", si] = pe
        apps.append(App(f"app{a}", 1e9, prios[a], tuple(stages), network=f"net{a % 2}"))
    wcrt = analyse(apps, placement).wcrt_us
    period = max(wcrt.values()) * rng.uniform(*period_factor)
    return [replace(a, period_us=period) for a in apps], placement


def naive_blocking(s_n, w, ps, pe):
    """Literal eq. 4.2: unroll enough jobs of s_e and take the best window of n_int consecutive kernels."""
    n_int = min(s_n, (math.ceil(ps / pe) + 1) * len(w))
    seq = list(w) * (n_int // len(w) + 2)
    return max(sum(seq[k:k + n_int]) for k in range(len(w)))


# ---------------------------------------------------------------- eq. 4.2


def test_thesis_kernel_count_examples():
    # l. 1349: |s| = 7, |s_e| = 3, equal periods -> 6 interfering kernels = two whole jobs of s_e
    assert fifo_blocking(7, S("gpu", 1, 2, 4), 100, 100) == 2 * 7          # 7 kernels would give 18, 3 give 7
    # Ch.5 l. 1775: |s| = 5, |s_e| = 2 -> 4 kernels
    assert fifo_blocking(5, S("gpu", 1, 2), 100, 100) == 2 * 3             # 5 kernels would give 8
    # fewer kernels in s than in s_e: the best window of |s| consecutive kernels, wrapping across jobs
    assert fifo_blocking(2, S("gpu", 5, 1, 1, 4), 100, 100) == 9           # 4 then 5 of the next job
    assert fifo_blocking(1, S("gpu", 5, 1, 1, 4), 100, 100) == 5
    # a 3x longer period of s: ceil(3) + 1 = 4 jobs of s_e; scale multiplies
    assert fifo_blocking(100, S("gpu", 1, 2, 4), 300, 100) == 4 * 7
    assert fifo_blocking(100, S("gpu", 1, 2, 4), 300, 100, scale_e=1.5) == pytest.approx(1.5 * 28)


def test_blocking_matches_literal_unrolling():
    rng = random.Random(7)
    for _ in range(300):
        w = [rng.randint(1, 50) for _ in range(rng.randint(1, 9))]
        s_n, ps, pe = rng.randint(1, 40), rng.choice([100, 150, 200, 300]), rng.choice([100, 150, 300])
        assert fifo_blocking(s_n, S("gpu", *w), ps, pe) == naive_blocking(s_n, w, ps, pe), (s_n, w, ps, pe)


def test_gpu_stage_response_is_own_plus_blocking_of_other_apps_only():
    a = App("a", 1e5, 0, (S("gpu", 10, 20, 30), S("dla", 500), S("gpu", 40)))
    b = App("b", 1e5, 1, (S("gpu", 7, 1, 1, 9),))
    pl = {("a", 0): "GPU", ("a", 1): "DLA0", ("a", 2): "GPU", ("b", 0): "GPU"}
    r = analyse([a, b], pl).stage_r_us
    assert r["a", 0] == 60 + fifo_blocking(3, b.stages[0], 1e5, 1e5) == 60 + 17   # 9 + 7 wraps
    assert r["a", 2] == 40 + 9                                          # its own stage 0 does not interfere
    assert r["b", 0] == 18 + fifo_blocking(4, a.stages[0], 1e5, 1e5) + fifo_blocking(4, a.stages[2], 1e5, 1e5)


def test_dla_stage_response_is_own_plus_other_dla_stages():
    apps = [App(n, 1e6, i, (S("dla", w), S("gpu", 1))) for i, (n, w) in enumerate(
        [("a", 3000), ("b", 2000), ("c", 1000), ("d", 4000)])]
    pl = {("a", 0): "DLA0", ("b", 0): "DLA0", ("c", 0): "DLA0", ("d", 0): "DLA1"}
    pl.update({(n, 1): "GPU" for n in "abcd"})
    r = analyse(apps, pl).stage_r_us
    assert (r["a", 0], r["b", 0], r["c", 0], r["d", 0]) == (6000, 6000, 6000, 4000)
    assert analyse(apps, pl, {"dla": 2.0}).stage_r_us["a", 0] == 12000


# ---------------------------------------------------------------- eq. 4.1 and jitter


def test_textbook_fixed_priority_rta():
    # C = (1, 2, 3), T = (4, 6, 12), rate-monotonic on one core -> R = (1, 3, 10)
    apps = [App(f"t{i}", p, i, (S("cpu", c),)) for i, (c, p) in enumerate([(1, 4), (2, 6), (3, 12)])]
    res = analyse(apps, {(f"t{i}", 0): "CPU0" for i in range(3)})
    assert [res.stage_r_us[f"t{i}", 0] for i in range(3)] == [1, 3, 10]
    assert res.schedulable and res.wcrt_us == {"t0": 1, "t1": 3, "t2": 10}
    # on another core nothing interferes
    res = analyse(apps, {("t0", 0): "CPU0", ("t1", 0): "CPU0", ("t2", 0): "CPU1"})
    assert res.stage_r_us["t2", 0] == 3


def test_equal_priority_interferes_both_ways_and_own_app_never():
    a, b = App("a", 10, 0, (S("cpu", 1), S("cpu", 1))), App("b", 10, 0, (S("cpu", 2),))
    res = analyse([a, b], {("a", 0): "CPU0", ("a", 1): "CPU0", ("b", 0): "CPU0"})
    assert res.stage_r_us["b", 0] == 2 + 1 + 1      # both tasks of a (equal priority)
    assert res.stage_r_us["a", 0] == 1 + 2          # b only; a's other task is its own chain
    assert res.stage_r_us["a", 1] == 1 + 2
    # lower priority (larger number) of b: it no longer interferes with a
    res = analyse([a, replace(b, priority=1)], {("a", 0): "CPU0", ("a", 1): "CPU0", ("b", 0): "CPU0"})
    assert res.stage_r_us["a", 0] == 1 and res.stage_r_us["b", 0] == 4


def test_jitter_raises_interference():
    def scenario(gpu_bcet):
        hi = App("hi", 10, 0, (S("cpu", 1), Stage("gpu", (T(5, gpu_bcet),)), S("cpu", 2)))
        lo = App("lo", 100, 1, (S("cpu", 7),))
        pl = {("hi", 0): "CPU1", ("hi", 1): "GPU", ("hi", 2): "CPU0", ("lo", 0): "CPU0"}
        return analyse([hi, lo], pl)

    steady, jittery = scenario(5), scenario(1)
    assert steady.jitter_us["hi", 2] == 0 and steady.stage_r_us["lo", 0] == 9       # 7 + 1 * 2
    assert jittery.jitter_us["hi", 2] == 4                                           # (5 - 1) from the GPU stage
    assert jittery.stage_r_us["lo", 0] == 11                                         # ceil((9 + 4) / 10) = 2 hits
    assert jittery.jitter_us["lo", 0] == 0 and jittery.wcrt_us["hi"] == 8


def test_result_is_a_fixed_point_of_eq_4_1_and_the_jitter_rule():
    rng = random.Random(3)
    checked = 0
    for _ in range(60):
        apps, pl = random_scenario(rng, n_apps=(3, 4), cpu_cores=1, period_factor=(1.5, 3.0))
        res = analyse(apps, pl)
        if not res.schedulable:
            continue
        checked += 1
        for app in apps:
            acc = 0.0
            for si, st in enumerate(app.stages):
                assert res.jitter_us[app.name, si] == pytest.approx(acc)
                acc += res.stage_r_us[app.name, si] - st.bcet_us
                if st.kind != "cpu":
                    continue
                r = res.stage_r_us[app.name, si]
                rhs = st.wcet_us + sum(
                    math.ceil((r + res.jitter_us[o.name, oi]) / o.period_us - 1e-9) * ost.wcet_us
                    for o in apps if o.name != app.name and o.priority <= app.priority
                    for oi, ost in enumerate(o.stages) if pl[o.name, oi] == pl[app.name, si])
                assert r == pytest.approx(rhs)
    assert checked >= 20


def test_divergence_and_iteration_cap_are_unschedulable():
    apps = [App("a", 10, 0, (S("cpu", 6),)), App("b", 10, 1, (S("cpu", 6),))]
    res = analyse(apps, {("a", 0): "CPU0", ("b", 0): "CPU0"})
    assert not res.schedulable and "app b" in res.reason and "diverges" in res.reason
    hi = App("hi", 10, 0, (S("cpu", 1), Stage("gpu", (T(5, 1),)), S("cpu", 2)))
    lo = App("lo", 100, 1, (S("cpu", 7),))
    pl = {("hi", 0): "CPU1", ("hi", 1): "GPU", ("hi", 2): "CPU0", ("lo", 0): "CPU0"}
    assert analyse([hi, lo], pl).schedulable
    capped = analyse([hi, lo], pl, max_iter=1)      # the jitter changed in the only iteration allowed
    assert not capped.schedulable and "converge" in capped.reason


def test_reason_names_the_missing_app_and_the_margin():
    apps = [App("ok", 100, 0, (S("gpu", 10),)), App("late", 25, 1, (S("gpu", 20),))]
    res = analyse(apps, {("ok", 0): "GPU", ("late", 0): "GPU"})
    assert not res.schedulable
    assert "late" in res.reason and "30.0 us > period 25.0 us" in res.reason and "by 5.0 us" in res.reason


def test_bad_placements_are_named():
    app = App("net", 100, 0, (S("cpu", 1), S("gpu", 1)))
    with pytest.raises(DseError, match=r"app net stage 1 .*gpu stage.*DLA0"):
        analyse([app], {("net", 0): "CPU0", ("net", 1): "DLA0"})
    with pytest.raises(DseError, match="app net stage 1 .*no PE"):
        analyse([app], {("net", 0): "CPU0"})
    with pytest.raises(DseError, match="unknown scale kind"):
        analyse([app], {("net", 0): "CPU0", ("net", 1): "GPU"}, {"npu": 1.0})
    # a placement covering more apps than the scenario is fine (one static placement for all scenarios)
    assert analyse([app], {("net", 0): "CPU0", ("net", 1): "GPU", ("other", 0): "GPU"}).schedulable


# ---------------------------------------------------------------- monotonicity and max FPS


def test_wcrt_non_increasing_as_frequencies_rise():
    rng = random.Random(11)
    for _ in range(40):
        apps, pl = random_scenario(rng, n_apps=(2, 4), cpu_cores=1)
        prob = CpaProblem(apps, pl)
        prev = None
        for s in np.linspace(2.0, 1.0, 6):     # fmax/f falling = frequencies rising
            scale = {"gpu": s, "cpu": 1 + (s - 1) * 0.5, "dla": s ** 0.5}
            res = prob.analyse(scale)
            if prev is not None:
                assert res.schedulable or not prev.schedulable
                if prev.schedulable:
                    for name, w in res.wcrt_us.items():
                        assert w <= prev.wcrt_us[name] + 1e-9
            prev = res
        assert prev.schedulable                # the period factor >= 1 keeps all-max schedulable


def test_schedulability_monotone_in_the_common_period():
    rng = random.Random(5)
    for _ in range(30):
        apps, pl = random_scenario(rng, n_apps=(2, 4), cpu_cores=1, period_factor=(1.0, 1.0))
        flags = [analyse([replace(a, period_us=p) for a in apps], pl).schedulable
                 for p in np.linspace(0.3, 2.0, 40) * apps[0].period_us]
        assert flags == sorted(flags), flags     # False ... False True ... True


def test_max_fps_agrees_with_a_linear_scan():
    rng = random.Random(2)
    apps, pl = random_scenario(rng, n_apps=(3, 3), cpu_cores=1)
    best = max_fps(apps, pl, hi=200)
    scan = [k / 10 for k in range(10, 2001)
            if analyse([replace(a, period_us=1e6 / (k / 10)) for a in apps], pl).schedulable]
    assert scan and best == max(scan)
    assert max_fps(apps, pl, {"gpu": 2.0}, hi=200) < best
    assert max_fps(apps, pl, lo=best + 1, hi=200) == 0.0
    assert max_fps(apps, pl, hi=best / 2) == pytest.approx(math.floor(best / 2 * 10) / 10)


def test_analyse_is_fast_enough_for_the_ga():
    """4 apps x ~60 GPU kernels: the CpaProblem re-analysis stays far below 1 ms per scale vector."""
    import timeit
    rng = random.Random(0)
    apps, pl = [], {}
    for a, chain in enumerate(["cdgc", "cgdgc", "cddgc", "cgc"]):
        stages, ng = [], chain.count("g")
        for si, k in enumerate(chain):
            if k == "c":
                stages.append(S("cpu", rng.uniform(300, 2000)))
                pl[f"a{a}", si] = f"CPU{a % 2}"
            elif k == "g":
                stages.append(S("gpu", *[rng.uniform(50, 400) for _ in range(60 // ng)]))
                pl[f"a{a}", si] = "GPU"
            else:
                stages.append(S("dla", rng.uniform(2000, 6000)))
                pl[f"a{a}", si] = f"DLA{si % 2}"
        apps.append(App(f"a{a}", 150_000, [0, 2, 3, 1][a], tuple(stages)))
    prob = CpaProblem(apps, pl)
    scale = {"gpu": 1.3, "cpu": 1.2, "dla": 1.1}
    assert prob.analyse(scale).schedulable
    per_call = min(timeit.repeat(lambda: prob.analyse(scale), number=200, repeat=3)) / 200
    assert per_call < 1e-3, f"{per_call * 1e6:.0f} us per analyse()"


# ---------------------------------------------------------------- DAG groups (Ch. 5, eqs. 5.3/5.4)
def fork_join(period=10_000.0, prio=0, name="g"):
    """src (CPU0) -> {a (CPU1), b (GPU, 3 kernels)} -> join (CPU0)."""
    stages = (S("cpu", 300), S("cpu", 800), S("gpu", 100, 200, 150), S("cpu", 200))
    app = App(name, period, prio, stages, edges=((0, 1), (0, 2), (1, 3), (2, 3)))
    place = {(name, 0): "CPU0", (name, 1): "CPU1", (name, 2): "GPU", (name, 3): "CPU0"}
    return app, place


def test_chain_given_as_edges_equals_the_implicit_chain():
    rng = random.Random(3)
    for _ in range(20):
        apps, place = random_scenario(rng)
        chained = [replace(a, edges=tuple((i, i + 1) for i in range(len(a.stages) - 1))) for a in apps]
        a, b = analyse(apps, place), analyse(chained, place)
        assert a.schedulable == b.schedulable and a.wcrt_us == pytest.approx(b.wcrt_us)
        assert a.stage_r_us == pytest.approx(b.stage_r_us) and a.jitter_us == pytest.approx(b.jitter_us)


def test_group_wcrt_is_the_longest_path_alone():
    app, place = fork_join()
    res = analyse([app], place)
    # ordered stages never interfere: src and join share CPU0 but are ordered; a (CPU1) and b (GPU) are parallel
    assert res.stage_r_us[("g", 0)] == 300 and res.stage_r_us[("g", 3)] == 200
    assert res.wcrt_us["g"] == pytest.approx(300 + max(800, 450) + 200)
    # the join's jitter is the worst over its inputs: r - BCET of the src plus that of the slower branch
    assert res.jitter_us[("g", 3)] == pytest.approx(0.0)        # BCET = WCET here


def test_parallel_branches_of_one_group_interfere():
    """Two parallel CPU branches of one group on one core: each suffers the other (equal priority)."""
    stages = (S("cpu", 100), S("cpu", 500), S("cpu", 700), S("cpu", 100))
    app = App("g", 10_000.0, 0, stages, edges=((0, 1), (0, 2), (1, 3), (2, 3)))
    place = {("g", 0): "CPU0", ("g", 1): "CPU1", ("g", 2): "CPU1", ("g", 3): "CPU0"}
    res = analyse([app], place)
    assert res.stage_r_us[("g", 1)] == pytest.approx(1200) and res.stage_r_us[("g", 2)] == pytest.approx(1200)
    assert res.stage_r_us[("g", 0)] == 100        # ordered with both branches and the join: no interference
    assert res.wcrt_us["g"] == pytest.approx(1400)


def test_dataflow_task_on_the_gpu_counts_as_one_kernel():
    """Eq. 5.4: a one-task stage suffers one (the largest) kernel of a DL GPU stage; it blocks a 5-kernel stage of
    the same period min(5, 2*1) = 2 times its WCET (l. 1775)."""
    dl = App("dl", 10_000.0, 0, (S("gpu", 10, 50, 20, 30, 40),))
    df = App("df", 10_000.0, 1, (S("gpu", 100),))
    res = analyse([dl, df], {("dl", 0): "GPU", ("df", 0): "GPU"})
    assert res.stage_r_us[("df", 0)] == pytest.approx(100 + 50)
    assert res.stage_r_us[("dl", 0)] == pytest.approx(150 + 2 * 100)


def test_join_jitter_is_the_worst_input():
    stages = (Stage("cpu", (T(100, 50),)), Stage("cpu", (T(400, 100),)), Stage("cpu", (T(300, 300),)),
              S("cpu", 50))
    app = App("g", 10_000.0, 0, stages, edges=((0, 1), (0, 2), (1, 3), (2, 3)))
    place = {("g", i): f"CPU{i}" for i in range(4)}
    res = analyse([app], place)
    assert res.jitter_us[("g", 1)] == pytest.approx(50) and res.jitter_us[("g", 2)] == pytest.approx(50)
    assert res.jitter_us[("g", 3)] == pytest.approx(50 + 300)


def test_bad_edges_are_named():
    with pytest.raises(DseError, match="goes backwards"):
        App("g", 1000.0, 0, (S("cpu", 1), S("cpu", 1)), edges=((1, 0),))
    with pytest.raises(DseError, match="outside"):
        App("g", 1000.0, 0, (S("cpu", 1),), edges=((0, 3),))
    with pytest.raises(DseError, match="period"):
        App("g", 0.0, 0, (S("cpu", 1),))
