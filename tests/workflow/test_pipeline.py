"""The Snakemake workflow for real, on a tiny network in a temp dir: end to end, rerun is a no-op,
an override reruns only what depends on it, a killed run resumes from the measurement cache, and a bad
override fails before any job runs."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dse.store import read
from tests.golden import assert_golden, canonical_table

REPO = Path(__file__).resolve().parents[2]
RUN = "results/tiny-detector/xavier-agx-sim/int8-b1-64"
# the thesis' search (its per-option jobs); the default (guided) one is checked on its own
FAST = "[benchmark=tiny-detector,search.strategy=proposed,search.options=[E,A,PND-A],benchmark.sample_size=300]"


def _workdir(tmp_path: Path) -> Path:
    for name in ("Snakefile", "workflow", "config"):
        os.symlink(REPO / name, tmp_path / name)
    return tmp_path


def snakemake(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", *args]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        text = proc.stdout + proc.stderr
        at = text.find("Error in rule")
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{text[max(0, at - 3000):at + 3000]}")
    return proc


def _jobs(proc: subprocess.CompletedProcess) -> list[str]:
    text = proc.stdout + proc.stderr
    return sorted(line.split("rule ", 1)[1].rstrip(":").strip() for line in text.splitlines()
                  if line.strip().startswith(("rule ", "localrule ")) and line.strip().endswith(":"))


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    wd = _workdir(tmp_path_factory.mktemp("wf"))
    proc = snakemake(wd, "--config", f"overrides={FAST}")
    return wd, proc


def test_end_to_end_outputs(finished):
    wd, proc = finished
    run = wd / RUN
    for name in ("model.onnx", "layers.parquet", "cuts.json", "maximize.json", "options/E.json", "options/A.json",
                 "options/PND-A.json", "selected.json", "search.json", "best.yaml", "report.md",
                 "measurements.parquet", "plots/fps_per_option.png", "plots/trajectory.png", "config.yaml"):
        assert (run / name).exists(), name
    best = yaml.safe_load((run / "best.yaml").read_text())
    frame = pd.read_parquet(run / "measurements.parquet")
    assert best["fps"] > 0 and best["config"]["option"] in ("E", "A", "PND-A")
    assert frame["config_hash"].is_unique, "a configuration was measured twice"
    assert set(frame["phase"]) >= {"baseline", "maximize", "option-search", "finetune"}
    assert best["fps"] >= frame.loc[frame["strategy"] == "Base(G)", "fps"].max()
    report = (run / "report.md").read_text()
    assert "Best configuration" in report and "Exploration cost" in report
    assert "## DLA fallback (TensorRT 6.0 (JetPack 4.3) rules)" in report   # why layers of the answer left the DLA
    assert "[maximize]" in proc.stderr  # progress lines


def test_the_tiny_run_is_golden(finished):
    wd, _ = finished
    assert_golden("pipeline/tiny-best.yaml", (wd / RUN / "best.yaml").read_text(encoding="utf-8"))
    assert_golden("pipeline/tiny-measurements.csv", canonical_table(pd.read_parquet(wd / RUN / "measurements.parquet")))


def test_a_virtual_board_run_holds_no_weights(finished):
    """The virtual board costs shapes: the run's model is weight-free and nothing materialized the weights."""
    import onnx

    from dse.graph.weights import has_weights

    wd, _ = finished
    model = onnx.load(str(wd / RUN / "model.onnx"))
    assert not has_weights(model) and (wd / RUN / "model.onnx").stat().st_size < 50_000
    assert not (wd / "results" / "models").exists()


def test_rerun_is_a_noop(finished):
    wd, _ = finished
    proc = snakemake(wd, "--config", f"overrides={FAST}")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_override_reruns_only_dependents(finished):
    wd, _ = finished
    proc = snakemake(wd, "-n", "--config", f"overrides={FAST[:-1]},search.degradation=0.05]")
    jobs = _jobs(proc)
    assert "analyze" not in jobs
    assert "maximize" in jobs and "finetune" in jobs


