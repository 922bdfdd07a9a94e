"""Target `dataflow` for real (Snakemake, the sim's step 1, the co-mapping GAs, the periodic simulation) on the
small `tiny` case in a temp dir: every output, the report, no deadline miss on the board, a rerun does nothing, a
GA override reruns the co-mapping only, and bad cases refused before any job runs."""
import json
import shutil

import pandas as pd
import pytest
import yaml

from dse.systems.dataflow.settings import DataflowSettings
from dse.core.errors import DseError
from tests.golden import assert_golden, canonical_table
from tests.workflow.test_pipeline import REPO, _jobs, _workdir, snakemake

CASE = "results/dataflow/tiny/xavier-agx-sim"
OVR = "[dataflow=tiny]"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    wd = _workdir(tmp_path_factory.mktemp("dataflow"))
    (wd / "config").unlink()                       # a copy: a test edits a graph in it
    shutil.copytree(REPO / "config", wd / "config")
    snakemake(wd, "dataflow", "--config", f"overrides={OVR}")
    return wd


def test_outputs_report_and_deployment(finished):
    case = finished / CASE
    for f in ("dataflow.md", "dataflow.parquet", "config.yaml", "plots/dataflow_fitness.png",
              "pareto/yolov2-tiny.parquet", "tasks/yolov2-tiny.parquet", "comap/30-entire-ga-s0.json",
              "deploy/60-baseline-s0.parquet"):
        assert (case / f).exists(), f
    jobs = pd.read_parquet(case / "dataflow.parquet")
    assert len(jobs) == 6 and set(jobs.method) == {"heuristic-ga", "entire-ga", "baseline"}
    r = {m: json.loads((case / "comap" / f"30-{m}-s0.json").read_text()) for m in jobs.method.unique()}
    assert r["entire-ga"]["feasible"]
    if r["heuristic-ga"]["feasible"]:
        assert r["entire-ga"]["max_u"] <= r["heuristic-ga"]["max_u"] + 1e-9
    # every dataflow task of the case is mapped, onto a PE its graph allows
    assert set(r["entire-ga"]["dataflow"]) >= {"G1/Bilateral", "G1/ReadImage", "R1/t0", "R2/t4"}
    assert r["entire-ga"]["dataflow"]["G1/Rescale-1"] == "GPU"
    assert r["entire-ga"]["dataflow"]["G1/ReadImage"].startswith("CPU")
    assert "dse" in r["entire-ga"]["versions"] and r["entire-ga"]["ga_seed"] == 0
    dep = pd.concat(pd.read_parquet(p) for p in (case / "deploy").glob("*.parquet"))
    assert len(dep) >= 2 and dep.misses.sum() == 0 and (dep.max_response_over_wcrt <= 1.0).all()
    assert (dep.jobs > 0).all()
    text = (case / "dataflow.md").read_text()
    assert "Figs. 5.6-5.9" in text and "| entire-ga |" in text and "Deployment on the virtual board" in text


def test_the_tiny_case_is_golden(finished):
    case = finished / CASE
    assert_golden("dataflow/tiny.csv", canonical_table(pd.read_parquet(case / "dataflow.parquet")))


def test_rerun_is_noop_and_ga_override_reruns_comap_only(finished):
    assert _jobs(snakemake(finished, "dataflow", "-n", "--config", f"overrides={OVR}")) == []
    jobs = _jobs(snakemake(finished, "dataflow", "-n", "--config", "overrides=[dataflow=tiny,dataflow.ga.population=10]"))
    assert "dataflow_comap" in jobs and "dataflow_pareto" not in jobs


@pytest.mark.slow
def test_an_edited_graph_reruns_the_comapping_and_the_run_keeps_its_graphs(finished):
    part = yaml.safe_load((finished / CASE / "config" / "dataflow.yaml").read_text())
    assert part["graph_specs"]["image-processing"]["tasks"]["Bilateral"] == {"wcet_us": {"cpu": 4915, "gpu": 368}}
    graph = finished / "config" / "dataflow" / "graphs" / "image-processing.yaml"
    text = graph.read_text()
    graph.write_text(text.replace("{cpu: 4915, gpu: 368}", "{cpu: 3932, gpu: 302}"))
    try:
        jobs = _jobs(snakemake(finished, "dataflow", "-n", "--config", f"overrides={OVR}"))
    finally:
        graph.write_text(text)
    assert "dataflow_comap" in jobs and "dataflow_pareto" not in jobs
    assert _jobs(snakemake(finished, "dataflow", "-n", "--config", f"overrides={OVR}")) == []


@pytest.mark.slow
@pytest.mark.parametrize("override, message", [
    ("[dataflow=tiny,dataflow.groups.G1.graft=nope]", "nope"),
    ("[dataflow=tiny,dataflow.groups.G1.graphs=[no-such-graph]]", "no-such-graph"),
    ("[dataflow=tiny,dataflow.methods=[entire-ga,annealing]]", "annealing"),
    ("[dataflow=tiny,dataflow.fps=[0]]", "fps"),
    ("[dataflow=tiny,dataflow.controller_core=2]", "controller_core"),
])
def test_bad_cases_refused_before_jobs(tmp_path, override, message):
    wd = _workdir(tmp_path)
    proc = snakemake(wd, "dataflow", "-n", "--config", f"overrides={override}", check=False)
    assert proc.returncode != 0 and message in proc.stdout + proc.stderr


BASE = {"name": "t", "networks": {"d": "yolov2-tiny"}, "groups": {"G": {"graphs": ["image-processing"], "dl": ["d"],
                                                                       "graft": "cvt_NV12_BGR-1"}},
        "priorities": ["G"], "fps": [10]}


@pytest.mark.parametrize("change, message", [
    ({"groups": {"G": {"graphs": [], "dl": []}}}, "neither graphs nor DL apps"),
    ({"groups": {"G": {"dl": ["d"], "graft": "x"}}}, "needs both a graph and a DL app"),
    ({"groups": {"G": {"dl": ["zz"]}}}, "zz"),
    ({"priorities": ["G", "H"]}, "total order"),
    ({"random_graphs": {"count": 0}}, "count"),
    ({"random_graphs": {"count": 2, "cpu_us": [5, 1]}}, "cpu_us"),
    ({"pareto": {"objectives": "power"}}, "power"),
    ({"colour": 1}, "colour"),
])
def test_settings_refuse_bad_values(change, message):
    with pytest.raises(DseError, match=message):
        DataflowSettings.resolve({**BASE, **change})
    assert DataflowSettings.resolve(BASE).groups[0].graft == "cvt_NV12_BGR-1"
