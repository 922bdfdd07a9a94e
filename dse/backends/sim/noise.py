"""Seeded measurement noise: the same configuration and seed always give the same numbers."""
from __future__ import annotations

import numpy as np


def noise_rng(seed: int, config_hash: str, repeat: int = 0) -> np.random.Generator:
    """A generator seeded by the run seed and the configuration (different configs get independent noise);
    ``repeat`` > 0: an independent re-run of the same configuration (the thesis' repeated final runs)."""
    key = [int(seed) & 0xFFFFFFFF, int(config_hash[:8], 16), int(config_hash[8:16], 16)]
    return np.random.default_rng(key + [int(repeat)] if repeat else key)


def factor(rng: np.random.Generator, sigma: float) -> float:
    """A multiplicative factor around 1 (lognormal, ``sigma`` ~ relative standard deviation)."""
    return float(rng.lognormal(0.0, sigma)) if sigma > 0 else 1.0
