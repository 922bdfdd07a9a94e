"""Board power from utilizations: idle rails + busy CPU cores + per-PE dynamic power scaled by load and DVFS.

Rails are named like tegrastats reports them on a Xavier: ``VDD_GPU`` (GPU), ``VDD_CPU`` (CPU cores), ``VDD_CV``
(both DLAs), ``VDD_SOC_REST`` (memory, SOC, 5 V rest; frequency independent). The optional ``power.rails``
section gives each clocked rail an idle power that falls with its clock,
``P_idle(f) = idle_min + (idle_max - idle_min) * ((f - fmin) / (fmax - fmin))^gamma``, so DVFS saves static
power too (thesis Ch. 4's 22-31 % saving needs it). The idle terms at fmax must sum to ``power.static_w``:
every number at MAXN (the Ch. 3 calibration) stays what it was. Without the section all idle power sits on
``VDD_SOC_REST`` and does not depend on the clocks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from dse.backends.sim.tasktime import clock_mhz, freq_span
from dse.core.errors import DseError, choices_error
from dse.core.validate import check_keys
from dse.platform import Platform

RAILS = ("VDD_GPU", "VDD_CPU", "VDD_CV", "VDD_SOC_REST")
RAIL_CLOCK = {"VDD_GPU": "gpu", "VDD_CPU": "cpu", "VDD_CV": "dla", "VDD_SOC_REST": None}
RAIL_OF_TYPE = {"gpu": "VDD_GPU", "dla": "VDD_CV", "npu": "VDD_CV", "cpu": "VDD_CPU"}
RAIL_KEYS = ("idle_min_w", "idle_max_w", "gamma", "idle_w")


@dataclass(frozen=True)
class Rail:
    name: str
    idle_min_w: float
    idle_max_w: float
    gamma: float = 1.0

    def idle_w(self, platform: Platform, freqs: Mapping[str, float | None] | None) -> float:
        kind = RAIL_CLOCK[self.name]
        span = freq_span(platform, kind) if kind else None
        mhz = clock_mhz(freqs, kind) if kind else None
        if span is None or mhz is None or span[1] <= span[0] or mhz >= span[1]:
            return self.idle_max_w      # exactly: MAXN numbers must not move by a rounding
        x = min(1.0, max(0.0, (mhz - span[0]) / (span[1] - span[0])))
        return self.idle_min_w + (self.idle_max_w - self.idle_min_w) * x ** self.gamma


def rails_of(platform: Platform) -> dict[str, Rail]:
    """The platform's rails, checked: known names, 0 <= idle_min <= idle_max, idle_max summing to static_w."""
    pm = _model(platform)
    section = ((platform.raw or {}).get("power") or {}).get("rails") or {}
    if not section:
        return {r: Rail(r, 0.0, pm.static_w if r == "VDD_SOC_REST" else 0.0) for r in RAILS}
    rails = {}
    for name, d in section.items():
        where = f"platform {platform.name} power.rails.{name}"
        if name not in RAILS:
            raise choices_error(f"rail in platform {platform.name} power.rails", name, RAILS)
        check_keys(d or {}, RAIL_KEYS, f"key of {where}")
        hi = float(d.get("idle_max_w", d.get("idle_w", 0.0)))
        lo = float(d.get("idle_min_w", hi)) if RAIL_CLOCK[name] else hi
        gamma = float(d.get("gamma", 1.0))
        if not 0.0 <= lo <= hi or gamma <= 0:
            raise DseError(f"{where}: needs 0 <= idle_min_w <= idle_max_w and gamma > 0, got {dict(d)}")
        rails[name] = Rail(name, lo, hi, gamma)
    for name in RAILS:
        rails.setdefault(name, Rail(name, 0.0, 0.0))
    total = sum(r.idle_max_w for r in rails.values())
    if abs(total - pm.static_w) > 1e-9:
        raise DseError(f"platform {platform.name}: the idle_max_w of power.rails sum to {total:.6g} W but "
                       f"power.static_w is {pm.static_w} W; they must match (the MAXN calibration)")
    return rails


def idle_rails_w(platform: Platform, freqs: Mapping[str, float | None] | None = None) -> dict[str, float]:
    """Idle power per rail at the given clocks (kind or PE name -> MHz; missing = fmax)."""
    return {name: r.idle_w(platform, freqs) for name, r in rails_of(platform).items()}


def freq_factor(platform: Platform, pe: str, freq_mhz: float | None) -> float:
    """(f / fmax): 1.0 at the platform's highest frequency (MAXN) or when no table is declared."""
    p = platform.pes.get(pe)
    if p is None or not p.freq_mhz or not freq_mhz:
        return 1.0
    return float(freq_mhz) / p.max_freq_mhz


def _dynamic(platform: Platform, load: Mapping[str, float], cpu_busy_cores: float,
             freqs: Mapping[str, float | None]) -> list[tuple[str, float]]:
    """(rail, W) of the busy CPU cores, then of every PE's dynamic power, in the historical order."""
    pm = _model(platform)
    cpu_mhz = clock_mhz(freqs, "cpu")
    cpu_f = (cpu_mhz / max(platform.cpu_freq_mhz)) if (cpu_mhz and platform.cpu_freq_mhz) else 1.0
    out = [("VDD_CPU", pm.cpu_core_w * cpu_busy_cores * cpu_f ** pm.freq_exponent)]
    for pe, dyn in pm.pe_dynamic_w.items():
        spec = platform.pes.get(pe)
        mhz = freqs.get(pe) or (clock_mhz(freqs, spec.type) if spec is not None else None)
        f = freq_factor(platform, pe, mhz)
        rail = RAIL_OF_TYPE.get(spec.type if spec is not None else "", "VDD_SOC_REST")
        out.append((rail, dyn * max(0.0, min(1.0, load.get(pe, 0.0))) * f ** pm.exponent_of(pe)))
    return out


def rail_power_w(platform: Platform, load: Mapping[str, float], cpu_busy_cores: float,
                 freqs: Mapping[str, float | None] | None = None) -> dict[str, float]:
    """Power per rail: its idle term at the clocks plus the dynamic power of the PEs it feeds. ``load``: PE ->
    fraction of full dynamic power (GPU: occupancy-weighted busy time; DLA: busy fraction); ``freqs``: kind or
    PE name -> MHz (``{"GPU": 905.25, "DLA": 896, "CPU": 1497.6}``; missing or None = fmax)."""
    freqs = dict(freqs or {})
    watts = idle_rails_w(platform, freqs)
    for rail, w in _dynamic(platform, load, cpu_busy_cores, freqs):
        watts[rail] += w
    return watts


def board_power_w(platform: Platform, load: Mapping[str, float], cpu_busy_cores: float,
                  freqs: Mapping[str, float | None] | None = None, cpu_freq_mhz: float | None = None) -> float:
    """The sum of ``rail_power_w``. Summed as static_w + (idle(f) - idle(fmax)) + dynamic terms, so at MAXN it is
    bit-for-bit the number of the rail-less model the Ch. 3 calibration was fitted with."""
    freqs = dict(freqs or {})
    if cpu_freq_mhz:
        freqs["CPU"] = cpu_freq_mhz
    watts = _model(platform).static_w
    for r in rails_of(platform).values():
        watts += r.idle_w(platform, freqs) - r.idle_max_w
    for _, w in _dynamic(platform, load, cpu_busy_cores, freqs):
        watts += w
    return watts


def _model(platform: Platform):
    if platform.power is None:
        raise DseError(f"platform {platform.name} has no power section")
    return platform.power
