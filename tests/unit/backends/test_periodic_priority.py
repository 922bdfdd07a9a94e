"""Periodic DES with seed 002's fixed priorities on the accelerators (``accelerators="priority"``): no
preemption of a running GPU/NPU task, the highest waiting priority first (same-instant arrivals included),
FIFO unchanged by default; DAG apps on the phones' single big cores, the HiKey970 NPU, and bad inputs."""
from pathlib import Path
from types import SimpleNamespace

import pytest

from dse.backends.sim.periodic import PeriodicApp, PeriodicStage, periodic_apps, simulate_periodic
from dse.backends.sim.tasktime import TailModel
from dse.core.errors import DseError
from dse.platform import load_platform
from dse.taskgraph.mapping import PeSet

EXACT = TailModel()
PLATFORMS = Path(__file__).resolve().parents[3] / "config" / "platform"


@pytest.fixture(scope="module")
def s9():
    return load_platform(PLATFORMS / "galaxy-s9-sim.yaml")


@pytest.fixture(scope="module")
def hikey():
    return load_platform(PLATFORMS / "hikey970-sim.yaml")


def app(name, stages, period=100_000.0, priority=0, offset=0.0):
    return PeriodicApp(name, period, priority, tuple(PeriodicStage(k, tuple(b)) for k, b in stages), offset)


def run(platform, apps, placement, duration=100_000.0, **kw):
    kw.setdefault("tail", EXACT)
    kw.setdefault("contention", 0.0)
    kw.setdefault("controller_core", None)
    return simulate_periodic(apps, placement, platform=platform, duration_us=duration, seed=1, **kw)


def on(pe, *apps):
    return {(a.name, 0): pe for a in apps}


# ---------------------------------------------------------------- (a) non-preemptive fixed priority on the GPU


def test_running_lower_priority_task_is_not_preempted(s9):
    lo = app("lo", [("gpu", [1000.0])], priority=1)
    hi = app("hi", [("gpu", [300.0])], priority=0, offset=200.0)
    res = run(s9, [lo, hi], on("GPU", lo, hi), accelerators="priority", trace=True)
    assert res.response_us["lo"] == [pytest.approx(1000.0)]
    assert res.response_us["hi"] == [pytest.approx(800.0 + 300.0)]      # blocked until 1000, then its own time
    assert [(s.start, s.end) for s in res.trace if s.label == "lo"] == [(0.0, 1000.0)]


def test_waiting_higher_priority_goes_first_even_if_later(s9):
    block = app("block", [("gpu", [1000.0])], priority=2)
    lo = app("lo", [("gpu", [400.0])], priority=1, offset=100.0)
    hi = app("hi", [("gpu", [300.0])], priority=0, offset=200.0)
    res = run(s9, [block, lo, hi], on("GPU", block, lo, hi), accelerators="priority")
    # block 0-1000, hi 1000-1300, lo 1300-1700
    assert res.response_us == {"block": [pytest.approx(1000.0)], "hi": [pytest.approx(1100.0)],
                               "lo": [pytest.approx(1600.0)]}


def test_same_instant_arrivals_are_picked_by_priority(s9):
    lo = app("lo", [("gpu", [400.0])], priority=1)        # listed (and released) first at t = 0
    hi = app("hi", [("gpu", [300.0])], priority=0)
    res = run(s9, [lo, hi], on("GPU", lo, hi), accelerators="priority")
    assert res.response_us == {"hi": [pytest.approx(300.0)], "lo": [pytest.approx(700.0)]}
    # a stage's next kernel, submitted as its previous one ends, still beats a waiting lower priority
    a = app("a", [("gpu", [100.0, 100.0, 100.0])], priority=0)
    b = app("b", [("gpu", [100.0, 100.0, 100.0])], priority=1)
    res = run(s9, [b, a], on("GPU", a, b), accelerators="priority", trace=True)
    assert [s.label for s in res.trace if s.lane == "GPU"] == ["a"] * 3 + ["b"] * 3
    assert res.response_us == {"a": [pytest.approx(300.0)], "b": [pytest.approx(600.0)]}


