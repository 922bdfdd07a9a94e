"""Periodic multi-app DES: chain semantics, CPU fixed-priority preemption, FIFO kernel interleaving on the GPU,
DLA FIFO, accelerator contention, rail energy, seeding; and a property test against the CPA (eqs. 4.1/4.2)."""
import time
from pathlib import Path

import numpy as np
import pytest

from dse.backends.sim.periodic import PeriodicApp, PeriodicStage, accelerator_contention, simulate_periodic
from dse.backends.sim.power import idle_rails_w, rail_power_w
from dse.backends.sim.tasktime import TailModel, dvfs_scale
from dse.core.errors import DseError
from dse.platform import load_platform

EXACT = TailModel()          # no jitter, no tail: every task takes its base time


@pytest.fixture(scope="module")
def xavier():
    return load_platform(Path(__file__).resolve().parents[3] / "config" / "platform" / "xavier-agx-sim.yaml")


def app(name, stages, period=100_000.0, priority=0, offset=0.0):
    return PeriodicApp(name, period, priority, tuple(PeriodicStage(k, tuple(b)) for k, b in stages), offset)


def run(xavier, apps, placement, duration=100_000.0, **kw):
    kw.setdefault("tail", EXACT)
    kw.setdefault("contention", 0.0)
    return simulate_periodic(apps, placement, platform=xavier, duration_us=duration, seed=kw.pop("seed", 1), **kw)


CHAIN = [("cpu", [700.0]), ("dla", [3000.0]), ("gpu", [50.0, 120.0, 80.0, 200.0]), ("cpu", [400.0])]
CHAIN_PES = ["CPU0", "DLA0", "GPU", "CPU1"]


def place(name, pes):
    return {(name, j): pe for j, pe in enumerate(pes)}


def test_single_app_alone_is_its_chain_sum(xavier):
    res = run(xavier, [app("a", CHAIN, period=10_000.0)], place("a", CHAIN_PES), duration=100_000.0)
    total = sum(sum(b) for _, b in CHAIN)
    assert res.completed["a"] == res.released["a"] == 10
    assert res.response_us["a"] == pytest.approx([total] * 10)
    assert res.misses["a"] == 0
    slow = run(xavier, [app("a", CHAIN, period=20_000.0)], place("a", CHAIN_PES), duration=20_000.0,
               freqs_mhz={"gpu": 675.75, "cpu": 1190.4})
    g, c = dvfs_scale(xavier, "gpu", 675.75), dvfs_scale(xavier, "cpu", 1190.4)
    assert slow.response_us["a"] == pytest.approx([1100 * c + 3000 + 450 * g])


def test_single_app_with_noise_is_the_sum_of_its_draws(xavier):
    res = run(xavier, [app("a", CHAIN, period=10_000.0)], place("a", CHAIN_PES), duration=200_000.0, tail=None)
    assert res.response_us["a"] == pytest.approx(res.work_us["a"])
    assert len(set(np.round(res.response_us["a"], 6))) > 10          # the platform's jitter and tail are drawn
    bound = TailModel.of(xavier).bound_us(np.array([b for _, bs in CHAIN for b in bs])).sum()
    assert max(res.response_us["a"]) <= bound


def test_app_from_a_task_profile(xavier):
    from dse.backends.base import MeasureSettings
    from dse.backends.sim import SimBackend
    from dse.core.configuration import Configuration
    from dse.graph.analysis import analyze
    from dse.zoo import build_network

    a = analyze(build_network("tiny-chain", input_size=64))
    config = Configuration(benchmark="tiny-chain", platform=xavier.name, option="A", cuts=(4,), streams=(1, 1),
                           precision="fp16", input_size=64, model_digest=a.digest)
    prof = SimBackend(xavier, a, MeasureSettings(input_size=64)).profile_tasks(config, runs=10)
    tc = PeriodicApp.from_profile("tc", prof, period_us=50_000.0, priority=2)
    assert [s.kind for s in tc.stages] == ["cpu", "dla", "gpu", "cpu"]
    assert len(tc.stages[2].base_us) == len(prof.stages[2].tasks)
    res = run(xavier, [tc], place("tc", ["CPU0", "DLA1", "GPU", "CPU0"]), duration=50_000.0)
    assert res.response_us["tc"] == [pytest.approx(sum(sum(s.base_us) for s in prof.stages))]


