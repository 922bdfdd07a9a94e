"""The discrete-event machinery shared by the three simulators: ``dse.backends.sim.des`` (the pipelined runtime),
``dse.backends.sim.periodic`` (periodic apps) and ``dse.taskgraph.simulate`` (per-layer mappings).

It holds what they have in common: the event queue, the servers (FIFO; fixed priority, preemptive or not), the
trace record and the Gantt data drawn from a trace. What a stage, a buffer or a contention rate means stays in
each simulator; so does processor sharing, which only the pipeline needs (its GPU occupancies and CPU pool).
"""
from __future__ import annotations

from collections import deque
from heapq import heappop, heappush
from typing import Iterable, NamedTuple


class EventQueue:
    """Events by time, ties in push order: the counter keeps a run independent of payloads and of the heap's
    layout, so a seeded run is the same everywhere. ``heap`` holds ``(t, seq, kind, payload)`` entries; a
    simulator whose loop is speed-critical may peek at and pop from it directly."""

    __slots__ = ("heap", "seq")

    def __init__(self) -> None:
        self.heap: list[tuple] = []
        self.seq = 0

    def __len__(self) -> int:
        return len(self.heap)

    def push(self, t: float, kind, payload=None) -> None:
        self.seq += 1
        heappush(self.heap, (t, self.seq, kind, payload))

    def pop(self) -> tuple:
        """The next event as ``(t, seq, kind, payload)``."""
        return heappop(self.heap)

    def pop_due(self) -> list[tuple]:
        """Every event at the earliest time, in push order: for a simulator that decides once per instant."""
        heap = self.heap
        out = [heappop(heap)]
        t = out[0][0]
        while heap and heap[0][0] == t:
            out.append(heappop(heap))
        return out

    def ticket(self) -> int:
        """A place in the push order for an event kept beside the heap, so it ties with heap events as if pushed
        now (the pipeline's next CPU end, which moves too often to be pushed)."""
        self.seq += 1
        return self.seq


class FifoServer:
    """One job at a time in arrival order, never preempted: a DLA core, the periodic GPU's kernel queue."""

    __slots__ = ("current", "queue")

    def __init__(self) -> None:
        self.current = None
        self.queue: deque = deque()

    def submit(self, job) -> bool:
        """``job`` arrives: True when it runs at once (the server idled), else it waits its turn."""
        if self.current is None:
            self.current = job
            return True
        self.queue.append(job)
        return False

    def finish(self):
        """The running job ended: the first waiting one runs and is returned, or the server idles (None)."""
        self.current = self.queue.popleft() if self.queue else None
        return self.current


class PriorityServer:
    """One job at a time, the smallest key first; keys must be unique (e.g. ``(priority, arrival)``), so jobs are
    never compared. Non-preemptive: a task-graph PE. ``preemptive``: a fixed-priority CPU core, where a job with
    a smaller key takes the core at once and the running one waits again under its own key, ahead of later
    arrivals of its priority."""

    __slots__ = ("current", "key", "queue", "preemptive")

    def __init__(self, preemptive: bool = False) -> None:
        self.current = self.key = None
        self.queue: list[tuple] = []
        self.preemptive = preemptive

    def submit(self, job, key) -> bool:
        """``job`` arrives: True when it runs at once (the server idled, or it preempted the running job)."""
        if self.current is not None:
            if not (self.preemptive and key < self.key):
                heappush(self.queue, (key, job))
                return False
            heappush(self.queue, (self.key, self.current))
        self.current, self.key = job, key
        return True

    def wait(self, job, key) -> None:
        """``job`` joins the queue without taking an idle server: when several arrive at one instant, the
        smallest key among all of them must win (``start_next`` after the instant)."""
        heappush(self.queue, (key, job))

    def release(self) -> None:
        """The running job ended; the server idles until ``start_next``."""
        self.current = self.key = None

    def start_next(self):
        """An idle server takes the smallest waiting key: the job it now runs, or None (busy, or nothing waits)."""
        if self.current is None and self.queue:
            self.key, self.current = heappop(self.queue)
            return self.current
        return None

    def finish(self):
        """The running job ended: the next one runs and is returned, or the server idles (None)."""
        self.release()
        return self.start_next()


class Span(NamedTuple):
    """One piece of work on one lane, the trace record of every simulator (``dse.report.gantt`` draws them)."""

    lane: str                   # the PE, thread or context; lanes that differ only in a " ctxN" suffix share rows
    frame: int                  # the frame it belongs to (periodic: the app's job index)
    start: float                # us
    end: float                  # us
    label: str                  # what ran: a stage, a task, an app
    task: int | None = None     # its task index, where the simulator numbers tasks (task graph, periodic)


class GanttData(NamedTuple):
    """What a Gantt chart draws: its rows top to bottom, each one lane's spans in start order, and the time span."""

    rows: list[tuple[str, list[Span]]]     # (row label, spans)
    start: float
    end: float


def _row_order(group: str) -> tuple:
    """Pre-processing threads first, post-processing last, DLA lanes before the others, then by stage."""
    if group.startswith("CPU pre"):
        return (0, group)
    if group.startswith("CPU post"):
        return (3, group)
    return (1 if group.startswith("DLA") else 2, group.split("stage")[-1], group)


def gantt_data(trace: Iterable[Span], first_frame: int | None = None, n_frames: int = 8) -> GanttData:
    """The rows of frames [first_frame, first_frame + n_frames) of ``trace`` (default: from the middle frame).
    Overlapping spans of one lane group (two pre-processing threads, two contexts of a stage) are spread over
    rows greedily, so every row is one thread or context."""
    trace = list(trace)
    if not trace:
        raise ValueError("empty schedule trace: measure with trace=True")
    if first_frame is None:
        frames = sorted({s.frame for s in trace})
        first_frame = frames[len(frames) // 2]
    shown = range(first_frame, first_frame + n_frames)
    groups: dict[str, list[Span]] = {}
    for s in trace:
        if s.frame in shown:
            groups.setdefault(s.lane.split(" ctx")[0], []).append(s)
    rows: list[tuple[str, list[Span]]] = []
    for group in sorted(groups, key=_row_order):
        lanes: list[list[Span]] = []
        for s in sorted(groups[group], key=lambda s: (s.start, s.end, s.frame, s.label)):
            for lane in lanes:
                if lane[-1].end <= s.start + 1e-9:
                    lane.append(s)
                    break
            else:
                lanes.append([s])
        rows += [(f"{group} #{i}" if len(lanes) > 1 else group, lane) for i, lane in enumerate(lanes)]
    spans = [s for _, lane in rows for s in lane]
    return GanttData(rows, min(s.start for s in spans), max(s.end for s in spans))
