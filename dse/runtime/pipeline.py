"""The pipelined run of one configuration, independent of the engine that executes the stages.

Threads (like JEDI's): ``pre_threads`` pre-processing threads, one worker per stage, ``post_threads``
post-processing threads. A pool of ``buffers`` slots bounds the frames in flight between pre- and
post-processing: a pre thread takes a free slot before it starts a frame, a post thread frees it when the
frame is done. A stage worker owns S contexts and feeds them strictly round-robin (context i of a PND stage
runs on PE i % 2, so the streams are split over both PEs), and forwards finished frames in submission order.

Every frame carries its id; results are keyed by it, so nothing is lost or reordered whatever the number of
threads. Any exception (pre, stage, post) is recorded and stops every thread; every blocking wait has a
timeout, and a watchdog ends a run in which no frame completes for ``stall_s`` seconds: a run never hangs.

``FrameRunner`` is what any runtime shares around its workers (pre/post threads, buffer pool, failures,
watchdog, RunResult); ``Pipeline`` adds the chain of stage workers, ``dse.runtime.taskgraph`` a task graph.

Standard library + numpy only, Python 3.8 grammar (shared with the board agent).
"""
from __future__ import annotations

import collections
import queue
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from dse.runtime.metrics import cpu_seconds, percentile, period_ms, usable_cores, utilization

POLL_S = 0.05
_EOF = object()


@dataclass
class StagePlan:
    """One pipeline stage: its engines (one, or two for PND) and its number of contexts (streams)."""

    engines: Sequence[Any]
    streams: int = 1
    name: str = ""


@dataclass
class RunResult:
    """What a run measured. ``error`` is None for a complete run, else the first failure (with where)."""

    fps: float = 0.0
    latency_ms_p50: float = 0.0
    latency_ms_p99: float = 0.0
    period_ms_p50: float = 0.0      # time per image over windows of completions (metrics.period_ms):
    period_ms_p10: float = 0.0      #   median, and 10th percentile (the host's fast state)
    window_s: float = 0.0
    frames: int = 0
    images: int = 0
    util: Dict[str, float] = field(default_factory=dict)
    stage_util: List[float] = field(default_factory=list)
    stage_ms: List[float] = field(default_factory=list)
    cpu_util: float = 0.0
    results: Dict[int, Any] = field(default_factory=dict)
    outputs: Dict[int, Any] = field(default_factory=dict)
    error: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.error is None


class _Job(object):
    __slots__ = ("id", "slot", "data", "t_pre", "t_done", "stage_ms")

    def __init__(self, job_id, slot, n_stages):
        self.id = job_id
        self.slot = slot
        self.data = None
        self.t_pre = 0.0
        self.t_done = 0.0
        self.stage_ms = [0.0] * n_stages


class _Stopped(Exception):
    """Raised inside a thread's wait when the run is stopping."""