def test_cpu_fixed_priority_preemption(xavier):
    lo = app("lo", [("cpu", [2000.0])], priority=1)
    hi = app("hi", [("cpu", [1000.0])], priority=0, offset=300.0)
    res = run(xavier, [lo, hi], {("lo", 0): "CPU0", ("hi", 0): "CPU0"}, trace=True)
    assert res.response_us["hi"] == [pytest.approx(1000.0)]
    assert res.response_us["lo"] == [pytest.approx(3000.0)]            # preempted for 1000 us
    lo_runs = [(s.start, s.end) for s in res.trace if s.label == "lo"]
    assert lo_runs == [(0.0, 300.0), (1300.0, 3000.0)]
    same = run(xavier, [lo, app("hi", [("cpu", [1000.0])], priority=1, offset=300.0)],
               {("lo", 0): "CPU0", ("hi", 0): "CPU0"})
    assert same.response_us == {"lo": [pytest.approx(2000.0)], "hi": [pytest.approx(2700.0)]}   # FIFO ties
    apart = run(xavier, [lo, hi], {("lo", 0): "CPU0", ("hi", 0): "CPU1"})
    assert apart.response_us["lo"] == [pytest.approx(2000.0)]


def test_gpu_kernels_interleave_fifo(xavier):
    a = app("a", [("gpu", [100.0, 100.0, 100.0])])
    b = app("b", [("gpu", [100.0, 100.0, 100.0])], priority=1)
    res = run(xavier, [a, b], {("a", 0): "GPU", ("b", 0): "GPU"}, trace=True)
    gpu = [(s.start, s.label, s.task) for s in res.trace if s.lane == "GPU"]
    assert [(n, k) for _, n, k in gpu] == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    assert res.response_us == {"a": [pytest.approx(500.0)], "b": [pytest.approx(600.0)]}
    # a late stage waits only for the kernel that runs (non-preemptive), then alternates
    late = run(xavier, [a, app("b", [("gpu", [100.0])], offset=150.0)], {("a", 0): "GPU", ("b", 0): "GPU"})
    assert late.response_us == {"a": [pytest.approx(400.0)], "b": [pytest.approx(150.0)]}


def test_dla_fifo_non_preemptive(xavier):
    a = app("a", [("dla", [1000.0])], priority=1)
    b = app("b", [("dla", [500.0])], priority=0, offset=10.0)
    res = run(xavier, [a, b], {("a", 0): "DLA1", ("b", 0): "DLA1"})
    assert res.response_us == {"a": [pytest.approx(1000.0)], "b": [pytest.approx(1490.0)]}


def test_contention_slows_busy_accelerators(xavier):
    c = accelerator_contention(xavier)
    assert 0.14 <= c <= 0.155
    apps = [app(n, [(k, [1000.0])]) for n, k in (("g", "gpu"), ("d0", "dla"), ("d1", "dla"))]
    pl = {("g", 0): "GPU", ("d0", 0): "DLA0", ("d1", 0): "DLA1"}
    three = run(xavier, apps, pl, contention=None)
    assert all(r == [pytest.approx(1000.0 * (1 + 2 * c))] for r in three.response_us.values())
    assert 1.28 <= three.response_us["g"][0] / 1000.0 <= 1.31
    # rates change when an accelerator stops: GPU and DLA0 together, the DLA task is shorter
    two = run(xavier, [app("g", [("gpu", [1000.0])]), app("d0", [("dla", [500.0])])],
              {("g", 0): "GPU", ("d0", 0): "DLA0"}, contention=c)
    assert two.response_us["d0"] == [pytest.approx(500.0 * (1 + c))]
    assert two.response_us["g"] == [pytest.approx(500.0 * (1 + c) + 500.0)]
    # CPU tasks are not slowed
    cpu = run(xavier, [*apps, app("p", [("cpu", [1000.0])])], {**pl, ("p", 0): "CPU2"}, contention=c)
    assert cpu.response_us["p"] == [pytest.approx(1000.0)]


def test_jobs_queue_behind_their_predecessor(xavier):
    res = run(xavier, [app("a", [("gpu", [1500.0])], period=1000.0)], {("a", 0): "GPU"}, duration=10_000.0)
    assert res.released["a"] == 10 and res.completed["a"] == 6
    assert res.response_us["a"] == pytest.approx([1500.0 + 500.0 * k for k in range(6)])
    assert res.misses["a"] == 5 + 4                    # 5 late completions + 4 pending past their deadline