# ---------------------------------------------------------------- (b) FIFO: the default, unchanged


def test_fifo_keeps_arrival_order(s9):
    block = app("block", [("gpu", [1000.0])], priority=2)
    lo = app("lo", [("gpu", [400.0])], priority=1, offset=100.0)
    hi = app("hi", [("gpu", [300.0])], priority=0, offset=200.0)
    want = {"block": [pytest.approx(1000.0)], "lo": [pytest.approx(1300.0)], "hi": [pytest.approx(1500.0)]}
    for kw in ({}, {"accelerators": "fifo"}):
        assert run(s9, [block, lo, hi], on("GPU", block, lo, hi), **kw).response_us == want
    lo0, hi0 = app("lo", [("gpu", [400.0])], priority=1), app("hi", [("gpu", [300.0])], priority=0)
    assert run(s9, [lo0, hi0], on("GPU", lo0, hi0)).response_us == {"lo": [pytest.approx(400.0)],
                                                                     "hi": [pytest.approx(700.0)]}
    a = app("a", [("gpu", [100.0, 100.0, 100.0])], priority=0)
    b = app("b", [("gpu", [100.0, 100.0, 100.0])], priority=1)
    assert run(s9, [a, b], on("GPU", a, b)).response_us == {"a": [pytest.approx(500.0)],
                                                            "b": [pytest.approx(600.0)]}   # kernels interleave


# ---------------------------------------------------------------- (c) three DAG apps on CPU4..CPU7 + GPU


def three_apps(s9):
    """Seed-002 style apps on S9's (1,1,1,1) + GPU PEs, PE ids as ``PeSet`` numbers them."""
    names = PeSet.build("1-1-1-1", ("gpu",), s9.mapping_core_ids()).names
    assert names == ("CPU4", "CPU5", "CPU6", "CPU7", "GPU")
    mapped = [
        # A: t0 -> (t1 on the GPU, t2 on CPU5) -> t3
        SimpleNamespace(name="A", period_us=10_000.0, priority=0, pe=(0, 4, 1, 0),
                        time_us=(1000.0, 2000.0, 1500.0, 500.0), preds=((), (0,), (0,), (1, 2))),
        SimpleNamespace(name="B", period_us=20_000.0, priority=1, pe=(0, 4, 2),
                        time_us=(2000.0, 3000.0, 1000.0), preds=((), (0,), (1,))),
        SimpleNamespace(name="C", period_us=5_000.0, priority=2, pe=(4, 0),
                        time_us=(2500.0, 1000.0), preds=((), (0,))),
    ]
    apps, placement = periodic_apps(mapped, names)
    apps[2] = PeriodicApp("C", 5_000.0, 2, apps[2].stages, offset_us=1000.0, edges=apps[2].edges)
    return apps, placement


def test_three_dag_apps_worst_responses_and_misses(s9):
    apps, placement = three_apps(s9)
    assert [s.kind for s in apps[0].stages] == ["cpu", "gpu", "cpu", "cpu"] and apps[0].edges == (
        (0, 1), (0, 2), (1, 3), (2, 3))
    # the board's own task-time model and contention: S9 has neither section, so times are exact
    res = simulate_periodic(apps, placement, platform=s9, duration_us=20_000.0, controller_core=None,
                            accelerators="priority")
    # A0: CPU4 0-1000; GPU at 1000 (C0 arrives then too, A wins) 1000-3000; t3 3000-3500.
    # A1: 10000-11000, GPU busy with C1 (9500-12000, not preempted) -> 12000-14000, t3 14000-14500.
    # B0: CPU4 1000-3000 (after A0.t0); GPU 3000-6000 (beats C0, waiting since 1000); CPU6 6000-7000.
    # C0 (released 1000): GPU 6000-8500, CPU4 8500-9500; C1 (6000): 9500-13000; C2 (11000): GPU 14000-16500,
    # CPU4 16500-17500; C3 (16000) still runs at the end, within its deadline.
    assert res.response_us["A"] == [pytest.approx(3500.0), pytest.approx(4500.0)]
    assert res.max_response_us["B"] == pytest.approx(7000.0)
    assert res.response_us["C"] == [pytest.approx(8500.0), pytest.approx(7000.0), pytest.approx(6500.0)]
    assert res.misses == {"A": 0, "B": 0, "C": 3}
    # energy = busy time x PE power (002 L236): CPU 12000 us x 0.875 W, GPU 17000 us x 4 W, no controller
    assert res.busy["GPU"] == pytest.approx(17_000.0 / 20_000.0)
    assert res.board_energy_j == pytest.approx((12_000.0 * 0.875 + 17_000.0 * 4.0) * 1e-6)
    # FIFO: C0 takes the idle GPU at 1000 ahead of A's kernel (submitted at the same instant)
    fifo = simulate_periodic(apps, placement, platform=s9, duration_us=20_000.0, controller_core=None)
    assert fifo.response_us["C"][0] == pytest.approx(3500.0)
    assert fifo.response_us["A"][0] == pytest.approx(6000.0)


