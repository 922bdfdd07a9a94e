"""Periodic runs of several per-layer-mapped DNN apps on this host's CPU core groups under fixed priorities: the
real counterpart of seed 002 Sec. VI's pipelined model (``dse.rt.schedule_based``, response "pipelined"), so the
measured responses can be held against that analysis.

An app (``PeriodicNet``) is its segments (``dse.runtime.taskgraph.partition_segments``: maximal runs of layers on
one PE, each an ONNX subgraph; PE id p runs on ``groups[p]``), a period, a priority (lower number = higher,
distinct across apps), one input feed reused every iteration and a release phase.

- Retiming: segment s has pipeline depth d_s = 0 where it reads no other segment, else the largest
  d_r + [PE_r != PE_s] over the segments r it reads (``pipeline_depths``).
- Stage (app, PE): the app's segments on that PE, in index order. Its job k is released at
  t0 + phase + k * period and runs segment s on iteration k - d_s, skipping s where that is < 0 (pipeline fill)
  or >= ``iterations`` (``stage_iteration``); each stage runs jobs 0 .. iterations - 1 + max_s d_s. So every
  cross-PE input of an iteration was made in an earlier period's job of its producer stage, and every same-PE
  input earlier in the same job or an earlier one: a stage's job needs nothing of its own period from another PE.
- One worker thread per PE in use, pinned to its core group, runs one segment at a time to its end
  (non-preemptive at segment boundaries). Whenever it is free it takes, of the released unfinished jobs of its
  stages, the one of the highest-priority app (ties: the earlier release) and runs that job's next segment; a
  stage's jobs run in order. A job whose next segment's inputs are not there yet (its producer stage on another
  PE is late) is passed over for this decision and flagged ``waited_for_data``; with nothing runnable the worker
  sleeps on a condition variable until a segment finishes somewhere or its next release.

So each (app, PE) stage is an independent periodic task, deadline = period, whose segments are non-preemptive
pieces: a PE's response bound is the fixed-priority response-time analysis of its stages with one lower-priority
segment of blocking, R = C + B + sum_h ceil(R / P_h) C_h. A stage job's response is its last segment's finish
minus its release; a miss is a response above the period. An iteration's end-to-end latency is its last
segment's finish minus the release of its job in the source stage (about depth x period by construction).
"""
from __future__ import annotations

import math
import numbers
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dse.core.errors import DseError
from dse.platform.cpu_groups import core_group_name
from dse.runtime.engine import pin_current_thread, run_pinned

START_S = 0.05     # t0 lies this far after run() starts the workers: they are up and pinned before release 0
POLL_S = 0.05      # the longest a waiting worker sleeps between looks at its stages (wake-ups come sooner)
SPIN_S = 0.0005    # a worker sleeps until this long before a release, then yields in a loop: timed waits
                   # overshoot by 0.1-0.2 ms on a VM, which would count as response time
_yield = getattr(os, "sched_yield", lambda: time.sleep(0))   # releases the GIL; sleep(0) costs a timer tick


@dataclass(frozen=True)
class PeriodicNet:
    """One app: all its segments (index order), period and phase in s, priority (lower = higher) and the input
    feed {network input: array} of every iteration."""

    name: str
    segments: Sequence[Any]
    period_s: float
    priority: int
    feed: dict
    phase_s: float = 0.0


def pipeline_depths(segments: Sequence[Any]) -> list[int]:
    """d_s per segment: how many periods after its iteration's release segment s runs. Index order is
    topological (a segment reads network inputs and earlier segments only), so one pass suffices."""
    producer = {t: s.index for s in segments for t in s.outputs}
    depth: list[int] = []
    for s in segments:
        reads = {producer[t] for t in s.inputs if t in producer}
        depth.append(max((depth[r] + int(segments[r].pe != s.pe) for r in reads), default=0))
    return depth


def stage_iteration(k: int, depth: int, iterations: int) -> int | None:
    """The iteration a segment of pipeline depth ``depth`` processes in its stage's job ``k``; None where there
    is none (pipeline fill, or past the last iteration)."""
    n = k - depth
    return n if 0 <= n < iterations else None