class FrameRunner(object):
    """What every runtime shares around its workers: ``pre_threads`` pre-processing threads taking slots of a
    pool of ``buffers``, ``post_threads`` post-processing threads freeing them, failure recording, the watchdog,
    the measurement window (the first ``warmup`` frames are not measured) and the RunResult.

    A subclass says how many stages it reports (``n_stages``: entries of stage_ms/stage_util), builds its worker
    threads in ``_prepare`` (per run), takes each pre-processed frame in ``_admit`` (``_EOF`` after the last),
    hands finished frames to ``self._post_q`` as ``("job", job)`` (``("job", _EOF)`` after the last) and records
    work with ``_record``; ``_release`` frees what ``_prepare`` made.
    """

    n_stages = 0

    def __init__(self, preprocess: Callable[[int, int], Dict[str, Any]],
                 postprocess: Callable[[int, Dict[str, Any]], Any], frames: int, warmup: int = 0,
                 pre_threads: int = 1, post_threads: int = 1, buffers: int = 1, images_per_job: int = 1,
                 keep_outputs: bool = False, keep_results: bool = True, timeout_s: float = 600.0,
                 stall_s: float = 60.0):
        if frames < 1 or warmup < 0 or pre_threads < 1 or post_threads < 1 or buffers < 1:
            raise ValueError("frames, pre/post threads and buffers must be >= 1 (warmup >= 0)")
        self.preprocess = preprocess
        self.postprocess = postprocess
        self.frames = frames + warmup
        self.warmup = warmup
        self.pre_threads = pre_threads
        self.post_threads = post_threads
        self.buffers = buffers
        self.images_per_job = images_per_job
        self.keep_outputs = keep_outputs
        self.keep_results = keep_results
        self.timeout_s = timeout_s
        self.stall_s = stall_s

    # --- for subclasses ------------------------------------------------------------------------------
    def _prepare(self) -> List[tuple]:
        """Per-run state and the workers: [(where, function, args, thread name), ...]."""
        raise NotImplementedError

    def _admit(self, job) -> None:
        raise NotImplementedError

    def _release(self) -> None:
        pass

    def _record(self, pe: str, stage: int, job: _Job, t0: float, t1: float) -> None:
        """Stage ``stage`` ran ``job`` on ``pe`` from t0 to t1 (seconds, perf_counter)."""
        job.stage_ms[stage] = (t1 - t0) * 1e3
        with self._lock:
            self._busy[pe].append((t0, t1))
            self._stage_busy[stage].append((t0, t1))

    # --- run -----------------------------------------------------------------------------------------
    def run(self) -> RunResult:
        self._stop = threading.Event()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._error = None  # type: Optional[str]
        self._next_id = 0
        self._pre_left = self.pre_threads
        self._completed = 0
        self._slots = queue.Queue()  # type: queue.Queue
        for s in range(self.buffers):
            self._slots.put(s)
        self._post_q = queue.Queue()  # type: queue.Queue
        self._busy = collections.defaultdict(list)  # type: Dict[str, list]
        self._stage_busy = [[] for _ in range(self.n_stages)]  # type: List[list]
        self._finished = []  # type: List[_Job]
        self._results = {}  # type: Dict[int, Any]
        self._outputs = {}  # type: Dict[int, Any]
        self._t0 = time.perf_counter()
        self._win = [self._t0, 0.0]
        self._cpu = [cpu_seconds(), 0.0]

        threads = []  # type: List[threading.Thread]
        try:
            for where, fn, args, name in self._prepare():
                threads.append(threading.Thread(target=self._guard, args=(where, fn) + tuple(args), name=name,
                                                daemon=True))
            for k in range(self.pre_threads):
                threads.append(threading.Thread(target=self._guard, args=("pre-processing", self._pre_loop),
                                                name="pre-%d" % k, daemon=True))
            for k in range(self.post_threads):
                threads.append(threading.Thread(target=self._guard, args=("post-processing", self._post_loop),
                                                name="post-%d" % k, daemon=True))
            self._t0 = time.perf_counter()
            self._win[0] = self._t0
            self._cpu[0] = cpu_seconds()
            for t in threads:
                try:
                    t.start()
                except RuntimeError as exc:  # the OS refused another thread: a failed run, not a crash
                    self._error = "cannot start thread %s: %s" % (t.name, exc)
                    break
            if self._error is None:
                self._watch()
        finally:
            self._stop.set()
            for t in threads:
                if t.ident is not None:  # started
                    t.join(timeout=5.0)
            self._release()
        return self._result()

    def _watch(self) -> None:
        deadline = self._t0 + self.timeout_s
        last_count, last_change = -1, time.perf_counter()
        while not self._done.wait(POLL_S):
            now = time.perf_counter()
            if self._stop.is_set():
                return
            with self._lock:
                count = self._completed
            if count != last_count:
                last_count, last_change = count, now
            elif now - last_change > self.stall_s:
                self._fail("watchdog", "no frame completed for %.0f s (%d of %d done)" % (
                    self.stall_s, count, self.frames))
                return
            if now > deadline:
                self._fail("watchdog", "run exceeded its time limit of %.0f s (%d of %d frames done)" % (
                    self.timeout_s, count, self.frames))
                return

    def _fail(self, where: str, message: str) -> None:
        with self._lock:
            if self._error is None:
                self._error = "%s: %s" % (where, message)
        self._stop.set()

    def _guard(self, where: str, fn: Callable, *args) -> None:
        try:
            fn(*args)
        except _Stopped:
            pass
        except BaseException as exc:
            self._fail(where, _describe(exc))

    def _get(self, q: "queue.Queue"):
        while True:
            if self._stop.is_set():
                raise _Stopped()
            try:
                return q.get(timeout=POLL_S)
            except queue.Empty:
                continue

    # --- pre/post-processing threads -----------------------------------------------------------------
    def _pre_loop(self) -> None:
        while True:
            slot = self._get(self._slots)
            with self._lock:
                job_id = self._next_id
                self._next_id += 1
            if job_id >= self.frames:
                self._slots.put(slot)
                with self._lock:
                    self._pre_left -= 1
                    last = self._pre_left == 0
                if last:
                    self._admit(_EOF)
                return
            job = _Job(job_id, slot, self.n_stages)
            job.t_pre = time.perf_counter()
            job.data = self.preprocess(job_id, slot)
            self._admit(job)

    def _post_loop(self) -> None:
        while True:
            _, job = self._get(self._post_q)
            if job is _EOF:
                self._post_q.put(("job", _EOF))  # for the other post threads
                return
            result = self.postprocess(job.id, job.data)
            job.t_done = time.perf_counter()
            self._slots.put(job.slot)
            with self._lock:
                if self.keep_results:
                    self._results[job.id] = result
                if self.keep_outputs:
                    self._outputs[job.id] = job.data
                job.data = None
                self._finished.append(job)
                self._completed += 1
                if self._completed == self.warmup and self.warmup > 0:
                    self._win[0] = job.t_done
                    self._cpu[0] = cpu_seconds()
                if self._completed == self.frames:
                    self._win[1] = job.t_done
                    self._cpu[1] = cpu_seconds()
                    self._done.set()

    # --- result --------------------------------------------------------------------------------------
    def _result(self) -> RunResult:
        res = RunResult(results=self._results, outputs=self._outputs, error=self._error)
        if self._error is not None or not self._done.is_set():
            if res.error is None:
                res.error = "run ended before all frames were processed"
            res.frames = self._completed
            return res
        lo, hi = self._win
        measured = sorted(self._finished, key=lambda j: j.t_done)[self.warmup:]
        span = max(hi - lo, 1e-9)
        res.window_s = hi - lo
        res.frames = len(measured)
        res.images = len(measured) * self.images_per_job
        res.fps = res.images / span
        lat = [(j.t_done - j.t_pre) * 1e3 for j in measured]
        res.latency_ms_p50 = percentile(lat, 50)
        done = [j.t_done for j in measured]                      # sorted above
        res.period_ms_p50 = period_ms(done, 50, self.images_per_job)
        res.period_ms_p10 = period_ms(done, 10, self.images_per_job)
        res.latency_ms_p99 = percentile(lat, 99)
        res.util = utilization(dict(self._busy), lo, hi)
        res.stage_util = [utilization({"s": b}, lo, hi)["s"] for b in self._stage_busy]
        res.stage_ms = [float(sum(j.stage_ms[i] for j in measured) / max(len(measured), 1))
                        for i in range(self.n_stages)]
        res.cpu_util = min(1.0, (self._cpu[1] - self._cpu[0]) / (span * usable_cores()))
        return res


