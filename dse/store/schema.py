"""The Parquet schema of one measurement row: every measurement of every run, queryable with pandas/DuckDB.

Lists and dicts (cuts, streams, per-PE utilization, stage times, engine keys, versions) are stored both
as readable scalar columns where queries need them (gpu_util, cuts as "52,134") and as JSON strings.
"""
from __future__ import annotations

import json
import platform as _platform
import time
from functools import lru_cache

import pyarrow as pa

from dse.measurement import Measurement

SCHEMA = pa.schema([
    ("config_hash", pa.string()),
    ("benchmark", pa.string()),
    ("platform", pa.string()),
    ("backend", pa.string()),
    ("phase", pa.string()),
    ("strategy", pa.string()),
    ("option", pa.string()),
    ("cuts", pa.string()),
    ("streams", pa.string()),
    ("buffers", pa.int32()),
    ("pre_threads", pa.int32()),
    ("post_threads", pa.int32()),
    ("precision", pa.string()),
    ("batch", pa.int32()),
    ("input_size", pa.int32()),
    ("model_digest", pa.string()),
    ("config_json", pa.string()),
    ("status", pa.string()),
    ("reason", pa.string()),
    ("fps", pa.float64()),
    ("latency_ms_p50", pa.float64()),
    ("latency_ms_p99", pa.float64()),
    ("gpu_util", pa.float64()),
    ("util_json", pa.string()),
    ("cpu_util", pa.float64()),
    ("power_w", pa.float64()),
    ("energy_j_per_frame", pa.float64()),
    ("stage_ms_json", pa.string()),
    ("dla_loadables", pa.int32()),
    ("fallback_layers", pa.int32()),
    ("engine_keys_json", pa.string()),
    ("engines_built_json", pa.string()),
    ("build_s", pa.float64()),
    ("measure_s", pa.float64()),
    ("timestamp", pa.float64()),
    ("seed", pa.int64()),
    ("versions_json", pa.string()),
    # digest of what the measurement depends on besides its configuration (platform definition, sample
    # size, warm-up, seed): a cache never answers with a row of another context
    ("context", pa.string()),
    # 0 = the measurement of the configuration; i > 0 = its i-th independent re-run (a comparison's confirmation)
    ("repeat", pa.int32()),
])
# what a file from an older version holds in a column it lacks
COLUMN_DEFAULTS = {"repeat": 0, "context": ""}


@lru_cache(maxsize=1)
def versions() -> dict:
    """Versions recorded with every row (reproducibility)."""
    from importlib import metadata

    out = {"python": _platform.python_version()}
    for pkg in ("dse", "onnx", "onnxruntime", "numpy", "pandas", "pyarrow", "snakemake", "hydra-core", "deap"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def measurement_row(m: Measurement, *, phase: str, strategy: str, seed: int = 0, repeat: int = 0,
                    engines_built: dict | None = None, context: str = "") -> dict:
    c = m.config
    return {
        "config_hash": c.hash,
        "benchmark": c.benchmark,
        "platform": c.platform,
        "backend": m.backend,
        "phase": phase,
        "strategy": strategy,
        "option": c.option,
        "cuts": ",".join(map(str, c.cuts)),
        "streams": ",".join(map(str, c.streams)),
        "buffers": c.buffers,
        "pre_threads": c.pre_threads,
        "post_threads": c.post_threads,
        "precision": c.precision,
        "batch": c.batch,
        "input_size": c.input_size,
        "model_digest": c.model_digest,
        "config_json": c.canonical_json(),
        "status": m.status,
        "reason": m.reason,
        "fps": float(m.fps),
        "latency_ms_p50": float(m.latency_ms_p50),
        "latency_ms_p99": float(m.latency_ms_p99),
        "gpu_util": float(m.gpu_util),
        "util_json": json.dumps(m.util, sort_keys=True),
        "cpu_util": float(m.cpu_util),
        "power_w": float(m.power_w),
        "energy_j_per_frame": float(m.energy_j_per_frame),
        "stage_ms_json": json.dumps([float(x) for x in m.stage_ms]),
        "dla_loadables": int(m.dla_loadables),
        "fallback_layers": int(m.fallback_layers),
        "engine_keys_json": json.dumps(list(m.engine_keys)),
        "engines_built_json": json.dumps(engines_built or {}, sort_keys=True),
        "build_s": float(m.build_s),
        "measure_s": float(m.measure_s),
        "timestamp": time.time(),
        "seed": int(seed),
        "versions_json": json.dumps(versions(), sort_keys=True),
        "context": context,
        "repeat": int(repeat),
    }


# files written before failures were told apart: a "failed" row may have been anything, so it is retried
LEGACY_STATUS = {"failed": "error"}
# stored statuses of measurements that are never replayed (the next phase or run measures them again)
RETRIED_STATUSES = ("error", *LEGACY_STATUS)


def row_to_measurement(row: dict) -> Measurement:
    """Rebuild a Measurement from a stored row (the measurement cache)."""
    from dse.configuration import Configuration

    return Measurement(
        config=Configuration.from_dict(json.loads(row["config_json"])),
        status=LEGACY_STATUS.get(row["status"], row["status"]), reason=row["reason"] or "", fps=row["fps"],
        latency_ms_p50=row["latency_ms_p50"], latency_ms_p99=row["latency_ms_p99"],
        util=json.loads(row["util_json"] or "{}"), cpu_util=row["cpu_util"], power_w=row["power_w"],
        energy_j_per_frame=row["energy_j_per_frame"], stage_ms=json.loads(row["stage_ms_json"] or "[]"),
        dla_loadables=int(row["dla_loadables"]), fallback_layers=int(row["fallback_layers"]),
        engine_keys=json.loads(row["engine_keys_json"] or "[]"), build_s=row["build_s"],
        measure_s=row["measure_s"], backend=row["backend"] or "",
    )
