"""Target `pareto` (seed 001) through Snakemake itself: outputs, rerun = nothing, a setting reruns the search,
bad values refused at planning."""
import json

import pandas as pd
import pytest

from tests.golden import assert_golden, canonical_table
from tests.workflow.test_pipeline import _jobs, _workdir, snakemake

RUN = "results/pareto/tx2-sim/emotion-ferplus"
OVR = "[platform=tx2-sim,benchmark=emotion-ferplus,pareto.population=60,pareto.generations=5,pareto.repeats=2]"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    wd = _workdir(tmp_path_factory.mktemp("pareto"))
    snakemake(wd, "pareto", "--config", f"overrides={OVR}")
    return wd


def test_outputs(finished):
    run = finished / RUN
    for f in ("pareto.parquet", "pareto.md", "plots/pareto_front.png", "run.json", "config/pareto.yaml", "config.yaml"):
        assert (run / f).exists(), f
    df = pd.read_parquet(run / "pareto.parquet")
    assert set(df.source) == {"nsga2", "trt-baseline"} and (df.source == "trt-baseline").sum() == 156
    assert {"A57_mhz", "Denver_mhz", "gpu_mhz", "fps", "energy_j", "model_fps", "on_front"} <= set(df.columns)
    assert df.on_front.any() and (df.fps > 0).all() and (df.energy_j > 0).all()
    meta = json.loads((run / "run.json").read_text())
    assert meta["seed"] == 0 and "dse" in meta["versions"] and meta["search"]["evaluations"] >= 60
    assert "| nsga2 |" in (run / "pareto.md").read_text()


def test_the_front_is_golden(finished):
    assert_golden("pareto/emotion-ferplus.csv", canonical_table(pd.read_parquet(finished / RUN / "pareto.parquet")))


def test_rerun_is_noop_and_a_setting_reruns_the_search(finished):
    assert _jobs(snakemake(finished, "pareto", "-n", "--config", f"overrides={OVR}")) == []
    jobs = _jobs(snakemake(finished, "pareto", "-n", "--config", f"overrides={OVR[:-1]},pareto.mutpb=0.1]"))
    assert "pareto_search" in jobs


@pytest.mark.slow
@pytest.mark.parametrize("override, message", [
    ("[platform=tx2-sim,benchmark=vgg19,pareto.comm=some]", "all_channels"),
    ("[platform=tx2-sim,benchmark=vgg19,pareto.repeats=0]", "repeats"),
    ("[platform=tx2-sim,benchmark=vgg19,+pareto.objective=fps]", "objective"),
    ("[platform=galaxy-s9-sim,benchmark=vgg19]", "no clocked section"),
    ("[platform=tx2-sim,benchmark=vgg19,precision=fp16]", "fp32"),
])
def test_bad_settings_are_refused_before_any_job(tmp_path, override, message):
    proc = snakemake(_workdir(tmp_path), "pareto", "-n", "--config", f"overrides={override}", check=False)
    assert proc.returncode != 0 and message in proc.stdout + proc.stderr
