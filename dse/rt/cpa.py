"""Compositional response-time analysis of pipelined DNN apps (thesis Ch. 4, eqs. 4.1 and 4.2).

- CPU stage: one preemptive fixed-priority task (a CPU stage with several tasks is analysed as one task
  with their summed times); eq. 4.1, hp = tasks of OTHER apps on the same core with priority number <= ours.
- GPU/DLA stage: eq. 4.2, FIFO and non-preemptive at kernel level: r(s) = C_s + sum_{s_e in ep(s)} B_{s,s_e}.
- Jitter (standard CPA): J(first stage) = 0, J(stage k) = sum_{j<k} (r_j - BCET_j), global fixed point.
- A DAG group (Ch. 5, eqs. 5.3/5.4): J of a stage = the maximum over its predecessors of J + r - BCET, the WCRT
  = the longest source-to-sink path of r (l. 1757-1759). Stages of one group ordered by precedence never
  interfere; parallel branches of one group do (spec 3.6 #5). On a chain both rules reduce to Ch. 4's.

The Step-2 GA calls the analysis ~66 times per scenario and chromosome with only the frequency scales
changing, so `CpaProblem` precomputes everything that does not depend on them: all tasks of one PE kind
scale alike, hence B_{s,s_e}(scale) = scale * B_{s,s_e}(1) and a GPU/DLA stage's r is one multiplication.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from dse.core.errors import DseError
from dse.rt.model import KINDS, App, CpaResult, Placement, Stage, kind_of

_EPS = 1e-9


def _n_interfering(s_tasks_n: int, m: int, period_s_us: float, period_e_us: float) -> int:
    """Eq. 4.2's kernel count: one kernel of s_e per kernel of s (FIFO), at most (ceil(P_s/P_e)+1) jobs of s_e.
    The epsilon keeps a float ratio such as 2.0000000001 from counting one job more."""
    jobs = math.ceil(period_s_us / period_e_us - _EPS) + 1
    return min(int(s_tasks_n), jobs * m)


def _window_blocking(n_int: int, w: np.ndarray, prefix2: np.ndarray) -> float:
    """Largest sum of n_int consecutive entries of the job-periodic kernel sequence w, w, w, ...:
    whole jobs plus the best circular window of the remainder (prefix2 = prefix sums of w doubled)."""
    m = len(w)
    full, rem = divmod(n_int, m)
    best_rem = float(np.max(prefix2[rem:rem + m] - prefix2[:m])) if rem else 0.0
    return full * float(prefix2[m]) + best_rem


def _prefix2(w: np.ndarray) -> np.ndarray:
    return np.concatenate(([0.0], np.cumsum(np.concatenate((w, w)))))


def fifo_blocking(s_tasks_n: int, other: Stage, period_s_us: float, period_e_us: float,
                  scale_e: float = 1.0) -> float:
    """B_{s,s_e} of eq. 4.2: the most that stage `other` (s_e) can delay a stage of `s_tasks_n` kernels on the
    same FIFO PE, in us. The window of consecutive kernels wraps across s_e's job boundaries."""
    if s_tasks_n < 0:
        raise DseError(f"stage kernel count must be >= 0, got {s_tasks_n}")
    if period_s_us <= 0 or period_e_us <= 0:
        raise DseError(f"periods must be > 0 us, got {period_s_us} and {period_e_us}")
    w = np.array([t.wcet_us for t in other.tasks], dtype=float)
    n_int = _n_interfering(s_tasks_n, len(w), period_s_us, period_e_us)
    return scale_e * _window_blocking(n_int, w, _prefix2(w))


