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