def test_workflow_and_run_search_are_one_method(finished):
    """What `snakemake` runs (one job per phase, caches in files) and what bench/ measures (`run_search`, one
    process) are the same phases: the same best configuration from the same measured configurations."""
    from dse.workflow.phases import search_setup
    from dse.config import split_overrides
    from dse.evaluate import Evaluator
    from dse.search import Study, run_search

    wd, _ = finished
    overrides = tuple(o for o in split_overrides(FAST) if not o.startswith("benchmark="))
    _, _, backend, space, settings, base = search_setup("tiny-detector", "int8", wd / "solo-engines",
                                                        "xavier-agx-sim", overrides)
    ev = Evaluator(backend)
    result = run_search(space, Study(ev), base, settings)
    best = yaml.safe_load((wd / RUN / "best.yaml").read_text())
    assert best["config"] == result.config.to_dict() and best["fps"] == result.fps
    frame = pd.read_parquet(wd / RUN / "measurements.parquet")
    assert set(frame["config_hash"]) == {key for key, _ in ev.cache}
    selected = json.loads((wd / RUN / "selected.json").read_text())
    assert selected == result.extra["selection"].to_dict()


def test_a_dry_run_changes_nothing(finished, tmp_path):
    """Planning writes nothing: `snakemake -n` and `--lint` on a fresh directory leave no results/, and a dry
    run with other settings leaves a finished run's config parts as they were (jobs read those)."""
    wd, _ = finished
    parts = {p.name: (p.read_text(), p.stat().st_mtime_ns) for p in (wd / RUN / "config").iterdir()}
    snakemake(wd, "-n", "--config", f"overrides={FAST[:-1]},search.top_k=3,benchmark.warmup=7]")
    assert {p.name: (p.read_text(), p.stat().st_mtime_ns) for p in (wd / RUN / "config").iterdir()} == parts
    fresh = _workdir(tmp_path)
    jobs = _jobs(snakemake(fresh, "-n"))
    assert "search" in jobs and "explore_option" not in jobs, "the default search is the guided one"
    snakemake(fresh, "--lint", check=False)
    assert not (fresh / "results").exists()