class CpaProblem:
    """One (apps, placement) pair, prepared once and re-analysed for many per-kind time scales (fmax/f).

    The placement may hold stages of apps not in `apps` (one static placement serves every scenario)."""

    def __init__(self, apps: Sequence[App], placement: Placement):
        self.apps = tuple(apps)
        names = [a.name for a in self.apps]
        if len(set(names)) != len(names):
            raise DseError(f"app names must be unique within a scenario, got {names}")
        # flat stage list; per app the slice of its stages
        self.keys: list[tuple[str, int]] = []
        self.kinds: list[str] = []
        self.pes: list[str] = []
        self.app_of: list[int] = []
        self.spans: list[range] = []
        for ai, app in enumerate(self.apps):
            start = len(self.keys)
            for si, st in enumerate(app.stages):
                pe = placement.get((app.name, si))
                if pe is None:
                    raise DseError(f"app {app.name} stage {si} ({st.label or st.kind}) has no PE in the placement")
                kind = kind_of(pe)
                if kind != st.kind:
                    raise DseError(f"app {app.name} stage {si} ({st.label or st.kind}) is a {st.kind} stage "
                                   f"but is placed on {pe} ({kind})")
                self.keys.append((app.name, si))
                self.kinds.append(kind)
                self.pes.append(pe)
                self.app_of.append(ai)
            self.spans.append(range(start, len(self.keys)))
        n = len(self.keys)
        # precedence in flat indices: predecessors, and the same-app stages that never run concurrently
        self.preds: list[tuple[int, ...]] = []
        self.related: list[set[int]] = []
        for app, span in zip(self.apps, self.spans):
            self.preds += [tuple(span.start + p for p in ps) for ps in app.preds]
            self.related += [{span.start + j for j in rel} for rel in app.related()]
        self.sinks = [[i for i in span if not any(i in self.preds[j] for j in span)] for span in self.spans]
        stages = [self.apps[self.app_of[i]].stages[self.keys[i][1]] for i in range(n)]
        self.period = [self.apps[self.app_of[i]].period_us for i in range(n)]
        self.wcet = [st.wcet_us for st in stages]
        self.bcet = [st.bcet_us for st in stages]
        # GPU/DLA: r at scale 1 (eq. 4.2); B pairs use the interferer's prefix sums, built once per stage
        self.base_r = list(self.wcet)
        arrays = {}
        for i in range(n):
            if self.kinds[i] == "cpu":
                continue
            for e in range(n):
                if self.pes[e] != self.pes[i] or e == i or self._ordered(i, e):
                    continue
                if e not in arrays:
                    w = np.array([t.wcet_us for t in stages[e].tasks], dtype=float)
                    arrays[e] = (w, _prefix2(w))
                w, p2 = arrays[e]
                n_int = _n_interfering(len(stages[i].tasks), len(w), self.period[i], self.period[e])
                self.base_r[i] += _window_blocking(n_int, w, p2)
        # CPU: hp sets of eq. 4.1 (same core, priority number <= ours, not ordered with us by precedence)
        self.cpu = [i for i in range(n) if self.kinds[i] == "cpu"]
        self.hp = {i: [h for h in self.cpu if self.pes[h] == self.pes[i] and h != i and not self._ordered(i, h)
                       and self.apps[self.app_of[h]].priority <= self.apps[self.app_of[i]].priority]
                   for i in self.cpu}
        # does anyone's r depend on jitter at all? (only through hp tasks with a predecessor)
        self._jitter_matters = any(self.preds[h] for hs in self.hp.values() for h in hs)

    def _ordered(self, i: int, e: int) -> bool:
        """Same app and ordered by precedence: the two never run at the same time."""
        return self.app_of[i] == self.app_of[e] and e in self.related[i]

    def _path(self, ai: int, r: list[float]) -> float:
        """Longest source-to-sink path of r through app ``ai`` (its end-to-end WCRT)."""
        end = {}
        for i in self.spans[ai]:
            end[i] = r[i] + max((end[p] for p in self.preds[i]), default=0.0)
        return max(end[i] for i in self.sinks[ai])

    def _scales(self, scale: Mapping[str, float] | None) -> dict[str, float]:
        sc = {k: 1.0 for k in KINDS}
        if scale:
            for k, v in scale.items():
                if k not in sc:
                    raise DseError(f"unknown scale kind {k!r}; valid: {list(KINDS)}")
                if not v > 0:
                    raise DseError(f"scale[{k!r}] must be > 0, got {v}")
                sc[k] = float(v)
        return sc

    def _rta(self, i: int, c: float, J: list[float], wc: list[float]) -> float:
        """Eq. 4.1 fixed point for CPU task i; inf once r exceeds the app period (divergence)."""
        hp = self.hp[i]
        limit = self.period[i]
        if c > limit:
            return math.inf
        if not hp:
            return c
        r = c
        while True:
            nr = c + sum(math.ceil((r + J[h]) / self.period[h] - _EPS) * wc[h] for h in hp)
            if nr > limit:
                return math.inf
            if nr <= r + _EPS:
                return nr
            r = nr

    def _solve(self, scale, max_iter: int):
        """Core of the analysis: (ok, r, J, reason). Stops early once an app misses: r only grows with J."""
        sc = self._scales(scale)
        n = len(self.keys)
        wc = [self.wcet[i] * sc[self.kinds[i]] for i in range(n)]
        bc = [self.bcet[i] * sc[self.kinds[i]] for i in range(n)]
        r = [self.base_r[i] * sc[self.kinds[i]] for i in range(n)]
        J = [0.0] * n
        for _ in range(max_iter):
            for i in self.cpu:
                r[i] = self._rta(i, wc[i], J, wc)
            newJ = [0.0] * n
            for ai, span in enumerate(self.spans):
                for i in span:
                    newJ[i] = max((newJ[p] + r[p] - bc[p] for p in self.preds[i]), default=0.0)
                total = self._path(ai, r)
                if total > self.apps[ai].period_us:
                    return False, r, newJ, self._miss(ai, r, total)
            converged = all(abs(a - b) <= _EPS * (1.0 + abs(a)) for a, b in zip(newJ, J))
            J = newJ
            if converged or not self._jitter_matters:
                return True, r, J, ""
        return False, r, J, f"jitter fixed point did not converge in {max_iter} iterations"

    def _miss(self, ai: int, r: list[float], total: float) -> str:
        app = self.apps[ai]
        if math.isinf(total):
            i = next(i for i in self.spans[ai] if math.isinf(r[i]))
            return (f"app {app.name}: CPU stage {self.keys[i][1]} on {self.pes[i]} needs more than the period "
                    f"{app.period_us:.1f} us (eq. 4.1 diverges)")
        return (f"app {app.name}: WCRT {total:.1f} us > period {app.period_us:.1f} us "
                f"(misses by {total - app.period_us:.1f} us)")

    def schedulable(self, scale: Mapping[str, float] | None = None, *, max_iter: int = 50) -> bool:
        """Fast yes/no for frequency searches (no result dicts built)."""
        return self._solve(scale, max_iter)[0]

    def analyse(self, scale: Mapping[str, float] | None = None, *, max_iter: int = 50) -> CpaResult:
        """Full result. When unschedulable, the values are those at the point the miss was detected."""
        ok, r, J, reason = self._solve(scale, max_iter)
        wcrt = {app.name: float(self._path(ai, r)) for ai, app in enumerate(self.apps)}
        return CpaResult(schedulable=ok, wcrt_us=wcrt, stage_r_us=dict(zip(self.keys, map(float, r))),
                         jitter_us=dict(zip(self.keys, map(float, J))), reason=reason)


