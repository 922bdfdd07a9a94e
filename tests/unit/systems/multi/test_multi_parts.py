"""Step 1 (the Pareto front against enumeration), the export's frequency lookup and clock script."""
import subprocess

import numpy as np
import pandas as pd
import pytest

from dse.systems.multi.export import dvfs_script, lookup
from dse.systems.multi.pareto import nondominated


def test_nondominated_matches_brute_force():
    rng = np.random.default_rng(3)
    pts = rng.random((300, 3))
    brute = [i for i in range(len(pts)) if not any(np.all(pts[j] <= pts[i]) and np.any(pts[j] < pts[i])
                                                   for j in range(len(pts)))]
    assert nondominated(pts).tolist() == brute


@pytest.fixture(scope="module")
def tiny_backend():
    from dse.config import compose_config
    from dse.systems.multi.networks import network_backend
    from dse.systems.multi.settings import MultiSettings
    from omegaconf import OmegaConf

    cfg = compose_config(["multi=tiny"])
    s = MultiSettings.resolve(cfg.multi)
    platform = OmegaConf.to_container(cfg.platform, resolve=True)
    return s, network_backend("yolov2-tiny", platform, s, 0)[1]


def test_ga_front_finds_most_of_the_exact_front(tiny_backend):
    from dataclasses import replace

    from dse.systems.multi.pareto import evaluators, search_front

    s, backend = tiny_backend
    profiler = evaluators(backend, s)[0].backend
    exact, info = search_front(profiler, s)
    assert info["mode"] == "exhaustive"
    ok = [c for c in exact if c.objectives is not None]
    front = {(c.option, c.cuts) for c in (ok[i] for i in nondominated(np.array([c.objectives for c in ok])))}
    ga_s = replace(s, pareto={**s.pareto, "exhaustive_max": 0, "population": 30, "generations": 30})
    found, info = search_front(profiler, ga_s)
    assert info["mode"] == "ga" and info["evaluated"] < info["space"]
    got = [c for c in found if c.objectives is not None]
    ga_front = {(c.option, c.cuts) for c in (got[i] for i in nondominated(np.array([c.objectives for c in got])))}
    assert len(ga_front & front) >= 0.6 * len(front), (len(ga_front & front), len(front))


def test_step1_reruns_from_its_store(tiny_backend, tmp_path):
    from dse.store import read
    from dse.systems.multi.pareto import evaluators, step1

    s, backend = tiny_backend
    store = tmp_path / "cache" / "step1-yolov2-tiny.parquet"
    first = step1(*evaluators(backend, s, store), s)
    rows = read(store)
    assert set(rows.phase) == {"objectives", "wcet"} and (rows.phase == "wcet").sum() == len(first[0])
    objectives, wcet = evaluators(backend, s, store)
    again = step1(objectives, wcet, s)
    assert objectives.measured == wcet.measured == 0 and objectives.reused + wcet.reused == len(rows)
    assert len(read(store)) == len(rows)
    for a, b in zip((first[0], first[1], first[3]), (again[0], again[1], again[3])):   # tasks/ profiled again, same
        pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_a_deployment_is_a_configuration_measured_and_replayed_from_its_store(tmp_path):
    from dse.backends.base import MeasureSettings
    from dse.backends.sim.periodic import PeriodicApp, PeriodicStage, simulate_periodic
    from dse.evaluate import Evaluator
    from dse.platform import load_platform
    from dse.store import read
    from dse.backends.sim.deployment import DeploymentBackend, deployment_config, deployment_of

    platform = load_platform("xavier-agx-sim")
    apps = [PeriodicApp("a", 1e6 / 30, 0, (PeriodicStage("cpu", (1500.0,), "pre"),
                                          PeriodicStage("gpu", (9000.1, 300.7)))),
            PeriodicApp("b", 1e6 / 30, 1, (PeriodicStage("dla", (12000.3,)), PeriodicStage("cpu", (800.0,))))]
    pl = {("a", 0): "CPU0", ("a", 1): "GPU", ("b", 0): "DLA0", ("b", 1): "CPU1"}
    clocks = {"cpu": 1190.4, "gpu": 675.75, "dla": 1395.2}
    ok = deployment_config(platform, "a+b", apps, pl, clocks, 30.0, 1e6, 7000, True)
    bad = deployment_config(platform, "a+b", apps, pl, clocks, 30.0, 1e6, 7000, False)
    assert deployment_of(ok) == (apps, pl, clocks, 30.0, 1e6, 7000) and ok.hash != bad.hash
    store = tmp_path / "cache" / "deploy-X-PR.parquet"

    def evaluator():
        board = DeploymentBackend(platform, MeasureSettings(seed=7))
        return Evaluator(board, store, seed=7, context=board.context)

    first = evaluator()
    ms = first.evaluate_many([(ok, 0), (ok, 1), (bad, 0)], phase="deploy", strategy="PR")
    assert [m.status for m in ms] == ["ok", "ok", "refused"] and "no clocks" in ms[2].reason
    for rep, m in enumerate(ms[:2]):
        want = simulate_periodic(apps, pl, platform=platform, freqs_mhz=clocks, duration_us=1e6, seed=7000 + rep,
                                 controller_core=None, random_phase=rep > 0)
        assert m.latency_ms_p50 == max(want.max_response_us.values()) / 1e3 and m.power_w == want.board_power_w
        assert m.energy_j_per_frame == want.board_power_w / 30 and m.fps == 30.0
        assert first.backend.take_result(ok, rep).rail_w == want.rail_w
    again = evaluator()
    replayed = again.evaluate_many([(ok, 0), (ok, 1), (bad, 0)], phase="deploy", strategy="PR")
    assert again.measured == 0 and again.reused == 3 and len(read(store)) == 3
    assert [m.latency_ms_p50 for m in replayed] == [m.latency_ms_p50 for m in ms]
    assert again.backend.take_result(ok, 1).rail_w == first.backend.take_result(ok, 1).rail_w    # simulated again
    assert again.backend.take_result(bad, 0) is None


