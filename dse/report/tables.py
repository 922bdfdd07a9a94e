"""The run's summary tables: the best configuration as a Table 3.5 row, the cost as a Table 3.4 row."""
from __future__ import annotations

import json

import pandas as pd

# Board-time estimate when the measurements came from the sim: what a real board would have spent.
DEFAULT_BOARD_COSTS = {"engine_build_s": {"GPU": 135.0, "DLA": 45.0, "CPU": 5.0}, "run_overhead_s": 10.0}


def proposed_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The proposed method's measurements: the comparison's methods label their phases '<method>/<phase>'."""
    return frame[~frame["phase"].str.contains("/", regex=False)]


def unique_tuples(frame: pd.DataFrame, phases=("option-search", "full-search")) -> int:
    """Cut-point tuples measured by the cut-point explorer (thesis Table 3.4 counts unique tuples)."""
    sub = frame[frame["phase"].isin(phases)]
    return int(sub[["option", "cuts"]].drop_duplicates().shape[0])


def engines_built(frame: pd.DataFrame) -> dict[str, int]:
    total: dict[str, int] = {}
    for text in frame["engines_built_json"].fillna("{}"):
        for pe, n in json.loads(text or "{}").items():
            total[pe] = total.get(pe, 0) + int(n)
    return total


def board_hours(frame: pd.DataFrame, sample_size: int, warmup: int, costs: dict | None = None) -> float:
    """Board time: real seconds (measure + build) when a real backend measured; for the sim, an estimate of
    what a real board would spend (frames / FPS + start-up per measurement, plus every engine build)."""
    if len(frame) and (frame["backend"] != "sim").all():
        return float((frame["measure_s"] + frame["build_s"]).sum()) / 3600.0
    costs = {**DEFAULT_BOARD_COSTS, **(costs or {})}
    fps = frame["fps"].where(frame["fps"] > 0)
    run_s = ((sample_size + warmup) / fps).fillna(0.0) + costs["run_overhead_s"]
    build_s = sum(costs["engine_build_s"].get(pe, 60.0) * n for pe, n in engines_built(frame).items())
    return float(run_s.sum() + build_s) / 3600.0


def best_row(best: dict) -> dict:
    """Table 3.5 columns for a best.yaml-style dict."""
    c = best["config"]
    return {
        "Option": c["option"], "Cuts": ",".join(map(str, c["cuts"])) or "-", "Pre.": c["pre_threads"],
        "Post.": c["post_threads"], "Buf.": c["buffers"], "Streams": ",".join(map(str, c["streams"])),
        "FPS": round(best["fps"], 1), "Latency p50 (ms)": round(best.get("latency_ms_p50", 0.0), 2),
        "Energy (mJ/frame)": round(1000 * best.get("energy_j_per_frame", 0.0), 1),
    }


def cost_row(frame: pd.DataFrame, sample_size: int, warmup: int, costs: dict | None = None) -> dict:
    built = engines_built(frame)
    return {
        "Tuples measured": unique_tuples(frame),
        "Measurements": int(len(frame)),
        "Param. points": int((frame["phase"] == "finetune").sum()),
        "Engines built GPU": built.get("GPU", 0), "Engines built DLA": built.get("DLA", 0),
        "Engines built CPU": built.get("CPU", 0),
        "Board hours (est.)": round(board_hours(frame, sample_size, warmup, costs), 2),
    }


def markdown_table(rows: list[dict]) -> str:
    if not rows:
        return "(none)\n"
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    out += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(out) + "\n"
