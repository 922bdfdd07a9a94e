"""The `layermap` target for real: squeezenet on galaxy-s9-sim with a small GA budget and ILP time
limit (outputs, GA vs ILP, monotone caps, Parquet rows, measurements), a rerun that does nothing, a changed ILP
setting that reruns only the ILP solves and the merge, host-cpu with real ORT profiling and measurements at a tiny
input size, and bad settings refused by name before any job runs."""
import json

import pandas as pd
import pytest

from dse.core.errors import DseError
from dse.workflow.plan import plan_runs
from tests.golden import assert_golden, canonical_table
from tests.workflow.test_pipeline import _jobs, _workdir, snakemake

S9 = ("[platform=galaxy-s9-sim,benchmark=squeezenet,layermap.cpu_configs=[4,2-1-1],layermap.caps=[1.0,0.7,0.5],"
      "layermap.ga.budget=1500,layermap.ilp.clusters=null,layermap.ilp.time_limit_s=5,layermap.pareto.budget=800")
S9_RUN = "results/squeezenet/galaxy-s9-sim/fp32-b1-224"


@pytest.fixture(scope="module")
def s9(tmp_path_factory):
    wd = _workdir(tmp_path_factory.mktemp("lm"))
    proc = snakemake(wd, "layermap", "--config", f"overrides={S9}]")
    return wd, proc


def test_s9_outputs_are_consistent(s9):
    wd, proc = s9
    run = wd / S9_RUN
    for name in ("profile.parquet", "layermap.parquet", "layermap.md", "plots/layermap_periods.png",
                 "plots/layermap_gantt_100.png", "plots/layermap_gantt_cap.png", "plots/layermap_pareto.png",
                 "layermap/pareto.json", "config.yaml", "cache/layermap.parquet"):
        assert (run / name).exists(), name
    assert "layermap" in (run / "config.yaml").read_text() and "time_limit_s: 5" in (run / "config.yaml").read_text()
    f = pd.read_parquet(run / "layermap.parquet")
    solved = f[f["method"].isin(["ga", "ilp"])]
    assert len(solved) == 2 * 3 * 2 and set(f["method"]) == {"ga", "ilp", "GPU-only", "CPU-only"}
    assert solved["period_us"].gt(0).all() and (solved["util"] <= solved["cap"] + 1e-6).all()
    assert f["measured_fps"].gt(0).all()      # every mapping measured by the sim (GA and ILP may find the same one)
    from dse.store import read

    assert len(read(run / "cache/layermap.parquet")) == f["config_hash"].nunique()
    key = solved.set_index(["cpu_config", "cap", "method"])
    for cpu in ("4", "2-1-1"):
        ilp = [key.loc[(cpu, c, "ilp")] for c in (1.0, 0.7, 0.5)]
        for c in (1.0, 0.7, 0.5):
            r = key.loc[(cpu, c, "ilp")]
            if r["status"] == "optimal":   # the unrestricted ILP's optimum is a lower bound of the GA's period
                assert r["period_us"] <= key.loc[(cpu, c, "ga")]["period_us"] * (1 + 1e-9)
        opt = [r["period_us"] for r in ilp if r["status"] == "optimal"]
        assert opt == sorted(opt), f"ILP periods of ({cpu}) not monotone as the cap tightens: {opt}"
    gpu = float(f.loc[f["method"] == "GPU-only", "period_us"].iloc[0])
    assert solved.loc[solved["cap"] == 1.0, "period_us"].min() < gpu        # 004 Fig. 14: mapping beats GPU-only
    front = json.loads((run / "layermap/pareto.json").read_text())["front"]
    assert len(front) >= 2 and [p["period_us"] for p in front] == sorted(p["period_us"] for p in front)
    md = (run / "layermap.md").read_text()
    assert "| (2,1,1) |" in md and "GPU-only" in md and "measured FPS" in md
    assert "[layermap] ilp 2-1-1 cap 50 %" in proc.stderr and "results ->" in proc.stderr   # progress, summary


def test_the_s9_table_is_golden(s9):
    wd, _ = s9
    table = pd.read_parquet(wd / S9_RUN / "layermap.parquet")
    # the ILPs run under a time limit: what they reach (and whether they prove it) depends on this machine's speed
    table = table[table["method"] != "ilp"].drop(columns=["gap"])
    assert_golden("layermap/s9-squeezenet.csv", canonical_table(table))


