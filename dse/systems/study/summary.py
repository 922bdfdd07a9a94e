"""A finished study in one table: one row per point from its ``summary.json``, the FPS gain over Base(G) per
network and size, the selected option per point, and the markdown summary."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from dse.core.errors import DseError
from dse.report.plots import plt, save_figure
from dse.report.tables import markdown_table

COST_COLUMNS = {"Tuples measured": "tuples", "Measurements": "measurements", "Engines built GPU": "engines_gpu",
                "Engines built DLA": "engines_dla", "Engines built CPU": "engines_cpu",
                "Board hours (est.)": "board_hours"}
# what varies between points and names a column of the variant (the seed is a repeat, not a variant)
VARIANT = ("precision", "input_size", "batch", "platform")


def study_frame(part: dict) -> pd.DataFrame:
    """One row per point, in grid order: the grid values, the best configuration, FPS, energy, Base(G), the
    exploration's cost (columns of ``COST_COLUMNS``) and the tool versions (JSON)."""
    rows = []
    for point in part["points"]:
        path = Path(point["run"]) / "summary.json"
        if not path.exists():
            raise DseError(f"{path} is missing: the point's exploration has not finished (rule report writes it)")
        s = json.loads(path.read_text())
        cost = s.pop("cost")
        rows.append({"study": part["name"], "run": point["run"], **s,
                     "cuts": ",".join(map(str, s["cuts"])), "streams": ",".join(map(str, s["streams"])),
                     **{col: cost.get(key, 0) for key, col in COST_COLUMNS.items()},
                     "versions": json.dumps(s["versions"], sort_keys=True)})
    return pd.DataFrame(rows)


def _varying(frame: pd.DataFrame) -> list[str]:
    return [c for c in VARIANT if frame[c].nunique() > 1] or ["precision", "input_size"]


def _variant(frame: pd.DataFrame) -> pd.Series:
    """The label of each row's variant: the VARIANT columns that vary within the study."""
    return frame[_varying(frame)].astype(str).agg(" ".join, axis=1)


def study_plots(frame: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """FPS gain over Base(G) per network and variant (median over seeds), and the map of selected options
    (the most frequent over seeds)."""
    out_dir = Path(out_dir)
    frame = frame.assign(variant=_variant(frame))
    gain = frame.groupby(["benchmark", "variant"], sort=False)["gain_pct"].median().unstack("variant")
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(gain) + 2), 3.6))
    width = 0.8 / max(1, gain.shape[1])
    for i, variant in enumerate(gain.columns):
        ax.bar([x + i * width for x in range(len(gain))], gain[variant].fillna(0).values, width, label=variant)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(gain))], gain.index, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("FPS gain over Base(G) (%)")
    ax.set_title("FPS gain of the best configuration over Base(G)")
    ax.legend(fontsize=7, ncol=2, title=" ".join(_varying(frame)), title_fontsize=7)
    fig.tight_layout()
    paths = [save_figure(fig, out_dir / "study_gain.png")]

    option = frame.groupby(["benchmark", "variant"], sort=False)["option"].agg(lambda s: s.mode().iloc[0])
    table = option.unstack("variant")
    options = sorted(frame["option"].unique())
    colours = {o: plt.get_cmap("tab10")(i % 10) for i, o in enumerate(options)}
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * table.shape[1] + 2), max(2.5, 0.4 * len(table) + 1)))
    for y, bench in enumerate(table.index):
        for x, variant in enumerate(table.columns):
            o = table.loc[bench, variant]
            if isinstance(o, str):
                ax.add_patch(plt.Rectangle((x, y), 1, 1, color=colours[o], alpha=0.6))
                ax.text(x + 0.5, y + 0.5, o, ha="center", va="center", fontsize=9)
    ax.set_xlim(0, table.shape[1])
    ax.set_ylim(0, len(table))
    ax.set_xticks([x + 0.5 for x in range(table.shape[1])], table.columns, fontsize=8)
    ax.set_yticks([y + 0.5 for y in range(len(table))], table.index, fontsize=8)
    ax.invert_yaxis()
    ax.set_title("Selected mapping option")
    fig.tight_layout()
    paths.append(save_figure(fig, out_dir / "study_options.png"))
    return paths


def study_markdown(part: dict, frame: pd.DataFrame) -> str:
    grid = ", ".join(f"{k} {v}" for k, v in part["grid"].items())
    rows = [{"Network": r.benchmark, "Precision": r.precision.upper(), "Size": r.input_size, "Batch": r.batch,
             "Platform": r.platform, "Seed": r.seed, "Option": r.option, "Cuts": r.cuts or "-",
             "FPS": round(r.fps, 1), "Base(G)": round(r.base_g_fps, 1),
             "Gain (%)": "" if pd.isna(r.gain_pct) else round(r.gain_pct),
             "mJ/frame": "n/a" if pd.isna(r.energy_j_per_frame) else round(1000 * r.energy_j_per_frame, 1),
             "Tuples": r.tuples, "Board h (est.)": r.board_hours} for r in frame.itertuples()]
    counts = frame["option"].value_counts()
    lines = [f"# Study {part['name']}", "", f"{len(frame)} explorations: {grid}"
             + (f"; every point with {', '.join(part['overrides'])}" if part.get("overrides") else "") + ".", "",
             f"Median gain over Base(G) {frame['gain_pct'].median():+.0f} % (range {frame['gain_pct'].min():+.0f} "
             f"to {frame['gain_pct'].max():+.0f} %). Selected options: "
             + ", ".join(f"{o} x{n}" for o, n in counts.items())
             + f". Exploration cost: {int(frame['tuples'].sum())} tuples, {int(frame['measurements'].sum())} "
               f"measurements, {frame['board_hours'].sum():.1f} board hours on a real board (est.).", "",
             markdown_table(rows),
             "![FPS gain over Base(G)](plots/study_gain.png)", "![Selected option](plots/study_options.png)", "",
             "Every point: `study.parquet` (one row per run, with the tool versions); each run's own report is "
             "`<run>/report.md`.", ""]
    return "\n".join(lines)
