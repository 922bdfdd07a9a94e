"""Target `multiapp` (seed 002 Sec. VI) for real on its tiny case: profiles -> SPEA2 with the schedule-based analysis
-> the periodic check, report and plots; a rerun does nothing; a changed GA setting reruns the search and report
only."""
import pandas as pd
import pytest

from dse.store.atomic import read_json
from tests.workflow.test_pipeline import _jobs, _workdir, snakemake

CASE = "results/multiapp/tiny/galaxy-s9-sim"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    wd = _workdir(tmp_path_factory.mktemp("multiapp"))
    snakemake(wd, "multiapp", "--config", "overrides=[multiapp=tiny]")
    return wd


def test_the_tiny_case_runs_end_to_end(finished):
    case = finished / CASE
    for name in ("profiles/squeezenet.parquet", "profiles/mobilenet-v1.parquet", "multiapp.parquet", "search.json",
                 "check.parquet", "multiapp.md", "plots/relative_response.png", "plots/energy_pairs.png",
                 "cache/check.parquet", "config.yaml"):
        assert (case / name).exists(), name
    pareto = pd.read_parquet(case / "multiapp.parquet")
    summary = read_json(case / "search.json")
    assert len(pareto) == summary["solutions"] >= 1 and summary["schedulable"] and pareto["schedulable"].all()
    for app in ("squeezenet", "mobilenet-v1"):       # a bound is never below the app's fastest response alone
        assert (pareto[f"{app}_relative"] >= 1 - 1e-9).all()
        assert (pareto[f"{app}_response_us"] <= {"squeezenet": 100e3, "mobilenet-v1": 200e3}[app]).all()
    check = pd.read_parquet(case / "check.parquet")
    sched = check[check.schedulable]
    assert len(sched) and (sched.misses == 0).all() and (sched.worst_us <= sched.bound_us * (1 + 1e-9)).all()
    assert "Every mapping the analysis calls schedulable had no miss" in (case / "multiapp.md").read_text()


@pytest.mark.slow
def test_rerun_is_a_noop_and_a_ga_change_reruns_the_search(finished):
    proc = snakemake(finished, "multiapp", "--config", "overrides=[multiapp=tiny]")
    assert "Nothing to be done" in proc.stdout + proc.stderr
    jobs = _jobs(snakemake(finished, "multiapp", "-n", "--config",
                           "overrides=[multiapp=tiny,multiapp.ga.generations=3]"))
    assert "multiapp_search" in jobs and "multiapp_report" in jobs and "multiapp_profile" not in jobs


@pytest.mark.slow   # about 45 s: cold segment timings and four periodic runs, for real
def test_the_host_case_runs_for_real(tmp_path):
    """multiapp=host with a small GA and a two-hyperperiod run: real ORT profiles, the periodic run on the core
    groups, every stage job in host_jobs.parquet, and a bound that holds where it says schedulable (loose: the
    check's verdict is what the run measured, noise may make a row fail, which the report names)."""
    wd = _workdir(tmp_path)
    small = ("multiapp.ga.population=24,multiapp.ga.generations=5,multiapp.alone.population=24,"
             "multiapp.alone.generations=5,multiapp.check.mappings=1,multiapp.check.hyperperiods=2")
    snakemake(wd, "multiapp", "--resources", "board=1", "--config", f"overrides=[multiapp=host,{small}]")
    case = wd / "results/multiapp/host/host-cpu"
    check = pd.read_parquet(case / "check.parquet")
    jobs = pd.read_parquet(case / "host_jobs.parquet")
    assert set(check.app) == {"squeezenet", "mobilenet-v1", "mobilenet-v2"} and (check.worst_us > 0).all()
    assert (check.jobs >= 8).all() and (check.bound_us > 0).all()
    assert {"app", "pe", "k", "release_s", "start_s", "finish_s", "response_s"} <= set(jobs.columns)
    ran = jobs[jobs.segments_run > 0]
    assert (ran.start_s >= ran.release_s - 1e-6).all() and (ran.finish_s >= ran.start_s).all()
    assert "Analysis vs the run" in (case / "multiapp.md").read_text()