def test_s9_rerun_is_a_noop_and_an_ilp_setting_reruns_only_the_ilp(s9):
    wd, _ = s9
    proc = snakemake(wd, "layermap", "--config", f"overrides={S9}]")
    assert "Nothing to be done" in proc.stdout + proc.stderr
    proc = snakemake(wd, "-n", "layermap", "--config", f"overrides={S9},layermap.ilp.time_limit_s=6]")
    assert set(_jobs(proc)) == {"configure", "resolved_config", "layermap_solve", "layermap_merge", "layermap"}
    assert "ga_" not in proc.stdout.split("Job stats")[0].replace("lm-ga", "")


@pytest.mark.parametrize("override,match", [
    ("layermap.cpu_configs=[3-2]", r"unknown CPU configuration '3-2' in layermap.cpu_configs; valid choices on "
                                   r"galaxy-s9-sim \(4 cores\): 4, 3-1, 2-2, 2-1-1, 1-1-1-1"),
    ("layermap.caps=[1.0,1.5]", r"cap 1.5 is outside \(0, 1\]"),
    ("layermap.caps=[0]", r"cap 0 is outside \(0, 1\]"),
    ("layermap.methods=[ga,sa]", r"unknown layermap method 'sa'; valid choices: ga, ilp"),
    ("layermap.accelerators=[npu]", r"unknown layermap accelerator of platform galaxy-s9-sim 'npu'; valid choices: gpu"),
    ("layermap.ilp.solver=gurobi", r"layermap.ilp.solver 'gurobi'; valid choices: cbc, highs"),
])
def test_bad_settings_are_refused_by_name(override, match):
    with pytest.raises(DseError, match=match):
        plan_runs({"overrides": f"[platform=galaxy-s9-sim,benchmark=squeezenet,{override}]"})


def test_bad_settings_fail_before_any_job_and_boards_refuse_the_other_target(tmp_path):
    wd = _workdir(tmp_path)
    proc = snakemake(wd, "layermap", "--config", "overrides=[platform=galaxy-s9-sim,layermap.caps=[2]]", check=False)
    assert proc.returncode != 0 and "cap 2 is outside (0, 1]" in proc.stdout + proc.stderr
    assert not (wd / "results").exists()
    proc = snakemake(wd, "-n", "layermap", "--config", "overrides=[benchmark=tiny-chain]", check=False)
    assert proc.returncode != 0 and "xavier-agx-sim is a pipeline board: the layermap target runs on" in proc.stdout + proc.stderr
    proc = snakemake(wd, "-n", "--config", "overrides=[platform=galaxy-s9-sim]", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "per-layer-mapping board" in text and "its target is `layermap`" in text


@pytest.mark.slow
def test_host_cpu_profiles_and_measures_for_real(tmp_path):
    wd = _workdir(tmp_path)
    snakemake(wd, "layermap", "--config",
              "overrides=[platform=host-cpu,benchmark=squeezenet,benchmark.input_size=64,benchmark.sample_size=40,"
              "benchmark.warmup=3,layermap.caps=[1.0,0.5],layermap.ga.budget=600,layermap.ga.population=40,"
              "layermap.ilp.time_limit_s=5,layermap.profile.repeats=3,layermap.profile.warmup=1]")
    run = wd / "results/squeezenet/host-cpu/fp32-b1-64"
    f = pd.read_parquet(run / "layermap.parquet")
    found = f[f["mapping"].notna()]   # the clustered ILP has no mapping for a single CPU PE (status infeasible)
    assert set(f["method"]) == {"ga", "ilp", "CPU-only"} and found["measured_fps"].gt(0).all()
    assert found["error_pct"].notna().all() and not (run / "plots/layermap_pareto.png").exists()   # no power model
    assert "ort" in (run / "layermap.md").read_text()
    from dse.store import read

    rows = read(run / "cache/layermap.parquet")
    assert len(rows) == found["config_hash"].nunique() and (rows["backend"] == "ort").all() and rows["option"].str.startswith("LM:").all()
    assert len(list((wd / "results" / "models").glob("*.onnx"))) == 1, "the profile and the runs had the weights"
