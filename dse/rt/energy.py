"""Energy model of thesis Ch. 4 (Sec. 4.4.2.3): per-processor static power as a function of its frequency,
plus per-frame dynamic energy measured at fmax and moved to other frequencies by a per-(network, processor)
regression. The thesis gives no regression form: quadratic for the static part, power law k*f^alpha for the
dynamic part (spec 2.6 item 11). Energy is reported per second (watts), which ranks like "energy per
period" when periods are equal and still works for distinct periods (spec 2.6 item 10).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from dse.core.errors import DseError


def _xy(freqs_mhz, watts, need: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    f = np.asarray(freqs_mhz, dtype=float)
    w = np.asarray(watts, dtype=float)
    if f.shape != w.shape or f.ndim != 1:
        raise DseError(f"{what}: frequencies and watts must be 1-D and of equal length, got {f.shape} and {w.shape}")
    if len(np.unique(f)) < need:
        raise DseError(f"{what}: needs at least {need} distinct frequencies, got {len(np.unique(f))}")
    if np.any(f <= 0):
        raise DseError(f"{what}: frequencies must be > 0 MHz, got {f.min()}")
    return f, w


def fit_static(freqs_mhz: Sequence[float], watts: Sequence[float]) -> np.ndarray:
    """Idle power vs frequency (measured with min = max clock, no app): quadratic, highest power first."""
    f, w = _xy(freqs_mhz, watts, 3, "fit_static")
    return np.polyfit(f, w, 2)


def fit_dynamic(freqs_mhz: Sequence[float], watts: Sequence[float]) -> tuple[float, float]:
    """Dynamic power vs frequency, P = k * f^alpha, by a line fit in log-log space. Measured-minus-static power
    can come out <= 0 when the app barely loads the processor; the log fit cannot use such points, so they
    are refused (re-measure or drop them) rather than silently clipped."""
    f, w = _xy(freqs_mhz, watts, 2, "fit_dynamic")
    bad = np.flatnonzero(w <= 0)
    if len(bad):
        pts = ", ".join(f"{f[i]:g} MHz: {w[i]:g} W" for i in bad[:5])
        raise DseError(f"fit_dynamic: dynamic power must be > 0 W for the power-law fit; non-positive at {pts} "
                       "(static power larger than the measured total? drop or re-measure these points)")
    alpha, logk = np.polyfit(np.log(f), np.log(w), 1)
    return float(np.exp(logk)), float(alpha)


@dataclass
class PowerFit:
    """Calibrated power model: static quadratic per kind, dynamic (k, alpha) per (network, kind), fmax per kind."""

    static: dict[str, tuple[float, ...]] = field(default_factory=dict)
    dynamic: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    fmax_mhz: dict[str, float] = field(default_factory=dict)

    def fmax(self, kind: str) -> float:
        if kind not in self.fmax_mhz:
            raise DseError(f"PowerFit has no fmax for kind {kind!r}; known: {sorted(self.fmax_mhz)}")
        return self.fmax_mhz[kind]

    def static_w(self, kind: str, f_mhz: float) -> float:
        """Static (idle) power of processor kind at f."""
        if kind not in self.static:
            raise DseError(f"PowerFit has no static fit for kind {kind!r}; known: {sorted(self.static)}")
        return float(np.polyval(self.static[kind], f_mhz))

    def dyn_scale(self, network: str, kind: str, f_mhz: float) -> float:
        """s_{n,kind}(f) = g(f) / g(fmax) = (f / fmax)^alpha: dynamic power at f relative to fmax."""
        if (network, kind) not in self.dynamic:
            raise DseError(f"PowerFit has no dynamic fit for network {network!r} on {kind!r}; "
                           f"known: {sorted(self.dynamic)}")
        if f_mhz <= 0:
            raise DseError(f"frequency must be > 0 MHz, got {f_mhz}")
        return float((f_mhz / self.fmax(kind)) ** self.dynamic[network, kind][1])

    def to_dict(self) -> dict:
        """JSON-able form: {"static": {kind: [a, b, c]}, "dynamic": {network: {kind: [k, alpha]}}, "fmax_mhz"}."""
        dyn: dict[str, dict[str, list[float]]] = {}
        for (net, kind), (k, a) in sorted(self.dynamic.items()):
            dyn.setdefault(net, {})[kind] = [float(k), float(a)]
        return {"static": {k: [float(c) for c in v] for k, v in sorted(self.static.items())},
                "dynamic": dyn, "fmax_mhz": {k: float(v) for k, v in sorted(self.fmax_mhz.items())}}

    @classmethod
    def from_dict(cls, d: Mapping) -> PowerFit:
        try:
            return cls(static={k: tuple(float(c) for c in v) for k, v in d["static"].items()},
                       dynamic={(net, kind): (float(ka[0]), float(ka[1]))
                                for net, kinds in d["dynamic"].items() for kind, ka in kinds.items()},
                       fmax_mhz={k: float(v) for k, v in d["fmax_mhz"].items()})
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            raise DseError(f"bad PowerFit dict ({exc!r}); expected keys static, dynamic, fmax_mhz") from exc


@dataclass
class AppEnergy:
    """What the energy model needs of one app under its mapping: dynamic energy per frame per kind at fmax."""

    name: str
    network: str
    period_us: float
    e_dyn_j: dict[str, float] = field(default_factory=dict)


def scenario_watts(fit: PowerFit, apps: Sequence[AppEnergy], freqs_mhz: Mapping[str, float]) -> float:
    """Processors' average power in a scenario at the given frequencies:
    sum_kind P_stat(f) + sum_apps (frames/s) * sum_kind e_dyn * s_{n,kind}(f) * fmax/f.
    The dynamic power scales by s(f) and the busy time by fmax/f (ACET proportional to 1/f)."""
    watts = sum(fit.static_w(kind, f) for kind, f in freqs_mhz.items())
    for app in apps:
        rate = 1e6 / app.period_us
        for kind, e in app.e_dyn_j.items():
            if kind not in freqs_mhz:
                raise DseError(f"app {app.name} has dynamic energy on {kind!r} but no frequency is given for it; "
                               f"given: {sorted(freqs_mhz)}")
            f = freqs_mhz[kind]
            watts += rate * e * fit.dyn_scale(app.network, kind, f) * fit.fmax(kind) / f
    return float(watts)
