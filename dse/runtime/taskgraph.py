"""Real execution of a per-layer mapping (seeds 002/004) on this host's CPU core groups.

``partition_segments`` turns a PE id per layer into segments: maximal runs of consecutive layers (topological
order) on one PE, each one ONNX subgraph that reads network inputs and tensors of any earlier segment.
``TaskGraphRuntime`` runs them: one worker thread per PE, pinned to its core group, executing one segment at a
time, each segment an ``OrtStageEngine`` with as many intra-op threads as the group has cores. Semantics of 004's
``SchedSimulator`` (spec 1.4): segment s of frame k is runnable when every segment it reads has finished frame k
and, when s has consumers on other PEs, frame k - B of s has been consumed by all of them (B = ``slots`` = 2,
double buffering); each PE picks its runnable segment with the smallest (frame, first layer). Every frame carries
a tensor dict, filled by the segments and emptied into post-processing when its last segment finishes.

Pre/post-processing threads, the buffer pool, failure handling (any exception stops every thread and is the
run's error), the watchdog and the RunResult are ``FrameRunner``'s, shared with ``Pipeline``; the subgraphs come
from ``dse.graph.partition.extract_ranges``, shared with ``partition``. So when every PE holds one contiguous
range, the segments are the stages of that cut tuple, with the same sessions and threads, and the outputs are
the pipeline's; only the scheduler differs. That case is not handed to ``Pipeline``: its chain scheduler has
streams, PND and in-order forwarding but no DAG and no per-tensor B slots; keeping one scheduler per semantics
makes the contiguous case a check of this one (the tests compare both). Not for the board agent (imports onnx).
"""
from __future__ import annotations

import numbers
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dse.core.errors import DseError
from dse.graph.partition import StageModel, extract_ranges
from dse.platform.cpu_groups import core_group_name
from dse.runtime.engine import pin_current_thread
from dse.runtime.pipeline import _EOF, POLL_S, FrameRunner, _describe, _Stopped

SLOTS = 2  # B: frames of a cross-PE tensor in flight (002 L350, 004 L111)


@dataclass
class Segment(StageModel):
    """A maximal run of layers on one PE: its ONNX subgraph (``model``), boundary tensors and ``pe``.

    ``network_outputs``: the network outputs it produces (they go to post-processing; a later segment may read
    them too).
    """

    pe: int = 0
    network_outputs: list[str] = field(default_factory=list)

    @property
    def file_name(self) -> str:
        return f"segment_{self.index}.onnx"


def partition_segments(analysis, layer_pe: Sequence[int]) -> list[Segment]:
    """One Segment per maximal run of consecutive layers mapped to the same PE id (``layer_pe[i]``: layer i's)."""
    n = len(analysis.layers)
    pes = list(layer_pe)
    if len(pes) != n:
        raise DseError(f"layer_pe has {len(pes)} entries; the network has {n} layers (one PE id per layer, in "
                       f"topological order)")
    for p in pes:
        if not isinstance(p, numbers.Integral) or p < 0:
            raise DseError(f"layer_pe holds {p!r}: PE ids are integers >= 0")
    pes = [int(p) for p in pes]
    bounds, first = [], 0
    for i in range(1, n + 1):
        if i == n or pes[i] != pes[first]:
            bounds.append((first, i - 1))
            first = i
    outputs = set(analysis.outputs)
    return [Segment(**vars(s), pe=pes[s.first_layer], network_outputs=[t for t in s.outputs if t in outputs])
            for s in extract_ranges(analysis, bounds, label="segment")]


def option_groups(platform, option: str) -> list[tuple[int, ...]]:
    """The core groups of a host-cpu mapping option in stage order: PE id p is the option's stage p."""
    opt = platform.option(option)
    groups = []
    for i, spec in enumerate(opt.stages):
        pes = platform.stage_pes(spec)
        if len(pes) != 1 or not pes[0].cores:
            raise DseError(f"option {option} of platform {platform.name}: stage {i} ({spec.label()}) is not one "
                           f"CPU core group")
        groups.append(tuple(pes[0].cores))
    return groups


