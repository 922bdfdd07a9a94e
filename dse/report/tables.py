"""The run's summary tables: the best configuration as a Table 3.5 row, the cost as a Table 3.4 row."""
from __future__ import annotations

import json

import pandas as pd

from dse.store import RETRIED_STATUSES

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


def board_hours(frame: pd.DataFrame, frames: int, costs) -> float:
    """Board time: real seconds (measure + build) when a real backend measured; for the sim, what a real board
    would spend (``costs``: ``dse.platform.BoardCosts``): ``frames`` at the measured FPS plus a start-up per
    measurement, and the build seconds the sim charged for every new engine."""
    if len(frame) and (frame["backend"] != "sim").all():
        return float((frame["measure_s"] + frame["build_s"]).sum()) / 3600.0
    run_s = sum(costs.run_s(frames, float(fps)) for fps in frame["fps"])
    return float(run_s + frame["build_s"].sum()) / 3600.0


def errors(frame: pd.DataFrame) -> pd.DataFrame:
    """Measurements that failed for a reason that may pass (the next run tries them again)."""
    return frame[frame["status"].isin(RETRIED_STATUSES)]


def best_row(best: dict) -> dict:
    """Table 3.5 columns for a best.yaml-style dict."""
    c = best["config"]
    return {
        "Option": c["option"], "Cuts": ",".join(map(str, c["cuts"])) or "-", "Pre.": c["pre_threads"],
        "Post.": c["post_threads"], "Buf.": c["buffers"], "Streams": ",".join(map(str, c["streams"])),
        "FPS": round(best["fps"], 1), "Latency p50 (ms)": round(best.get("latency_ms_p50", 0.0), 2),
        "Energy (mJ/frame)": round(1000 * best.get("energy_j_per_frame", 0.0), 1),
    }


def cost_row(frame: pd.DataFrame, frames: int, costs) -> dict:
    built = engines_built(frame)
    return {
        "Tuples measured": unique_tuples(frame),
        "Measurements": int(len(frame)),
        "Refused": int((frame["status"] == "refused").sum()),
        "Errors": int(len(errors(frame))),
        "Param. points": int((frame["phase"] == "finetune").sum()),
        "Engines built GPU": built.get("GPU", 0), "Engines built DLA": built.get("DLA", 0),
        "Engines built CPU": built.get("CPU", 0),
        "Board hours (est.)": round(board_hours(frame, frames, costs), 2),
    }


def markdown_table(rows: list[dict]) -> str:
    if not rows:
        return "(none)\n"
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    out += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(out) + "\n"
