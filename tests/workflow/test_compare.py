"""Rule `compare` for real: Snakemake on a tiny network in a temp dir, every method in one job."""
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from dse.workflow.compare import CONFIRM_FIRST
from tests.golden import assert_golden, canonical_table

REPO = Path(__file__).resolve().parents[2]
RUN = "results/tiny-detector/xavier-agx-sim/int8-b1-64"
FAST = ("[benchmark=tiny-detector,search.strategy=proposed,search.options=[E,A,PND-A],benchmark.sample_size=300,"
        "+compare={ga:{population:6,generations:2},finetune_ga:{population:4,generations:1},"
        "profiled_ga:{population:8,generations:3},exhaustive_cap:200}]")


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    wd = tmp_path_factory.mktemp("cmp")
    for name in ("Snakefile", "workflow", "config"):
        os.symlink(REPO / name, wd / name)
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "compare", "--config", f"overrides={FAST}"]
    proc = subprocess.run(cmd, cwd=wd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return wd / RUN


def test_one_row_per_method(compared):
    frame = pd.read_parquet(compared / "comparison.parquet")
    from dse.workflow.compare import METHODS

    assert list(frame["method"]) == [m for m in METHODS if m in set(frame["method"])]
    ran = frame[frame["status"] != "skipped"].set_index("method")
    assert {"Base(G)", "Base(D)", "Profiled", "Comprehensive GA", "Fine-tuning GA", "Exhaustive", "Random",
            "Proposed"} <= set(ran.index)
    assert (ran["fps"] > 0).all() and (ran["points_measured"] >= 1).all()
    # every answer re-run 5 times with fresh noise: close to, but not the same as, its search measurement
    assert (ran["repeats"] == 5).all() and (ran["fps_confirmed_std"] > 0).all()
    assert ((ran["fps_confirmed"] - ran["fps"]).abs() < 0.1 * ran["fps"]).all()
    assert (ran["fps_confirmed"] != ran["fps"]).all()
    assert ran.loc["Random", "points_measured"] == ran.loc["Proposed", "points_measured"]
    assert ran.loc["Proposed", "fps"] > ran.loc["Base(G)", "fps"]
    # the run's own strategy is read from its phases, the other one (guided) runs in the comparison
    assert ran.loc["Guided", "fps"] > ran.loc["Base(G)", "fps"]
    assert ran.loc["Base(D)", "engines_gpu"] == 0 and ran.loc["Base(D)", "engines_dla"] == 1
    for _, r in ran.iterrows():
        curve = list(r["anytime"])
        assert len(curve) == r["points_measured"] and curve == sorted(curve)
        target = 0.98 * ran["fps"].max()
        if curve and curve[-1] >= target:
            k = int(r["points_to_target"])
            assert curve[k - 1] >= target and (k == 1 or curve[k - 2] < target)
        else:
            assert pd.isna(r["points_to_target"])
    md = (compared / "comparison.md").read_text()
    assert "Table 3.11" in md and "| Proposed |" in md
    assert (compared / "plots" / "compare_fps.png").stat().st_size > 0
    assert (compared / "plots" / "compare_anytime.png").stat().st_size > 0


def test_the_comparison_is_golden(compared):
    frame = pd.read_parquet(compared / "comparison.parquet")
    assert_golden("compare/tiny-detector.csv", canonical_table(frame))


def test_every_method_has_one_runner():
    from dse.workflow.compare import METHODS, RUNNERS

    assert set(RUNNERS) == set(METHODS)


def test_nothing_measured_twice_and_methods_labelled(compared):
    files = sorted((compared / "cache").glob("*.parquet"))
    frame = pd.concat([pd.read_parquet(p) for p in files], ignore_index=True)
    assert not frame.duplicated(["config_hash", "repeat"]).any(), "a configuration was measured twice"
    # each method's answer re-run 5 times through the evaluator: recorded, labelled, and never the same sample
    confirm = frame[frame["phase"].str.endswith("/confirm")]
    assert len(confirm) and set(confirm["repeat"]) == set(range(CONFIRM_FIRST, CONFIRM_FIRST + 5))
    # besides, only the guided search re-runs (its near-best candidates and tuned answers, from repeat 1)
    rerun = frame[~frame["phase"].str.endswith("/confirm") & (frame["repeat"] > 0)]
    assert set(rerun["strategy"]) <= {"Guided", "guided"} and (rerun["repeat"] < CONFIRM_FIRST).all()
    own = {p.stem: set(pd.read_parquet(p)["strategy"]) for p in files if p.stem.startswith("compare-")}
    assert own, "no method measured anything new"
    for stem, strategies in own.items():
        assert len(strategies) == 1, (stem, strategies)
    phases = set(frame.loc[frame["strategy"] != "proposed", "phase"]) - {"baseline"}
    assert all("/" in p for p in phases), phases   # compare rows never pass for the proposed method's phases


def test_bench_summary_reads_the_targets_off_the_comparison(compared):
    from bench.compare_methods import summarize

    frame = pd.read_parquet(compared / "comparison.parquet")
    s = summarize(frame)
    ran = frame[frame["status"] == "ok"].set_index("method")
    assert s["best_fps"] == ran["fps_confirmed"].max() and s["proposed_fps"] == ran.loc["Proposed", "fps_confirmed"]
    assert s["targets"]["within_2pct_of_best"] == (s["proposed_over_best"] >= 0.98)
    assert s["targets"]["fewer_points_than_comprehensive_ga"] == (
        ran.loc["Proposed", "points_measured"] < ran.loc["Comprehensive GA", "points_measured"])
    assert s["profiled_estimate_low_pct"] and s["points"]["Proposed"] == ran.loc["Proposed", "points_measured"]


@pytest.mark.slow
def test_rerun_of_the_comparison_measures_nothing_again(compared):
    """The re-runs of the answers are cached like every measurement: forcing the job again measures nothing
    new (the comparison reads its answers, their confirmations included, from the run's files)."""
    wd = compared.parents[3]
    before = {p.name: len(pd.read_parquet(p)) for p in (compared / "cache").glob("*.parquet")}
    old = pd.read_parquet(compared / "comparison.parquet").set_index("method")
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "compare", "--forcerun", "comparison",
           "--config", f"overrides={FAST}"]
    proc = subprocess.run(cmd, cwd=wd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    after = {p.name: len(pd.read_parquet(p)) for p in (compared / "cache").glob("*.parquet")}
    assert after == before
    new = pd.read_parquet(compared / "comparison.parquet").set_index("method")
    assert new["fps_confirmed"].equals(old["fps_confirmed"])
