"""Execution time of one task (a GPU kernel, a DLA stage, a pre/post step) in the multi-app modes of the sim.

Two platform sections feed it, both optional:

- ``tasks: {sigma, tail_p, tail_us, cap_sigmas}``: a draw is ``base x lognormal(sigma)`` (the factor capped at
  ``exp(cap_sigmas * sigma)``) plus, with probability ``tail_p``, a spike ``Uniform(0, tail_us)``. The spike is
  what makes the thesis' max-observed WCETs much larger than the mean (Ch. 4, spec 2.5.1); it is bounded, so
  ``bound_us`` is a hard upper limit and a WCET estimated over enough runs is safe.
- ``dvfs: {memory_bound: {GPU: phi, DLA: phi, CPU: phi}}``: the share of a task that does not scale with the
  clock (DRAM-bound): ``t(f) = t_max * ((1 - phi) * fmax / f + phi)``; phi = 0 (the default) is pure 1/f. The
  design-time analysis keeps pure 1/f, which is then conservative.

The Ch. 3 single-network path (``SimBackend.measure``) uses neither: its calibration stays where it was.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from dse.core.errors import DseError, choices_error
from dse.core.validate import check_keys
from dse.platform import Platform
from dse.platform.modes import ClockSetting
from dse.rt.model import PE_KINDS as KINDS     # the sim's clock kinds: the analysis' and seed 002's NPU
TASK_KEYS = ("sigma", "tail_p", "tail_us", "cap_sigmas")


@dataclass(frozen=True)
class TailModel:
    """Per-task time distribution: capped lognormal jitter plus a bounded spike (see the module doc)."""

    sigma: float = 0.0
    tail_p: float = 0.0
    tail_us: float = 0.0
    cap_sigmas: float = 4.0

    def __post_init__(self):
        if self.sigma < 0 or self.tail_us < 0 or self.cap_sigmas <= 0 or not 0.0 <= self.tail_p <= 1.0:
            raise DseError(f"task-time model needs sigma >= 0, 0 <= tail_p <= 1, tail_us >= 0, cap_sigmas > 0; "
                           f"got {self}")

    @classmethod
    def of(cls, platform: Platform) -> "TailModel":
        """The platform's ``tasks`` section; without one, the DES' ``noise.task_sigma`` and no tail."""
        d = _section(platform, "tasks")
        check_keys(d, TASK_KEYS, f"key of platform {platform.name} tasks")
        return cls(sigma=float(d.get("sigma", platform.task_sigma)), tail_p=float(d.get("tail_p", 0.0)),
                   tail_us=float(d.get("tail_us", 0.0)), cap_sigmas=float(d.get("cap_sigmas", 4.0)))

    def draw(self, base_us, rng: np.random.Generator, size=None) -> np.ndarray:
        """Samples for ``base_us`` (scalar or array, broadcast against ``size``)."""
        base = np.asarray(base_us, dtype=float)
        shape = base.shape if size is None else size
        t = np.broadcast_to(base, shape).astype(float)
        if self.sigma > 0:
            t = t * np.minimum(rng.lognormal(0.0, self.sigma, size=shape), math.exp(self.cap_sigmas * self.sigma))
        if self.tail_p > 0 and self.tail_us > 0:
            t = t + (rng.random(size=shape) < self.tail_p) * rng.uniform(0.0, self.tail_us, size=shape)
        return t

    def bound_us(self, base_us):
        """The largest time a draw can take: a safe WCET for any number of runs."""
        return np.asarray(base_us, dtype=float) * math.exp(self.cap_sigmas * self.sigma) + \
            (self.tail_us if self.tail_p > 0 else 0.0)


def memory_bound(platform: Platform) -> dict[str, float]:
    """phi per kind (gpu, dla, cpu) from ``dvfs.memory_bound`` (0 = pure 1/f)."""
    d = _section(platform, "dvfs")
    check_keys(d, ("memory_bound",), f"key of platform {platform.name} dvfs")
    mb = {str(k).lower(): float(v) for k, v in (d.get("memory_bound") or {}).items()}
    for k, v in mb.items():
        if k not in KINDS:
            raise choices_error(f"kind in platform {platform.name} dvfs.memory_bound", k.upper(),
                                [x.upper() for x in KINDS])
        if not 0.0 <= v <= 1.0:
            raise DseError(f"platform {platform.name} dvfs.memory_bound.{k.upper()} must be in [0, 1], got {v}")
    return {k: mb.get(k, 0.0) for k in KINDS}


def freq_span(platform: Platform, kind: str) -> tuple[float, float] | None:
    """(fmin, fmax) of a kind's DVFS table, None without one."""
    table = platform.freq_table(kind)
    return (table[0], table[-1]) if table else None


def clock_mhz(freqs: Mapping[str, float | None] | None, kind: str) -> float | None:
    """A kind's frequency from a dict keyed by kind (``gpu``/``GPU``) or by a PE name (``DLA0``)."""
    for key, mhz in (freqs or {}).items():
        if mhz and (str(key).lower() == kind or str(key).lower().rstrip("0123456789") == kind):
            return float(mhz)
    return None


def dvfs_scale(platform: Platform, kind: str, mhz: float | None, phi: float | None = None, *,
               units: float = 1.0, mem_scale: float = 1.0) -> float:
    """t(f) / t(fmax) = (1 - phi) * fmax / f / units + phi * mem_scale: the compute share scales with the clock
    (and with the share of units powered, e.g. a power mode's GPU TPCs), the memory-bound share phi with the
    memory clock (``mem_scale`` = EMC top / EMC now). Exactly 1.0 at fmax (``mhz`` None) with everything on."""
    span = freq_span(platform, kind)
    if (not mhz or span is None) and units == 1.0 and mem_scale == 1.0:
        return 1.0
    phi = memory_bound(platform)[kind] if phi is None else phi
    compute = span[1] / float(mhz) if (mhz and span) else 1.0
    return (1.0 - phi) * compute / units + phi * mem_scale


def _section(platform: Platform, key: str) -> dict:
    d = (platform.raw or {}).get(key) or {}
    if not isinstance(d, Mapping):
        raise DseError(f"platform {platform.name}: {key} must be a mapping, got {d!r}")
    return dict(d)


def time_scale(platform: Platform, setting: ClockSetting, kind: str) -> float:
    """t(setting) / t(MAXN) of work on a clock kind (``dvfs_scale`` with the mode's GPU units and EMC ceiling)."""
    return dvfs_scale(platform, kind, setting.of(kind), units=setting.mode.gpu_units if kind == "gpu" else 1.0,
                      mem_scale=setting.emc_scale)
