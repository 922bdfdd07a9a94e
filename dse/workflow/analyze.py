"""Rule `analyze`: the run's model.onnx (sanitized), layers.parquet and cuts.json."""
from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from dse.network import analyze_source
from dse.store.atomic import write_bytes_atomic, write_json_atomic


def analyze_run(run: str | Path) -> dict:
    run = Path(run)
    source = OmegaConf.to_container(OmegaConf.load(run / "config" / "model.yaml"))
    analysis = analyze_source(source)
    write_bytes_atomic(run / "model.onnx", analysis.model.SerializeToString())
    frame = analysis.to_frame()
    tmp = run / ".layers.parquet.tmp"
    frame.to_parquet(tmp, index=False)
    tmp.replace(run / "layers.parquet")
    summary = analysis.summary()
    write_json_atomic(run / "cuts.json", summary)
    return summary
