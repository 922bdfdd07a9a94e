"""Seed 001 on the clocked board (dse.systems.pareto): the board's clock semantics, Eqs. 1-13 against the board, NSGA-II,
the TensorRT baseline, the board as a Backend of the evaluator, Table 2 anchors and bad input."""
import numpy as np
import pytest

from dse.backends.base import MeasureSettings
from dse.calibration.tx2 import TABLE_2, analysed, compare
from dse.evaluate import Evaluator
from dse.systems.pareto.backend import ClockedBackend, measurement_context
from dse.systems.pareto.board import ClockedBoard, ClockedParams, clocks
from dse.systems.pareto.model import TangModel
from dse.systems.pareto.search import dominates_front, hypervolume, nsga2, pareto_mask, remeasure, trt_baseline
from dse.core.errors import DseError
from dse.platform import load_platform, platform_from_dict
from dse.search.ga_common import GASettings
from dse.workflow.plan import measurement_context as plan_context


@pytest.fixture(scope="module")
def tx2():
    return load_platform("tx2-sim")


@pytest.fixture(scope="module")
def alex(tx2):
    return ClockedBoard(tx2, analysed("alexnet"))


def _evaluator(board, seed=0, store=None):
    settings = MeasureSettings(benchmark="alexnet", precision="fp32", input_size=224, seed=seed)
    return Evaluator(ClockedBackend(board, settings), store, seed=seed)


def test_profile_clusters_levels_and_host(tx2, alex):
    assert [c.name for c in tx2.cpu_clusters] == ["A57", "Denver"]
    assert all(len(c.freq_mhz) == 12 for c in tx2.cpu_clusters) and len(tx2.pes["GPU"].freq_mhz) == 13
    assert alex.n_cores == 6 and alex.gpu_core == 0 and alex.n_tasks == 13
    assert len(TABLE_2) == 27


def test_clock_semantics(tx2, alex):
    top = alex.measure(alex.gpu_only, clocks(tx2))
    slow_gpu = alex.measure(alex.gpu_only, clocks(tx2, gpu_mhz=114.75))
    slow_cpu = alex.measure(alex.gpu_only, clocks(tx2, 345.6))
    assert slow_gpu["fps"] < top["fps"] and slow_cpu["fps"] < top["fps"]
    # the idle Denver cluster's clock does not change the TensorRT time
    assert alex.measure(alex.gpu_only, clocks(tx2, {"Denver": 345.6}))["fps"] == pytest.approx(top["fps"])
    # CPU tasks scale with their core's clock: all on one Denver core, half the clock -> about twice the time
    on_denver = np.full(alex.n_tasks, 4)
    a = alex.measure(on_denver, clocks(tx2, {"Denver": 2035.2}))["period_us"]
    b = alex.measure(on_denver, clocks(tx2, {"Denver": 1113.6}))["period_us"]
    assert b / a == pytest.approx(2035.2 / 1113.6, rel=1e-9)
    # noise: the same seed repeats, another differs
    r1 = alex.measure(alex.gpu_only, clocks(tx2), np.random.default_rng(1))["fps"]
    assert r1 == alex.measure(alex.gpu_only, clocks(tx2), np.random.default_rng(1))["fps"] != top["fps"]


def test_bad_clocks_and_mappings_are_named(tx2, alex):
    with pytest.raises(DseError, match="1300.*valid choices.*1300.5"):
        clocks(tx2, gpu_mhz=1300)
    with pytest.raises(DseError, match="A57.*2000"):
        clocks(tx2, {"A57": 2000})
    with pytest.raises(DseError, match="Kryo"):
        clocks(tx2, {"Kryo": 345.6})
    with pytest.raises(DseError, match="core id.*6"):
        alex.measure(np.full(alex.n_tasks, 6), clocks(tx2))
    with pytest.raises(DseError, match="no clocked section"):
        ClockedParams.of(load_platform("galaxy-s9-sim"))


def test_clocked_section_is_checked(tx2):
    raw = dict(tx2.raw)
    raw["clocked"] = {**raw["clocked"], "emc": {"floor": 1.5, "knee_mhz": 1000}}
    with pytest.raises(DseError, match="emc.floor"):
        ClockedParams.of(platform_from_dict(raw))
    raw["clocked"] = {**tx2.raw["clocked"], "host": {"token_ns": 0.1, "frame_us": 1}}
    with pytest.raises(DseError, match="overlap"):
        ClockedParams.of(platform_from_dict(raw))


def test_model_matches_the_board_on_cpu_only_mappings_and_tracks_it_on_trt(tx2, alex):
    m = TangModel(alex)
    # CPU-only mapping: Eqs. 3, 5, 7 are exactly what the board charges
    rng = np.random.default_rng(0)
    for _ in range(5):
        mapping = rng.integers(1, 6, alex.n_tasks)
        clk = clocks(tx2, {"A57": 1267.2, "Denver": 806.4}, 726.75)
        assert m.evaluate(m.genome(mapping, clk)).period_us[0] == pytest.approx(alex.measure(mapping, clk)["period_us"])
    base = trt_baseline(m)
    assert base.shape == (156, m.genome_length)
    obj = m.evaluate(base)
    board = np.array([alex.measure(*m.decode(g))["fps"] for g in base])
    assert np.max(np.abs(obj.fps / board - 1)) < 0.05


