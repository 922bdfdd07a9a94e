"""One query over the measurements of every target: the pareto target's board runs are rows of the store's schema
in ``<run>/cache/``, as the pipeline's and the layermap target's are, so one DuckDB glob reads them all."""
import duckdb
import numpy as np
import pandas as pd

from dse.config import read_part
from dse.store.schema import SCHEMA
from dse.workflow.plan import measurement_context
from tests.test_pareto_workflow import OVR, RUN
from tests.test_workflow import _workdir, snakemake


def test_pareto_rows_are_store_rows_for_duckdb(tmp_path):
    wd = _workdir(tmp_path)
    snakemake(wd, "pareto", "--config", f"overrides={OVR}")
    every = f"read_parquet('{wd}/results/**/cache/*.parquet', union_by_name=true)"
    columns = duckdb.sql(f"DESCRIBE SELECT * FROM {every}").df().column_name.tolist()
    assert set(SCHEMA.names) <= set(columns)
    rows = duckdb.sql(f"""
        SELECT phase, strategy, status, reason, seed, context, repeat, config_hash, fps, versions['dse'] AS dse
        FROM {every} WHERE platform = 'tx2-sim' AND backend = 'clocked-sim'""").df()
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