def table():
    return pd.DataFrame([
        {"scenario": "a", "fps": 30.0, "feasible": True, "cpu_mhz": 1190.4, "gpu_mhz": 675.75, "dla_mhz": 1395.2,
         "est_w": 2.0},
        {"scenario": "a", "fps": 40.0, "feasible": True, "cpu_mhz": 1497.6, "gpu_mhz": 905.25, "dla_mhz": 1395.2,
         "est_w": 3.0},
        {"scenario": "a", "fps": 50.0, "feasible": False, "cpu_mhz": 2265.6, "gpu_mhz": 1377.0, "dla_mhz": 1395.2,
         "est_w": None},
    ])


def test_lookup_takes_the_closest_tighter_entry():
    assert lookup(table(), "a", 35)["fps"] == 40.0
    assert lookup(table(), "a", 30)["fps"] == 30.0
    with pytest.raises(Exception, match="no feasible entry"):
        lookup(table(), "a", 45)


def test_dvfs_script_sets_the_boards_clock_files_per_entry(tmp_path):
    from dse.platform.modes import ClockControl, KnobFiles, clock_control
    from dse.platform import load_platform

    text = dvfs_script(table(), clock_control(load_platform("xavier-agx")))   # the files the board agent writes
    (tmp_path / "dvfs.sh").write_text(text)
    subprocess.run(["sh", "-n", str(tmp_path / "dvfs.sh")], check=True)
    assert "apply 905250000 1395200000 1497600" in text and "2265600" not in text
    assert "/sys/devices/17000000.gv11b/devfreq/17000000.gv11b" in text and "nafll_dla" in text
    # the same script over a stand-in sysfs tree, run for real: the 40-FPS entry is the smallest one >= 35
    sys_ = tmp_path / "sys"
    for d, lo, hi in (("gpu", "min_freq", "max_freq"), ("cpu0/cpufreq", "scaling_min_freq", "scaling_max_freq"),
                      ("cpu1/cpufreq", "scaling_min_freq", "scaling_max_freq"), ("dla", None, "cap")):
        (sys_ / d).mkdir(parents=True)
        for f, v in ((lo, "1"), (hi, "9999999999")):
            if f:
                (sys_ / d / f).write_text(v + "\n")
    local = ClockControl("nvpmodel", (
        ("gpu", KnobFiles((f"{sys_}/gpu/min_freq",), (f"{sys_}/gpu/max_freq",), 1.0)),
        ("dla", KnobFiles((), (f"{sys_}/dla/cap",), 1.0)),
        ("cpu", KnobFiles((f"{sys_}/cpu[0-9]*/cpufreq/scaling_min_freq",),
                          (f"{sys_}/cpu[0-9]*/cpufreq/scaling_max_freq",), 1000.0))))
    (tmp_path / "local.sh").write_text(dvfs_script(table(), local))
    subprocess.run(["sh", str(tmp_path / "local.sh"), "a", "35"], check=True)
    read = lambda rel: (sys_ / rel).read_text().strip()
    assert read("gpu/min_freq") == read("gpu/max_freq") == "905250000" and read("dla/cap") == "1395200000"
    assert {read(f"cpu{c}/cpufreq/scaling_{m}_freq") for c in (0, 1) for m in ("min", "max")} == {"1497600"}
    proc = subprocess.run(["sh", str(tmp_path / "local.sh"), "a", "45"], capture_output=True, text=True)
    assert proc.returncode == 1 and "no mapping meets 45 FPS in a" in proc.stderr
