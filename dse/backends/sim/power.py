"""Board power from utilizations: static + busy CPU cores + per-PE dynamic power scaled by load and DVFS."""
from __future__ import annotations

from dse.platform import Platform


def freq_factor(platform: Platform, pe: str, freq_mhz: float | None) -> float:
    """(f / fmax): 1.0 at the platform's highest frequency (MAXN) or when no table is declared."""
    p = platform.pes.get(pe)
    if p is None or not p.freq_mhz or not freq_mhz:
        return 1.0
    return float(freq_mhz) / p.max_freq_mhz


def board_power_w(platform: Platform, load: dict[str, float], cpu_busy_cores: float,
                  freqs: dict[str, float | None] | None = None, cpu_freq_mhz: float | None = None) -> float:
    """``load``: PE -> fraction of full dynamic power (GPU: occupancy-weighted busy time; DLA: busy fraction)."""
    pm = platform.power
    freqs = freqs or {}
    watts = pm.static_w
    cpu_f = (cpu_freq_mhz / max(platform.cpu_freq_mhz)) if (cpu_freq_mhz and platform.cpu_freq_mhz) else 1.0
    watts += pm.cpu_core_w * cpu_busy_cores * cpu_f ** pm.freq_exponent
    for pe, dyn in pm.pe_dynamic_w.items():
        f = freq_factor(platform, pe, freqs.get(pe))
        watts += dyn * max(0.0, min(1.0, load.get(pe, 0.0))) * f ** pm.freq_exponent
    return watts
