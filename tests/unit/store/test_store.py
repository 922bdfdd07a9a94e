"""Parquet store: schema round trip, merge, crash safety of a writer killed mid-write."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.core.measurement import Measurement
from dse.store import SCHEMA, append, measurement_row, merge, read, row_to_measurement


def _measurement(i: int, fps: float = 100.0) -> Measurement:
    cfg = Configuration(benchmark="tiny", platform="xavier-agx-sim", option="PND-A", cuts=(10 + i,),
                        streams=(4, 2), buffers=8, pre_threads=2)
    return Measurement(config=cfg, fps=fps + i, latency_ms_p50=9.5, latency_ms_p99=12.0,
                       util={"GPU": 0.7, "DLA0": 0.9, "DLA1": 0.88}, power_w=25.0,
                       energy_j_per_frame=0.12, stage_ms=[9.0, 5.5], engine_keys=["a", "b"], backend="sim")


def test_round_trip(tmp_path):
    path = tmp_path / "m.parquet"
    rows = [measurement_row(_measurement(i), phase="search", strategy="global", seed=3) for i in range(5)]
    append(path, rows[:2])
    append(path, rows[2:])
    frame = read(path)
    assert len(frame) == 5
    assert [list(c) for c in frame["cuts"]] == [[10], [11], [12], [13], [14]]
    assert frame["gpu_util"].iloc[0] == pytest.approx(0.7)
    back = row_to_measurement(frame.iloc[3].to_dict())
    original = _measurement(3)
    assert back.config == original.config and back.config.hash == original.config.hash
    assert back.fps == pytest.approx(original.fps) and back.util == original.util
    assert back.stage_ms == original.stage_ms


def test_missing_file_reads_empty(tmp_path):
    frame = read(tmp_path / "none.parquet")
    assert len(frame) == 0 and "fps" in frame.columns


def test_merge_dedupes_by_config(tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    append(a, [measurement_row(_measurement(i), phase="p", strategy="s") for i in range(3)])
    append(b, [measurement_row(_measurement(i), phase="q", strategy="s") for i in range(2, 6)])
    out = merge([a, b, tmp_path / "missing.parquet"], tmp_path / "all.parquet")
    assert len(out) == 6
    assert len(read(tmp_path / "all.parquet")) == 6
    assert out.loc[out["cuts"].map(tuple) == (12,), "phase"].item() == "p"


def test_corrupt_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really parquet")
    with pytest.raises(DseError, match="not a readable Parquet file"):
        read(bad)


WRITER = r"""
import sys
from dse.store import append, measurement_row
from dse.store.parquet import _table, write_atomic
from tests.unit.store.test_store import _measurement
path = sys.argv[1]
i = 0
while True:
    rows = [measurement_row(_measurement(i), phase="p", strategy="s") for _ in range(200)]
    if i % 10 == 9:  # start over: the file stays small, so 300 reads stay quick on a loaded machine
        write_atomic(_table(rows), path)
    else:
        append(path, rows)
    i += 1
    print(i, flush=True)
"""


def test_killed_writer_never_leaves_a_corrupt_file(tmp_path):
    path = tmp_path / "m.parquet"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    for attempt in range(3):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, env=env, text=True)
        proc.stdout.readline()  # at least one complete write happened
        time.sleep(0.05 * (attempt + 1))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        frame = read(path)  # must parse
        assert len(frame) % 200 == 0 and len(frame) >= 200
    leftovers = [p for p in tmp_path.iterdir() if p.name != "m.parquet"]
    # a killed writer may leave its temp file, never a torn target; temp files are hidden dot-files (and the
    # writers' lock file stays: its lock dies with the process)
    assert all(p.name.startswith(".m.parquet.") or p.name == "m.parquet.lock" for p in leftovers)


def test_reads_while_a_writer_rewrites_never_tear(tmp_path):
    """Parallel jobs read each other's files while those are being replaced: every read sees one version."""
    path = tmp_path / "m.parquet"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, env=env, text=True)
    try:
        proc.stdout.readline()
        sizes = [len(read(path)) for _ in range(300)]
    finally:
        proc.kill()
        proc.wait()
    assert all(n % 200 == 0 and n >= 200 for n in sizes)


