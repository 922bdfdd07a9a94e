"""One query over the measurements of every target: the pareto target's board runs, the taskset target's variant
times and the multi target's step-1 profiles, power-fit runs and deployment runs are rows of the store's schema in
``<run>/cache/``, as the pipeline's and the layermap target's are, so one DuckDB glob reads them all. The three
targets share one working directory; taskset and multi run only their measuring jobs (``variants.yaml``; one
network's step 1, one deployment)."""
import duckdb
import numpy as np
import pandas as pd
import pytest

from dse.config import read_part
from dse.store.schema import SCHEMA
from dse.workflow.plan import measurement_context
from tests.workflow.test_pareto import OVR, RUN
from tests.workflow.test_pipeline import _workdir, snakemake

TASKSET = "results/taskset/zoo-xavier/physical"
TASKSET_OVR = "[taskset=zoo-xavier,taskset.measure.networks=[squeezenet],taskset.sets=2,taskset.thresholds=[1.0,1.8]]"
MULTI = "results/multi/tiny/xavier-agx-sim"
MULTI_OVR = "[multi=tiny]"


@pytest.fixture(scope="module")
def wd(tmp_path_factory):
    wd = _workdir(tmp_path_factory.mktemp("store"))
    snakemake(wd, "pareto", "--config", f"overrides={OVR}")
    snakemake(wd, f"{TASKSET}/variants.yaml", "--config", f"overrides={TASKSET_OVR}")
    snakemake(wd, f"{MULTI}/pareto/yolov3-tiny.parquet", f"{MULTI}/deploy/X-PR.parquet", "--config",
              f"overrides={MULTI_OVR}")
    return wd


def every(wd) -> str:
    return f"read_parquet('{wd}/results/**/cache/*.parquet', union_by_name=true)"


def test_one_query_reads_every_target_in_the_store_schema(wd):
    columns = duckdb.sql(f"DESCRIBE SELECT * FROM {every(wd)}").df().column_name.tolist()
    assert set(SCHEMA.names) <= set(columns)
    rows = duckdb.sql(f"""
        SELECT backend, phase, strategy, status, seed, context, versions['dse'] AS dse, config_hash
        FROM {every(wd)}""").df()
    assert set(rows.backend) == {"clocked-sim", "taskset-variants", "sim-profile", "sim-periodic"}
    assert set(rows.status) == {"ok", "refused"} and (rows.seed == 0).all() and rows.dse.notna().all()
    for column in ("phase", "strategy", "context"):
        assert (rows[column].fillna("").str.len() > 0).all(), column
    assert set(rows.groupby("backend").phase.agg(lambda p: tuple(sorted(set(p)))).items()) == {
        ("clocked-sim", ("remeasure",)), ("taskset-variants", ("variants",)), ("sim-profile", ("objectives", "wcet")),
        ("sim-periodic", ("deploy", "powerfit"))}


def test_pareto_rows(wd):
    rows = duckdb.sql(f"""
        SELECT phase, strategy, status, reason, seed, context, repeat, config_hash, fps, versions['dse'] AS dse
        FROM {every(wd)} WHERE platform = 'tx2-sim' AND backend = 'clocked-sim'""").df()
    table = pd.read_parquet(wd / RUN / "pareto.parquet")
    assert len(rows) == 2 * len(table) and sorted(rows.repeat.unique()) == [0, 1]      # pareto.repeats=2
    assert set(rows.phase) == {"remeasure"} and set(rows.strategy) == {"nsga2", "trt-baseline"}
    assert (rows.status == "ok").all() and rows.reason.isna().all()      # a reason only for refused / error rows
    assert (rows.seed == 0).all() and rows.dse.notna().all()
    run = wd / RUN
    assert set(rows.context) == {measurement_context(read_part(run, "platform"), read_part(run, "pareto"))}
    # the result table's throughput is the mean of the stored runs of each point
    means = rows.groupby(["strategy", "config_hash"]).fps.mean()
    for source in ("nsga2", "trt-baseline"):
        assert np.allclose(sorted(means[source]), sorted(table[table.source == source].fps), rtol=1e-12)


def test_taskset_rows_are_the_variant_table(wd):
    rows = duckdb.sql(f"""
        SELECT option, cuts, precision, status, stage_ms, fps, fallback_layers, context
        FROM {every(wd)} WHERE backend = 'taskset-variants'""").df()
    assert set(rows.status) == {"ok"} and rows.context.nunique() == 1
    assert set(rows.option) == {"rc8", "rc4", "tc8", "tc4", "dla1", "dla2", "cpu2", "cpu4", "cpu6"}
    assert (rows[rows.option != "dla2"].option.value_counts() == 1).all() and (rows.option == "dla2").sum() > 1
    assert set(rows[rows.option.str.startswith("tc")].precision) == {"fp16"}            # zoo-xavier's tc_precision
    table = pd.read_parquet(wd / TASKSET / "variants.parquet").set_index("option")
    job = rows.assign(ms=rows.stage_ms.map(max))
    for option, ms in job[job.option != "dla2"].set_index("option").ms.items():
        assert table.ms[option] == ms
    split = job[job.option == "dla2"]
    best = split.loc[split.ms.idxmin()]
    assert table.ms["dla2"] == best.ms and table.cut["dla2"] == best.cuts[0]    # the table's split is the fastest
    assert np.allclose(split.fps, 1e3 / split.ms, rtol=1e-12)


