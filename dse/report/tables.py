"""The run's summary tables: the best configuration as a Table 3.5 row, the cost as a Table 3.4 row."""
from __future__ import annotations

import pandas as pd

from dse.store import RETRIED_STATUSES


# phases that measure cut tuples: the thesis' explorer (global and full searches) and the guided exploration
TUPLE_PHASES = ("option-search", "full-search", "guided")


def unique_tuples(frame: pd.DataFrame, phases=TUPLE_PHASES) -> int:
    """Cut-point tuples measured by the cut-tuple searches (thesis Table 3.4 counts unique tuples)."""
    sub = frame[frame["phase"].isin(phases)]
    return len({(o, tuple(int(c) for c in cuts)) for o, cuts in zip(sub["option"], sub["cuts"])})


def engine_types(option: str, n_keys: int, platform) -> list[str]:
    """PE type of each engine key of a configuration: one engine per stage, of its stage's PE type (an
    interleaved stage builds a GPU engine and one DLA engine for both cores)."""
    stages = platform.option(option).stages
    if any(s.interleaved for s in stages):
        return (["GPU"] + ["DLA"] * (n_keys - 1))[:n_keys]
    return [s.pe_type.upper() for s in stages]


def distinct_engines(pairs, platform) -> dict[str, set[str]]:
    """PE type -> the distinct engines the configurations need, from (option, engine keys) pairs: a count that
    does not depend on which job or run happened to build an engine first."""
    out: dict[str, set[str]] = {}
    for option, keys in pairs:
        keys = [str(k) for k in (keys if keys is not None else [])]
        if option in platform.options:
            for t, k in zip(engine_types(option, len(keys), platform), keys):
                out.setdefault(t, set()).add(k)
    return out


def board_seconds(runs, engines: dict[str, set[str]], frames: int, costs) -> float:
    """What a real board spends (``costs``: ``dse.platform.BoardCosts``): a start-up and ``frames`` at the
    measured FPS (null or 0 when nothing ran) per measurement, one build per distinct engine."""
    run_s = sum(costs.run_s(frames, fps if fps is not None and fps == fps else 0.0) for fps in runs)
    return run_s + sum(costs.build_s(t) * len(keys) for t, keys in engines.items())


def board_hours(frame: pd.DataFrame, platform, frames: int, costs) -> float:
    """Board time: real seconds (measure + build) when a real backend measured; for the sim, what a real
    board would spend (``board_seconds``)."""
    if len(frame) and (frame["backend"] != "sim").all():
        return float((frame["measure_s"] + frame["build_s"]).sum()) / 3600.0
    engines = distinct_engines(zip(frame["option"], frame["engine_keys"]), platform)
    return board_seconds(list(frame["fps"]), engines, frames, costs) / 3600.0


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
        "Energy (mJ/frame)": ("n/a" if best.get("energy_j_per_frame") is None
                              else round(1000 * best["energy_j_per_frame"], 1)),
    }


def cost_row(frame: pd.DataFrame, platform, frames: int, costs) -> dict:
    built = {t: len(keys) for t, keys in distinct_engines(zip(frame["option"], frame["engine_keys"]), platform).items()}
    return {
        "Tuples measured": unique_tuples(frame),
        "Measurements": int(len(frame)),
        "Refused": int((frame["status"] == "refused").sum()),
        "Errors": int(len(errors(frame))),
        "Param. points": int((frame["phase"] == "finetune").sum()),
        "Engines built GPU": built.get("GPU", 0), "Engines built DLA": built.get("DLA", 0),
        "Engines built CPU": built.get("CPU", 0),
        "Board hours (est.)": round(board_hours(frame, platform, frames, costs), 2),
    }


def markdown_table(rows: list[dict]) -> str:
    if not rows:
        return "(none)\n"
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    out += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(out) + "\n"