def test_reruns_follow_the_parts_without_snakemake_metadata(finished, tmp_path):
    """A copied results folder (or one after `rm -rf .snakemake`) has no metadata for the params trigger: a
    changed setting still reruns what reads it, and the same settings still rerun nothing."""
    wd, _ = finished
    copy = _workdir(tmp_path)
    shutil.copytree(wd / "results", copy / "results", symlinks=True)
    assert not (copy / ".snakemake").exists()
    jobs = _jobs(snakemake(copy, "-n", "--config", f"overrides={FAST[:-1]},search.degradation=0.05]"))
    assert {"configure", "maximize", "finetune", "report"} <= set(jobs) and "analyze" not in jobs
    assert jobs.count("configure") == 1, jobs          # only the search part changed
    proc = snakemake(copy, "-n", "--config", f"overrides={FAST}")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_the_workflow_is_lint_clean(tmp_path):
    """`snakemake --lint` finds nothing (it exits non-zero on any finding): every rule has a log and a software
    environment, helper functions live in workflow/rules/common.smk, no absolute or '+'-composed paths."""
    proc = snakemake(_workdir(tmp_path), "--lint", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Lints for" not in text, text[-3000:]


def test_no_rule_runs_python_inside_the_workflow():
    """Snakemake runs each `run:` job in a new process that parses the whole workflow again (plans every run:
    about 6 s a job on two cores, 8 jobs a run); rules call `dse` or a script instead."""
    rules = [REPO / "Snakefile", *sorted((REPO / "workflow/rules").glob("*.smk"))]
    offenders = [f"{p.name}:{i}" for p in rules for i, line in enumerate(p.read_text().splitlines(), 1)
                 if line.strip() == "run:"]
    assert not offenders, f"`run:` directives in {offenders}"


@pytest.mark.slow
def test_changed_platform_remeasures_instead_of_reusing_stale_answers(finished):
    """The measurement cache is keyed by configuration AND context: after a platform change every phase
    measures again (old rows stay on disk, unused), and the merged file holds only the new context."""
    wd, _ = finished
    run = wd / RUN
    before = len(pd.read_parquet(run / "cache" / "maximize.parquet"))
    proc = snakemake(wd, "--config", f"overrides={FAST[:-1]},platform.limits.max_streams_per_stage=12]")
    assert "maximize" in _jobs(proc)
    cache = pd.read_parquet(run / "cache" / "maximize.parquet")
    assert len(cache) > before and cache["context"].nunique() == 2
    merged = pd.read_parquet(run / "measurements.parquet")
    assert merged["context"].nunique() == 1 and merged["config_hash"].is_unique
    assert set(merged["context"]) == set(cache["context"].iloc[before:])


BAD_OVERRIDES = [
    ("benchmark=nope", "unknown benchmark 'nope'; valid choices:"),
    # settings of later phases are validated when the workflow is planned, not inside a job
    ("search.initial=bogus", "unknown search.initial 'bogus'; valid choices: auto, balanced, random"),
    ("search.options=[A,Z]", "unknown mapping option for platform xavier-agx-sim 'Z'; valid choices: A, B"),
    ("+compare.methods=[Oracle]", "unknown comparison method 'Oracle'"),
    ("platform.dla_rulez=1", "valid keys of platform: backend, board_model, contention, cost, cpu, dla_rules"),
    # what the platform's backend cannot measure with at all
    ("platform=host-cpu,precision=int8", "platform host-cpu runs precision(s) fp32, not int8"),
    ("platform=xavier-agx", "INT8 engines need the network's TensorRT calibration cache"),
    # impossible or unbounded combinations
    ("precision=fp32,search.options=[A]", "search.options names A, which cannot run here: stage 1 runs on DLA0"),
    ("search.max_buffers=300", "search.max_buffers 300 exceeds the limit of 256 on xavier-agx-sim"),
    ("search.max_buffers=100000000", "search.max_buffers must be an integer in 1..4,096"),
    ("search.top_k=0", "search.top_k must be an integer in 1..1,000, got 0"),
    ("batch=512", "batch 512 exceeds the limit of 256 on xavier-agx-sim (platform.limits.max_batch)"),
    ("reuse_from=/nonexistent/run", "reuse_from='/nonexistent/run' is not a finished run directory"),
    ("benchmark.model=/nonexistent/net.onnx,benchmark.name=net", "benchmark.model '/nonexistent/net.onnx': no such file"),
    ("benchmark.model=tiny-chain", "benchmark.model=tiny-chain replaces benchmark yolov4's model: name the run"),
    ("platform.limits.max_buffers=0", "limits.max_buffers must be a positive integer"),
]


@pytest.mark.parametrize("override, message", BAD_OVERRIDES)
def test_bad_override_fails_before_any_job(tmp_path, override, message):
    wd = _workdir(tmp_path)
    proc = snakemake(wd, "--config", f"overrides=[{override}]", check=False)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
    assert not (wd / "results").exists()


@pytest.mark.slow
def test_resume_after_interruption(tmp_path):
    wd = _workdir(tmp_path)
    args = ["--config", "overrides=[benchmark=tiny-detector,search.strategy=proposed,benchmark.sample_size=300]"]
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", *args]
    proc = subprocess.Popen(cmd, cwd=wd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    cache = wd / RUN / "cache"
    deadline = time.time() + 300
    while time.time() < deadline:  # wait until the option searches have measured something
        files = list(cache.glob("explore-*.parquet")) if cache.exists() else []
        if files and sum(len(read(f)) for f in files) >= 5:  # read while the jobs rewrite the files
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = pd.concat([read(f) for f in cache.glob("*.parquet")])
    assert len(before) >= 5 and not (wd / RUN / "best.yaml").exists()
    # the README's recovery steps: unlock the directory the killed run locked, rerun its incomplete jobs
    assert "Unlocked" in snakemake(wd, "--unlock", *args).stderr
    done = snakemake(wd, "--rerun-incomplete", *args)
    after = pd.read_parquet(wd / RUN / "measurements.parquet")
    assert after["config_hash"].is_unique
    assert set(before["config_hash"]) <= set(after["config_hash"])
    # the resumed jobs reused what the killed run had measured
    assert "reused from cache" in done.stderr
    snakemake(wd, "--report", "report.html", *args)   # the README's HTML report of the finished run
    assert (wd / "report.html").stat().st_size > 0


@pytest.mark.slow
def test_an_infrastructure_failure_fails_the_run_and_is_not_replayed(tmp_path):
    """Corrupt engine-cache entries make every measurement an error: the run fails and says why (no
    "best 0.0 FPS"); once the entries are gone the next run measures the same configurations for real."""
    wd = _workdir(tmp_path)
    args = ["--config", "overrides=[benchmark=tiny-chain,search.strategy=proposed,search.options=[E,A],"
            "benchmark.sample_size=200]"]
    snakemake(wd, *args)
    run = wd / "results/tiny-chain/xavier-agx-sim/int8-b1-64"
    sidecars = sorted((wd / "results/engines/xavier-agx-sim").glob("*.json"))
    for p in sidecars:
        p.write_bytes(p.read_bytes()[:10])
    shutil.rmtree(run / "cache")              # nothing to replay: every configuration is measured again
    failed = snakemake(wd, "--forcerun", "maximize", *args, check=False)
    out = failed.stdout + failed.stderr
    assert failed.returncode != 0 and "maximizer measured nothing on option E" in out
    assert "corrupt engine sidecar" in out and not (run / "maximize.json").exists()
    assert set(read(run / "cache" / "maximize.parquet")["status"]) == {"error"}
    for p in sidecars:                        # the operator removes the broken entries
        p.unlink()
    snakemake(wd, *args)
    best = yaml.safe_load((run / "best.yaml").read_text())
    frame = pd.read_parquet(run / "measurements.parquet")
    assert best["fps"] > 0 and frame["fps"].max() == pytest.approx(best["fps"], rel=0.2)
    ok = frame[frame["status"] == "ok"]
    assert ok["config_hash"].is_unique and set(frame.loc[frame["status"] == "error", "config_hash"]) <= set(ok["config_hash"])


@pytest.mark.slow
def test_two_runs_of_one_job_lose_and_repeat_nothing(tmp_path):
    """Two processes of one phase on one run directory (two runs that both got past Snakemake's lock) write one
    file: every configuration is measured once and no row is lost, the same rows as one process alone."""
    rows = {}
    for name, copies in (("pair", 2), ("solo", 1)):
        (tmp_path / name).mkdir()
        wd = _workdir(tmp_path / name)
        rel = "results/tiny-chain/xavier-agx-sim/int8-b1-64"
        run = wd / rel
        inputs = [f"{rel}/config/{part}.yaml" for part in ("platform", "measure", "search")] + [f"{rel}/cuts.json"]
        snakemake(wd, *inputs, "--config", "overrides=[benchmark=tiny-chain,benchmark.sample_size=200]")
        procs = [subprocess.Popen([sys.executable, "-m", "dse", "workflow", "maximize", str(run)], cwd=wd,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(copies)]
        assert all(p.wait(timeout=300) == 0 for p in procs), [p.stderr.read() for p in procs]
        frame = read(run / "cache" / "maximize.parquet")
        assert not frame.duplicated(["config_hash", "repeat"]).any(), f"{name}: a configuration measured twice"
        rows[name] = set(frame["config_hash"])
    assert rows["pair"] == rows["solo"], "rows lost or added by the concurrent run"


def test_a_changed_reuse_from_reruns_what_reads_it(finished):
    """reuse_from is a search setting: changing it reruns the searches (it was once recorded without effect)."""
    wd, _ = finished
    proc = snakemake(wd, "-n", "--config", f"overrides={FAST[:-1]},reuse_from={wd / RUN}]")
    jobs = _jobs(proc)
    assert "explore_option" in jobs and "search" in jobs and "analyze" not in jobs


@pytest.mark.slow
def test_host_cpu_platform_unchanged(tmp_path):
    """The default (guided) workflow on real ONNX Runtime measurements (platform=host-cpu, fp32 by the platform):
    each configuration measured once, plus the guided search's re-runs on fresh repeat indices."""
    wd = _workdir(tmp_path)
    snakemake(wd, "--config", "overrides=[benchmark=tiny-chain,platform=host-cpu,benchmark.sample_size=40]")
    run = wd / "results/tiny-chain/host-cpu/fp32-b1-64"
    best = yaml.safe_load((run / "best.yaml").read_text())
    frame = pd.read_parquet(run / "measurements.parquet")
    assert best["backend"] == "ort" and best["fps"] > 0
    assert set(frame["backend"]) == {"ort"} and not frame.duplicated(["config_hash", "repeat"]).any()
    assert set(frame["option"]) >= {"E", "1-1"} or len(os.sched_getaffinity(0)) != 2
    # ONNX Runtime ran the weights: made once in the shared cache, never copied into the run
    assert len(list((wd / "results" / "models").glob("*.onnx"))) == 1
    assert (run / "model.onnx").stat().st_size < 50_000


def test_the_readme_duckdb_query_runs_on_the_measurements(finished):
    """The query the README shows, on a run's measurements.parquet: typed columns, nulls for what was not
    measured (a refused row has no FPS), maps and lists usable in SQL."""
    import re

    import duckdb

    wd, _ = finished
    readme = (REPO / "README.md").read_text()
    sql = re.search(r'duckdb\.sql\(\\"(.*?)\\"\)', readme).group(1)
    path = str(wd / RUN / "measurements.parquet")
    rows = duckdb.sql(sql.replace("results/yolov4/xavier-agx-sim/int8-b1-416/measurements.parquet", path)).fetchall()
    assert rows and rows[0][1] == max(r[1] for r in rows) > 0
    typed = duckdb.sql(f"SELECT util['GPU'], len(stage_ms), cuts, typeof(timestamp) FROM '{path}' "
                       "WHERE status = 'ok' LIMIT 1").fetchall()[0]
    assert 0 <= typed[0] <= 1 and typed[1] >= 1 and isinstance(typed[2], list) and typed[3] == "TIMESTAMP WITH TIME ZONE"
    nulls = duckdb.sql(f"SELECT count(*) FROM '{path}' WHERE status != 'ok' AND fps IS NOT NULL").fetchall()[0][0]
    assert nulls == 0


@pytest.mark.slow
def test_guided_strategy_end_to_end(finished):
    """search.strategy=guided on the same run directory: maximize -> search (guided) -> finetune -> report, no
    per-option jobs; the same answer as run_search with the same settings, and the report and the comparison
    count the guided phases only (the proposed search's files stay beside them)."""
    from dse.workflow.phases import search_setup
    from dse.config import split_overrides
    from dse.evaluate import Evaluator
    from dse.search import Study, run_search
    from dse.workflow.phases import asked_by_phases

    wd, _ = finished
    guided = f"{FAST[:-1]},search.strategy=guided]"
    plan = _jobs(snakemake(wd, "-n", "--config", f"overrides={guided}"))
    assert "search" in plan and "explore_option" not in plan and "select_option" not in plan
    snakemake(wd, "--config", f"overrides={guided}")
    run = wd / RUN
    searched = json.loads((run / "search.json").read_text())
    assert searched["strategy"] == "guided" and searched["rounds"] and (run / "cache/guided.asked.json").exists()
    report = (run / "report.md").read_text()
    assert "guided exploration measured" in report
    asked = asked_by_phases(run, "guided")
    assert set(json.loads((run / "cache/guided.asked.json").read_text())) <= asked
    overrides = tuple(o for o in split_overrides(guided) if not o.startswith("benchmark="))
    _, _, backend, space, settings, base = search_setup("tiny-detector", "int8", wd / "guided-engines",
                                                        "xavier-agx-sim", overrides)
    result = run_search(space, Study(Evaluator(backend)), base, settings)
    best = yaml.safe_load((run / "best.yaml").read_text())
    assert best["config"] == result.config.to_dict() and searched["unique_tuples"] == result.extra["unique_tuples"]
    frame = pd.read_parquet(run / "measurements.parquet")
    assert set(frame.loc[frame["phase"] == "guided", "strategy"]) <= {"guided"}


@pytest.mark.slow
def test_the_report_counts_what_this_search_asked_for(finished):
    """After a search setting changed, the run's files keep the earlier search's rows (reused where asked
    again); the report and the comparison count only what the current search asked for."""
    from dse.workflow.phases import asked_by_phases

    wd, _ = finished
    snakemake(wd, "--config", f"overrides={FAST[:-1]},search.top_k=2,search.min_local_searches=2]")
    run = wd / RUN
    asked = asked_by_phases(run, "proposed")
    merged = pd.read_parquet(run / "measurements.parquet")
    stale = set(merged["config_hash"]) - asked
    assert asked and stale, "the earlier search's rows are kept on disk"
    section = (run / "report.md").read_text().split("## Exploration cost")[1]
    header, _, values = [line for line in section.splitlines() if line.startswith("|")][:3]
    cells = dict(zip([c.strip() for c in header.split("|")[1:-1]], [c.strip() for c in values.split("|")[1:-1]]))
    assert int(cells["Measurements"]) == len(asked & set(merged["config_hash"]))
