"""Ranking near-equal configurations on fresh re-runs, with more re-runs only where the ranking is still in doubt.

The guided search answers the best of its fine-tuner's starts and tuned configurations on fresh re-runs,
``guided_repeats`` (3) of them each. At 3 % noise per run, three re-runs put the standard error of the difference
of two means at 2.4 %, so the pick among configurations 1-4 % apart is often wrong: in 8 of 36 guided searches on
the virtual Xavier at 3 % noise, a configuration the final ranking re-ran was at least 1 % faster (true FPS) than
the answer. The ranking therefore runs as a race: after each batch of ``repeats`` re-runs, two
configurations whose means lie within ``RACE_Z`` standard errors of their difference, and whose order changes what
the means decide (the leader; for the guided search's contenders, its two finalists), get another batch; a pair
further apart, or one whose order changes nothing (two near-equal tuples that both go on), is settled. It stops
when every pair is settled, when ``RACE_Z`` standard errors are below the resolution (``RACE_RESOLUTION``; at 1 %
noise three re-runs already are: no extra batch), after ``RACE_ROUNDS`` batches, or when the search's re-runs
would cost more board time than its measurements (``dse.search.board_time.RerunBudget``, ``guided_rerun_share``;
on a host's CPU cores a re-run costs what a measurement does, on a Jetson a fraction of one).

A batch runs round-robin, one run of each configuration in a round before the next round, and the race compares
configurations within rounds: log FPS = configuration + round + noise (a two-way model, fitted by least squares),
so what a round's runs share cancels. On a real host much of the noise can be shared: on a host shared with other
tenants, all four configurations of a round ran about 25 % faster together, and two configurations' difference
within a round spread 4.5-10.8 % where two runs apart spread 13.8-16.5 % (in another stretch on that host none was
shared). The noise left within rounds is estimated from the model's residuals; the race takes its upper
``PAIRED_CONFIDENCE`` bound where that is below the noise assumed for one run (which bounds it: a run's noise is the
shared part and this one). On a virtual board each run's noise is its own, the two agree and the race runs as it
would on unpaired means. The means ranked on are the model's: in a race where every configuration ran every round,
the geometric mean of its runs.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Sequence

import numpy as np

from dse.core.configuration import Configuration
from dse.search.board_time import RerunBudget
from dse.search.study import Study

RACE_Z = 2.0              # two configurations this many standard errors of their difference apart are settled
RACE_RESOLUTION = 0.02    # ... and the race stops once RACE_Z standard errors are below this (relative FPS)
RACE_ROUNDS = 4           # at most this many batches of re-runs per configuration
PAIRED_CONFIDENCE = 0.9   # the within-round noise taken: this upper confidence bound of its estimate
TIE = 1e-9                # means this close (relative) are equal: the fit's rounding, not the board


class _Runs:
    """The race's re-runs so far: each configuration's FPS and the round each ran in."""

    def __init__(self, n: int):
        self.runs: list[list[float]] = [[] for _ in range(n)]
        self.rounds: list[list[int]] = [[] for _ in range(n)]
        self.next_round = 0

    def fit(self) -> tuple[np.ndarray, np.ndarray, float, int]:
        """(log means, pseudo-inverse of the normal matrix over the configurations, residual variance, its degrees
        of freedom) of log FPS = configuration + round + noise over every run so far."""
        k, ids = len(self.runs), sorted({r for rs in self.rounds for r in rs})
        col = {r: k + c for c, r in enumerate(ids)}
        rows = [(i, col[r], x) for i, (xs, rs) in enumerate(zip(self.runs, self.rounds)) for x, r in zip(xs, rs)]
        top = max((x for _, _, x in rows), default=1.0)
        design = np.zeros((len(rows), k + len(ids)))
        y = np.empty(len(rows))
        for n, (i, c, x) in enumerate(rows):
            design[n, i] = design[n, c] = 1.0
            y[n] = math.log(max(x, 1e-6 * top, 1e-12))   # a failed run (0 FPS): far below, and noisy: no pairing
        inverse = np.linalg.pinv(design.T @ design)
        beta = inverse @ design.T @ y
        df = len(rows) - int(np.linalg.matrix_rank(design))
        resid = y - design @ beta
        var = float(resid @ resid / df) if df > 0 else math.inf
        log_means = beta[:k] + (beta[k:].mean() if ids else 0.0)
        log_means[[not r for r in self.runs]] = np.nan
        return log_means, inverse[:k, :k], var, df


def race(study: Study, configs: Sequence[Configuration], phase: str, repeats: int, noise: float,
         first: int = 1, resolution: float = RACE_RESOLUTION,
         pick: Callable[[list[float]], Collection[int]] | None = None,
         budget: RerunBudget | None = None) -> tuple[list[list[float]], list[float]]:
    """(each configuration's re-run FPS in repeat order, the means to rank on: the within-round comparison's means
    at the race's average round, nan where never run). The re-runs: consecutive repeat indices from ``first``, ``repeats`` per batch, run
    round-robin, at most ``RACE_ROUNDS`` batches) and the means to rank them on. ``noise``: the relative noise of
    one run; ``resolution``: the relative difference the race must resolve before it stops; ``pick``: what the means
    decide (the indices it takes from them; by default the leader). Two configurations whose means lie within
    ``RACE_Z`` standard errors of their difference, and where the order of the two changes the pick, get another
    batch, where ``budget`` allows it; the rest are settled."""
    so_far = _Runs(len(configs))
    _batch(study, configs, so_far, range(len(configs)), phase, repeats, first)
    fit = so_far.fit()
    if repeats < 1 or noise <= 0:
        return so_far.runs, list(np.exp(fit[0]))
    pick = pick or (lambda means: {max(range(len(means)), key=means.__getitem__)})
    for _ in range(1, RACE_ROUNDS):
        log_means, inverse, var, df = fit
        sigma = min(noise, paired_noise(var, df))
        means = list(np.exp(log_means))
        doubt: set[int] = set()
        for i, j in itertools.combinations(range(len(configs)), 2):
            d = RACE_Z * sigma * math.sqrt(max(inverse[i, i] + inverse[j, j] - 2 * inverse[i, j], 0.0))
            if d <= resolution or abs(log_means[i] - log_means[j]) > d:
                continue
            if _order_matters(pick, means, i, j):
                doubt.update((i, j))
        if not doubt or (budget is not None and not budget.allows([means[i] for i in doubt] * repeats)):
            break
        _batch(study, configs, so_far, sorted(doubt), phase, repeats, first)
        fit = so_far.fit()
    return so_far.runs, list(np.exp(fit[0]))


def paired_noise(var: float, df: int, confidence: float = PAIRED_CONFIDENCE) -> float:
    """The upper ``confidence`` bound of the within-round noise whose estimate is ``var`` on ``df`` degrees of
    freedom (infinite with none)."""
    if df < 1 or not math.isfinite(var):
        return math.inf
    from scipy.special import gammaincinv   # chi2.ppf(q, df) = 2 gammaincinv(df / 2, q), without scipy.stats

    return math.sqrt(var * df / (2 * gammaincinv(df / 2, 1 - confidence)))


def _batch(study: Study, configs: Sequence[Configuration], so_far: _Runs, which: Sequence[int], phase: str,
           repeats: int, first: int) -> None:
    """``repeats`` more rounds of re-runs of the configurations in ``which`` (into ``so_far``): one run of each
    before the next of any, so a drift of the board's speed during the batch (a shared host's other tenants, a
    Jetson warming up) falls on all of them alike instead of on whichever ran last (on a host shared with other
    tenants one configuration ran 81-109 FPS within a race), and the race compares them within rounds. Each
    configuration's repeat indices stay consecutive from ``first``, even after a batch it sat out."""
    for _ in range(repeats):
        for i in which:
            k = first + len(so_far.runs[i])
            so_far.runs[i].extend(study.remeasure(configs[i], phase, range(k, k + 1)))
            so_far.rounds[i].append(so_far.next_round)
        so_far.next_round += 1


def _order_matters(pick: Callable[[list[float]], Collection[int]], means: list[float], i: int, j: int) -> bool:
    """Whether ``pick`` takes other configurations with ``i`` just above ``j`` than with ``j`` just above ``i`` (both at
    their mid-point, so a tie is a pair in doubt too)."""
    mid = (means[i] + means[j]) / 2
    eps = 1e-9 * max(abs(mid), 1.0)
    ahead, behind = list(means), list(means)
    ahead[i], ahead[j] = mid + eps, mid - eps
    behind[i], behind[j] = mid - eps, mid + eps
    return set(pick(ahead)) != set(pick(behind))
