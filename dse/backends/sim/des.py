"""Discrete-event simulation of the pipelined runtime (the JEDI semantics of thesis Ch. 3.3).

- ``buffers``, with ``buffer_scope="pipeline"``: tokens a frame holds from the start of its pre-processing to the
  end of its post-processing (frames in flight). With ``"interface"`` (the JEDI runtime, cap-lab/jedi: "the
  number of buffers between stages"): every interface (pre -> stage 1, stage k -> stage k+1, last stage -> post)
  has that many slots; a producer takes a slot of its output interface when it starts and the consumer frees it
  when it finishes, so only adjacent steps bound each other.
- pre/post threads are CPU tasks shared by processor sharing: every running task progresses at the rate the tasks
  running *now* allow, slowed by their number (shared DRAM, and time-slicing beyond the core count, where each
  stage's polling host thread counts as ``stage_thread_cpu`` of a core). A rate fixed at a task's start would let
  tasks that started while few ran keep their speed later, and the host work beyond its cores. Each stage execution
  also gives its stage's one host thread a CPU task (``StageRuntime.cpu_us``: enqueue, DLA submission), run in the
  same pool one at a time per thread; the stream does not wait for it (the enqueue runs ahead of the PE), but it
  takes its share of the cores.
- every stage has S streams (execution contexts); a stream takes the next frame from the stage's FIFO and
  runs the stage's phases in order. GPU phases share the GPU by processor sharing with occupancies: a job
  with occupancy o runs at rate min(1, 1/sum(o)); small kernels overlap, big ones saturate it. DLA phases
  queue for their core, which runs one task at a time (so 2 contexts per DLA hide the GPU-side reformats).
  "host" phases (the hand-over wait at a stage boundary) hold the stream and nothing else.
- a PND stage's streams are split between the two DLA cores.
The unit of work is one buffer (a batch of images). Utilizations are integrated over the measured window: from
the ``warmup``-th completion to ``frames`` completions later. With ``cooldown`` 0 nothing is admitted after the
measured frames, so the window's end drains an emptying pipeline, faster than its steady state where two GPU
stages share the GPU (``bench.sim_window``: PND-B +2.9 % median over 600 frames); ``cooldown`` frames admitted
after them keep it full to the end (the platform's ``sim.full_window``).

The event queue (and the ticket that orders the pre/post pool's next end beside it), the DLA cores' FIFO servers
and the trace records are ``dse.des``'s, shared with the other simulators; the GPU's occupancy sharing and the
pre/post processor sharing are this model's own. The loop peeks at and pops the queue's heap itself: one call less
per event is about 2 % of ``bench.sim_speed``, and the whole shared core costs it about 2 % (paired runs, medians).
"""
from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from dse.des import EventQueue, FifoServer, Span


@dataclass
class StageRuntime:
    phases: list[tuple[str, float, float]]     # (resource "gpu"|"dla", us, occupancy)
    stream_cores: list[int | None]             # per stream: DLA core index, None for a GPU stage
    label: str = ""
    # per stream phases, when streams run different engines (interleaved stage: the whole network on the
    # GPU for some streams, on a DLA core for others); None = every stream runs ``phases``
    stream_phases: list[list[tuple[str, float, float]]] | None = None
    cpu_us: float = 0.0      # CPU work of the stage's host thread per execution (``dse.platform.StageThreadWork``)

    def phases_of(self, stream: int) -> list[tuple[str, float, float]]:
        return self.stream_phases[stream] if self.stream_phases else self.phases


@dataclass
class SimInput:
    pre_us: float
    post_us: float
    pre_threads: int
    post_threads: int
    buffers: int
    cpu_cores: int
    cpu_contention: float
    stages: list[StageRuntime]
    n_dla: int
    frames: int
    warmup: int
    task_sigma: float = 0.0
    seed: int = 0
    trace: bool = False
    buffer_scope: str = "pipeline"             # "pipeline" | "interface" (see the module docstring)
    stage_thread_cpu: float = 0.0              # cores each stage's host thread keeps busy (polling its stream)
    cooldown: int = 0                          # frames admitted after the measured ones (see ``simulate``)