def test_phone_cpu_pes_are_the_big_cores(s9):
    a = app("a", [("cpu", [100.0])])
    with pytest.raises(DseError, match=r"PE 'CPU0' is not on galaxy-s9-sim .*'CPU4', 'CPU5', 'CPU6', 'CPU7', 'GPU'"):
        run(s9, [a], on("CPU0", a))
    with pytest.raises(DseError, match="controller_core=None frees it"):
        run(s9, [a], on("CPU7", a), controller_core=7)
    assert run(s9, [a], on("CPU7", a)).response_us["a"] == [pytest.approx(100.0)]


# ---------------------------------------------------------------- (d) the NPU


def test_npu_runs_on_hikey970(hikey):
    chain = app("n", [("cpu", [500.0]), ("npu", [2000.0]), ("gpu", [300.0])], period=10_000.0)
    pl = {("n", 0): "CPU4", ("n", 1): "NPU", ("n", 2): "GPU"}
    res = simulate_periodic([chain], pl, platform=hikey, duration_us=20_000.0, controller_core=None,
                            accelerators="priority")
    assert res.response_us["n"] == [pytest.approx(2800.0)] * 2
    assert res.busy["NPU"] == pytest.approx(4000.0 / 20_000.0)
    assert res.board_energy_j == pytest.approx((1000.0 * 0.875 + 4000.0 * 2.0 + 600.0 * 4.0) * 1e-6)
    lo = app("lo", [("npu", [1000.0])], priority=1)
    hi = app("hi", [("npu", [300.0])], priority=0, offset=200.0)
    both = run(hikey, [lo, hi], on("NPU", lo, hi), accelerators="priority")
    assert both.response_us == {"lo": [pytest.approx(1000.0)], "hi": [pytest.approx(1100.0)]}
    with pytest.raises(DseError, match="npu stage but is placed on GPU"):
        run(hikey, [lo], on("GPU", lo))


def test_npu_is_refused_where_there_is_none(s9):
    a = app("a", [("npu", [1000.0])])
    with pytest.raises(DseError, match=r"PE 'NPU' is not on galaxy-s9-sim \(valid: \['CPU4', 'CPU5', 'CPU6', "
                                       r"'CPU7', 'GPU'\]\)"):
        run(s9, [a], on("NPU", a), accelerators="priority")


# ---------------------------------------------------------------- (e) bad inputs


def test_unknown_accelerator_policy(s9):
    a = app("a", [("gpu", [100.0])])
    with pytest.raises(DseError, match="unknown accelerators policy 'edf'; valid choices: fifo, priority"):
        run(s9, [a], on("GPU", a), accelerators="edf")


def test_periodic_apps_names_bad_pe_ids():
    bad = SimpleNamespace(name="x", period_us=1.0, priority=0, pe=(3,), time_us=(1.0,), preds=((),))
    with pytest.raises(DseError, match=r"app x: PE ids \[3\] must index the 2 PEs"):
        periodic_apps([bad], ("CPU4", "GPU"))
