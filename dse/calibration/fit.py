"""Fit cost-model parameters to the *fit* half of the published anchors; the held-out half stays validation.

Hand-fitting against every anchor hides over-fitting, so ``dse calibrate --fit`` moves a few physical parameters
of a platform profile (peak rates, per-inference overheads, reformat bandwidth, ...) by bounded multipliers to
minimize the squared log error of the fit-split anchors only, then reports fit and held-out errors before and
after. The virtual board is seeded, so the objective is deterministic; Powell's method (scipy) needs no gradient.
The result is a list of Hydra overrides (``platform.cost.gpu.peak_gmacs.fp16=...``): a reviewer copies them into
the profile, or passes them to ``dse calibrate --set`` / a pipeline run to try them first. A parameter may tie
several paths that stand for one physical value (``a.busy_w+b.busy_w``): they move by the same multiplier.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from dse.core.errors import DseError
from dse.report.tables import markdown_table

# Parameters that the throughput anchors inform, each a separate physical rate or overhead.
DEFAULT_PARAMETERS = (
    "cost.gpu.peak_gmacs.int8",     # Y4 INT8 GPU-only inference, Base(G) rows
    "cost.gpu.peak_gmacs.fp16",     # FP16 baselines and option E
    "cost.gpu.per_inference_us",    # enqueue + sync per stage execution (tiny networks, many stages)
    "cost.dla.peak_gmacs.int8",     # DLA stage time, DLA/GPU multiples
    "cost.dla.peak_gmacs.fp16",
    "cost.dla.per_inference_us",    # per loadable
    "cost.reformat.bandwidth_gbs",  # GPU-side copies at DLA boundaries
    "cost.handover_us",             # Fig. 3.12's communication overhead
)
BOUNDS = (0.5, 2.0)                 # multipliers of the profile's value a fit may reach


@dataclass
class FitResult:
    parameters: list[str]
    start: list[float]
    fitted: list[float]
    loss_start: float
    loss_fitted: float
    evaluations: int
    before: list = field(default_factory=list)   # anchors with the profile's values
    after: list = field(default_factory=list)    # anchors with the fitted values
    path_starts: dict = field(default_factory=dict)   # parameter -> the profile's value of each tied path

    def values(self) -> list[tuple[str, float]]:
        """(path, fitted value) of every path; a tied path keeps its own value times the parameter's multiplier."""
        return [(path, start * f / s) for p, s, f in zip(self.parameters, self.start, self.fitted)
                for path, start in zip(tied_paths(p), self.path_starts[p])]

    def apply(self, profile: dict) -> None:
        for path, value in self.values():
            set_path(profile, path, value)

    def overrides(self) -> list[str]:
        return [f"platform.{path}={_round(v)}" for path, v in self.values()]


def _round(v: float) -> float:
    return float(f"{v:.4g}")


def tied_paths(parameter: str) -> list[str]:
    """The profile paths a fit parameter moves together (``a.b+c.d`` -> [a.b, c.d])."""
    return [p.strip() for p in parameter.split("+")]


def get_path(d: dict, path: str):
    node = d
    for i, key in enumerate(path.split(".")):
        if not isinstance(node, dict) or key not in node:
            where = ".".join(path.split(".")[:i]) or "the profile"
            choices = sorted(node) if isinstance(node, dict) else []
            raise DseError(f"fit parameter {path!r}: no key {key!r} in {where}"
                           + (f" (valid: {', '.join(map(str, choices))})" if choices else ""))
        node = node[key]
    if isinstance(node, bool) or not isinstance(node, (int, float)) or node <= 0:
        raise DseError(f"fit parameter {path!r} is {node!r}: only positive numbers can be fitted")
    return float(node)


def set_path(d: dict, path: str, value: float) -> None:
    *head, last = path.split(".")
    node = d
    for key in head:
        node = node[key]
    node[last] = value