def test_eq12_idle_time_readings_differ_on_split_mappings(alex):
    g = np.array([[0] * 6 + [1] * 7 + [11, 11, 12]])
    s, p = TangModel(alex, idle_time="sum").evaluate(g), TangModel(alex, idle_time="period").evaluate(g)
    assert s.period_us[0] == p.period_us[0] and s.energy_j[0] > p.energy_j[0]
    with pytest.raises(DseError, match="period"):
        TangModel(alex, idle_time="latency")
    with pytest.raises(DseError, match="all_channels"):
        TangModel(alex, comm="some")


def test_nsga2_is_seeded_and_beats_the_baseline_front(tx2, alex):
    m = TangModel(alex)
    ga = GASettings(population=400, generations=25, cxpb=0.9, mutpb=0.05, seed=3)
    a, log = nsga2(m, ga)
    b, _ = nsga2(m, ga)
    assert np.array_equal(a, b) and log["evaluations"] > 200 and len(log["hypervolume"]) == 26
    assert all(x <= y + 1e-12 for x, y in zip(log["hypervolume"], log["hypervolume"][1:]))   # archive only grows
    nf, ne = remeasure(_evaluator(alex), m, a, 3, strategy="nsga2")
    base = trt_baseline(m)
    bf, be = remeasure(_evaluator(alex), m, base, 3, strategy="trt-baseline")
    keep, bk = pareto_mask(nf, ne), pareto_mask(bf, be)
    ref = (0.0, 1.1 * max(ne.max(), be.max()))
    assert nf.max() > bf.max()                       # AlexNet: throughput the baseline cannot reach (001 Sec. 5)
    assert hypervolume(nf[keep], ne[keep], ref) > hypervolume(bf[bk], be[bk], ref)
    assert dominates_front(nf[keep], ne[keep], bf[bk], be[bk], tol=0.03) >= 0.8


def test_the_board_as_a_backend_keeps_the_draws_and_canonical_hashes(tx2, alex, tmp_path):
    m = TangModel(alex)
    G = np.array([*trt_baseline(m)[::40], [1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 3, 7, 2]])
    fps, energy = remeasure(_evaluator(alex, 7, tmp_path / "cache.parquet"), m, G, 3, strategy="nsga2")
    # run r of the i-th point is the r-th run the board draws from one generator seeded [seed, i]
    for i, g in enumerate(G):
        rng = np.random.default_rng([7, i])
        runs = [alex.measure(*m.decode(g), rng) for _ in range(3)]
        assert fps[i] == np.mean([r["fps"] for r in runs]) and energy[i] == np.mean([r["energy_j"] for r in runs])
    again = _evaluator(alex, 7, tmp_path / "cache.parquet")
    assert np.array_equal(remeasure(again, m, G, 3, strategy="nsga2")[0], fps)
    assert again.measured == 0 and again.reused == 3 * len(G)        # every run answered by the store
    backend = again.backend
    top = backend.configuration(alex.gpu_only, clocks(tx2), stream=5)
    assert top.extra == (("core_map", "0" * 13), ("mapping", "cores1"), ("task_graph", alex.graph.digest))
    assert backend.configuration(alex.gpu_only, clocks(tx2, 2035.2, 1300.5), stream=6).hash == top.hash
    slow = backend.configuration(alex.gpu_only, clocks(tx2, {"Denver": 345.6}, 114.75), stream=0)
    assert dict(slow.extra)["gpu_mhz"] == "114.75" and dict(slow.extra)["Denver_mhz"] == "345.6"
    mapping, clk = backend.decode(slow)
    assert np.array_equal(mapping, alex.gpu_only) and clk == clocks(tx2, {"Denver": 345.6}, 114.75)
    ok = backend.measure(slow)
    assert ok.ok and ok.fps > 0 and ok.energy_j_per_frame == pytest.approx(ok.power_w / ok.fps)
    assert set(ok.util) == {f"CPU{k}" for k in range(6)} | {"GPU"} and ok.util["CPU5"] == 0.0
    assert "gpu_mhz=1300" in backend.check(slow.with_(extra=(*slow.extra, ("gpu_mhz", "1300"))))
    assert backend.measure(slow.with_(platform="xavier-agx-sim")).status == "refused"
    assert measurement_context({"name": "tx2-sim"}, {"seed": 0}) == plan_context({"name": "tx2-sim"}, {"seed": 0})


def test_pareto_helpers():
    assert pareto_mask([1, 2, 2, 3], [1, 1, 2, 5]).tolist() == [False, True, False, True]
    assert hypervolume([2.0], [1.0], (0.0, 3.0)) == pytest.approx(4.0)
    assert dominates_front([2.0], [1.0], [1.0, 3.0], [2.0, 0.5]) == 0.5


def test_table2_anchor_comparison_shape(tx2):
    rows = compare(tx2)
    assert len(rows) == 27 and {r["network"] for r in rows} == {"vgg19", "alexnet", "emotion-ferplus"}
    # the sim's times follow the paper's ordering within each network: fastest at the top clocks
    for net in ("vgg19", "alexnet", "emotion-ferplus"):
        r = [x for x in rows if x["network"] == net]
        assert max(r, key=lambda x: x["fps_sim"])["f_gpu_ghz"] == 1.30
        assert min(r, key=lambda x: x["fps_sim"])["f_gpu_ghz"] == 0.11