def test_energy_is_rails_times_duration(xavier):
    apps = [app("a", CHAIN, period=20_000.0), app("b", CHAIN, period=25_000.0, priority=1)]
    pl = {**place("a", CHAIN_PES), **place("b", ["CPU2", "DLA1", "GPU", "CPU3"])}
    freqs = {"gpu": 905.25, "dla": 1062.4, "cpu": 1497.6}
    res = run(xavier, apps, pl, duration=1e6, freqs_mhz=freqs, tail=None)
    assert res.board_energy_j == pytest.approx(sum(res.rail_w.values()) * 1.0)
    assert res.rail_j == pytest.approx({k: w * 1.0 for k, w in res.rail_w.items()})
    load = {pe: f for pe, f in res.busy.items() if not pe.startswith("CPU")}
    cores = sum(f for pe, f in res.busy.items() if pe.startswith("CPU")) + 0.05
    assert res.rail_w == pytest.approx(rail_power_w(xavier, load, cores, freqs))
    assert 0 < res.busy["GPU"] < 1
    assert res.busy["DLA0"] == pytest.approx(50 * 3000 * dvfs_scale(xavier, "dla", 1062.4) / 1e6, rel=0.02)
    idle = run(xavier, [app("a", [("cpu", [1.0])], period=1e7)], {("a", 0): "CPU0"}, duration=1e6,
               freqs_mhz=freqs, controller_core=None)
    assert idle.board_energy_j == pytest.approx(sum(idle_rails_w(xavier, freqs).values()), rel=1e-5)


def test_seeded(xavier):
    apps = [app("a", CHAIN, period=9_000.0), app("b", CHAIN, period=11_000.0, priority=1)]
    pl = {**place("a", CHAIN_PES), **place("b", ["CPU2", "DLA0", "GPU", "CPU3"])}
    r1, r2 = (run(xavier, apps, pl, duration=300_000.0, tail=None, contention=None, seed=4) for _ in range(2))
    r3 = run(xavier, apps, pl, duration=300_000.0, tail=None, contention=None, seed=5)
    assert r1.response_us == r2.response_us and r1.board_energy_j == r2.board_energy_j
    assert r1.response_us != r3.response_us
    ph = run(xavier, apps, pl, duration=300_000.0, random_phase=True, seed=4, trace=True)
    assert min(s.start for s in ph.trace) > 0.0


def test_placement_is_checked(xavier):
    a = app("a", CHAIN)
    with pytest.raises(DseError, match="controller"):
        run(xavier, [a], place("a", ["CPU7", "DLA0", "GPU", "CPU1"]))
    with pytest.raises(DseError, match="is a dla stage but is placed on GPU"):
        run(xavier, [a], place("a", ["CPU0", "GPU", "GPU", "CPU1"]))
    with pytest.raises(DseError, match="no PE for stage 3"):
        run(xavier, [a], place("a", CHAIN_PES[:3]))
    with pytest.raises(DseError, match="not on"):
        run(xavier, [a], place("a", ["CPU9", "DLA0", "GPU", "CPU1"]))


def test_four_apps_of_sixty_kernels_run_fast(xavier):
    rng = np.random.default_rng(0)
    apps, pl = [], {}
    for i in range(4):
        st = [("cpu", [700.0]), ("dla", [3000.0]), ("gpu", rng.uniform(10, 100, 60)), ("cpu", [500.0])]
        apps.append(app(f"a{i}", st, period=25_000.0, priority=i))
        pl.update(place(f"a{i}", [f"CPU{i}", f"DLA{i % 2}", "GPU", f"CPU{i + 3}"]))
    t0 = time.perf_counter()
    res = run(xavier, apps, pl, duration=2e6, tail=None, contention=None)
    assert time.perf_counter() - t0 < 5.0            # 10 s simulated take well under 2 s on one core
    assert all(n == 80 for n in res.completed.values())