def test_context_filters_rows_and_old_files_read_as_no_context(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "m.parquet"
    append(path, [measurement_row(_measurement(0), phase="p", strategy="s", context="ctx-a"),
                  measurement_row(_measurement(1), phase="p", strategy="s", context="ctx-b")])
    assert [list(c) for c in read(path, context="ctx-a")["cuts"]] == [[10]]
    assert len(read(path)) == 2 and len(read(path, context="other")) == 0
    out = merge([path], tmp_path / "all.parquet", context="ctx-b")
    assert [list(c) for c in out["cuts"]] == [[11]]
    # a file written before the context column existed: readable, appendable, and of context ""
    old = tmp_path / "old.parquet"
    row = measurement_row(_measurement(2), phase="p", strategy="s")
    pq.write_table(pa.Table.from_pylist([row], schema=SCHEMA).drop(["context"]), old)
    append(old, [measurement_row(_measurement(3), phase="p", strategy="s", context="ctx-a")])
    assert [list(c) for c in read(old, context="")["cuts"]] == [[12]]
    assert [list(c) for c in read(old, context="ctx-a")["cuts"]] == [[13]]


def test_evaluator_never_answers_from_another_context(tmp_path):
    """A changed platform definition or sample size (another context) re-measures; the same one reuses."""
    from dse.backends.base import MeasureSettings
    from dse.backends.sim import SimBackend
    from dse.evaluate import Evaluator
    from dse.graph.analysis import analyze
    from dse.zoo import build_network

    board = SimBackend("xavier-agx-sim", analyze(build_network("tiny-chain", input_size=64)),
                       MeasureSettings(input_size=64, sample_size=100))
    cfg = Configuration(benchmark="tiny-chain", platform="xavier-agx-sim", precision="int8", input_size=64)
    first = Evaluator(board, tmp_path / "a.parquet", context="v1")
    m = first.evaluate(cfg, phase="p", strategy="s")
    assert m.ok and first.measured == 1
    same = Evaluator(board, tmp_path / "b.parquet", cache_files=[tmp_path / "a.parquet"], context="v1")
    assert same.evaluate(cfg, phase="p", strategy="s").fps == m.fps and same.measured == 0
    changed = Evaluator(board, tmp_path / "c.parquet", cache_files=[tmp_path / "a.parquet"], context="v2")
    changed.evaluate(cfg, phase="p", strategy="s")
    assert changed.measured == 1 and changed.reused == 0


def test_arrow_types_and_nulls_for_what_was_not_measured(tmp_path):
    """Lists, maps, a UTC timestamp; a refused row has null figures (not 0.0), and a backend that reads no
    power (host-cpu) leaves power and energy null."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "m.parquet"
    refused = Measurement.refused(_measurement(1).config, "no", backend="sim")
    no_power = _measurement(2)
    no_power.power_w = no_power.energy_j_per_frame = None
    append(path, [measurement_row(m, phase="p", strategy="s") for m in (_measurement(0), refused, no_power)])
    schema = pq.read_schema(path)
    assert pa.types.is_list(schema.field("cuts").type) and schema.field("cuts").type.value_type == pa.int32()
    assert pa.types.is_map(schema.field("util").type) and schema.field("util").type.item_type == pa.float64()
    assert schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    frame = read(path)
    assert dict(frame["util"][0]) == {"GPU": 0.7, "DLA0": 0.9, "DLA1": 0.88} and list(frame["stage_ms"][0]) == [9.0, 5.5]
    assert frame["fps"].isna().tolist() == [False, True, False] and frame["reason"][1] == "no"
    assert frame["power_w"].isna().tolist() == [False, True, True]
    back = row_to_measurement(frame.iloc[2].to_dict())
    assert back.ok and back.power_w is None and back.energy_j_per_frame is None


def test_a_file_from_before_the_arrow_types_is_upgraded(tmp_path):
    """JSON text and comma strings, a float timestamp, 0.0 for a failure and the old "failed" status read into
    the current schema (and the failure is not replayed)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cfg = _measurement(0).config
    common = {"config_hash": cfg.hash, "benchmark": "tiny", "platform": "xavier-agx-sim", "backend": "sim",
              "phase": "p", "strategy": "s", "option": "PND-A", "cuts": "10", "streams": "4,2", "buffers": 8,
              "pre_threads": 2, "post_threads": 1, "precision": "int8", "batch": 1, "input_size": 416,
              "model_digest": "", "config_json": cfg.canonical_json(), "latency_ms_p50": 0.0,
              "latency_ms_p99": 0.0, "gpu_util": 0.0, "cpu_util": 0.0, "power_w": 0.0, "energy_j_per_frame": 0.0,
              "dla_loadables": 0, "fallback_layers": 0, "engine_keys_json": '["a"]', "engines_built_json": '{"DLA": 1}',
              "build_s": 1.0, "measure_s": 0.1, "timestamp": 1.7e9, "seed": 0, "versions_json": '{"dse": "0.1.0"}'}
    old = [{**common, "status": "ok", "reason": "", "fps": 120.0, "util_json": '{"GPU": 0.5}',
            "stage_ms_json": "[1.5, 2.0]"},
           {**common, "config_hash": "x", "status": "failed", "reason": "lost", "fps": 0.0, "util_json": "{}",
            "stage_ms_json": "[]"}]
    path = tmp_path / "old.parquet"
    pq.write_table(pa.Table.from_pylist(old), path)
    frame = read(path)
    assert [list(c) for c in frame["cuts"]] == [[10], [10]] and list(frame["streams"][0]) == [4, 2]
    assert dict(frame["util"][0]) == {"GPU": 0.5} and list(frame["engine_keys"][1]) == ["a"]
    assert str(frame["timestamp"].dtype) == "datetime64[us, UTC]" and frame["timestamp"][0].year == 2023
    assert frame["fps"][0] == 120.0 and pd.isna(frame["fps"][1]) and pd.isna(frame["power_w"][1])
    assert row_to_measurement(frame.iloc[1].to_dict()).status == "error"
    append(path, [measurement_row(_measurement(3), phase="p", strategy="s")])   # old files stay appendable
    assert len(read(path)) == 3


def test_a_file_of_another_schema_or_a_cut_short_json_is_one_named_error(tmp_path):
    """A Parquet file that is no measurement store in ``cache/`` (a user's table, columns of other types) and a JSON
    a copy cut short are refused naming the file and what to do, not with a KeyError or a JSONDecodeError."""
    import pandas as pd

    from dse.core.errors import DseError
    from dse.store.atomic import read_json, write_json_atomic
    from dse.store.parquet import read

    other = tmp_path / "other.parquet"
    pd.DataFrame({"a": [1, 2], "cuts": ["x", "y"]}).to_parquet(other)
    with pytest.raises(DseError, match=r"other.parquet is a Parquet file of another schema \(no column 'config_hash'\)"):
        read(other)
    typed = tmp_path / "typed.parquet"
    pd.DataFrame({"config_hash": ["h"], "repeat": ["first"]}).to_parquet(typed)
    with pytest.raises(DseError, match="typed.parquet does not fit the measurement schema"):
        read(typed)
    path = write_json_atomic(tmp_path / "maximize.asked.json", ["a" * 16, "b" * 16])
    assert read_json(path) == ["a" * 16, "b" * 16]
    path.write_text(path.read_text()[:10])
    with pytest.raises(DseError, match=r"maximize.asked.json is not valid JSON .*: delete it, and snakemake reruns"):
        read_json(path)
    with pytest.raises(DseError, match="search.json is missing"):
        read_json(tmp_path / "search.json")
