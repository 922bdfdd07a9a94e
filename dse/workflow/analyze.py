"""Rule `analyze`: the run's model.onnx (sanitized), layers.parquet and cuts.json."""
from __future__ import annotations

from pathlib import Path

from dse.network import analyze_source
from dse.store.atomic import write_bytes_atomic, write_json_atomic
from dse.config import read_part


def analyze_run(run: str | Path) -> dict:
    run = Path(run)
    analysis = analyze_source(read_part(run, "model"))
    write_bytes_atomic(run / "model.onnx", analysis.model.SerializeToString())
    write_bytes_atomic(run / "layers.parquet", analysis.to_frame().to_parquet(index=False))
    summary = analysis.summary()
    write_json_atomic(run / "cuts.json", summary)
    return summary