class Pipeline(FrameRunner):
    """Runs ``frames`` jobs (the first ``warmup`` are not measured) through a chain of stages.

    ``preprocess(job_id, slot) -> {input name: array}``; ``postprocess(job_id, outputs) -> result``.
    ``images_per_job`` is the batch (FPS counts images).
    """

    def __init__(self, stages: Sequence[StagePlan], preprocess: Callable[[int, int], Dict[str, Any]],
                 postprocess: Callable[[int, Dict[str, Any]], Any], *, frames: int, warmup: int = 0,
                 pre_threads: int = 1, post_threads: int = 1, buffers: int = 1, images_per_job: int = 1,
                 keep_outputs: bool = False, keep_results: bool = True, timeout_s: float = 600.0,
                 stall_s: float = 60.0):
        if not stages:
            raise ValueError("a pipeline needs at least one stage")
        for i, st in enumerate(stages):
            if st.streams < 1 or not st.engines:
                raise ValueError("stage %d needs at least one engine and one stream" % i)
        FrameRunner.__init__(self, preprocess, postprocess, frames, warmup, pre_threads, post_threads, buffers,
                             images_per_job, keep_outputs, keep_results, timeout_s, stall_s)
        self.stages = list(stages)
        self.n_stages = len(self.stages)

    def _prepare(self) -> List[tuple]:
        self._inboxes = [queue.Queue() for _ in self.stages]  # type: List[queue.Queue]
        self._contexts = []  # type: List[list]
        for st in self.stages:
            self._contexts.append([st.engines[k % len(st.engines)].create_context(k) for k in range(st.streams)])
        return [("stage %d" % i, self._stage_loop, (i, ctxs), "stage-%d" % i) for i, ctxs in enumerate(self._contexts)]

    def _release(self) -> None:
        for ctxs in getattr(self, "_contexts", ()):
            for c in ctxs:
                try:
                    c.close()
                except Exception:
                    pass
        self._contexts = []

    def _admit(self, job) -> None:
        self._inboxes[0].put(("job", job))

    def _stage_loop(self, index: int, contexts: list) -> None:
        inbox = self._inboxes[index]
        out = self._inboxes[index + 1] if index + 1 < len(self.stages) else self._post_q
        waiting = collections.deque()  # jobs not yet submitted
        inflight = collections.deque()  # [job, done flag] in submission order
        busy = [False] * len(contexts)
        rr = 0
        eof = False
        while True:
            kind, item = self._get(inbox)
            if kind == "job":
                if item is _EOF:
                    eof = True
                else:
                    waiting.append(item)
            else:  # a context finished: ("done", (k, entry, outputs, error, t0, t1))
                k, entry, outputs, error, t0, t1 = item
                if error is not None:
                    raise RuntimeError("context %d on %s failed on frame %d: %s" % (
                        k, contexts[k].pe, entry[0].id, _describe(error)))
                busy[k] = False
                job = entry[0]
                job.data = outputs
                self._record(contexts[k].pe, index, job, t0, t1)
                entry[1] = True
            while waiting and not busy[rr]:
                job = waiting.popleft()
                entry = [job, False]
                inflight.append(entry)
                busy[rr] = True
                contexts[rr].submit(job.data, _completion(inbox, rr, entry))
                rr = (rr + 1) % len(contexts)
            while inflight and inflight[0][1]:
                out.put(("job", inflight.popleft()[0]))
            if eof and not waiting and not inflight:
                out.put(("job", _EOF))
                return


def _completion(inbox: "queue.Queue", k: int, entry: list):
    def done(outputs, error, t0, t1):
        inbox.put(("done", (k, entry, outputs, error, t0, t1)))
    return done


def _describe(exc: BaseException) -> str:
    text = "%s: %s" % (type(exc).__name__, exc)
    tb = traceback.extract_tb(exc.__traceback__)
    if tb:
        last = tb[-1]
        text += " (at %s:%d)" % (last.filename.rsplit("/", 1)[-1], last.lineno)
    return text
