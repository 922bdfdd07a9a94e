"""Results store: the measurement schema and crash-safe Parquet files. Its names load on first use, so that a job
that only writes a small file (``dse.store.atomic``: the workflow's config parts) does not import pandas and
pyarrow."""
from importlib import import_module

_HOME = {**dict.fromkeys(("append", "combine", "merge", "read", "store_lock", "write_atomic"), "parquet"),
         **dict.fromkeys(("RETRIED_STATUSES", "SCHEMA", "measurement_row", "row_to_measurement"), "schema")}
__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'dse.store' has no attribute {name!r}")
    value = globals()[name] = getattr(import_module(f"dse.store.{_HOME[name]}"), name)
    return value
