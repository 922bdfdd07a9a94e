"""Power modes and clocks on the virtual Jetsons (dse.platform.modes), the clock phase of the pipeline DSE
(dse.search.clocks) and its workflow step: objective, min_fps, Pareto mode, bad input."""
import json

import pytest

from dse.backends import sets_clocks
from dse.backends.sim import SimBackend
from dse.core.configuration import Configuration
from dse.backends.sim.tasktime import time_scale
from dse.platform.modes import clock_extra, clock_setting, mode_levels, power_modes
from dse.core.errors import DseError
from dse.evaluate import Evaluator
from dse.config import compose_config
from dse.platform import load_platform, platform_from_dict
from dse.search.clocks import EnergySettings, clock_phase, mapping_candidates
from dse.search.study import Study
from tests.workflow.test_pipeline import _jobs, _workdir, snakemake

XAVIER = load_platform("xavier-agx-sim")
RUN = "results/tiny-detector/xavier-agx-sim/int8-b1-64"
OVR = ("[benchmark=tiny-detector,search.options=[E,PND-A],benchmark.sample_size=300,search.objective=energy,"
       "search.min_fps=100,search.pareto=true,search.power_modes=[MAXN,MODE_30W_ALL],search.energy_mappings=2]")


def test_power_modes_are_nvpmodel_ceilings_over_the_tables():
    modes = power_modes(XAVIER)
    assert list(modes)[0] == "MAXN" and modes["MODE_10W"].cpu_online == 2 and modes["MODE_10W"].gpu_units == 0.5
    full = mode_levels(XAVIER, modes["MAXN"])
    assert full["gpu"][-1] == 1377 and full["dla"][-1] == 1395.2 and full["cpu"][-1] == 2265.6
    w30 = mode_levels(XAVIER, modes["MODE_30W_ALL"])
    assert w30["gpu"] == [675.75, 828.75] and w30["cpu"] == [1190.4] and max(w30["dla"]) == 972.8
    assert mode_levels(XAVIER, modes["MODE_10W"])["gpu"] == [520.0]      # below Table 4.7: the ceiling itself
    assert "MODE_15W" in power_modes(load_platform("xavier-agx")) and "MODE_50W" in power_modes(
        load_platform("orin-agx-sim"))
    assert list(power_modes(load_platform("host-cpu"))) == ["MAXN"]       # no section: full clocks only


def test_full_clocks_are_the_plain_configuration():
    assert clock_extra(XAVIER, "MAXN", {"gpu": 1377, "dla": 1395.2, "cpu": 2265.6}) == {}
    assert clock_extra(XAVIER, "MODE_30W_ALL", {"gpu": 828.75, "cpu": 1190.4}) == {"power_mode": "MODE_30W_ALL"}
    assert clock_extra(XAVIER, "MAXN", {"gpu": 905.25}) == {"gpu_mhz": "905.25"}
    s = clock_setting(XAVIER, {})
    assert s.of("gpu") is None and all(time_scale(XAVIER, s, k) == 1.0 for k in ("gpu", "dla", "cpu"))
    low = clock_setting(XAVIER, {"power_mode": "MODE_15W"})
    assert low.of("gpu") == 670.0 and low.emc_scale == pytest.approx(2133 / 1333)
    assert time_scale(XAVIER, low, "gpu") > 1377 / 670 * 0.8


@pytest.mark.parametrize("extra, message", [
    ({"power_mode": "MODE_99W"}, "unknown power mode of xavier-agx-sim 'MODE_99W'; valid choices: MAXN, MODE_10W"),
    ({"gpu_mhz": "900"}, "gpu_mhz=900 is not a GPU level of power mode MAXN on xavier-agx-sim; levels: 675.75"),
    ({"power_mode": "MODE_30W_ALL", "gpu_mhz": "1377"}, "not a GPU level of power mode MODE_30W_ALL"),
    ({"cpu_mhz": "fast"}, "cpu_mhz must be a number of MHz, got 'fast'"),
])
def test_bad_clocks_are_refused_naming_the_choices(tiny_detector, extra, message):
    be = SimBackend(XAVIER, tiny_detector)
    m = be.measure(_config(tiny_detector, extra=extra))
    assert m.status == "refused" and message in m.reason


