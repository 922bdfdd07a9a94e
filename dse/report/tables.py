"""The run's summary tables (the best configuration as a Table 3.5 row, the cost as a Table 3.4 row) and the
Markdown renderer of every report's tables."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

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


def format_cell(value, fmt: str | None = None, missing: str | None = None) -> str:
    """One table cell: ``fmt`` (a format string such as ``"{:.1f}"``) applied to the value; None or NaN, where no
    number was measured or solved, as ``missing`` where given (a format string cannot render them)."""
    if missing is not None and (value is None or (isinstance(value, float) and math.isnan(value))):
        return missing
    return str(value) if fmt is None else fmt.format(value)


def markdown_table(rows: list[dict], columns: Sequence[str] | None = None, *, right: Iterable[str] = (),
                   formats: Mapping[str, str] | None = None, missing: str | None = None,
                   compact: bool = False) -> str:
    """The one renderer of every report's Markdown tables, so they all read (and grep) alike.

    ``columns``: the columns in order (default: the first row's keys; without rows or columns: "(none)").
    ``right``: columns aligned right (``---:``). ``formats``: column -> format string of its cells (``format_cell``).
    ``missing``: what a cell shows that a row lacks or that holds None or NaN (default: a lacking cell blank, the
    others as ``str`` writes them). ``compact``: the separator row without spaces (``|---|---|``)."""
    cols = list(rows[0]) if columns is None and rows else list(columns or ())
    if not cols:
        return "(none)\n"
    right, formats = set(right), formats or {}
    rule = ["---:" if c in right else "---" for c in cols]
    sep = ("|" + "|".join(rule) + "|") if compact else ("| " + " | ".join(rule) + " |")
    out = ["| " + " | ".join(cols) + " |", sep]
    out += ["| " + " | ".join(format_cell(r[c], formats.get(c), missing) if c in r else missing or ""
                              for c in cols) + " |" for r in rows]
    return "\n".join(out) + "\n"