def test_multi_rows_are_step_1s_profiles(wd):
    rows = duckdb.sql(f"""
        SELECT phase, strategy, option, cuts, status, reason, latency_ms_p50, fps, stage_ms, energy_j_per_frame,
               context
        FROM {every(wd)} WHERE backend = 'sim-profile' AND benchmark = 'yolov3-tiny'""").df()
    cands = pd.read_parquet(wd / MULTI / "candidates" / "yolov3-tiny.parquet")
    front = pd.read_parquet(wd / MULTI / "pareto" / "yolov3-tiny.parquet")
    objectives, wcet = rows[rows.phase == "objectives"], rows[rows.phase == "wcet"]
    assert len(objectives) == len(cands) and len(wcet) == len(front) and set(rows.strategy) == {"exhaustive"}
    assert objectives.context.nunique() == wcet.context.nunique() == 1                # runs differ: two contexts
    assert set(objectives.context) != set(wcet.context)
    key = ["option", "cuts"]
    got = objectives.assign(cuts=objectives.cuts.map(tuple)).set_index(key).sort_index()
    want = cands.assign(cuts=cands.cuts.map(tuple)).set_index(key).sort_index()
    assert ((got.status == "refused") == (want.rejected.str.len() > 0)).all()
    assert (got.reason.fillna("") == want.rejected).all()
    got, want = got[got.status == "ok"], want[got.status == "ok"]
    assert np.allclose(got.latency_ms_p50 * 1e3, want.latency_us, rtol=1e-12)       # the frame's chain time
    assert np.allclose(got.fps * got.latency_ms_p50, 1e3, rtol=1e-12)
    assert np.allclose(got.energy_j_per_frame, want[["e_gpu_j", "e_dla_j", "e_cpu_j"]].sum(axis=1), rtol=1e-12)
    assert (got.stage_ms.map(len) == [len(c) + 1 for c in got.index.get_level_values("cuts")]).all()
    front = front.assign(cuts=front.cuts.map(tuple)).set_index(key).sort_index()
    long = wcet.assign(cuts=wcet.cuts.map(tuple)).set_index(key).sort_index()
    assert np.allclose(long.latency_ms_p50 * 1e3, front.acet_us, rtol=1e-12)           # the WCET profile's ACETs


def test_multi_deploy_rows_are_the_deployment_runs(wd):
    rows = duckdb.sql(f"""
        SELECT benchmark AS scenario, fps, repeat, strategy, status, reason, latency_ms_p50, power_w,
               energy_j_per_frame, context
        FROM {every(wd)} WHERE backend = 'sim-periodic' AND phase = 'deploy'""").df()
    runs = pd.read_parquet(wd / MULTI / "deploy" / "X-PR.parquet")
    table = pd.read_parquet(wd / MULTI / "freqtable" / "X-PR.parquet")
    assert set(rows.strategy) == {"PR"} and rows.context.nunique() == 1
    ok, refused = rows[rows.status == "ok"], rows[rows.status == "refused"]
    assert len(ok) == len(runs) and len(refused) == (~table.feasible).sum() and refused.reason.str.len().all()
    key = ["scenario", "fps", "repeat"]
    got, want = ok.set_index(key).sort_index(), runs.set_index(key).sort_index()
    assert got.index.equals(want.index)
    assert np.allclose(got.latency_ms_p50, want.max_response_ms, rtol=1e-12)        # the largest response time
    assert np.allclose(got.power_w, want.board_w, rtol=1e-12)                       # the whole board's power
    assert np.allclose(got.energy_j_per_frame * got.index.get_level_values("fps"), want.board_w, rtol=1e-12)


def test_multi_power_fit_rows_are_its_sweep_runs(wd):
    """Every dynamic sweep point of the power fit is one run of a network alone at one clock level."""
    import json

    rows = duckdb.sql(f"""
        SELECT status, strategy, repeat, config_hash FROM {every(wd)}
        WHERE backend = 'sim-periodic' AND phase = 'powerfit'""").df()
    fit = json.loads((wd / MULTI / "powerfit.json").read_text())
    assert len(rows) == len(fit["dynamic"]) > 0 and rows.config_hash.is_unique
    assert (rows.status == "ok").all() and set(rows.strategy) == {"powerfit"} and (rows.repeat == 0).all()
