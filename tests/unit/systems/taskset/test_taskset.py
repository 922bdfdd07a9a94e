"""Seed 003's task-set scheduling: Table 4 as data, the unit models against brute force, the exact
shortcuts (bound, greedy) against the ILP, the generator's contract, the campaign's nesting, and the `taskset`
target and CLI for real (Snakemake, HiGHS, Parquet)."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from dse.cli import main
from dse.systems.taskset.campaign import CampaignSettings, decide_configurations, from_config, run_campaign, summarize
from dse.systems.taskset.errors import TasksetError
from dse.systems.taskset.generate import generate_set, set_rng
from dse.systems.taskset.schedule import Scheduler
from dse.systems.taskset.variants import OPTIONS, VariantTable, load_table
from tests.golden import assert_golden, canonical_table
from tests.workflow.test_pipeline import _jobs, _workdir, snakemake

pytest.importorskip("pulp")
NAN = np.nan


def row(**times) -> np.ndarray:
    r = np.full(len(OPTIONS), NAN)
    for k, v in times.items():
        r[OPTIONS.index(k)] = v
    return r


def brute_force(s: Scheduler, times: np.ndarray, enabled) -> bool:
    """Every assignment of a placement to every task; feasible iff some one keeps every unit within the frame."""
    task, place, t = s.columns(times, enabled)
    per_task = [np.flatnonzero(task == i) for i in range(len(times))]
    for combo in itertools.product(*per_task):
        loads = sum(s.place_mask[place[c]] * t[c] for c in combo) if combo else np.zeros(1)
        if (loads <= s.frame + 1e-9).all():
            return True
    return False


def test_table4_is_the_papers_table():
    t = load_table("apollo-xavier")
    assert t.frame_ms == 100 and t.types == ("DNN1", "DNN3", "DNN4", "RNN1", "RNN2", "RNN3", "DNN5")
    ok = np.isfinite(t.lo)
    # every U_max = 1.15 x nominal and U_min = 0.85 x nominal (spec 5.3), to the printed two decimals
    assert np.allclose(t.hi[ok] / t.lo[ok], 1.15 / 0.85, atol=0.01)
    rnn = [t.types.index(k) for k in ("RNN1", "RNN2", "RNN3")]
    assert not ok[rnn][:, [OPTIONS.index("dla1"), OPTIONS.index("dla2")]].any()         # "-": no RNN on a DLA
    assert not ok[:3, :3].any()                                                        # "x": big DNNs off the CPU
    assert set(t.scenarios) == {"nvdla", "gpu-tc", "gpu-rc"}
    assert t.scenario("nvdla").configurations["NVDLA-comb"] == ("dla2",)
    assert VariantTable.from_dict(t.to_dict()).to_dict() == t.to_dict()


@pytest.mark.parametrize("units", ["physical", "per_config"])
def test_decide_and_the_ilp_equal_brute_force(units):
    table = load_table("apollo-xavier")
    s = Scheduler(25.0, units)           # a short frame makes small sets tight
    rng = np.random.default_rng(1)
    every = tuple(OPTIONS)
    seen = {True: 0, False: 0}
    for _ in range(80):
        n = int(rng.integers(2, 5))
        types = rng.integers(len(table.types), size=n)
        times = table.lo[types] + rng.random((n, len(OPTIONS))) * (table.hi[types] - table.lo[types])
        enabled = tuple(rng.choice(every, size=int(rng.integers(3, 8)), replace=False))
        truth = brute_force(s, times, enabled)
        seen[truth] += 1
        assert s.decide(times, enabled).feasible == truth
        assert s.schedule(times, enabled).feasible == truth
    assert min(seen.values()) >= 10      # both answers exercised


def test_units_hand_cases():
    phys, per = Scheduler(100.0, "physical"), Scheduler(100.0, "per_config")
    dla = ("dla1", "dla2")
    assert phys.decide(np.array([row(dla2=60), row(dla2=60)]), dla).feasible is False     # both DLAs, twice
    assert phys.decide(np.array([row(dla1=60), row(dla1=60)]), dla).feasible              # one per DLA
    three = np.array([row(dla2=50), row(dla1=50), row(dla1=50)])
    res = phys.schedule(three, dla)
    assert res.feasible and res.loads_ms["D0"] == 100 and res.loads_ms["D1"] == 100
    assert [a[0] for a in res.assignment] == ["dla2", "dla1", "dla1"]
    # cpu4 is bound to pairs 0+1: a cpu2 task fits on pair 2 beside it, a second cpu4 does not
    assert phys.decide(np.array([row(cpu4=70), row(cpu2=90)]), ("cpu2", "cpu4")).feasible
    assert phys.decide(np.array([row(cpu4=70), row(cpu4=40)]), ("cpu4",)).feasible is False
    # Tensor and CUDA cores share the GPU physically; per_config gives each its own pair of bins
    gpu = np.array([row(tc4=60), row(rc4=60), row(tc4=60), row(rc4=60)])
    assert phys.decide(gpu, ("tc4", "rc4")).feasible is False
    assert per.decide(gpu, ("tc4", "rc4")).feasible


def test_schedule_minimizes_the_cumulative_utilization():
    s = Scheduler(100.0)
    res = s.schedule(np.array([row(dla2=10, tc8=5), row(dla1=30, rc4=20)]), OPTIONS)
    assert res.status == "optimal" and res.utilization_ms == pytest.approx(25.0)
    assert [a[0] for a in res.assignment] == ["tc8", "rc4"]
    assert s.decide(np.empty((0, len(OPTIONS))), OPTIONS).feasible


def test_generator_contract():
    table = load_table("apollo-xavier")
    r = OPTIONS.index("dla2")
    for threshold in (1.0, 2.2):
        rng = set_rng(3, "nvdla", threshold)
        for _ in range(30):
            types, times = generate_set(rng, table, "dla2", threshold, margin=0.1)
            total = times[:, r].sum()
            assert (threshold - 0.1) * 100 <= total <= threshold * 100 + 1e-9
            assert set(types) <= {0, 1, 2, 6}                      # only types with a DLA variant
            lo, hi = table.lo[types], table.hi[types]
            ok = np.isfinite(lo)
            assert np.array_equal(ok, np.isfinite(times))
            assert ((times[ok] >= lo[ok]) & (times[ok] <= hi[ok])).all()
    a = generate_set(set_rng(0, "nvdla", 1.4), table, "dla2", 1.4)
    b = generate_set(set_rng(0, "nvdla", 1.4), table, "dla2", 1.4)
    assert np.array_equal(a[1], b[1], equal_nan=True)


def test_campaign_nesting_matches_direct_answers():
    table = load_table("apollo-xavier")
    scenario = table.scenario("gpu-tc")
    s = Scheduler(table.frame_ms)
    for threshold in (1.4, 1.8, 2.2):
        rng = set_rng(0, "gpu-tc", threshold)
        for _ in range(6):
            _, times = generate_set(rng, table, "tc8", threshold)
            nested = decide_configurations(s, times, scenario.configurations)
            direct = {c: s.decide(times, o).feasible for c, o in scenario.configurations.items()}
            assert {c: d.feasible for c, d in nested.items()} == direct
    frame = run_campaign(table, CampaignSettings("gpu-tc", sets=8, thresholds=(1.0, 1.6, 3.0)))
    summary = summarize(frame)
    at = summary.set_index(["configuration", "threshold"]).success
    assert all(at[c, 1.0] == 1.0 for c in scenario.configurations)   # the reference alone fits by construction
    assert at["TC-comb", 1.6] == 0.0 and at["TC+RC+CPU", 3.0] == 0.0
    for t in (1.0, 1.6, 3.0):
        assert at["TC-comb", t] <= at["TC", t] <= at["TC+RC", t] <= at["TC+RC+CPU", t]
    assert set(frame.decided_by) <= {"bound", "greedy", "ilp", "implied"}


@pytest.mark.parametrize("change, message", [
    ({"variants": {"A": {"dla1": [5, 4]}}}, "U_min 5.0 > U_max 4.0"),
    ({"unit": None}, "time unit None missing or unknown; valid choices: ms, us"),
    ({"variants": {"A": {}}}, "task A has no runnable variant"),
    ({"variants": {"A": {"npu": 3}}}, "unknown option 'npu'; valid choices: cpu2"),
    ({"frame": 0}, "frame must be > 0"),
    ({"scenarios": {"s": {"reference": "gpu", "configurations": {"c": ["dla1"]}}}}, "reference 'gpu'"),
])
def test_bad_tables_name_the_value(change, message):
    base = {"name": "t", "unit": "ms", "frame": 100, "variants": {"A": {"dla1": [1, 2]}}}
    with pytest.raises(TasksetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        VariantTable.from_dict({**base, **change})


def test_bad_campaign_settings_name_the_value():
    table = load_table("apollo-xavier")
    with pytest.raises(TasksetError, match="unknown scenario 'cpu'.*gpu-rc, gpu-tc|unknown scenario 'cpu'.*nvdla"):
        CampaignSettings("cpu").check(table)
    with pytest.raises(TasksetError, match=r"thresholds must be numbers > 0, got \[0\]"):
        CampaignSettings("nvdla", thresholds=(1.0, 0))
    with pytest.raises(TasksetError, match="unknown unit model 'shared'; valid choices: physical, per_config"):
        CampaignSettings("nvdla", units="shared").check(table)
    with pytest.raises(TasksetError, match="utilization threshold must be > 0"):
        generate_set(np.random.default_rng(0), table, "dla2", -1.0)
    node = {**table.to_dict(), "colour": 1}
    with pytest.raises(TasksetError, match="unknown key of taskset 'colour'; valid choices: "):
        from_config(node, "nvdla")


def test_cli_run_writes_campaign_and_report(tmp_path, capsys):
    code = main(["taskset", "run", "scenario=gpu-rc", "sets=3", "thresholds=[1.0,1.6]", f"results_dir={tmp_path}"])
    assert code == 0
    tdir = tmp_path / "taskset-cli" / "apollo-xavier" / "physical"
    assert not (tmp_path / "taskset").exists()      # the target's own directory is left to the target
    frame = pd.read_parquet(tdir / "campaign" / "gpu-rc.parquet")
    assert len(frame) == 3 * 2 * 3 and set(frame.configuration) == {"RC-comb", "RC", "RC+CPU"}
    meta = json.loads((tdir / "campaign" / "gpu-rc.json").read_text())
    assert meta["settings"]["seed"] == 0 and meta["settings"]["sets"] == 3 and meta["versions"]
    assert "| 1.0 | 100.0 | 100.0 | 100.0 |" in (tdir / "taskset.md").read_text()
    assert (tdir / "plots" / "gpu-rc.png").stat().st_size > 0
    assert main(["taskset", "run", "scenario=cpu-only", f"results_dir={tmp_path}"]) == 2
    assert "unknown scenario 'cpu-only'" in capsys.readouterr().err


def test_taskset_target_runs_every_scenario_and_reruns_nothing(tmp_path):
    wd = _workdir(tmp_path)
    ovr = "overrides=[taskset.sets=2,taskset.thresholds=[1.0,1.8]]"
    snakemake(wd, "taskset", "--config", ovr)
    tdir = wd / "results" / "taskset" / "apollo-xavier" / "physical"
    summary = pd.read_parquet(tdir / "taskset.parquet")
    assert set(summary.scenario) == {"nvdla", "gpu-tc", "gpu-rc"} and len(summary) == 2 * (5 + 4 + 3)
    assert_golden("taskset/two-sets.csv", canonical_table(summary))
    assert _jobs(snakemake(wd, "taskset", "-n", "--config", ovr)) == []
    jobs = _jobs(snakemake(wd, "taskset", "-n", "--config", "overrides=[taskset.sets=3,taskset.thresholds=[1.0,1.8]]"))
    assert jobs.count("taskset_campaign") == 3
    bad = snakemake(wd, "taskset", "-n", "--config", "overrides=[taskset.units=shared]", check=False)
    assert bad.returncode != 0 and "shared" in bad.stdout + bad.stderr


# -- variants measured by the evaluator (dse.systems.taskset.measured) ---------------------------------------------------

SMALL = ("squeezenet", "yolov2-tiny")


@pytest.fixture(scope="module")
def measured():
    from dse.systems.taskset.measured import MeasureSpec, measure_variants

    return measure_variants(MeasureSpec(networks=SMALL), frame_ms=100.0)


def test_measured_variants_have_the_seeds_shapes(measured):
    variants, rows = measured
    ms = rows.set_index(["type", "option"]).ms
    for net in SMALL:
        t = ms[net]
        assert t["rc4"] >= t["rc8"] and t["tc4"] >= t["tc8"]      # fewer SMs, never faster
        assert t["tc8"] < t["rc8"]                                 # Tensor cores (fp16) beat CUDA cores (fp32)
        assert t["cpu2"] > t["cpu4"] > t["cpu6"]
        assert t["dla1"] / 2 < t["dla2"] < t["dla1"]               # two cores at once: faster, not twice
    assert ms["yolov2-tiny", "rc4"] / ms["yolov2-tiny", "rc8"] > ms["squeezenet", "rc4"] / ms["squeezenet", "rc8"]
    split = rows[rows.option == "dla2"].iloc[0]
    assert split.stage1_us <= split.us and split.stage2_us <= split.us and max(split.stage1_us, split.stage2_us) == split.us
    # Table 4's form: [0.85, 1.15] x the time; an option over the frame is no variant ("x")
    lo, hi = variants["squeezenet"]["tc8"]
    assert lo == pytest.approx(0.85 * ms["squeezenet", "tc8"], abs=1e-3)
    assert hi == pytest.approx(1.15 * ms["squeezenet", "tc8"], abs=1e-3)
    dropped = rows[~rows.kept]
    assert (dropped.u_max > 100).all() and "cpu2" not in variants["yolov2-tiny"]
    table = VariantTable.from_dict({"name": "m", "unit": "ms", "frame": 100, "variants": variants,
                                    "scenarios": load_table("apollo-xavier").to_dict()["scenarios"]})
    assert table.types == SMALL


def test_measured_cpu_variants_run_onnx_runtime_with_k_threads():
    from dse.platform.cpu_groups import usable_cores
    from dse.systems.taskset.measured import MeasureSpec, measure_variants

    _, rows = measure_variants(MeasureSpec(networks=("squeezenet",), cpu="ort", repeats=3), frame_ms=1000.0)
    cpu = rows[rows.option.str.startswith("cpu")]
    assert set(cpu.source) == {"ort"} and (cpu.ms > 0).all()
    assert sorted(cpu.option) == [f"cpu{k}" for k in (2, 4, 6) if k <= len(usable_cores())]


def test_measured_variants_are_store_rows_a_rerun_reads(tmp_path, monkeypatch):
    from dse.store import read
    from dse.systems.taskset.backend import VariantBackend
    from dse.systems.taskset.measured import MeasureSpec, measure_variants

    store = tmp_path / "cache" / "variants.parquet"
    spec = MeasureSpec(networks=("squeezenet",))
    variants, rows = measure_variants(spec, frame_ms=100.0, store=store)
    stored = read(store)
    assert set(stored.status) == {"ok"} and set(stored.phase) == {"variants"} and stored.context.nunique() == 1
    assert set(stored.option) == set(rows.option) and (stored.option == "dla2").sum() > 1     # one row per split

    def measure(self, config, *, repeat=0):
        raise AssertionError(f"measured {config.option} again")

    monkeypatch.setattr(VariantBackend, "measure", measure)
    again = measure_variants(spec, frame_ms=100.0, store=store)
    assert again[0] == variants and len(read(store)) == len(stored)
    pd.testing.assert_frame_equal(again[1], rows, check_exact=True)


@pytest.mark.parametrize("change, message", [
    ({"networks": ["yolo9"]}, "unknown benchmark 'yolo9'"),
    ({"networks": []}, "networks is empty"),
    ({"cpu": "gpu"}, "cpu 'gpu'; valid choices: sim, ort"),
    ({"tc_precision": "fp32"}, "tc_precision 'fp32'; valid choices: fp16, int8"),
    ({"dla_precision": "fp32"}, "dla_precision 'fp32' on xavier-agx-sim; valid choices: fp16, int8"),
    ({"cpu_cores": [3]}, "cpu_cores 3"),
    ({"sm_fraction": 1.5}, "sm_fraction must be in"),
    ({"colour": 1}, "unknown key of taskset.measure 'colour'; valid choices: "),
])
def test_bad_measure_specs_name_the_value(change, message):
    from dse.systems.taskset.measured import MeasureSpec

    with pytest.raises(TasksetError, match=message):
        MeasureSpec.from_dict({"networks": ["squeezenet"], **change})


def test_measured_network_without_a_variant_fails():
    from dse.systems.taskset.measured import MeasureSpec, measure_variants

    with pytest.raises(TasksetError, match="yolov2-tiny has no runnable variant"):
        measure_variants(MeasureSpec(networks=("yolov2-tiny",)), frame_ms=0.5)


@pytest.mark.slow
def test_measured_table_through_snakemake(tmp_path):
    wd = _workdir(tmp_path)
    base = ("taskset=zoo-xavier,taskset.measure.networks=[squeezenet,mobilenet-v2],taskset.sets=2,"
            "taskset.thresholds=[1.0,1.6],taskset.run_scenarios=[gpu-tc,nvdla]")
    jobs = _jobs(snakemake(wd, "taskset", "--config", f"overrides=[{base}]"))
    assert jobs.count("taskset_variants") == 1 and jobs.count("taskset_campaign") == 2
    tdir = wd / "results" / "taskset" / "zoo-xavier" / "physical"
    text = (tdir / "taskset.md").read_text()
    assert "Measured variants" in text and "| squeezenet |" in text
    assert set(pd.read_parquet(tdir / "variants.parquet").type) == {"squeezenet", "mobilenet-v2"}
    assert _jobs(snakemake(wd, "taskset", "-n", "--config", f"overrides=[{base}]")) == []
    jobs = _jobs(snakemake(wd, "taskset", "-n", "--config", f"overrides=[{base},taskset.measure.spread=0.1]"))
    assert jobs.count("taskset_variants") == 1 and jobs.count("taskset_campaign") == 2
    bad = snakemake(wd, "taskset", "-n", "--config", f"overrides=[{base},taskset.measure.cpu=npu]", check=False)
    assert bad.returncode != 0 and "npu" in bad.stdout + bad.stderr


def test_cli_measures_a_measured_table_once(tmp_path):
    args = ["taskset", "run", "table=zoo-xavier", "taskset.measure.networks=[squeezenet]", "scenario=gpu-rc",
            "sets=2", "thresholds=[1.0]", f"results_dir={tmp_path}"]
    assert main(args) == 0
    variants = tmp_path / "taskset-cli" / "zoo-xavier" / "physical" / "variants.yaml"
    stamp = variants.stat().st_mtime_ns
    assert main(args) == 0 and variants.stat().st_mtime_ns == stamp
