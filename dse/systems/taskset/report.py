"""Campaign results as the paper shows them: success ratio per threshold (Figs. 10-12) and mean instances per
schedulable set (Tables 5-7, "x" where no set is schedulable)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from dse.report.tables import markdown_table


def pivot(summary: pd.DataFrame, scenario: str, value: str) -> pd.DataFrame:
    """threshold x configuration (the scenario's column order) of ``value``."""
    s = summary[summary.scenario == scenario]
    order = list(dict.fromkeys(s.configuration))
    return s.pivot(index="threshold", columns="configuration", values=value)[order]


def tables_markdown(summary: pd.DataFrame, scenario: str, label: str = "") -> str:
    """Two markdown tables for one scenario: success ratio (%) and mean instances per schedulable set."""
    ratio, count = pivot(summary, scenario, "success"), pivot(summary, scenario, "mean_instances")
    cols = ["threshold", *ratio.columns]
    lines = [f"### {scenario}{f' ({label})' if label else ''}: schedulable sets (%)", ""]
    lines += markdown_table([{"threshold": t, **(100 * row).to_dict()} for t, row in ratio.iterrows()], cols,
                            formats=dict.fromkeys(cols, "{:.1f}"), compact=True).splitlines()
    lines += ["", f"### {scenario}: mean instances per schedulable set (x = none schedulable)", ""]
    lines += markdown_table([{"threshold": t, **row.to_dict()} for t, row in count.iterrows()], cols,
                            formats={**dict.fromkeys(cols, "{:.2f}"), "threshold": "{:.1f}"}, missing="x",
                            compact=True).splitlines()
    undecided = int(summary[summary.scenario == scenario].undecided.sum())
    if undecided:
        lines += ["", f"{undecided} set x configuration answers undecided (ILP time limit): counted as not "
                      f"schedulable."]
    return "\n".join(lines) + "\n"


def plot_success(summary: pd.DataFrame, scenario: str, out: str | Path, label: str = "") -> Path:
    """Figs. 10-12 style: the share of schedulable sets per threshold, one line per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dse.report.plots import save_figure

    ratio = pivot(summary, scenario, "success")
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for name in ratio.columns:
        ax.plot(ratio.index, 100 * ratio[name], marker="o", ms=3, label=name)
    ax.set_xlabel("utilization threshold (relative to the reference option)")
    ax.set_ylabel("schedulable task sets (%)")
    ax.set_title(f"{scenario}{f' ({label})' if label else ''}")
    ax.set_ylim(-3, 103)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out)


def variants_markdown(rows: pd.DataFrame) -> str:
    """The measured variant table (``dse.systems.taskset.measured``): ms per network x option, "x" where dropped (over
    the frame), like the seed's Table 4."""
    options = list(dict.fromkeys(rows.option))
    cells = [{"task type": network, **{r.option: (f"{r.ms:.2f}" if r.kept else "x") for r in sub.itertuples()}}
             for network, sub in rows.groupby("type", sort=False)]
    lines = ["### Measured variants (ms; x = over the frame, not a variant)", ""]
    lines += markdown_table(cells, ["task type", *options], missing="-", compact=True).splitlines()
    sources = ", ".join(f"{o}: {s}" for o, s in rows.groupby("option", sort=False).source.first().items())
    return "\n".join(lines + ["", f"Sources: {sources}.", ""])