def _random_scenario(rng, xavier, stages_pool):
    """2-3 apps with random chains (profiled or synthetic), random PEs (CPU0-6, DLA0/1, GPU), random periods."""
    n = int(rng.integers(2, 4))
    apps, pl = [], {}
    for i in range(n):
        chain = stages_pool[int(rng.integers(len(stages_pool)))]
        pes = []
        for kind, _ in chain:
            pes.append({"cpu": f"CPU{int(rng.integers(0, 3))}", "gpu": "GPU",
                        "dla": f"DLA{int(rng.integers(0, 2))}"}[kind])
        apps.append((f"app{i}", chain, int(rng.permutation(n)[i]), rng.uniform(0.0, 1.0)))
        pl.update(place(f"app{i}", pes))
    return apps, pl


def test_des_never_exceeds_the_cpa_wcrt(xavier):
    """For random small scenarios near their CPA limit (period just above the analysis' minimum): observed max
    response <= CPA WCRT, with the WCETs taken as the task-time model's hard bound inflated by the contention
    margin (1 + c * other accelerators used). A frequent, short tail keeps the draws near that bound; even seeds
    release every app at 0 (the synchronous release that loads the FIFOs most), odd seeds at random phases."""
    cpa = pytest.importorskip("dse.rt.cpa")
    from dataclasses import replace

    from dse.backends.base import MeasureSettings
    from dse.backends.sim import SimBackend
    from dse.core.configuration import Configuration
    from dse.graph.analysis import analyze
    from dse.rt.model import App, Stage, Task
    from dse.zoo import build_network

    a = analyze(build_network("tiny-chain", input_size=64))
    backend = SimBackend(xavier, a, MeasureSettings(input_size=64, seed=0))
    pool = []
    for option, cuts in (("E", ()), ("A", (4,)), ("B", (2, 7)), ("C", (2, 7))):
        config = Configuration(benchmark="tiny-chain", platform=xavier.name, option=option, cuts=cuts,
                               streams=(1,) * (len(cuts) + 1), precision="fp16", input_size=64,
                               model_digest=a.digest)
        prof = backend.profile_tasks(config, runs=20)
        pool.append([(s.kind, [b / 10 if s.kind == "cpu" else b for b in s.base_us]) for s in prof.stages])
    rng = np.random.default_rng(11)
    pool += [[("cpu", [300.0]), ("gpu", list(rng.uniform(20, 300, 12))), ("cpu", [200.0])],
             [("cpu", [500.0]), ("dla", [2500.0]), ("gpu", list(rng.uniform(20, 200, 8))), ("cpu", [150.0])]]
    tail, c = TailModel(sigma=0.02, tail_p=0.5, tail_us=10.0), accelerator_contention(xavier)
    worst = 0.0
    for seed in range(12):
        specs, pl = _random_scenario(np.random.default_rng(seed), xavier, pool)
        used = {pe for pe in pl.values() if not pe.startswith("CPU")}
        margin = 1 + c * (len(used) - 1)
        models = [App(name, 1.0, prio, tuple(
            Stage(k, tuple(Task(float(tail.bound_us(x)) * (1 if k == "cpu" else margin), float(x), 0.5 * float(x))
                           for x in b)) for k, b in chain)) for name, chain, prio, _ in specs]
        fps = cpa.max_fps(models, pl, hi=5000)
        assert fps > 0
        period = 1e6 / fps * float(np.random.default_rng(seed + 100).uniform(1.0, 1.1))
        bound = cpa.analyse([replace(m, period_us=period) for m in models], pl)
        assert bound.schedulable
        des = [app(name, chain, period=period, priority=prio) for name, chain, prio, _ in specs]
        res = simulate_periodic(des, pl, platform=xavier, duration_us=300 * period, seed=seed,
                                random_phase=bool(seed % 2), tail=tail)
        for name, *_ in specs:
            assert res.completed[name] >= 290 and res.misses[name] == 0
            assert res.max_response_us[name] <= bound.wcrt_us[name] + 1e-6, (seed, name)
            worst = max(worst, res.max_response_us[name] / bound.wcrt_us[name])
    assert worst > 0.6                       # the scenarios do load the board: the check is not vacuous


# --- DAG apps (Ch. 5 groups): a stage is ready once all its predecessors completed ---------------------------

FORK_JOIN = ((0, 1), (0, 2), (1, 3), (2, 3))


def dag(name, stages, edges, period=100_000.0, priority=0, offset=0.0):
    return PeriodicApp(name, period, priority, tuple(PeriodicStage(k, tuple(b)) for k, b in stages), offset,
                       edges=edges)