def analyse(apps: Sequence[App], placement: Placement, scale: Mapping[str, float] | None = None, *,
            max_iter: int = 50) -> CpaResult:
    """One-shot analysis; build a `CpaProblem` yourself to re-analyse one placement for many scale vectors."""
    return CpaProblem(apps, placement).analyse(scale, max_iter=max_iter)


def max_fps(apps: Sequence[App], placement: Placement, scale: Mapping[str, float] | None = None,
            lo: float = 1, hi: float = 1000) -> float:
    """Highest common FPS on the 0.1-FPS grid in [lo, hi] at which every app (period 1e6/fps) is schedulable;
    0 if none. Bisection is exact on that grid: with equal periods n_int does not depend on the period and
    every response time is non-decreasing in the load, so schedulability is monotone in the period."""
    if not 0 < lo <= hi:
        raise DseError(f"max_fps needs 0 < lo <= hi, got lo={lo}, hi={hi}")

    def ok(k: int) -> bool:
        period = 1e6 / (k / 10)
        return CpaProblem([replace(a, period_us=period) for a in apps], placement).schedulable(scale)

    k_lo, k_hi = math.ceil(lo * 10 - _EPS), math.floor(hi * 10 + _EPS)
    if k_lo > k_hi or not ok(k_lo):
        return 0.0
    if ok(k_hi):
        return k_hi / 10
    while k_hi - k_lo > 1:      # invariant: ok(k_lo), not ok(k_hi)
        mid = (k_lo + k_hi) // 2
        k_lo, k_hi = (mid, k_hi) if ok(mid) else (k_lo, mid)
    return k_lo / 10