def test_lower_clocks_and_modes_trade_fps_for_energy(tiny_detector):
    be = SimBackend(XAVIER, tiny_detector)
    full = be.measure(_config(tiny_detector))
    slow = be.measure(_config(tiny_detector, extra={"gpu_mhz": "905.25", "cpu_mhz": "1497.6"}))   # CPU-bound
    ten = be.measure(_config(tiny_detector, extra={"power_mode": "MODE_10W"}))
    assert slow.fps < full.fps and slow.power_w < full.power_w
    assert ten.fps < slow.fps and ten.power_w < slow.power_w
    assert slow.energy_j_per_frame < full.energy_j_per_frame     # DVFS saves energy per frame here


def test_settings_refuse_bad_objective_min_fps_and_modes():
    with pytest.raises(DseError, match="unknown search.objective 'speed'; valid choices: energy, fps, fps_per_watt"):
        EnergySettings(objective="speed")
    with pytest.raises(DseError, match="search.min_fps must be a number >= 0, got -1"):
        EnergySettings(min_fps=-1)
    with pytest.raises(DseError, match="power mode of xavier-agx-sim 'MODE_5W'; valid choices: MAXN"):
        EnergySettings(objective="energy", power_modes=("MODE_5W",)).check(XAVIER, sets_clocks(XAVIER))
    agx = load_platform("xavier-agx")
    assert sets_clocks(agx) and sets_clocks(XAVIER) and not sets_clocks(load_platform("host-cpu"))
    EnergySettings(objective="energy").check(agx, sets_clocks(agx))   # its agent sets them (clock_control)
    bare = platform_from_dict(compose_config(["platform=xavier-agx", "platform.clock_control=null"]).platform)
    with pytest.raises(DseError, match=r"platform xavier-agx \(trt backend\) has neither"):
        EnergySettings(objective="energy").check(bare, sets_clocks(bare))
    rest, e = EnergySettings.split({"top_k": 3, "objective": "energy", "energy_mappings": 2})
    assert rest == {"top_k": 3} and e.mappings == 2 and e.active and not EnergySettings().active


