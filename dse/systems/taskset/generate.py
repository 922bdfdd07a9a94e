"""Random task sets at a utilization threshold (seed 003 L491, L499; spec 5.5).

The paper says only "a mechanism similar to UUnifast", instances of the DNN/RNN types drawn at random, each
time drawn from its Table 4 interval, and thresholds relative to the scenario's reference option. Here, like
UUniFast, a set's total reference utilization lands at the threshold: types uniform among those with a reference
variant (the NVDLA scenario cannot hold RNNs at 1.0, where the paper schedules 100 %), each instance's time on
every option drawn independently from [U_min, U_max], an instance that would push the reference sum over
threshold x frame drawn again, and the set closed once the sum reaches (threshold - margin) x frame. The margin
is not in the paper: 0.1 reproduces Table 5's mean instance counts (BENCHMARKS.md, "Task sets"), and a set at 1.2 then never
fits the reference option alone, as in Tables 5-7 ("x" at 1.2 for every "comb" column)."""
from __future__ import annotations

import zlib

import numpy as np

from dse.systems.taskset.errors import TasksetError
from dse.systems.taskset.variants import VariantTable

MAX_DRAWS = 100_000


def set_rng(seed: int, scenario: str, threshold: float) -> np.random.Generator:
    """The stream of one (scenario, threshold): the same sets whatever other thresholds a run includes."""
    return np.random.default_rng([int(seed), zlib.crc32(scenario.encode()), int(round(threshold * 1000))])


def generate_set(rng: np.random.Generator, table: VariantTable, reference: str, threshold: float,
                 margin: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """(type index per instance, times ms (instances, OPTIONS) with NaN where a type has no variant)."""
    if not threshold or threshold <= 0:
        raise TasksetError(f"utilization threshold must be > 0, got {threshold}")
    if not 0 < margin <= threshold:
        raise TasksetError(f"margin must be in (0, threshold {threshold}], got {margin}")
    r = table.option_index(reference)
    pool = np.flatnonzero(np.isfinite(table.lo[:, r]))
    if not len(pool):
        raise TasksetError(f"no task type of {table.name} has a {reference} variant")
    smallest = float(table.hi[pool, r].min())
    if smallest > margin * table.frame_ms:
        raise TasksetError(f"margin {margin} x frame {table.frame_ms:g} ms is below the smallest {reference} "
                           f"instance ({smallest:g} ms): a set could never close; use a margin >= "
                           f"{smallest / table.frame_ms:.3f}")
    budget, close = threshold * table.frame_ms, (threshold - margin) * table.frame_ms
    types, rows, total = [], [], 0.0
    for _ in range(MAX_DRAWS):
        if total >= close:
            break
        k = int(pool[rng.integers(len(pool))])
        lo, hi = table.lo[k], table.hi[k]
        row = lo + rng.random(len(lo)) * (hi - lo)           # NaN stays NaN: no variant
        if total + row[r] <= budget:
            types.append(k)
            rows.append(row)
            total += row[r]
    times = np.array(rows) if rows else np.empty((0, table.lo.shape[1]))
    return np.array(types, dtype=np.int64), times