def test_fork_join_branches_run_concurrently(xavier):
    st = [("cpu", [300.0]), ("gpu", [100.0, 200.0, 150.0, 250.0]), ("cpu", [500.0]), ("cpu", [200.0])]
    res = run(xavier, [dag("g", st, FORK_JOIN)], place("g", ["CPU0", "GPU", "CPU1", "CPU0"]), trace=True)
    assert res.response_us["g"] == [pytest.approx(300.0 + 700.0 + 200.0)]      # the longest path
    assert res.response_us["g"][0] < sum(sum(b) for _, b in st)
    assert res.work_us["g"] == [pytest.approx(1700.0)]
    spans = {s.task: (s.start, s.end) for s in res.trace}                       # flat task index per segment
    assert spans[5] == pytest.approx((300.0, 800.0))                            # the CPU branch, beside ...
    assert spans[1][0] == pytest.approx(300.0) and spans[4][1] == pytest.approx(1000.0)   # ... the GPU kernels
    assert spans[6] == pytest.approx((1000.0, 1200.0))
    # one job in flight: with a period below the response the next source waits for the whole previous job
    busy = run(xavier, [dag("g", st, FORK_JOIN, period=1000.0)], place("g", ["CPU0", "GPU", "CPU1", "CPU0"]),
               duration=5000.0)
    assert busy.response_us["g"] == pytest.approx([1200.0 + 200.0 * k for k in range(4)])


def test_join_waits_for_its_slowest_predecessor(xavier):
    pes = place("g", ["CPU0", "GPU", "CPU1", "CPU2"])
    for cpu_branch, longest in ((900.0, 900.0), (400.0, 700.0)):
        st = [("cpu", [300.0]), ("gpu", [100.0, 200.0, 150.0, 250.0]), ("cpu", [cpu_branch]), ("cpu", [200.0])]
        res = run(xavier, [dag("g", st, FORK_JOIN)], pes, trace=True)
        join = [s.start for s in res.trace if s.task == 6]
        assert join == [pytest.approx(300.0 + longest)]
        assert res.response_us["g"] == [pytest.approx(300.0 + longest + 200.0)]
    # a three-way join: the source's successors end at 300+100, 300+800 and 300+450
    st = [("cpu", [300.0]), ("cpu", [100.0]), ("gpu", [800.0]), ("dla", [450.0]), ("cpu", [50.0])]
    edges = ((0, 1), (0, 2), (0, 3), (1, 4), (2, 4), (3, 4))
    res = run(xavier, [dag("g", st, edges)], place("g", ["CPU0", "CPU1", "GPU", "DLA0", "CPU0"]))
    assert res.response_us["g"] == [pytest.approx(1150.0)]


def test_parallel_branches_of_one_job_share_a_pe(xavier):
    two_gpu = [("cpu", [100.0]), ("gpu", [100.0] * 3), ("gpu", [100.0] * 3), ("cpu", [100.0])]
    res = run(xavier, [dag("g", two_gpu, FORK_JOIN)], place("g", ["CPU0", "GPU", "GPU", "CPU0"]), trace=True)
    assert [s.task for s in res.trace if s.lane == "GPU"] == [1, 4, 2, 5, 3, 6]   # FIFO kernels
    assert res.response_us["g"] == [pytest.approx(800.0)]
    two_cpu = [("cpu", [100.0]), ("cpu", [300.0]), ("cpu", [200.0]), ("cpu", [100.0])]
    res = run(xavier, [dag("g", two_cpu, FORK_JOIN)], place("g", ["CPU0", "CPU1", "CPU1", "CPU0"]))
    assert res.response_us["g"] == [pytest.approx(700.0)]                        # same priority: FIFO
    # edges spelling out the chain are the chain, bit for bit
    chain = [app("a", CHAIN, period=9_000.0), app("b", CHAIN, period=11_000.0, priority=1)]
    explicit = [dag(a.name, CHAIN, ((0, 1), (1, 2), (2, 3)), period=a.period_us, priority=a.priority)
                for a in chain]
    pl = {**place("a", CHAIN_PES), **place("b", ["CPU2", "DLA0", "GPU", "CPU1"])}
    r1, r2 = (run(xavier, x, pl, duration=200_000.0, tail=None, contention=None, trace=True)
              for x in (chain, explicit))
    assert r1.response_us == r2.response_us and r1.trace == r2.trace