@dataclass
class PipelineRun:
    buffers_per_s: float
    latencies_us: np.ndarray
    gpu_busy: float
    gpu_load: float
    dla_busy: list[float]
    cpu_busy_cores: float
    stage_service_us: list[float]
    pre_service_us: float
    post_service_us: float
    window_us: float
    trace: list[Span] = field(default_factory=list)


def simulate(inp: SimInput) -> PipelineRun:  # noqa: C901 - one event loop, kept in one place for speed
    n_end = inp.warmup + inp.frames            # the window ends at this many completions ...
    n_total = n_end + inp.cooldown             # ... with these admitted, so the pipeline is still full then
    n_st = len(inp.stages)
    rng = np.random.default_rng(inp.seed)
    if inp.task_sigma > 0:
        jit = rng.lognormal(0.0, inp.task_sigma, size=(n_total, n_st + 2))
    else:
        jit = np.ones((n_total, n_st + 2))
    jit = jit.tolist()
    cores, contention = max(1, inp.cpu_cores), inp.cpu_contention
    polling = inp.stage_thread_cpu * n_st      # CPU the stage threads take from pre/post once the cores are full
    trace = [] if inp.trace else None

    events = EventQueue()
    push, heap = events.push, events.heap
    now = 0.0
    # integrals
    last_t = 0.0
    gpu_busy_i = gpu_load_i = cpu_i = 0.0
    dla_i = [0.0] * inp.n_dla
    snap = None

    per_iface = inp.buffer_scope == "interface"
    # free slots: slot[0] is taken by pre-processing; "pipeline" frees it after post-processing, "interface" has
    # one pool per interface (pre -> stage 1 ... last stage -> post), freed by the interface's consumer
    slots = [inp.buffers] * (n_st + 1)
    next_frame = 0
    idle_pre, idle_post = inp.pre_threads, inp.post_threads
    stage_q = [deque() for _ in range(n_st)]
    post_q: deque = deque()
    idle_streams = [list(range(len(s.stream_cores)))[::-1] for s in inp.stages]
    dla = [FifoServer() for _ in range(inp.n_dla)]
    gpu_jobs: dict[int, list] = {}
    gpu_occ = 0.0
    gpu_rate = 1.0
    gpu_last = 0.0
    gpu_version = 0
    # processor sharing in virtual time: every running job has done cpu_v of work since the origin, so a job's
    # finish tag (cpu_v at its start + its work) never changes and the next to end is the heap's smallest tag
    cpu_heap: list = []
    cpu_v = 0.0
    cpu_last = 0.0
    cpu_next = None
    cpu_id = 0
    start_t = [0.0] * n_total
    done_t = [0.0] * n_total
    done = 0
    order: list[int] = []                      # frames in the order they completed
    stage_service = [0.0] * n_st
    stage_count = [0] * n_st
    pre_service = post_service = 0.0
    pre_count = post_count = 0
    job_id = 0

    def cpu_slow(n):
        busy = n + polling
        return (1.0 + contention * (n - 1)) * (busy / cores if busy > cores else 1.0)

    slow_of = [cpu_slow(n) if n else 1.0 for n in range(inp.pre_threads + inp.post_threads + n_st + 1)]
    thread_work = [0] * n_st      # per stage: executions whose host-thread work is not done (the first one runs)

    def cpu_advance():
        """Processor sharing: every running pre/post job progresses at the rate the jobs running now allow."""
        nonlocal cpu_last, cpu_v
        if cpu_heap and now > cpu_last:
            cpu_v += (now - cpu_last) / slow_of[len(cpu_heap)]
        cpu_last = now

    def cpu_reschedule():
        """The next pre/post end as (time, ticket), kept beside the event heap: ordered as if pushed, never stale."""
        nonlocal cpu_next
        cpu_next = None
        if cpu_heap:
            cpu_next = (now + max(cpu_heap[0][0] - cpu_v, 0.0) * slow_of[len(cpu_heap)], events.ticket())

    def cpu_start(kind, f, work=0.0):
        """A CPU task: pre- or post-processing of frame ``f`` (kind 0, 1), or ``work`` of stage ``f``'s thread (2)."""
        nonlocal cpu_id
        cpu_advance()
        if kind == 0:
            work = inp.pre_us * jit[f][0]
            start_t[f] = now
        elif kind == 1:
            work = inp.post_us * jit[f][1]
        cpu_id += 1
        heapq.heappush(cpu_heap, (cpu_v + work, cpu_id, (kind, f, now)))
        cpu_reschedule()

    def try_pre():
        nonlocal idle_pre, next_frame
        while idle_pre and slots[0] and next_frame < n_total:
            idle_pre -= 1
            slots[0] -= 1
            cpu_start(0, next_frame)
            next_frame += 1

    def try_post():
        nonlocal idle_post
        while idle_post and post_q:
            idle_post -= 1
            cpu_start(1, post_q.popleft())

    def gpu_advance():
        nonlocal gpu_last
        if gpu_jobs:
            d = (now - gpu_last) * gpu_rate
            if d:
                for j in gpu_jobs.values():
                    j[0] -= d
        gpu_last = now

    def gpu_reschedule():
        nonlocal gpu_rate, gpu_version
        gpu_version += 1
        if not gpu_jobs:
            return
        gpu_rate = 1.0 / gpu_occ if gpu_occ > 1.0 else 1.0
        rem = min(j[0] for j in gpu_jobs.values())
        push(now + max(rem, 0.0) / gpu_rate, 2, gpu_version)

    def run_phase(job):
        """job = [frame, stage, stream, phase index, phase start]"""
        nonlocal gpu_occ, job_id
        f, k, s, idx = job[0], job[1], job[2], job[3]
        st = inp.stages[k]
        if idx == 0 and st.cpu_us > 0:
            thread_work[k] += 1
            if thread_work[k] == 1:
                cpu_start(2, k, st.cpu_us)
        if idx == len(st.phases_of(s)):
            idle_streams[k].append(s)
            if st.stream_cores[s] is not None:
                core_jobs[st.stream_cores[s]] -= 1
            if per_iface:  # the input slot is free again: its producer may go on
                slots[k] += 1
                if k == 0:
                    try_pre()
                else:
                    dispatch(k - 1)
            if k + 1 < n_st:
                stage_q[k + 1].append(f)
                dispatch(k + 1)
            else:
                post_q.append(f)
                try_post()
            dispatch(k)
            return
        res, us, occ = st.phases_of(s)[idx]
        job[4] = now
        if res == "host":  # holds the stream, no PE
            push(now + us, 3, job)
        elif res == "gpu":
            gpu_advance()
            job_id += 1
            gpu_jobs[job_id] = [us * jit[f][2 + k], occ, job]
            gpu_occ += occ
            gpu_reschedule()
        else:
            c = st.stream_cores[s]
            if dla[c].submit(job):
                dla_start(c, job)

    def dla_start(c, job):
        job[4] = now
        res, us, occ = inp.stages[job[1]].phases_of(job[2])[job[3]]
        push(now + us * jit[job[0]][2 + job[1]], 1, (c, job))

    core_jobs = [0] * inp.n_dla  # frames currently inside a DLA stage, per core

    def dispatch(k):
        q, idle = stage_q[k], idle_streams[k]
        cores_of = inp.stages[k].stream_cores
        while idle and q and (slots[k + 1] or not per_iface):
            if per_iface:
                slots[k + 1] -= 1
            if cores_of[0] is None or len(idle) == 1:
                s = idle.pop()
            else:  # a free context on the least loaded DLA core (PND balances its two engines)
                pos = min(range(len(idle)), key=lambda i: (core_jobs[cores_of[idle[i]]], -i))
                s = idle.pop(pos)
            if cores_of[s] is not None:
                core_jobs[cores_of[s]] += 1
            run_phase([q.popleft(), k, s, 0, now])

    def phase_done(job):
        f, k = job[0], job[1]
        if f >= inp.warmup:
            stage_service[k] += now - job[4]
            if job[3] == len(inp.stages[k].phases_of(job[2])) - 1:
                stage_count[k] += 1
        if trace is not None:
            res = inp.stages[k].phases_of(job[2])[job[3]][0]
            if res == "host":
                lane = f"hand-over stage{k + 1}"
            elif res == "gpu":
                lane = f"GPU stage{k + 1} ctx{job[2]}"
            else:
                lane = f"DLA{inp.stages[k].stream_cores[job[2]]} stage{k + 1} ctx{job[2]}"
            trace.append(Span(lane, f, job[4], now, f"stage{k + 1}"))
        job[3] += 1
        run_phase(job)

    def cpu_done(ck, f, t0) -> bool:
        """A CPU task ended: a pre/post job hands its frame on; True once every frame is done."""
        nonlocal idle_pre, idle_post, pre_service, pre_count, post_service, post_count, done, snap
        if ck == 2:         # stage f's thread: nothing waits for its work; it takes on the next execution's
            thread_work[f] -= 1
            if thread_work[f]:
                cpu_start(2, f, inp.stages[f].cpu_us)
            return False
        if ck == 0:
            idle_pre += 1
            if f >= inp.warmup:
                pre_service += now - t0
                pre_count += 1
            if trace is not None:
                trace.append(Span("CPU pre", f, t0, now, "pre"))
            stage_q[0].append(f)
            dispatch(0)
            try_pre()
        else:
            idle_post += 1
            slots[n_st if per_iface else 0] += 1
            if per_iface:
                dispatch(n_st - 1)
            if f >= inp.warmup:
                post_service += now - t0
                post_count += 1
            if trace is not None:
                trace.append(Span("CPU post", f, t0, now, "post"))
            done_t[f] = now
            done += 1
            order.append(f)
            if done == inp.warmup:
                snap = (now, gpu_busy_i, gpu_load_i, cpu_i, list(dla_i))
            if done == n_end:
                return True
            try_post()
            try_pre()
        return False

    try_pre()
    while heap or cpu_next:
        if cpu_next is not None and (not heap or cpu_next[0] < heap[0][0]
                                     or (cpu_next[0] == heap[0][0] and cpu_next[1] < heap[0][1])):
            t, kind = cpu_next[0], 4
        else:
            t, _, kind, payload = heapq.heappop(heap)
            if kind == 2 and payload != gpu_version:
                continue
        # integrate utilization up to t
        dt = t - last_t
        if dt > 0:
            if gpu_jobs:
                gpu_busy_i += dt
                gpu_load_i += dt * (gpu_occ if gpu_occ < 1.0 else 1.0)
            cpu_i += dt * min(len(cpu_heap), cores)
            for c, core in enumerate(dla):
                if core.current is not None:
                    dla_i[c] += dt
            last_t = t
        now = t
        if kind == 4:
            cpu_advance()
            ended = []
            while cpu_heap and cpu_heap[0][0] - cpu_v <= 1e-6:
                ended.append(heapq.heappop(cpu_heap)[1:])
            ended = [payload for _, payload in sorted(ended)]      # jobs ending together hand on in start order
            cpu_reschedule()
            for ck, f, t0 in ended:
                if cpu_done(ck, f, t0):
                    break
            if done == n_end:
                break
        elif kind == 3:
            phase_done(payload)
        elif kind == 1:
            c, job = payload
            nxt = dla[c].finish()
            if nxt is not None:
                dla_start(c, nxt)
            phase_done(job)
        else:
            gpu_advance()
            finished = [jid for jid, j in gpu_jobs.items() if j[0] <= 1e-6]
            jobs = []
            for jid in finished:
                j = gpu_jobs.pop(jid)
                gpu_occ -= j[1]
                jobs.append(j[2])
            if not gpu_jobs:
                gpu_occ = 0.0
            gpu_reschedule()
            for job in jobs:
                phase_done(job)

    if snap is None:
        snap = (0.0, 0.0, 0.0, 0.0, [0.0] * inp.n_dla)
    t0, g0, l0, c0, d0 = snap
    window = max(now - t0, 1e-9)
    # frames finish out of order: throughput and latency over the frames completed after the warm-up snapshot
    lat = np.array([done_t[f] - start_t[f] for f in order[inp.warmup:n_end]])
    return PipelineRun(
        buffers_per_s=inp.frames / (window * 1e-6),
        latencies_us=lat,
        gpu_busy=min(1.0, (gpu_busy_i - g0) / window),
        gpu_load=min(1.0, (gpu_load_i - l0) / window),
        dla_busy=[min(1.0, (dla_i[c] - d0[c]) / window) for c in range(inp.n_dla)],
        cpu_busy_cores=(cpu_i - c0) / window,
        stage_service_us=[stage_service[k] / max(stage_count[k], 1) for k in range(n_st)],
        pre_service_us=pre_service / max(pre_count, 1),
        post_service_us=post_service / max(post_count, 1),
        window_us=window,
        trace=trace or [],
    )