@dataclass
class JobRecord:
    """One stage job: release, first segment start and last segment finish in s from t0 (NaN for a job with no
    segment to run), the segments it ran, and whether it was ever passed over for missing inputs."""

    app: str
    pe: int
    k: int
    release_s: float
    start_s: float = math.nan
    finish_s: float = math.nan
    segments_run: int = 0
    waited_for_data: bool = False

    @property
    def response_s(self) -> float:
        return self.finish_s - self.release_s


@dataclass(frozen=True)
class SegmentRun:
    """One segment's run: its PE, its job's release, its start and finish in s from t0 (what a WCET taken from a
    run reads)."""

    app: str
    segment: int
    iteration: int
    pe: int
    release_s: float
    start_s: float
    finish_s: float


@dataclass
class AppResult:
    """One app's stage-job responses (jobs that ran a segment, by PE then job), their worst, the misses
    (response > period) and the end-to-end latency per iteration."""

    name: str
    period_s: float
    priority: int
    response_s: list[float]
    latency_s: list[float]
    worst_response_s: float = field(init=False)
    misses: int = field(init=False)
    jobs: int = field(init=False)

    def __post_init__(self):
        self.worst_response_s = max(self.response_s, default=math.nan)
        self.misses = sum(r > self.period_s for r in self.response_s)
        self.jobs = len(self.response_s)


@dataclass
class PeriodicRunResult:
    """Every stage job (by app, PE, job), every segment run, per app its AppResult, and with ``keep_outputs``
    the network outputs of every iteration (``outputs[app][n]``)."""

    jobs: list[JobRecord]
    apps: dict[str, AppResult]
    outputs: dict[str, list[dict]] = field(default_factory=dict)
    segment_runs: list[SegmentRun] = field(default_factory=list)

    def service_times_s(self, app: str, segments: int) -> list[list[float]]:
        """Per segment of ``app`` (``segments`` of them) its service times in s: from when each run could start
        (its job released and its PE done with the segment before) to its finish. That is the run plus the
        runtime's dispatch delay (lock, pick, wake-up: mostly 0.1-0.4 ms on the 2-core VM, up to 2 ms in a
        hiccup; a wait for a late input counts too), which a bound over bare run times leaves out."""
        out: list[list[float]] = [[] for _ in range(segments)]
        last: dict[int, float] = {}
        for r in sorted(self.segment_runs, key=lambda r: r.start_s):
            if r.app == app:
                out[r.segment].append(r.finish_s - max(r.release_s, last.get(r.pe, -math.inf)))
            last[r.pe] = r.finish_s
        return out

    @property
    def latency_s(self) -> dict[str, list[float]]:
        return {name: a.latency_s for name, a in self.apps.items()}

    def responses_s(self, app: str) -> list[float]:
        return self.apps[app].response_s

    def worst_response_s(self, app: str) -> float:
        return self.apps[app].worst_response_s

    def misses(self, app: str) -> int:
        return self.apps[app].misses

    def to_frame(self):
        """One row per stage job, with its response."""
        import pandas as pd

        return pd.DataFrame([{**vars(j), "response_s": j.response_s} for j in self.jobs])


