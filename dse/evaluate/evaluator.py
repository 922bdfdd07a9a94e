"""One evaluator for every strategy and backend, so no configuration is ever measured twice.

The cache is keyed by the configuration's canonical hash (and the re-run index, for confirmations) and seeded
from Parquet files of earlier phases and runs, taking only rows of the same measurement context (a changed
platform definition or sample size makes earlier answers stale) and only answers that may be replayed: an
``error`` row is kept on disk and counted, but the next evaluator that is asked for that configuration (the next
phase of the run, or the next run) measures it again; one evaluator asks the backend once. Every new
measurement is appended (atomically) to this job's own file before the strategy sees it, so a killed run
resumes where it stopped.

Concurrent writers: a measurement is taken and appended while holding the job file's lock, after re-reading
the files other processes changed since; two runs of one job started together therefore neither lose rows
(the read-modify-write of an append is serialized) nor measure a configuration twice (the second finds the
first's row).

Failures are told apart: the backend returns ``refused`` / ``error`` measurements itself; a ``DseError`` it
raises is infrastructure trouble (a corrupt cache entry, an unreachable board) and becomes an ``error`` row;
any other exception is a bug of ours: it propagates, the job fails, nothing is recorded.
"""
from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Callable, Iterable

from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.core.measurement import Measurement
from dse.store import append, measurement_row, read, row_to_measurement, store_lock


class Evaluator:
    """Measures configurations through a backend (``dse.backends.base.Backend``)."""

    def __init__(self, backend, store: str | Path | None = None, *,
                 cache_files: Iterable[str | Path] | Callable[[], Iterable[str | Path]] = (),
                 seed: int = 0, on_measure: Callable[[Measurement, str, str], None] | None = None,
                 context: str = ""):
        """``cache_files``: files whose rows answer too, or a function listing them (called at every refresh,
        so files other jobs create later are seen)."""
        self.backend = backend
        self.store = Path(store) if store else None
        self.seed = seed
        self.on_measure = on_measure
        self.context = context
        self.cache: dict[tuple[str, int], Measurement] = {}
        self.measured = 0          # new measurements made by this evaluator
        self.reused = 0            # answers served from the cache
        self.asked: set[str] = set()   # configurations asked for, measured or cached (what this search looked at)
        self._stale: set[tuple[str, int]] = set()   # configurations with an error row of an earlier phase or run
        self._cache_files = cache_files if callable(cache_files) else (lambda files=list(cache_files): files)
        self._read_as: dict[Path, tuple[int, int]] = {}   # file -> (mtime_ns, size) when last read
        self._refresh()

    def _refresh(self) -> None:
        """Load the rows of every cache file that changed since it was last read."""
        for path in {*map(Path, self._cache_files()), *([self.store] if self.store else [])}:
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            if self._read_as.get(path) == (stat.st_mtime_ns, stat.st_size):
                continue
            self._read_as[path] = (stat.st_mtime_ns, stat.st_size)
            for row in read(path, context=self.context).to_dict("records"):
                m = row_to_measurement(row)
                key = (row["config_hash"], int(row["repeat"]))
                if m.replayable:
                    self.cache.setdefault(key, m)
                elif key not in self.cache:   # (this evaluator's own errors are in its cache)
                    self._stale.add(key)

    def evaluate(self, config: Configuration, *, phase: str, strategy: str, repeat: int = 0) -> Measurement:
        """The measurement of ``config`` (``repeat`` > 0: an independent re-run, cached under its index)."""
        key = (config.hash, int(repeat))
        self.asked.add(config.hash)
        if key in self.cache:
            self.reused += 1
            return self.cache[key]
        with store_lock(self.store) if self.store else contextlib.nullcontext():
            self._refresh()
            if key in self.cache:   # another process of this job measured it while we waited
                self.reused += 1
                return self.cache[key]
            m, row = self._measured_row(config, repeat, phase, strategy)
            self._append([row])
        self.cache[key] = m        # one evaluator does not retry an error at once (the next phase or run does)
        self.measured += 1
        if self.on_measure:
            self.on_measure(m, phase, strategy)
        return m

    def evaluate_many(self, requests: Iterable[tuple[Configuration, int]], *, phase: str,
                      strategy: str) -> list[Measurement]:
        """The measurements of ``(config, repeat)`` pairs, as ``evaluate`` one by one would give them, with the new
        rows appended in one write: a batch of thousands of cheap measurements (a virtual board's) would
        otherwise rewrite the job's file once per row."""
        requests = [(config, int(repeat)) for config, repeat in requests]
        for config, _ in requests:
            self.asked.add(config.hash)
        out: dict[tuple[str, int], Measurement] = {}
        rows, made = [], []
        with store_lock(self.store) if self.store else contextlib.nullcontext():
            self._refresh()
            for config, repeat in requests:
                key = (config.hash, repeat)
                if key in out or key in self.cache:
                    self.reused += 1
                    out.setdefault(key, self.cache.get(key))
                    continue
                m, row = self._measured_row(config, repeat, phase, strategy)
                out[key] = self.cache[key] = m
                made.append(m)
                rows.append(row)
            self._append(rows)
        self.measured += len(made)
        if self.on_measure:
            for m in made:
                self.on_measure(m, phase, strategy)
        return [out[(config.hash, repeat)] for config, repeat in requests]

    @property
    def stale_errors(self) -> int:
        """Configurations with error rows of earlier phases or runs, which were not replayed."""
        return len(self._stale)

    def _measured_row(self, config: Configuration, repeat: int, phase: str, strategy: str) -> tuple[Measurement, dict]:
        """A fresh measurement and its store row."""
        m, engines_built = self._measure(config, repeat)
        return m, measurement_row(m, phase=phase, strategy=strategy, seed=self.seed, repeat=repeat,
                                  engines_built=engines_built, context=self.context)

    def _append(self, rows: list[dict]) -> None:
        """Append this evaluator's new rows to its file (the caller holds the file's lock)."""
        if self.store and rows:
            append(self.store, rows, locked=True)
            stat = self.store.stat()
            self._read_as[self.store] = (stat.st_mtime_ns, stat.st_size)   # our own rows are in the cache

    def _measure(self, config: Configuration, repeat: int) -> tuple[Measurement, dict[str, int]]:
        started = time.perf_counter()
        before = self.engines_built()
        try:
            m = self.backend.measure(config, repeat=repeat)
        except DseError as exc:  # infrastructure trouble the backend could not classify: may pass, retried later
            m = Measurement.error(config, str(exc), backend=self.backend.name)
        if not m.measure_s:
            m.measure_s = time.perf_counter() - started
        after = self.engines_built()
        return m, {pe: n - before.get(pe, 0) for pe, n in after.items() if n - before.get(pe, 0)}

    def engines_built(self) -> dict[str, int]:
        """Engines built so far per PE type by the backend's artifact cache (Table 3.7's built engines)."""
        cache = self.backend.engine_cache
        counts = cache.counts if cache is not None else {}
        return {pe.upper(): int(c.get("built", 0)) for pe, c in counts.items()}
