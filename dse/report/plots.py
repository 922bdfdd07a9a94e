"""Plots of a run: FPS per mapping option (thesis Fig. 3.8), the search trajectory, the clock phase's front."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def fps_per_option(frame: pd.DataFrame, out: str | Path) -> Path:
    """Best FPS each mapping option reached (any phase), relative to the lowest, like Fig. 3.8."""
    ok = frame[frame["status"] == "ok"]
    best = ok.groupby("option")["fps"].max().sort_values()
    fig, ax = plt.subplots(figsize=(6, 3.2))
    bars = ax.bar(best.index, best.values, color=["#4C72B0" if o != best.idxmax() else "#DD8452" for o in best.index])
    low = best.min() if len(best) else 1.0
    for bar, v in zip(bars, best.values):
        ax.text(bar.get_x() + bar.get_width() / 2, v, f"{v:.0f}\n({v / low:.2f}x)", ha="center", va="bottom", fontsize=7)
    ax.set_ylabel("best FPS")
    ax.set_title("FPS per mapping option")
    ax.margins(y=0.25)
    fig.tight_layout()
    return save_figure(fig, out)


def trajectory(frame: pd.DataFrame, out: str | Path) -> Path:
    """FPS of every measurement in order, and the best so far, coloured by phase."""
    frame = frame.sort_values("timestamp").reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for phase, sub in frame.groupby("phase", sort=False):
        ax.scatter(sub.index, sub["fps"], s=6, label=phase)
    ax.plot(frame.index, frame["fps"].cummax(), color="black", lw=1, label="best so far")
    ax.set_xlabel("measurement #")
    ax.set_ylabel("FPS")
    ax.set_title("Search trajectory")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    return save_figure(fig, out)


def energy_front(points: pd.DataFrame, chosen: dict | None, reference: dict | None, min_fps: float,
                 out: str | Path) -> Path:
    """FPS vs J/frame of every configuration the clock phase measured, per power mode, with the front, the answer
    and the FPS-optimal configuration at full clocks (both re-measured means)."""
    ok = points[points["status"] == "ok"]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for mode, sub in ok.groupby("power_mode", sort=False):
        ax.scatter(sub["fps"], sub["energy_j_per_frame"], s=8, alpha=0.35, label=mode)
    front = ok[ok["on_front"]].sort_values("fps")
    ax.plot(front["fps"], front["energy_j_per_frame"], color="black", lw=1.2, marker=".", label="front")
    for what, d, marker in (("FPS-optimal, full clocks", reference, "s"), ("answer", chosen, "*")):
        if d:
            ax.scatter([d["fps"]], [d["energy_j_per_frame"]], marker=marker, s=90, edgecolors="black", zorder=5,
                       label=f"{what} ({d['fps']:.0f} FPS, {d['energy_j_per_frame']:.3f} J)")
    if min_fps > 0:
        ax.axvline(min_fps, color="grey", ls="--", lw=1, label=f"min_fps {min_fps:g}")
    ax.set_xlabel("FPS")
    ax.set_ylabel("energy (J/frame)")
    ax.set_title("Mappings x power modes x clocks")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, out)


def relative_responses(frame: pd.DataFrame, apps: list[str], out: str | Path) -> Path:
    """Seed 002 Fig. 11: the Pareto set's relative response times, the first two apps on the axes and the third's
    (where there is one) as the grey level: darker, smaller."""
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    x, y = frame[f"{apps[0]}_relative"], frame[f"{apps[1]}_relative"] if len(apps) > 1 else frame["power_w"]
    if len(apps) > 2:
        sc = ax.scatter(x, y, c=frame[f"{apps[2]}_relative"], cmap="gray", s=14, edgecolors="k", linewidths=0.3)
        fig.colorbar(sc, ax=ax, label=f"{apps[2]} relative response")
    else:
        ax.scatter(x, y, s=14)
    ax.set_xlabel(f"{apps[0]} relative response")
    ax.set_ylabel(f"{apps[1]} relative response" if len(apps) > 1 else "energy (W)")
    ax.set_title(f"Pareto set: {len(frame)} solutions")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, out)


def energy_over_pairs(frame: pd.DataFrame, apps: list[str], out: str | Path) -> Path:
    """Seed 002 Fig. 12 (a)-(c): the energy (colour, darker is less) over the relative response times of each pair
    of apps."""
    pairs = [(a, b) for i, a in enumerate(apps) for b in apps[i + 1:]] or [(apps[0], apps[0])]
    fig, axes = plt.subplots(1, len(pairs), figsize=(4.2 * len(pairs), 3.8), squeeze=False)
    for ax, (a, b) in zip(axes[0], pairs):
        sc = ax.scatter(frame[f"{a}_relative"], frame[f"{b}_relative"], c=frame["power_w"], cmap="gray", s=14,
                        edgecolors="k", linewidths=0.3)
        ax.set_xlabel(f"{a} relative response")
        ax.set_ylabel(f"{b} relative response")
        ax.grid(alpha=0.3)
    fig.colorbar(sc, ax=list(axes[0]), label="energy (W)")
    return save_figure(fig, out)


def save_figure(fig, out) -> Path:
    """Write a figure atomically (temp file + rename) to a file path (a directory is refused)."""
    from dse.core.errors import DseError

    out = Path(out)
    if out.is_dir():
        plt.close(fig)
        raise DseError(f"{out} is a directory: give a file path to write to")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix}")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(out)
    return out