# --- checks --------------------------------------------------------------------------------------------------
def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def _is_count(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _iterations(nets: Sequence[PeriodicNet], iterations) -> list[int]:
    """One count per app (a single int is every app's)."""
    if _is_count(iterations):
        counts = [iterations] * len(nets)
    elif isinstance(iterations, Sequence) and not isinstance(iterations, str) and len(iterations) == len(nets):
        counts = list(iterations)
    else:
        raise DseError(f"iterations must be an integer >= 1 (or one per app), got {iterations!r}")
    for n, c in zip(nets, counts):
        if not _is_count(c) or c < 1:
            raise DseError(f"iterations must be an integer >= 1 (or one per app), got {c!r} for app {n.name}")
    return [int(c) for c in counts]


def _group_names(groups) -> str:
    return ", ".join(f"{p} ({core_group_name(g)})" for p, g in enumerate(groups) if g) or "none"


def _check_net(n: PeriodicNet, groups) -> None:
    if not (_is_number(n.period_s) and n.period_s > 0):
        raise DseError(f"app {n.name}: period_s must be a number > 0, got {n.period_s!r}")
    if not (_is_number(n.phase_s) and n.phase_s >= 0):
        raise DseError(f"app {n.name}: phase_s must be a number >= 0, got {n.phase_s!r}")
    if not _is_count(n.priority):
        raise DseError(f"app {n.name}: priority must be an integer (lower = higher), got {n.priority!r}")
    segs = list(n.segments)
    if not segs or [s.index for s in segs] != list(range(len(segs))):
        raise DseError(f"app {n.name}: give the whole list of segments from partition_segments, in order")
    for s in segs:
        if not (_is_count(s.pe) and 0 <= s.pe < len(groups)) or not groups[s.pe]:
            layers = f" (layers {s.first_layer}-{s.last_layer})" if hasattr(s, "first_layer") else ""
            raise DseError(f"app {n.name}: segment {s.index}{layers} is mapped to PE {s.pe!r}, which has no core "
                           f"group; valid PE ids: {_group_names(groups)}")
    made = {t for s in segs for t in s.outputs}
    missing = sorted({t for s in segs for t in s.inputs} - made - set(n.feed))
    if missing:
        raise DseError(f"app {n.name}: the feed {sorted(n.feed)} lacks network input(s) {missing}")


def _check(nets: Sequence[PeriodicNet], groups) -> None:
    if not nets:
        raise DseError("a periodic run needs at least one app")
    names = [n.name for n in nets]
    if len(set(names)) != len(names):
        raise DseError(f"app names must be distinct, got {names}")
    for n in nets:
        _check_net(n, groups)
    seen: dict[int, str] = {}
    for n in nets:
        if n.priority in seen:
            raise DseError(f"app priorities must be distinct: {seen[n.priority]} and {n.name} both have priority "
                           f"{n.priority}")
        seen[n.priority] = n.name


def _groups(groups) -> list[tuple[int, ...]]:
    return [tuple(sorted(int(c) for c in g)) for g in groups]


# --- engines and segment times -------------------------------------------------------------------------------
def build_engines(segments, groups) -> list:
    """An OrtStageEngine per segment on its core group."""
    from dse.runtime.ort_engine import OrtStageEngine

    return [OrtStageEngine(s.model, groups[s.pe], pe=core_group_name(groups[s.pe])) for s in segments]


def _segment_feeds(segments, engines, feed: dict) -> list[dict]:
    """Each segment's real inputs, from one pass of ``feed`` through the segments in order."""
    values = dict(feed)
    feeds = []
    for s, e in zip(segments, engines):
        feeds.append({t: values[t] for t in s.inputs})
        values.update(e.infer(feeds[-1]))
    return feeds


def close_engines(engines) -> None:
    for e in engines:
        getattr(e, "close", lambda: None)()


def segment_times(segments, groups: Sequence[Sequence[int]], feed: dict | None = None, *, repeats: int = 20,
                  warmup: int = 3, idle_s: float = 0.0, engines: Sequence[Any] | None = None) -> list[list[float]]:
    """Per segment its ``repeats`` run times in s, each segment alone on a thread pinned to its core group, on
    its real inputs (``feed`` through the segments once), after ``warmup`` untimed runs: what the analysis'
    segment times come from (the caller takes the max as a measured WCET, or a percentile).

    ``idle_s``: the thread sleeps this long before each timed run, as a periodic run's segments mostly start
    after their core idled. On the 2-core VM they then run slower than back to back (MobileNet v1 whole on one
    core: 9.95 ms back to back, 14.4 ms after 30-100 ms idle; every small segment about +0.15 ms), so a WCET
    timed back to back is exceeded by most of a periodic run's segments.

    ``segments`` may be a PeriodicNet (its segments and feed). ``engines``: one per segment to time instead of
    fresh ONNX Runtime sessions.
    """
    if isinstance(segments, PeriodicNet):
        net = segments if feed is None else PeriodicNet(segments.name, segments.segments, segments.period_s,
                                                        segments.priority, feed, segments.phase_s)
    else:
        net = PeriodicNet("network", list(segments), 1.0, 0, {} if feed is None else feed)
    if not _is_count(repeats) or repeats < 1:
        raise DseError(f"repeats must be an integer >= 1, got {repeats!r}")
    if not _is_count(warmup) or warmup < 0:
        raise DseError(f"warmup must be an integer >= 0, got {warmup!r}")
    if not (_is_number(idle_s) and idle_s >= 0):
        raise DseError(f"idle_s must be a number >= 0, got {idle_s!r}")
    groups = _groups(groups)
    _check([net], groups)
    segs = list(net.segments)
    own = engines is None
    engines = build_engines(segs, groups) if own else list(engines)
    if len(engines) != len(segs):
        raise DseError(f"{len(engines)} engines for {len(segs)} segments")

    def timed(engine, inputs):
        for _ in range(warmup):
            engine.infer(inputs)
        out = []
        for _ in range(repeats):
            if idle_s:
                time.sleep(idle_s)
            t = time.perf_counter()
            engine.infer(inputs)
            out.append(time.perf_counter() - t)
        return out

    try:
        feeds = _segment_feeds(segs, engines, net.feed)
        return [run_pinned(groups[s.pe], lambda e=e, f=f: timed(e, f), f"time-seg-{s.index}")
                for s, e, f in zip(segs, engines, feeds)]
    finally:
        if own:
            close_engines(engines)


# --- the run -------------------------------------------------------------------------------------------------
class _Stage:
    """One (app, PE) stage's progress: the job in hand (``k``, its record) and the position in its segments."""

    def __init__(self, app: int, pe: int, segs: list[int], depths: list[int], iterations: int, jobs: int):
        self.app, self.pe, self.segs, self.depths = app, pe, segs, depths
        self.iterations, self.jobs = iterations, jobs
        self.k, self.pos, self.record = 0, 0, None

    @property
    def done(self) -> bool:
        return self.k >= self.jobs

    def iteration(self) -> int | None:
        return stage_iteration(self.k, self.depths[self.segs[self.pos]], self.iterations)


class PeriodicRuntime:
    """Runs ``nets`` periodically, ``iterations`` iterations each (one count, or one per app), on ``groups``
    (PE id p -> its cores); semantics in the module docstring. ``engines[app][segment]`` (``infer(dict) ->
    dict``) replace the ONNX Runtime sessions, built here otherwise and warmed up with ``warmup`` runs on real
    inputs before any run; ``close()`` frees them. ``keep_outputs`` keeps every iteration's network outputs.
    ``run()`` raises a DseError when a segment fails or the run outlasts ``timeout_s``; called again, it starts
    over on the same sessions (the multiapp host check's calibration runs, then its checked run)."""

    def __init__(self, nets: Sequence[PeriodicNet], groups: Sequence[Sequence[int]], iterations, *,
                 warmup: int = 3, timeout_s: float = 600.0, engines: Sequence[Sequence[Any]] | None = None,
                 keep_outputs: bool = False):
        self.groups = _groups(groups)
        self.nets = list(nets)
        _check(self.nets, self.groups)
        self.iterations = _iterations(self.nets, iterations)
        if not (_is_number(timeout_s) and timeout_s > 0):
            raise DseError(f"timeout_s must be a number > 0, got {timeout_s!r}")
        if not _is_count(warmup) or warmup < 0:
            raise DseError(f"warmup must be an integer >= 0, got {warmup!r}")
        self.timeout_s, self.keep_outputs = float(timeout_s), bool(keep_outputs)
        self.depths = [pipeline_depths(n.segments) for n in self.nets]
        if engines is None:
            self.engines = []
            try:
                for n in self.nets:
                    self.engines.append(build_engines(n.segments, self.groups))
            except BaseException:
                self.close()
                raise
        else:
            self.engines = [list(es) for es in engines]
            if [len(es) for es in self.engines] != [len(n.segments) for n in self.nets]:
                raise DseError(f"engines per app {[len(es) for es in self.engines]} do not match the segments per "
                               f"app {[len(n.segments) for n in self.nets]}")
        if warmup:  # first-run costs (allocations, kernel selection) before any release
            for n, es in zip(self.nets, self.engines):
                for s, e, f in zip(n.segments, es, _segment_feeds(n.segments, es, n.feed)):
                    run_pinned(self.groups[s.pe], lambda e=e, f=f: [e.infer(f) for _ in range(warmup)],
                               f"warmup-seg-{s.index}")

    def __enter__(self) -> PeriodicRuntime:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for es in self.engines:
            close_engines(es)

    def _release(self, a: int, k: int) -> float:
        """Job k's release in s from t0 (every stage of an app shares it)."""
        n = self.nets[a]
        return n.phase_s + k * n.period_s

    def _now(self) -> float:
        return time.perf_counter() - self.t0

    def run(self) -> PeriodicRunResult:
        self._cond = threading.Condition(threading.Lock())   # guards everything below
        self._stop, self._error = False, None
        self._values: dict[tuple[int, int], dict] = {}        # (app, iteration) -> tensors made so far
        self._left = {(a, i): len(n.segments) for a, n in enumerate(self.nets) for i in range(self.iterations[a])}
        self._records: list[JobRecord] = []
        self._segment_runs: list[SegmentRun] = []
        self._latency = [[math.nan] * k for k in self.iterations]
        self._outputs = [[None] * k for k in self.iterations] if self.keep_outputs else None
        self._stages: dict[int, list[_Stage]] = {}
        for a, n in enumerate(self.nets):
            jobs = self.iterations[a] + max(self.depths[a])
            for pe in sorted({s.pe for s in n.segments}):
                st = _Stage(a, pe, [s.index for s in n.segments if s.pe == pe], self.depths[a], self.iterations[a],
                            jobs)
                self._stages.setdefault(pe, []).append(st)
                self._advance(st)
        threads = [threading.Thread(target=self._worker, args=(pe,), name=f"periodic-pe{pe}", daemon=True)
                   for pe in sorted(self._stages)]
        self.t0 = time.perf_counter() + START_S
        for t in threads:
            t.start()
        deadline = time.monotonic() + START_S + self.timeout_s
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in threads):
            with self._cond:
                self._stop = True
                self._cond.notify_all()
                late = [f"{self.nets[st.app].name} on PE {pe} at job {st.k} of {st.jobs}"
                        for pe, sts in sorted(self._stages.items()) for st in sts if not st.done]
            raise DseError(f"the periodic run did not end within timeout_s = {self.timeout_s:g} s; unfinished: "
                           f"{'; '.join(late)}")
        if self._error is not None:
            raise DseError(f"the periodic run failed: {self._error}") from self._error
        return self._result()

    def _result(self) -> PeriodicRunResult:
        order = {n.name: a for a, n in enumerate(self.nets)}
        jobs = sorted(self._records, key=lambda j: (order[j.app], j.pe, j.k))
        apps = {n.name: AppResult(n.name, n.period_s, n.priority,
                                  [j.response_s for j in jobs if j.app == n.name and j.segments_run],
                                  self._latency[a]) for a, n in enumerate(self.nets)}
        outputs = {n.name: self._outputs[a] for a, n in enumerate(self.nets)} if self.keep_outputs else {}
        return PeriodicRunResult(jobs, apps, outputs, self._segment_runs)

    # --- the workers (state under self._cond) ------------------------------------------------------------
    def _advance(self, st: _Stage) -> None:
        """Move the stage to its next segment that has an iteration, closing jobs that are through; a job with
        nothing (left) to run closes at once, as waiting for its release would change nothing."""
        while not st.done:
            if st.record is None:
                st.record = JobRecord(self.nets[st.app].name, st.pe, st.k, self._release(st.app, st.k))
            while st.pos < len(st.segs) and st.iteration() is None:
                st.pos += 1
            if st.pos < len(st.segs):
                return
            self._records.append(st.record)
            st.k, st.pos, st.record = st.k + 1, 0, None

    def _feed(self, st: _Stage) -> dict | None:
        """The inputs of the stage's next segment for its iteration, or None while one is missing."""
        net = self.nets[st.app]
        values = self._values.get((st.app, st.iteration()), {})
        feed = {}
        for t in net.segments[st.segs[st.pos]].inputs:
            if t in values:
                feed[t] = values[t]
            elif t in net.feed:
                feed[t] = net.feed[t]
            else:
                return None
        return feed

    def _pick(self, stages: list[_Stage]):
        """(stage, feed) of the highest-priority released runnable job, or (None, the next release)."""
        now = self._now()
        best, key, wake = None, None, math.inf
        for st in stages:
            if st.done:
                continue
            release = st.record.release_s
            if release > now:
                wake = min(wake, release)
                continue
            feed = self._feed(st)
            if feed is None:
                st.record.waited_for_data = True
                continue
            k = (self.nets[st.app].priority, release)
            if best is None or k < key:
                best, key = (st, feed), k
        return best, wake - now

    def _worker(self, pe: int) -> None:
        try:
            pin_current_thread(self.groups[pe])
            stages = self._stages[pe]
            while True:
                with self._cond:
                    while True:
                        if self._stop or all(st.done for st in stages):
                            return
                        best, wait = self._pick(stages)
                        if best is not None:
                            break
                        if wait > SPIN_S:
                            self._cond.wait(min(POLL_S, wait - SPIN_S))
                        else:  # the short final wait: yield the lock and the GIL, look again
                            self._cond.release()
                            try:
                                _yield()
                            finally:
                                self._cond.acquire()
                    st, feed = best
                    seg, it = st.segs[st.pos], st.iteration()
                    begin = self._now()
                    if st.record.segments_run == 0:
                        st.record.start_s = begin
                try:
                    out = self.engines[st.app][seg].infer(feed)
                    s = self.nets[st.app].segments[seg]
                    missing = [t for t in s.outputs if t not in out]
                    if missing:
                        raise RuntimeError(f"it did not produce {missing}")
                except Exception as exc:
                    s = self.nets[st.app].segments[seg]
                    layers = f" (layers {s.first_layer}-{s.last_layer})" if hasattr(s, "first_layer") else ""
                    raise RuntimeError(f"app {self.nets[st.app].name} segment {seg}{layers} on PE {pe} failed on "
                                       f"iteration {it} (job {st.k}): {type(exc).__name__}: {exc}") from exc
                with self._cond:
                    self._finish(st, seg, it, out, begin, self._now())
                    self._cond.notify_all()
        except BaseException as exc:
            with self._cond:
                if self._error is None:
                    self._error = exc
                self._stop = True
                self._cond.notify_all()

    def _finish(self, st: _Stage, seg: int, it: int, out: dict, begin: float, finish: float) -> None:
        a = st.app
        self._segment_runs.append(SegmentRun(self.nets[a].name, seg, it, st.pe, st.record.release_s, begin, finish))
        key = (a, it)
        self._values.setdefault(key, {}).update(out)
        self._left[key] -= 1
        if self._left[key] == 0:  # the iteration is through: its tensors go (memory stays bounded)
            values = self._values.pop(key)
            self._latency[a][it] = finish - self._release(a, it)
            if self._outputs is not None:
                self._outputs[a][it] = {t: values[t] for s in self.nets[a].segments
                                        for t in getattr(s, "network_outputs", ()) if t in values}
        st.record.segments_run += 1
        st.record.finish_s = finish
        st.pos += 1
        self._advance(st)


def run_periodic(nets: Sequence[PeriodicNet], groups: Sequence[Sequence[int]], iterations,
                 **options) -> PeriodicRunResult:
    """Build, run and close a ``PeriodicRuntime`` (``options``: its keyword arguments)."""
    with PeriodicRuntime(nets, groups, iterations, **options) as runtime:
        return runtime.run()
