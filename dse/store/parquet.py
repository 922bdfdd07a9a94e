"""Crash-safe Parquet files: every write goes to a temp file, is fsynced, then renamed over the target.

A killed writer leaves either the old file or the new one, never a torn one (rename is atomic on POSIX).
Parallel Snakemake jobs write their own files; `merge` combines them.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dse.core.errors import DseError
from dse.store.atomic import write_bytes_atomic
from dse.store.schema import COLUMN_DEFAULTS, RETRIED_STATUSES, SCHEMA, upgrade


def _table(rows: list[dict] | pd.DataFrame, schema: pa.Schema = SCHEMA) -> pa.Table:
    if isinstance(rows, pd.DataFrame):
        return pa.Table.from_pandas(rows[schema.names], schema=schema, preserve_index=False)
    return pa.Table.from_pylist([{k: r.get(k) for k in schema.names} for r in rows], schema=schema)


def write_atomic(table: pa.Table, path: str | Path) -> Path:
    """Write a table to `path` atomically (temp file in the same directory + fsync + os.replace)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return write_bytes_atomic(path, sink.getvalue().to_pybytes())


STORE_KEYS = ("config_hash",)   # what every store row, of any version, has (an old one may lack repeat)


def _read_table(path: Path) -> pa.Table:
    """One open() = one inode: a concurrent writer's rename cannot mix two versions of the file (reading
    by path lets Arrow open it more than once, and a rename in between tears the read)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        return pq.read_table(pa.BufferReader(data))
    except (pa.ArrowInvalid, OSError) as exc:
        raise DseError(f"{path} is not a readable Parquet file ({exc}); delete it or restore it from a backup") from None


def _conform(table: pa.Table, schema: pa.Schema, path: Path | None = None) -> pa.Table:
    """A table in the schema's columns and types: a file from before the Arrow types is upgraded
    (``schema.upgrade``); columns a file from an older version lacks get their default or null. A file of another
    schema (no ``config_hash``, or columns that do not cast) is refused naming it: it is no measurement store."""
    missing = [k for k in STORE_KEYS if k in schema.names and k not in table.column_names]
    if missing:
        raise DseError(f"{path or 'a table'} is a Parquet file of another schema (no column {missing[0]!r}): not a "
                       "measurement store; move it out of the run's cache/")
    if schema is SCHEMA and ("util_json" in table.column_names or "cuts" in table.column_names
                             and pa.types.is_string(table.schema.field("cuts").type)):
        table = pa.Table.from_pylist(upgrade(table.to_pylist()), schema=SCHEMA)
    for f in schema:
        if f.name not in table.column_names:
            default = COLUMN_DEFAULTS.get(f.name)
            column = (pa.nulls(len(table), f.type) if default is None
                      else pa.array([default] * len(table), type=f.type))
            table = table.append_column(f.name, column)
    try:
        return table.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise DseError(f"{path or 'a table'} does not fit the measurement schema ({exc}); move it out of the run's "
                       "cache/") from None


def read(path: str | Path, schema: pa.Schema = SCHEMA, context: str | None = None) -> pd.DataFrame:
    """Load a measurement file into pandas; an empty frame with the schema's columns if it does not exist.
    With ``context``: only the rows measured in that context (a file from before contexts counts as "")."""
    path = Path(path)
    if not path.exists():
        return schema.empty_table().to_pandas()
    frame = _conform(_read_table(path), schema, path).to_pandas()
    if context is not None:
        frame = frame[frame["context"].fillna("") == context].reset_index(drop=True)
    return frame


def store_lock(path: str | Path):
    """The lock every writer of ``path`` holds (``<path>.lock``): two runs of one job started together queue
    instead of overwriting each other's rows. Not re-entrant across instances: take it once per process."""
    from filelock import FileLock

    return FileLock(str(path) + ".lock")


def append(path: str | Path, rows: list[dict], schema: pa.Schema = SCHEMA, *, locked: bool = False) -> Path:
    """Append rows: read, concatenate, rewrite atomically (files hold hundreds of rows; simplicity wins), under
    the file's lock unless the caller holds it (``locked``)."""
    path = Path(path)
    if not locked:
        path.parent.mkdir(parents=True, exist_ok=True)
        with store_lock(path):
            return append(path, rows, schema, locked=True)
    new = _table(rows, schema)
    if path.exists():
        new = pa.concat_tables([_conform(_read_table(path), schema, path), new])
    return write_atomic(new, path)


def combine(inputs: list[str | Path], schema: pa.Schema = SCHEMA, context: str | None = None) -> pd.DataFrame:
    """The rows of per-job files as one frame: the first replayable row of each (configuration, re-run index)
    and every ``error`` row (kept for the record; a later successful try of the same configuration stays too).
    With ``context``, only that context's rows."""
    frames = [read(p, schema, context) for p in inputs if Path(p).exists()]
    frames = [f for f in frames if len(f)]
    frame = pd.concat(frames, ignore_index=True) if frames else schema.empty_table().to_pandas()
    if len(frame):
        errors = frame["status"].isin(RETRIED_STATUSES)
        kept = frame[~errors].drop_duplicates(subset=["config_hash", "repeat"], keep="first")
        frame = pd.concat([kept, frame[errors]]).sort_index().reset_index(drop=True)
    return frame


def merge(inputs: list[str | Path], output: str | Path, schema: pa.Schema = SCHEMA,
          context: str | None = None) -> pd.DataFrame:
    """``combine`` the files and write the result to ``output``."""
    frame = combine(inputs, schema, context)
    write_atomic(_table(frame, schema), output)
    return frame