def test_clock_phase_meets_min_fps_below_the_full_clock_energy(tiny_detector):
    be = SimBackend(XAVIER, tiny_detector)
    study = Study(Evaluator(be))
    best = _config(tiny_detector)
    mid = tiny_detector.feasible_cuts[len(tiny_detector.feasible_cuts) // 2]
    other = _config(tiny_detector, option="PND-A", cuts=(mid,), streams=(2, 2))
    ms = [study.measure(c, "search") for c in (best, other)]
    assert [c.option for c in mapping_candidates(best, ms, 2)] == ["E", "PND-A"]
    floor = 0.6 * ms[0].fps
    r = clock_phase(study, XAVIER, [best, other], EnergySettings(objective="energy", min_fps=floor,
                                                                 power_modes=("MAXN", "MODE_30W_ALL"), repeats=2))
    assert r.extra["feasible"] and r.extra["chosen"]["fps"] >= floor and len(r.extra["chosen"]["reruns"]) == 2
    assert r.extra["chosen"]["energy_j_per_frame"] < r.extra["reference"]["energy_j_per_frame"]
    assert r.extra["reference"]["gpu_mhz"] == 1377 and r.extra["reference"]["option"] == "E"
    assert any(p["on_front"] for p in r.extra["points"]) and r.extra["measured"] == len(r.extra["points"]) - 2   # the two tops were known
    out = r.to_dict()
    assert 0 < out["energy_ratio"] < 1 and json.dumps(out)


def test_min_fps_above_anything_reachable_is_recorded_with_the_best_fps(tiny_detector):
    be = SimBackend(XAVIER, tiny_detector)
    study = Study(Evaluator(be))
    best = _config(tiny_detector)
    top = study.measure(best, "search").fps
    r = clock_phase(study, XAVIER, [best], EnergySettings(objective="fps_per_watt", min_fps=10 * top,
                                                          power_modes=("MAXN",)))
    assert not r.extra["feasible"] and r.extra["chosen"] is None
    assert f"is above every FPS measured: the best is {top:.1f} FPS (E" in r.extra["reason"]


@pytest.fixture(scope="module")
def tiny_detector():
    from dse.graph.analysis import analyze
    from dse.zoo import build_network

    return analyze(build_network("tiny-detector", input_size=416))


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    wd = _workdir(tmp_path_factory.mktemp("clocks"))
    snakemake(wd, "--config", f"overrides={OVR}")
    return wd


@pytest.mark.slow
def test_workflow_energy_objective_end_to_end(finished):
    run = finished / RUN
    out = json.loads((run / "clocks.json").read_text())
    assert out["feasible"] and out["chosen"]["fps"] >= 100 and out["energy_ratio"] < 1
    assert {p["power_mode"] for p in out["points"]} == {"MAXN", "MODE_30W_ALL"}
    assert (run / "plots" / "energy_front.png").stat().st_size > 0
    report = (run / "report.md").read_text()
    assert "## Energy: objective energy, min_fps 100" in report and "| answer |" in report
    summary = json.loads((run / "summary.json").read_text())
    assert summary["clocks"]["objective"] == "energy" and summary["clocks"]["chosen_fps"] >= 100
    rows = __import__("pandas").read_parquet(run / "measurements.parquet")
    assert (rows.phase == "clocks").sum() >= out["measured"]


@pytest.mark.slow
def test_an_energy_setting_reruns_only_the_clock_phase(finished):
    assert _jobs(snakemake(finished, "-n", "--config", f"overrides={OVR}")) == []
    jobs = _jobs(snakemake(finished, "-n", "--config", f"overrides={OVR.replace('min_fps=100', 'min_fps=120')}"))
    assert "clocks" in jobs and "report" in jobs
    assert not {"maximize", "explore_option", "search", "finetune"} & set(jobs)


@pytest.mark.slow
def test_min_fps_nothing_reaches_is_a_recorded_result_not_a_crash(finished):
    snakemake(finished, "--config", f"overrides={OVR.replace('min_fps=100', 'min_fps=100000')}")
    out = json.loads((finished / RUN / "clocks.json").read_text())
    assert not out["feasible"] and "min_fps 100000 is above every FPS measured: the best is" in out["reason"]
    assert "No answer: min_fps 100000" in (finished / RUN / "report.md").read_text()


@pytest.mark.parametrize("override, message", [
    ("search.objective=speed", "unknown search.objective 'speed'; valid choices: energy, fps, fps_per_watt"),
    ("search.power_modes=[MODE_99W]", "unknown power mode of xavier-agx-sim 'MODE_99W'"),
    ("search.min_fps=-5", "search.min_fps must be a number >= 0"),
])
def test_bad_energy_settings_fail_before_any_job(tmp_path, override, message):
    wd = _workdir(tmp_path)
    proc = snakemake(wd, "-n", "--config", f"overrides=[benchmark=tiny-detector,{override}]", check=False)
    assert proc.returncode != 0 and message in proc.stdout + proc.stderr


def _config(analysis, option="E", cuts=(), streams=(2,), extra=None) -> Configuration:
    return Configuration(benchmark="tiny-detector", platform="xavier-agx-sim", option=option, cuts=cuts,
                         streams=streams, buffers=6, pre_threads=2, post_threads=2, precision="int8", input_size=416,
                         model_digest=analysis.digest, extra=extra or {})


def test_objective_fps_within_power_modes_answers_inside_them(tiny_detector):
    study = Study(Evaluator(SimBackend(XAVIER, tiny_detector)))
    best = _config(tiny_detector)
    r = clock_phase(study, XAVIER, [best], EnergySettings(power_modes=("MODE_30W_ALL",), repeats=1))
    assert r.extra["feasible"] and r.extra["chosen"]["power_mode"] == "MODE_30W_ALL" and r.extra["reference"]["power_mode"] == "MAXN"
    # inside the mode (828.75 / 1190.4 MHz are its top clocks), and the fastest of it within the noise: the tiny
    # detector is host-bound, so a lower GPU clock can measure as fast
    top = next(p for p in r.extra["points"] if p["power_mode"] == "MODE_30W_ALL" and p["gpu_mhz"] == 828.75
               and p["cpu_mhz"] == 1190.4)
    assert r.extra["chosen"]["gpu_mhz"] <= 828.75 and r.extra["chosen"]["cpu_mhz"] <= 1190.4
    assert r.extra["chosen"]["fps"] >= 0.97 * top["fps"]
    assert EnergySettings(power_modes=("MODE_15W",)).active
