"""Results store: the measurement schema and crash-safe Parquet files."""
from dse.store.parquet import append, combine, merge, read, store_lock, write_atomic
from dse.store.schema import RETRIED_STATUSES, SCHEMA, measurement_row, row_to_measurement

__all__ = ["RETRIED_STATUSES", "SCHEMA", "append", "combine", "merge", "measurement_row", "read", "row_to_measurement",
           "store_lock", "write_atomic"]