class _Frame:
    __slots__ = ("job", "tensors", "pending", "unconsumed", "left")

    def __init__(self, job, pending: list[int], unconsumed: list[int], left: int):
        self.job = job
        self.tensors = dict(job.data)
        self.pending = pending  # per segment: producers not yet finished
        self.unconsumed = unconsumed  # per segment: cross-PE consumers not yet finished
        self.left = left  # segments not yet finished


class TaskGraphRuntime(FrameRunner):
    """Runs ``frames`` frames (after ``warmup``) of a segmented network on core groups (``groups[p]``: PE p's cores).

    ``preprocess(frame, slot) -> {network input: array}``; ``postprocess(frame, {network output: array})``.
    ``engines``: one per segment with ``infer({input: array}) -> {output: array}``; by default an
    ``OrtStageEngine`` on the segment's core group (built here; ``close()`` frees them). ``buffers`` bounds the
    frames between pre- and post-processing (default: enough that only the B slots per cross-PE tensor bind).
    RunResult: ``util`` per PE (by core-group name), ``stage_ms``/``stage_util`` per segment.
    """

    def __init__(self, segments: Sequence[Segment], groups: Sequence[Sequence[int]],
                 preprocess: Callable[[int, int], dict[str, Any]], postprocess: Callable[[int, dict[str, Any]], Any],
                 *, frames: int, warmup: int = 0, slots: int = SLOTS, buffers: int | None = None,
                 pre_threads: int = 1, post_threads: int = 1, images_per_job: int = 1, keep_outputs: bool = False,
                 keep_results: bool = True, timeout_s: float = 600.0, stall_s: float = 60.0,
                 engines: Sequence[Any] | None = None, spinning: bool = False):
        if not segments or [s.index for s in segments] != list(range(len(segments))):
            raise DseError("give the whole list of segments from partition_segments, in order")
        if slots < 1:
            raise DseError(f"slots (B) must be >= 1, got {slots}")
        self.groups = [tuple(sorted(int(c) for c in g)) for g in groups]
        self.pe_names = [core_group_name(g) if g else f"PE{p}" for p, g in enumerate(self.groups)]
        for s in segments:
            if not (0 <= s.pe < len(self.groups)) or not self.groups[s.pe]:
                choices = ", ".join(f"{p} ({n})" for p, n in enumerate(self.pe_names) if self.groups[p]) or "none"
                raise DseError(f"segment {s.index} (layers {s.first_layer}-{s.last_layer}) is mapped to PE {s.pe}, "
                               f"which has no core group; valid PE ids: {choices}")
        self.segments = list(segments)
        self.n_stages = len(self.segments)
        self.slots = slots
        self.pes = sorted({s.pe for s in self.segments})
        producer = {t: s.index for s in self.segments for t in s.outputs}
        self.sources = list(dict.fromkeys(t for s in self.segments for t in s.inputs if t not in producer))
        self.deps = [sorted({producer[t] for t in s.inputs if t in producer}) for s in self.segments]
        self.consumers: list[list[int]] = [[] for _ in self.segments]
        for s, deps in enumerate(self.deps):
            for d in deps:
                self.consumers[d].append(s)
        self.cross = [[c for c in cons if self.segments[c].pe != self.segments[s].pe]
                      for s, cons in enumerate(self.consumers)]
        self.outputs = [t for s in self.segments for t in s.network_outputs]
        if buffers is None:
            buffers = slots * len(self.pes) + pre_threads + post_threads
        FrameRunner.__init__(self, preprocess, postprocess, frames, warmup, pre_threads, post_threads, buffers,
                             images_per_job, keep_outputs, keep_results, timeout_s, stall_s)
        if engines is None:
            from dse.runtime.ort_engine import OrtStageEngine

            engines = [OrtStageEngine(s.model, self.groups[s.pe], pe=self.pe_names[s.pe], spinning=spinning)
                       for s in self.segments]
        elif len(engines) != len(self.segments):
            raise DseError(f"{len(engines)} engines for {len(self.segments)} segments")
        self.engines = list(engines)

    def close(self) -> None:
        for e in self.engines:
            e.close()

    # --- FrameRunner hooks ---------------------------------------------------------------------------
    def _prepare(self) -> list[tuple]:
        self._cond = threading.Condition(threading.Lock())  # guards the scheduler state below
        self._frames_in: dict[int, _Frame] = {}
        self._arrived: dict[int, Any] = {}  # pre-processed frames waiting for their turn (admission in id order)
        self._next_admit = 0
        self._ready: dict[int, list[tuple[int, int, int]]] = {p: [] for p in self.pes}  # (frame, first layer, seg)
        self._in_flight = [0] * len(self.segments)  # frames of a segment not yet consumed by its cross-PE consumers
        self._tasks_left = {p: self.frames * sum(s.pe == p for s in self.segments) for p in self.pes}
        self._frames_left = self.frames
        for p in self.pes:
            self._busy[self.pe_names[p]] = []
        return [(f"PE {p} ({self.pe_names[p]})", self._pe_loop, (p,), f"pe-{p}") for p in self.pes]

    def _admit(self, job) -> None:
        if job is _EOF:
            return
        missing = [t for t in self.sources if t not in job.data]
        if missing:
            raise ValueError(f"frame {job.id}: pre-processing gave {sorted(job.data)}, not network input(s) {missing}")
        with self._cond:
            self._arrived[job.id] = job
            while self._next_admit in self._arrived:
                k = self._next_admit
                frame = _Frame(self._arrived.pop(k), [len(d) for d in self.deps],
                               [len(c) for c in self.cross], len(self.segments))
                self._frames_in[k] = frame
                for s, deps in enumerate(self.deps):
                    if not deps:
                        self._ready[self.segments[s].pe].append((k, self.segments[s].first_layer, s))
                self._next_admit += 1
            self._cond.notify_all()

    # --- the PE workers ------------------------------------------------------------------------------
    def _pick(self, pe: int) -> tuple[int, int, int] | None:
        """The runnable task of ``pe`` with the smallest (frame, first layer), removed from its ready list."""
        ready = self._ready[pe]
        runnable = [t for t in ready if not self.cross[t[2]] or self._in_flight[t[2]] < self.slots]
        if not runnable:
            return None
        task = min(runnable)
        ready.remove(task)
        if self.cross[task[2]]:
            self._in_flight[task[2]] += 1
        return task

    def _pe_loop(self, pe: int) -> None:
        pin_current_thread(self.groups[pe])
        name = self.pe_names[pe]
        while True:
            with self._cond:
                task = None
                while task is None:
                    if self._stop.is_set():
                        raise _Stopped()
                    if self._tasks_left[pe] == 0:
                        return
                    task = self._pick(pe)
                    if task is None:
                        self._cond.wait(POLL_S)
                k, _, s = task
                frame = self._frames_in[k]
                seg = self.segments[s]
                feed = {t: frame.tensors[t] for t in seg.inputs}
            t0 = time.perf_counter()
            try:
                out = self.engines[s].infer(feed)
            except Exception as exc:
                raise RuntimeError(f"segment {s} (layers {seg.first_layer}-{seg.last_layer}) failed on frame {k}: "
                                   f"{_describe(exc)}") from exc
            t1 = time.perf_counter()
            self._record(name, s, frame.job, t0, t1)
            self._finish(pe, k, s, out)

    def _finish(self, pe: int, k: int, s: int, out: dict[str, Any]) -> None:
        seg = self.segments[s]
        missing = [t for t in seg.outputs if t not in out]
        if missing:
            raise RuntimeError(f"segment {s} (layers {seg.first_layer}-{seg.last_layer}) did not produce {missing}")
        with self._cond:
            frame = self._frames_in[k]
            frame.tensors.update(out)
            for d in self.deps[s]:  # s has read d's outputs: d's slot of frame k is free once all cross readers did
                if self.segments[d].pe != seg.pe:
                    frame.unconsumed[d] -= 1
                    if frame.unconsumed[d] == 0:
                        self._in_flight[d] -= 1
            for c in self.consumers[s]:
                frame.pending[c] -= 1
                if frame.pending[c] == 0:
                    self._ready[self.segments[c].pe].append((k, self.segments[c].first_layer, c))
            frame.left -= 1
            self._tasks_left[pe] -= 1
            if frame.left == 0:
                del self._frames_in[k]
                frame.job.data = {t: frame.tensors[t] for t in self.outputs}
                self._post_q.put(("job", frame.job))
                self._frames_left -= 1
                if self._frames_left == 0:
                    self._post_q.put(("job", _EOF))
            self._cond.notify_all()
