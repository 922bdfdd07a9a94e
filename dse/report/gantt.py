"""Gantt chart of a simulated steady-state schedule (like thesis Fig. 3.12): one row per thread/context.

Input is a simulator's trace of ``dse.des.Span``; ``dse.des.gantt_data`` lays it out in rows, this draws them.
"""
from __future__ import annotations

from pathlib import Path

from dse.des import gantt_data


def draw_gantt(trace, out: str | Path, *, first_frame: int | None = None, n_frames: int = 8,
               title: str = "") -> Path:
    """Draw frames [first_frame, first_frame + n_frames) of the trace (default: the middle) to ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = gantt_data(trace, first_frame, n_frames)
    cmap = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(data.rows) + 1.5))
    for y, (_, lane) in enumerate(data.rows):
        for s in lane:
            ax.barh(y, (s.end - s.start) / 1000, left=(s.start - data.start) / 1000, color=cmap(s.frame % 10),
                    edgecolor="black", linewidth=0.4)
            if (s.end - s.start) / 1000 > 0.04 * ((data.end - data.start) / 1000):
                ax.text((s.start - data.start + (s.end - s.start) / 2) / 1000, y,
                        f"{s.label} f{s.frame}\n{(s.end - s.start) / 1000:.2f} ms", ha="center", va="center",
                        fontsize=6)
    ax.set_yticks(range(len(data.rows)), [label for label, _ in data.rows])
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(title or "simulated steady-state schedule")
    fig.tight_layout()
    from dse.report.plots import save_figure

    return save_figure(fig, out)