def anchor_loss(rows) -> float:
    """Mean squared log error of the fit-split throughput anchors, plus the squared log distance of each fit-split
    ranking anchor to its allowed interval (zero inside it: a ranking anchor asks which option wins, not by how
    much exactly)."""
    terms = []
    for a in rows:
        if a.split != "fit":
            continue
        if a.kind == "throughput":
            if a.published > 0 and a.simulated > 0:
                terms.append(math.log(a.simulated / a.published) ** 2)
            else:
                terms.append(4.0)
        else:
            v = max(a.simulated, 1e-9)
            gap = (math.log(a.lo / v) if a.lo > 0 and v < a.lo else 0.0) + (math.log(v / a.hi) if v > a.hi else 0.0)
            terms.append(gap ** 2)
    if not terms:
        raise DseError("no fit-split anchors to fit: the anchor set is empty")
    return float(np.mean(terms))


def fit(profile: dict, evaluate: Callable[[dict], list], parameters: Sequence[str] = DEFAULT_PARAMETERS,
        bounds: tuple[float, float] = BOUNDS, max_evaluations: int = 200,
        progress: Callable[[int, float], None] | None = None) -> FitResult:
    """Minimize ``anchor_loss(evaluate(profile'))`` over log-multipliers of ``parameters`` within ``bounds``.

    ``evaluate`` maps a platform profile (a plain dict) to its anchors; it is called once per point."""
    from scipy.optimize import minimize

    if not parameters:
        raise DseError("no parameters to fit")
    if max_evaluations < 1:
        raise DseError(f"fit evaluations {max_evaluations}: need at least 1")
    lo, hi = bounds
    if not 0 < lo <= 1 <= hi:
        raise DseError(f"fit bounds {bounds}: need 0 < low <= 1 <= high (multipliers of the profile's values)")
    path_starts = {p: [get_path(profile, path) for path in tied_paths(p)] for p in parameters}
    start = [path_starts[p][0] for p in parameters]
    seen: dict[tuple, tuple[float, list]] = {}

    def run(x) -> tuple[float, list]:
        key = tuple(np.round(np.asarray(x, dtype=float), 6))
        if key not in seen:
            d = copy.deepcopy(profile)
            for p, xi in zip(parameters, key):
                for path, v0 in zip(tied_paths(p), path_starts[p]):
                    set_path(d, path, v0 * math.exp(xi))
            rows = evaluate(d)
            seen[key] = (anchor_loss(rows), rows)
            if progress:
                progress(len(seen), min(v[0] for v in seen.values()))
        return seen[key]

    x0 = np.zeros(len(parameters))
    loss0, before = run(x0)
    if max_evaluations > 1:
        minimize(lambda x: run(x)[0], x0, method="Powell", bounds=[(math.log(lo), math.log(hi))] * len(parameters),
                 options={"maxfev": max_evaluations - 1, "xtol": 1e-3, "ftol": 1e-4})
    x_best = min(seen, key=lambda k: seen[k][0])      # Powell's last point need not be its best one
    loss1, after = seen[x_best]
    fitted = [v0 * math.exp(xi) for v0, xi in zip(start, x_best)]
    return FitResult(list(parameters), start, fitted, loss0, loss1, len(seen), before, after, path_starts)


def fit_table(result: FitResult) -> str:
    rows = []
    for p, a, b in zip(result.parameters, result.start, result.fitted):
        first, *tied = tied_paths(p)
        name = first + (f" (+ {len(tied)} tied: {', '.join(tied)})" if tied else "")
        rows.append({"parameter": name, "profile": _round(a), "fitted": _round(b),
                     "change": f"{(b / a - 1) * 100:+.1f} %"})
    lines = markdown_table(rows, ("parameter", "profile", "fitted", "change"),
                           right=("profile", "fitted", "change")).splitlines()
    lines += ["", f"fit loss (mean squared log error of the fit half) {result.loss_start:.5f} -> "
                  f"{result.loss_fitted:.5f} in {result.evaluations} evaluations"]
    return "\n".join(lines)
