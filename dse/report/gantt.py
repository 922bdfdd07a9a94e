"""Gantt chart of a simulated steady-state schedule (like thesis Fig. 3.12): one row per thread/context.

Input is the DES trace: (resource, frame, start_us, end_us, label) tuples. Overlapping tasks of one resource
(e.g. two pre-processing threads) are spread over rows greedily, so every row is one thread or context.
"""
from __future__ import annotations

from pathlib import Path


def _rows(trace, frames: set[int]) -> dict[str, list[list[tuple]]]:
    groups: dict[str, list[tuple]] = {}
    for res, f, t0, t1, label in trace:
        if f in frames:
            kind = res.split(" ctx")[0]
            groups.setdefault(kind, []).append((t0, t1, f, label))
    out: dict[str, list[list[tuple]]] = {}
    for kind, tasks in groups.items():
        lanes: list[list[tuple]] = []
        for task in sorted(tasks):
            for lane in lanes:
                if lane[-1][1] <= task[0] + 1e-9:
                    lane.append(task)
                    break
            else:
                lanes.append([task])
        out[kind] = lanes
    return out


def _order(kind: str) -> tuple:
    if kind.startswith("CPU pre"):
        return (0, kind)
    if kind.startswith("CPU post"):
        return (3, kind)
    return (1 if kind.startswith("DLA") else 2, kind.split("stage")[-1], kind)


def draw_gantt(trace, out: str | Path, *, first_frame: int | None = None, n_frames: int = 8,
               title: str = "") -> Path:
    """Draw frames [first_frame, first_frame + n_frames) of the trace (default: the middle) to ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not trace:
        raise ValueError("empty schedule trace: measure with trace=True")
    all_frames = sorted({t[1] for t in trace})
    if first_frame is None:
        first_frame = all_frames[len(all_frames) // 2]
    frames = set(range(first_frame, first_frame + n_frames))
    rows = _rows(trace, frames)
    labels, bars = [], []
    for kind in sorted(rows, key=_order):
        for i, lane in enumerate(rows[kind]):
            labels.append(f"{kind} #{i}" if len(rows[kind]) > 1 else kind)
            bars.append(lane)
    t_min = min(t[0] for lane in bars for t in lane)
    cmap = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(labels) + 1.5))
    for y, lane in enumerate(bars):
        for t0, t1, f, label in lane:
            ax.barh(y, (t1 - t0) / 1000, left=(t0 - t_min) / 1000, color=cmap(f % 10), edgecolor="black",
                    linewidth=0.4)
            if (t1 - t0) / 1000 > 0.04 * ((max(x[1] for ln in bars for x in ln) - t_min) / 1000):
                ax.text((t0 - t_min + (t1 - t0) / 2) / 1000, y, f"{label} f{f}\n{(t1 - t0) / 1000:.2f} ms",
                        ha="center", va="center", fontsize=6)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(title or "simulated steady-state schedule")
    fig.tight_layout()
    from dse.report.plots import save_figure

    return save_figure(fig, out)
