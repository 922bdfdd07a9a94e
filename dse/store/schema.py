"""The Parquet schema of one measurement row: every measurement of every run, queryable with pandas/DuckDB.

Arrow types throughout: lists (cuts, streams, stage times, engine keys), maps (per-PE utilization, engines
built, versions), a UTC timestamp, and nulls for what was not measured (every figure of a refused or errored
row; power and energy where the backend cannot read them, e.g. on host-cpu). ``config_json`` is kept as text on
purpose: it is the canonical JSON whose hash is ``config_hash``. Files from before (JSON text and comma strings,
a float timestamp, 0.0 for failures) are read into this schema by ``upgrade``.
"""
from __future__ import annotations

import json
import platform as _platform
from datetime import datetime, timezone
from functools import lru_cache

import pyarrow as pa

from dse.core.measurement import Measurement

INTS = pa.list_(pa.int32())
SCHEMA = pa.schema([
    ("config_hash", pa.string()),
    ("benchmark", pa.string()),
    ("platform", pa.string()),
    ("backend", pa.string()),
    ("phase", pa.string()),
    ("strategy", pa.string()),
    ("option", pa.string()),
    ("cuts", INTS),
    ("streams", INTS),
    ("buffers", pa.int32()),
    ("pre_threads", pa.int32()),
    ("post_threads", pa.int32()),
    ("precision", pa.string()),
    ("batch", pa.int32()),
    ("input_size", pa.int32()),
    ("model_digest", pa.string()),
    ("config_json", pa.string()),
    ("status", pa.string()),        # ok | refused | error
    ("reason", pa.string()),        # null when ok
    ("fps", pa.float64()),
    ("latency_ms_p50", pa.float64()),
    ("latency_ms_p99", pa.float64()),
    ("gpu_util", pa.float64()),
    ("util", pa.map_(pa.string(), pa.float64())),
    ("cpu_util", pa.float64()),
    ("power_w", pa.float64()),
    ("energy_j_per_frame", pa.float64()),
    ("stage_ms", pa.list_(pa.float64())),
    ("dla_loadables", pa.int32()),
    ("fallback_layers", pa.int32()),
    ("fallback_reasons", pa.map_(pa.string(), pa.int32())),   # failed DLA rule (op/feature) -> layers; null: unknown
    ("engine_keys", pa.list_(pa.string())),
    ("engines_built", pa.map_(pa.string(), pa.int32())),   # engines this measurement's builds added, per PE type
    ("build_s", pa.float64()),
    ("measure_s", pa.float64()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("seed", pa.int64()),
    ("versions", pa.map_(pa.string(), pa.string())),
    # digest of what the measurement depends on besides its configuration (platform definition, measurement
    # settings): a cache never answers with a row of another context
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
    ok = m.ok

    def measured(value):   # a figure exists only for a measurement that ran, and only where it was read
        return None if not ok or value is None else float(value)

    return {
        "config_hash": c.hash, "benchmark": c.benchmark, "platform": c.platform, "backend": m.backend,
        "phase": phase, "strategy": strategy, "option": c.option, "cuts": list(c.cuts), "streams": list(c.streams),
        "buffers": c.buffers, "pre_threads": c.pre_threads, "post_threads": c.post_threads,
        "precision": c.precision, "batch": c.batch, "input_size": c.input_size, "model_digest": c.model_digest,
        "config_json": c.canonical_json(), "status": m.status, "reason": m.reason if not ok else None,
        "fps": measured(m.fps), "latency_ms_p50": measured(m.latency_ms_p50),
        "latency_ms_p99": measured(m.latency_ms_p99), "gpu_util": measured(m.util.get("GPU")),
        "util": {k: float(v) for k, v in m.util.items()} if ok else None, "cpu_util": measured(m.cpu_util),
        "power_w": measured(m.power_w), "energy_j_per_frame": measured(m.energy_j_per_frame),
        "stage_ms": [float(x) for x in m.stage_ms] if ok else None,
        "dla_loadables": int(m.dla_loadables), "fallback_layers": int(m.fallback_layers),
        "fallback_reasons": ({str(k): int(v) for k, v in m.fallback_reasons.items()}
                             if m.fallback_reasons is not None else None),
        "engine_keys": list(m.engine_keys), "engines_built": dict(engines_built or {}),
        "build_s": float(m.build_s), "measure_s": float(m.measure_s), "timestamp": datetime.now(timezone.utc),
        "seed": int(seed), "versions": versions(), "context": context, "repeat": int(repeat),
    }


def upgrade(rows: list[dict]) -> list[dict]:
    """Rows of a file written before the Arrow types (JSON text, comma strings, a float timestamp, 0.0 for
    what was not measured) in this schema's form."""
    def ints(text) -> list[int]:
        return [int(x) for x in str(text or "").split(",") if x.strip()]

    out = []
    for r in rows:
        ok = r.get("status") == "ok"
        r = {**COLUMN_DEFAULTS, **r}
        r["cuts"], r["streams"] = ints(r.get("cuts")), ints(r.get("streams"))
        r["util"] = json.loads(r.pop("util_json", None) or "{}") if ok else None
        r["stage_ms"] = json.loads(r.pop("stage_ms_json", None) or "[]") if ok else None
        r["engine_keys"] = json.loads(r.pop("engine_keys_json", None) or "[]")
        r["engines_built"] = json.loads(r.pop("engines_built_json", None) or "{}")
        r["versions"] = json.loads(r.pop("versions_json", None) or "{}")
        ts = r.get("timestamp")
        r["timestamp"] = datetime.fromtimestamp(float(ts), timezone.utc) if ts is not None else None
        if not ok:
            for key in ("fps", "latency_ms_p50", "latency_ms_p99", "gpu_util", "cpu_util", "power_w",
                        "energy_j_per_frame"):
                r[key] = None
        else:
            r["reason"] = None
        out.append(r)
    return out


# files written before failures were told apart: a "failed" row may have been anything, so it is retried
LEGACY_STATUS = {"failed": "error"}
# stored statuses of measurements that are never replayed (the next phase or run measures them again)
RETRIED_STATUSES = ("error", *LEGACY_STATUS)


def _reasons(value) -> dict[str, int] | None:
    """A stored map column (pairs, a dict, or null/NaN for a row that did not record it)."""
    if value is None or isinstance(value, float):
        return None
    return {str(k): int(v) for k, v in dict(value).items()}


def row_to_measurement(row: dict) -> Measurement:
    """Rebuild a Measurement from a stored row (the measurement cache); nulls read as "not measured"."""
    from dse.core.configuration import Configuration

    def value(key, default=0.0):
        v = row.get(key)
        return default if v is None or v != v else float(v)   # null / NaN

    util = row.get("util")
    return Measurement(
        config=Configuration.from_dict(json.loads(row["config_json"])),
        status=LEGACY_STATUS.get(row["status"], row["status"]), reason=row.get("reason") or "",
        fps=value("fps"), latency_ms_p50=value("latency_ms_p50"), latency_ms_p99=value("latency_ms_p99"),
        util=dict(util) if util is not None else {}, cpu_util=value("cpu_util"),
        power_w=value("power_w", None), energy_j_per_frame=value("energy_j_per_frame", None),
        stage_ms=[float(x) for x in (row.get("stage_ms") if row.get("stage_ms") is not None else [])],
        dla_loadables=int(row["dla_loadables"]), fallback_layers=int(row["fallback_layers"]),
        fallback_reasons=_reasons(row.get("fallback_reasons")),
        engine_keys=[str(k) for k in (row.get("engine_keys") if row.get("engine_keys") is not None else [])],
        build_s=value("build_s"), measure_s=value("measure_s"), backend=row["backend"] or "",
    )
