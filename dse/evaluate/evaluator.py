"""One evaluator for every strategy and backend, so no configuration is ever measured twice.

The cache is keyed by the configuration's canonical hash and seeded from Parquet files of earlier
phases and runs, taking only rows of the same measurement context (a changed platform definition or
sample size makes earlier answers stale); every new measurement is appended (atomically) to this job's own file before the
strategy sees it, so a killed run resumes where it stopped.
"""
from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Callable, Iterable

from dse.configuration import Configuration
from dse.measurement import Measurement
from dse.store import append, measurement_row, read, row_to_measurement


class Evaluator:
    """Measures configurations through a backend (anything with ``measure(config) -> Measurement``)."""

    def __init__(self, backend, store: str | Path | None = None, *, cache_files: Iterable[str | Path] = (),
                 seed: int = 0, on_measure: Callable[[Measurement, str, str], None] | None = None,
                 context: str = ""):
        self.backend = backend
        self.store = Path(store) if store else None
        self.seed = seed
        self.on_measure = on_measure
        self.context = context
        self.cache: dict[str, Measurement] = {}
        self.measured = 0          # new measurements made by this evaluator
        self.reused = 0            # answers served from the cache
        self.phase_counts: Counter = Counter()
        self.history: list[tuple[str, str, Measurement]] = []   # (phase, strategy, measurement) in ask order
        files = list(cache_files) + ([self.store] if self.store else [])
        for path in files:
            for row in read(path, context=context).to_dict("records"):
                self.cache.setdefault(row["config_hash"], row_to_measurement(row))

    def __contains__(self, config: Configuration) -> bool:
        return config.hash in self.cache

    def evaluate(self, config: Configuration, *, phase: str, strategy: str) -> Measurement:
        key = config.hash
        if key in self.cache:
            self.reused += 1
            m = self.cache[key]
            self.history.append((phase, strategy, m))
            return m
        started = time.perf_counter()
        before = self._built_counts()
        try:
            m = self.backend.measure(config)
        except Exception as exc:  # a backend bug or a board failure is a recorded failure, the search goes on
            m = Measurement.failed(config, f"{type(exc).__name__}: {exc}", backend=getattr(self.backend, "name", ""))
        if not m.measure_s:
            m.measure_s = time.perf_counter() - started
        after = self._built_counts()
        engines_built = {pe: n - before.get(pe, 0) for pe, n in after.items() if n - before.get(pe, 0)}
        if self.store:
            append(self.store, [measurement_row(m, phase=phase, strategy=strategy, seed=self.seed,
                                                engines_built=engines_built, context=self.context)])
        self.cache[key] = m
        self.measured += 1
        self.phase_counts[phase] += 1
        self.history.append((phase, strategy, m))
        if self.on_measure:
            self.on_measure(m, phase, strategy)
        return m

    def _built_counts(self) -> dict[str, int]:
        """Engines built so far per PE type by the backend's artifact cache (Table 3.7's built engines)."""
        cache = getattr(self.backend, "engine_cache", None)
        counts = getattr(cache, "counts", None) or {}
        return {pe.upper(): int(c.get("built", 0)) for pe, c in counts.items()}

    def best(self) -> Measurement | None:
        ok = [m for m in self.cache.values() if m.ok]
        return max(ok, key=lambda m: m.fps) if ok else None
