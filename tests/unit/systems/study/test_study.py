"""Design studies: the grid is checked by name, every point is planned like one ordinary run, the Snakemake
target explores each point and merges them, and a rerun with a larger grid explores only the new points."""
import pandas as pd
import pytest

from dse.core.errors import DseError
from dse.systems.study.settings import StudySettings
import dse.workflow.plan
from dse.workflow.study import plan_study, plan_study_point
from tests.golden import assert_golden, canonical_table
from tests.workflow.test_pipeline import _jobs, _workdir, snakemake

GRID = {"benchmarks": ["tiny-chain", "tiny-residual"], "precisions": ["fp16", "int8"], "seeds": [0, 1]}


def test_points_cover_the_grid_in_order():
    s = StudySettings.from_dict({"name": "g", "grid": GRID, "overrides": ["search.top_k=2"]})
    points = s.points()
    assert len(points) == 8
    assert points[0].overrides == ("search.top_k=2", "benchmark=tiny-chain", "precision=fp16", "seed=0")
    assert points[-1].values == {"benchmarks": "tiny-residual", "precisions": "int8", "seeds": 1}
    assert s.results_dir("results", points[-1]) == "results/studies/g/s1"


@pytest.mark.parametrize("grid, overrides, match", [
    ({}, [], "grid is empty"),
    ({"networks": ["yolov4"]}, [], "unknown grid key in study g: 'networks'; valid choices: batches, benchmarks"),
    ({"benchmarks": []}, [], "benchmarks must be a non-empty list"),
    ({"benchmarks": ["yolov4", "yolov4"]}, [], "repeats a value"),
    ({"precisions": ["fp16"]}, ["precision=int8"], "override 'precision=int8' sets a key the grid varies"),
])
def test_bad_grid_is_refused_by_name(grid, overrides, match):
    with pytest.raises(DseError, match=match):
        StudySettings.from_dict({"name": "g", "grid": grid, "overrides": overrides})


def test_unknown_study_key_is_refused():
    with pytest.raises(DseError, match="unknown key of study 'grids'; valid choices: "):
        StudySettings.from_dict({"name": "g", "grids": GRID})


def test_plan_places_each_point_under_the_study():
    (sdir, plan), = plan_study({"overrides": "[study=tiny]"}).items()
    assert sdir == "results/studies/tiny"
    assert list(plan.facts["runs"]) == [f"results/studies/tiny/s0/{n}/xavier-agx-sim/int8-b1-{s}"
                               for n in ("tiny-chain", "tiny-residual") for s in (64, 96)]
    assert all("top_k: 2" in p.parts["search"] for p in plan.facts["runs"].values())


def test_one_point_is_planned_alone_as_in_the_whole_study(monkeypatch):
    """A job inside a cluster job plans its own point only: the same plan, found on the first try."""
    (_, study), = plan_study({"overrides": "[study=tiny]"}).items()
    planned = []
    real = dse.workflow.plan.plan_run
    monkeypatch.setattr(dse.workflow.plan, "plan_run", lambda cfg: planned.append(1) or real(cfg))
    for run, plan in study.facts["runs"].items():
        planned.clear()
        assert plan_study_point({"overrides": "[study=tiny]"}, run) == plan
        assert len(planned) == 1
    assert plan_study_point({"overrides": "[study=tiny]"}, "results/studies/tiny/s1/tiny-chain/x/int8-b1-64") is None


def test_a_bad_point_is_named_before_any_job_runs():
    with pytest.raises(DseError, match=r"point \{'benchmarks': 'tiny-chain', 'input_sizes': 100\}: "
                                       "benchmark.input_size must be a positive multiple of 32"):
        plan_study({"overrides": "[study=tiny,study.grid.input_sizes=[64,100]]"})


def test_study_target_explores_each_point_and_reruns_only_new_ones(tmp_path):
    wd = _workdir(tmp_path)
    small = "[study=tiny,study.grid.input_sizes=[64],benchmark.sample_size=200]"
    snakemake(wd, "study", "--config", f"overrides={small}")
    frame = pd.read_parquet(wd / "results/studies/tiny/study.parquet")
    assert list(frame["benchmark"]) == ["tiny-chain", "tiny-residual"]
    assert_golden("study/tiny.csv", canonical_table(frame))
    assert (frame["fps"] > frame["base_g_fps"]).all() and (frame["tuples"] > 0).all()
    assert set(frame["option"]) <= {"A", "B", "C", "D", "E", "PND-A", "PND-B"}
    assert "onnxruntime" in frame["versions"].iloc[0]
    md = (wd / "results/studies/tiny/study.md").read_text()
    assert "2 explorations" in md and "tiny-residual" in md
    # one more input size: only the two new points explore; the old ones are not touched
    bigger = small.replace("input_sizes=[64]", "input_sizes=[64,96]")
    jobs = _jobs(snakemake(wd, "-n", "study", "--config", f"overrides={bigger}"))
    assert jobs.count("analyze") == 2 and jobs.count("finetune") == 2 and jobs.count("study_merge") == 1


@pytest.mark.parametrize("plan, override, key", [
    ("dse.systems.multi.jobs:plan_multi", "multi=tiny,multi.name=../up", "multi.name"),
    ("dse.systems.dataflow.jobs:plan_dataflow", "dataflow=tiny,dataflow.name=/etc/x", "dataflow.name"),
    ("dse.workflow.study:plan_study", "study=tiny,study.name=x/y", "study.name"),
    ("dse.systems.pareto.jobs:plan_pareto", "pareto=default,benchmark.name=..", "benchmark.name"),
])
def test_a_name_that_would_leave_results_dir_is_refused_at_planning(plan, override, key):
    """Every name that becomes a path is one plain directory name: a case, a study or a benchmark named
    ``../up`` or ``/etc/x`` would plan its directory outside ``results_dir``."""
    import importlib

    module, name = plan.split(":")
    with pytest.raises(DseError, match=f"{key} must be a plain directory name"):
        getattr(importlib.import_module(module), name)({"overrides": f"[{override}]"})