def test_bad_edges_are_rejected():
    st = (PeriodicStage("cpu", (1.0,), "pre"), PeriodicStage("gpu", (1.0,), "net"), PeriodicStage("cpu", (1.0,)))
    with pytest.raises(DseError, match=r"app g: edge 0->3 names a stage outside 0..2"):
        PeriodicApp("g", 1000.0, 0, st, edges=((0, 1), (0, 3)))
    with pytest.raises(DseError, match=r"app g: edge -1->2"):
        PeriodicApp("g", 1000.0, 0, st, edges=((-1, 2),))
    with pytest.raises(DseError, match=r"app g: edge 1->0 \(net -> pre\) goes backwards"):
        PeriodicApp("g", 1000.0, 0, st, edges=((1, 0),))
    with pytest.raises(DseError, match=r"edge 2->2 \(stage 2 -> stage 2\)"):
        PeriodicApp("g", 1000.0, 0, st, edges=((2, 2),))
    assert PeriodicApp("g", 1000.0, 0, st, edges=((0, 2), (1, 2))).preds == ((), (), (0, 1))


def test_des_of_dags_never_exceeds_the_cpa_wcrt(xavier):
    """As the chain property test above, with Ch. 5 groups: fork-joins (a GPU branch beside a CPU or a DLA
    branch, or two GPU branches of one job) and chains on CPU0-2, the DLAs and the GPU; the CPA's longest path
    bounds the observed responses."""
    cpa = pytest.importorskip("dse.rt.cpa")
    from dataclasses import replace

    from dse.rt.model import App, Stage, Task

    rng = np.random.default_rng(7)
    pool = [
        ([("cpu", [300.0]), ("gpu", list(rng.uniform(20, 300, 10))), ("cpu", [900.0]), ("cpu", [150.0])], FORK_JOIN),
        ([("cpu", [200.0]), ("dla", [2000.0]), ("cpu", [400.0]), ("gpu", list(rng.uniform(20, 200, 8))),
          ("cpu", [100.0])], ((0, 1), (0, 2), (1, 3), (3, 4), (2, 4))),
        ([("cpu", [150.0]), ("gpu", list(rng.uniform(20, 150, 6))), ("gpu", list(rng.uniform(20, 150, 9))),
          ("cpu", [150.0])], FORK_JOIN),
        ([("cpu", [500.0]), ("dla", [2500.0]), ("gpu", list(rng.uniform(20, 200, 8))), ("cpu", [150.0])], None),
    ]
    tail, c = TailModel(sigma=0.02, tail_p=0.5, tail_us=10.0), accelerator_contention(xavier)
    worst = 0.0
    for seed in range(8):
        specs, pl = _random_scenario(np.random.default_rng(seed), xavier, [st for st, _ in pool])
        edges = {}
        for name, chain, *_ in specs:                       # the edges of the pool entry each app drew
            edges[name] = next(e for st, e in pool if st is chain)
        used = {pe for pe in pl.values() if not pe.startswith("CPU")}
        margin = 1 + c * (len(used) - 1)
        models = [App(name, 1.0, prio, tuple(
            Stage(k, tuple(Task(float(tail.bound_us(x)) * (1 if k == "cpu" else margin), float(x), 0.5 * float(x))
                           for x in b)) for k, b in chain), edges=edges[name]) for name, chain, prio, _ in specs]
        fps = cpa.max_fps(models, pl, hi=5000)
        assert fps > 0
        period = 1e6 / fps * float(np.random.default_rng(seed + 100).uniform(1.0, 1.1))
        bound = cpa.analyse([replace(m, period_us=period) for m in models], pl)
        assert bound.schedulable
        des = [dag(name, chain, edges[name], period=period, priority=prio) for name, chain, prio, _ in specs]
        res = simulate_periodic(des, pl, platform=xavier, duration_us=300 * period, seed=seed,
                                random_phase=bool(seed % 2), tail=tail)
        for name, *_ in specs:
            assert res.completed[name] >= 290 and res.misses[name] == 0
            assert res.max_response_us[name] <= bound.wcrt_us[name] + 1e-6, (seed, name)
            worst = max(worst, res.max_response_us[name] / bound.wcrt_us[name])
    assert worst > 0.6
