"""Target `multi` for real (Snakemake, the sim, the CPA, the GA, the periodic simulation) on the small `tiny`
case in a temp dir: every output, the report's shapes, a rerun does nothing, a GA override reruns step 2 only,
the export, and bad cases refused before any job runs."""
import json
import sys

import pandas as pd
import pytest

from tests.golden import assert_golden, canonical_json, canonical_table
from tests.workflow.test_pipeline import _jobs, _workdir, snakemake

CASE = "results/multi/tiny/xavier-agx-sim"
OVR = "[multi=tiny]"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    wd = _workdir(tmp_path_factory.mktemp("multi"))
    snakemake(wd, "multi", "--config", f"overrides={OVR}")
    return wd


def test_outputs_and_shapes(finished):
    case = finished / CASE
    for f in ("multi.md", "config.yaml", "plots/multi_fps.png", "powerfit.json", "powerfit.parquet", "pareto/yolov2-tiny.parquet",
              "tasks/yolov3-tiny.parquet", "combine/X-PR.json", "freqtable/Y-LC.parquet", "deploy/X-SOTA.parquet"):
        assert (case / f).exists(), f
    fps = {(r["fsm"], r["method"]): r for r in (json.loads(p.read_text()) for p in (case / "combine").glob("*.json"))}
    for fsm in ("X", "Y"):
        assert fps[fsm, "PR"]["max_fps"] >= fps[fsm, "BS"]["max_fps"] > 0
        assert fps[fsm, "LC"]["max_fps"] >= fps[fsm, "PR"]["max_fps"] - 0.5
        assert fps[fsm, "PR"]["max_fps"] >= fps[fsm, "GB"]["max_fps_all_apps"] - 0.05
    cands = pd.read_parquet(case / "candidates" / "yolov2-tiny.parquet")     # every step-1 measurement
    front = pd.read_parquet(case / "pareto" / "yolov2-tiny.parquet")
    assert len(cands) > len(front) and cands.pareto.sum() == len(front)
    assert (cands.rejected.str.len() > 0).sum() == cands.latency_us.isna().sum()
    dep = pd.concat(pd.read_parquet(p) for p in (case / "deploy").glob("*.parquet"))
    assert len(dep) and dep.misses.sum() == 0 and (dep.max_response_over_wcrt <= 1.0).all()
    table = pd.read_parquet(case / "freqtable" / "X-PR.parquet")
    assert set(table.scenario) == {"cam", "cam+dash"}
    text = (case / "multi.md").read_text()
    assert "Maximum FPS (Table 4.8)" in text and "| PR |" in text
    versions = json.loads((case / "combine" / "X-PR.json").read_text())["versions"]
    assert "dse" in versions and "deap" in versions


def test_the_tiny_case_is_golden(finished):
    case = finished / CASE
    combine = [json.loads(p.read_text()) for p in sorted((case / "combine").glob("*.json"))]
    assert_golden("multi/tiny-combine.json", canonical_json(combine))
    deploy = pd.concat(pd.read_parquet(p).assign(file=p.name) for p in sorted((case / "deploy").glob("*.parquet")))
    assert_golden("multi/tiny-deploy.csv", canonical_table(deploy))


def test_rerun_is_noop_and_ga_override_reruns_step2_only(finished):
    assert _jobs(snakemake(finished, "multi", "-n", "--config", f"overrides={OVR}")) == []
    jobs = _jobs(snakemake(finished, "multi", "-n", "--config", "overrides=[multi=tiny,multi.ga.population=10]"))
    assert "multi_combine" in jobs and "multi_pareto" not in jobs and "multi_powerfit" not in jobs


def test_export(finished, tmp_path):
    import subprocess

    out = tmp_path / "exp"
    subprocess.run([sys.executable, "-m", "dse", "multi", "export", str(finished / CASE), "--fsm", "X", "--method",
                    "PR", "-o", str(out)], check=True, cwd=finished)
    cfg = (out / "jedi.cfg").read_text()
    assert 'instance_num = "2"' in cfg and cfg.count("cut_points") == 2
    subprocess.run(["sh", "-n", str(out / "dvfs.sh")], check=True)


@pytest.mark.slow
@pytest.mark.parametrize("override, message", [
    ("[multi=tiny,multi.fsms={X:[[cam,nobody]]}]", "nobody"),
    ("[multi=tiny,multi.fsms={X:[]}]", "no scenarios"),
    ("[multi=tiny,multi.priorities=[cam,cam]]", "total order"),
    ("[multi=tiny,multi.methods=[PR,FAST]]", "FAST"),
])
def test_bad_cases_refused_before_jobs(tmp_path, override, message):
    wd = _workdir(tmp_path)
    proc = snakemake(wd, "multi", "-n", "--config", f"overrides={override}", check=False)
    assert proc.returncode != 0 and message in proc.stdout + proc.stderr
