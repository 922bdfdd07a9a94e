"""Periodic multi-application DES: the deployment run of thesis Ch. 4 (Sec. 4.5.4) on the virtual Xavier, and
the multi-app schedules of seed 002 (Sec. VI) on the per-layer-mapping boards (galaxy-s9-sim, hikey970-sim).

Each app is released every period (from its offset, or a seeded random phase) by a controller on a reserved
CPU core; a job runs its chain of tasks in order, each on the PE its stage is placed on. A Ch. 5 group is an app
with ``edges``: a DAG of stages, where a stage is ready once all its predecessors completed (its own tasks still
run in order), so parallel branches of one job run at the same time, on different PEs or queued on one; the job
completes with its last stage. A job released while the app's previous job still runs waits for it (one frame in
flight per app, no drop). Scheduling, on the servers of ``dse.des``:

- a CPU core: preemptive fixed priority (lower number wins; equal priorities FIFO, no preemption);
- a DLA core: FIFO, one task at a time, non-preemptive;
- the GPU: ONE non-preemptive FIFO server over kernels. A stage submits its next kernel when the previous one
  ends, so the next kernel to run is the head kernel of the earliest-queued waiting stage: kernels of the apps
  interleave, as the analysis' eq. 4.2 assumes.
- an NPU (hikey970-sim): FIFO like a DLA core.
- ``accelerators="priority"`` (seed 002, Eq. (11)): every non-CPU PE is non-preemptive fixed priority instead.
  A running task is never interrupted; when the PE frees, the waiting task of the highest-priority app goes
  first (ties FIFO). Tasks that arrive at one instant are all seen before the PE picks one.

On a per-layer-mapping board the CPU PEs are its mapping cores (the big cluster: CPU4..CPU7 on both phones)
and there is no controller core (pass ``controller_core=None``).

Shared-DRAM contention: while k other accelerators (of GPU, DLAs, NPU) are busy, such a task progresses at
rate 1 / (1 + contention * k); rates change (and completion times move) whenever an accelerator starts or stops.
Task times are drawn per job from the task-time model (``tasktime.TailModel``) around the base times at fmax,
scaled to the clocks with the memory-bound fraction. A DLA task holds only its DLA core: its GPU-side reformats
are inside its time, as in the analysis (spec 2.6 item 8), so their GPU interference is not simulated.
Energy: per-rail power (``power.rail_power_w``) of the measured loads (GPU occupancy 1 while a kernel runs),
times the duration.
"""
from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from dse.backends.sim.power import rail_power_w
from dse.backends.sim.tasktime import KINDS, TailModel, dvfs_scale
from dse.core.errors import DseError, choices_error
from dse.des import EventQueue, FifoServer, PriorityServer, Span
from dse.platform import Platform, load_platform
from dse.rt.model import Placement, check_edges, kind_of, preds_of

ACCELERATOR_KINDS = ("gpu", "dla", "npu")
ACCELERATOR_POLICIES = ("fifo", "priority")


def accelerator_contention(platform: Platform) -> float:
    """``contention.accelerators`` of the platform (0 without the section)."""
    d = (platform.raw or {}).get("contention") or {}
    unknown = sorted(set(d) - {"accelerators"})
    if unknown:
        raise DseError(f"platform {platform.name}: unknown contention key {unknown[0]!r}; valid: accelerators")
    c = float(d.get("accelerators", 0.0))
    if c < 0:
        raise DseError(f"platform {platform.name}: contention.accelerators must be >= 0, got {c}")
    return c


@dataclass(frozen=True)
class PeriodicStage:
    """A stage of an app's chain: its tasks' noise-free base times at the maximum clocks, in us."""

    kind: str                      # "cpu" | "gpu" | "dla" | "npu"
    base_us: tuple[float, ...]
    label: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise DseError(f"stage kind {self.kind!r} is not one of {list(KINDS)}")
        if not self.base_us or any(b < 0 for b in self.base_us):
            raise DseError(f"stage {self.label or self.kind}: needs task base times >= 0, got {self.base_us}")


@dataclass(frozen=True)
class PeriodicApp:
    """``edges`` as in ``dse.rt.model.App``: stage index pairs of a DAG listed in a topological order (every edge
    from a lower to a higher index); None is the chain 0 -> 1 -> ..."""

    name: str
    period_us: float
    priority: int                  # CPU priority, 0 highest
    stages: tuple[PeriodicStage, ...]
    offset_us: float = 0.0         # first release
    edges: tuple[tuple[int, int], ...] | None = None

    def __post_init__(self):
        if self.period_us <= 0 or self.offset_us < 0:
            raise DseError(f"app {self.name}: needs period_us > 0 and offset_us >= 0")
        check_edges(self.name, [st.label for st in self.stages], self.edges)

    @property
    def preds(self) -> tuple[tuple[int, ...], ...]:
        """Predecessor stage indices of every stage."""
        return preds_of(len(self.stages), self.edges)

    @classmethod
    def from_profile(cls, name: str, profile, period_us: float, priority: int,
                     offset_us: float = 0.0) -> "PeriodicApp":
        """From a ``profile.TaskProfile`` (its noise-free base times at fmax)."""
        stages = tuple(PeriodicStage(s.kind, tuple(s.base_us), s.label) for s in profile.stages)
        return cls(name, float(period_us), int(priority), stages, float(offset_us))


@dataclass
class PeriodicResult:
    duration_us: float
    response_us: dict[str, list[float]]     # per completed job, release -> end of its last task
    work_us: dict[str, list[float]]         # per completed job, the sum of its drawn task times (no waiting)
    released: dict[str, int]
    completed: dict[str, int]
    misses: dict[str, int]                  # completed late + still pending past their deadline at the end
    busy: dict[str, float]                  # PE -> busy fraction of the duration
    rail_w: dict[str, float]                # average power per rail
    rail_j: dict[str, float]
    board_energy_j: float
    trace: list[Span] = field(default_factory=list)    # per run segment: lane the PE, label the app, frame the job

    @property
    def max_response_us(self) -> dict[str, float]:
        return {a: max(r) if r else math.inf for a, r in self.response_us.items()}

    @property
    def p99_response_us(self) -> dict[str, float]:
        return {a: float(np.percentile(r, 99)) if r else math.inf for a, r in self.response_us.items()}

    @property
    def board_power_w(self) -> float:
        return float(sum(self.rail_w.values()))


class _Run:
    """A task (flat index ``task`` within its app) on a PE: the remaining work (us at rate 1) and when its
    current run segment began."""

    __slots__ = ("job", "task", "pe", "work", "remaining", "rate", "t_last", "seg_start", "version")

    def __init__(self, job, task: int, pe: str, work: float):
        self.job, self.task, self.pe, self.work, self.remaining = job, task, pe, work, work
        self.rate, self.t_last, self.seg_start, self.version = None, 0.0, 0.0, 0


class _Graph:
    """An app's stages in flat task indices: each stage's task range, successors, predecessor counts, sources."""

    __slots__ = ("first", "end", "stage_of", "succs", "n_preds", "sources")

    def __init__(self, app: PeriodicApp):
        sizes = [len(s.base_us) for s in app.stages]
        self.first = [sum(sizes[:j]) for j in range(len(sizes))]
        self.end = [f + n for f, n in zip(self.first, sizes)]
        self.stage_of = [j for j, n in enumerate(sizes) for _ in range(n)]
        preds = app.preds
        self.succs = [[b for b in range(len(sizes)) if j in preds[b]] for j in range(len(sizes))]
        self.n_preds = [len(ps) for ps in preds]
        self.sources = [j for j, ps in enumerate(preds) if not ps]


class _Job:
    """A released job: its drawn task times, and per stage how many predecessors it still waits for."""

    __slots__ = ("app", "index", "release", "times", "pes", "waiting", "stages_left")

    def __init__(self, app: int, index: int, release: float, times: np.ndarray, pes: list[str], graph: _Graph):
        self.app, self.index, self.release, self.times, self.pes = app, index, release, times, pes
        self.waiting, self.stages_left = list(graph.n_preds), len(graph.n_preds)


def simulate_periodic(apps: Sequence[PeriodicApp], placement: Placement, *, platform,
                      freqs_mhz: Mapping[str, float | None] | None = None, duration_us: float, seed: int = 0,
                      controller_core: int | None = 7, contention: float | None = None,
                      tail: TailModel | None = None, random_phase: bool = False, controller_load: float = 0.05,
                      trace: bool = False, accelerators: str = "fifo") -> PeriodicResult:
    """Run ``apps`` under ``placement`` ((app, stage index) -> PE) for ``duration_us``.

    ``freqs_mhz``: kind (gpu, dla, cpu) -> MHz, None = fmax. ``contention``: None = the platform's
    ``contention.accelerators``. ``tail``: None = the platform's task-time model. ``controller_core``: the CPU
    core the release controller owns (no app task may use it; it counts ``controller_load`` busy cores in the
    power); None = no controller. ``random_phase``: each app's first release at a seeded Uniform(0, period).
    ``accelerators``: "fifo" (Ch. 4) or "priority" (seed 002: non-preemptive fixed priority on every non-CPU PE)."""
    if accelerators not in ACCELERATOR_POLICIES:
        raise choices_error("accelerators policy", accelerators, ACCELERATOR_POLICIES)
    by_priority = accelerators == "priority"
    p = load_platform(platform)
    tail = TailModel.of(p) if tail is None else tail
    c = accelerator_contention(p) if contention is None else float(contention)
    clocks = {k: None for k in KINDS}
    for key, mhz in (freqs_mhz or {}).items():
        if str(key).lower() not in KINDS:
            raise DseError(f"freqs_mhz key {key!r}: expected one of {list(KINDS)}")
        clocks[str(key).lower()] = float(mhz) if mhz else None
    scale = {k: dvfs_scale(p, k, clocks[k]) for k in KINDS}
    names = [a.name for a in apps]
    if len(set(names)) != len(names):
        raise DseError(f"app names must be distinct, got {names}")
    pes_of = [_placed(p, a, placement, controller_core) for a in apps]
    graphs = [_Graph(a) for a in apps]
    bases = [np.array([b * scale[s.kind] for s in a.stages for b in s.base_us]) for a in apps]
    phase_rng = np.random.default_rng([int(seed), 0x5EED])
    offsets = [float(phase_rng.uniform(0.0, a.period_us)) if random_phase else a.offset_us for a in apps]
    draws = []
    for i, a in enumerate(apps):
        n_jobs = max(0, math.ceil((duration_us - offsets[i]) / a.period_us))
        draws.append(tail.draw(bases[i], np.random.default_rng([int(seed), i + 1]), size=(n_jobs, len(bases[i]))))

    events = EventQueue()
    push = events.push
    arrival = itertools.count()                # FIFO order of submissions among equal CPU priorities

    segments: list[Span] = []
    accels = _accelerator_pes(p)
    is_cpu = {pe: kind_of(pe) == "cpu" for pe in dict.fromkeys([*accels, *[x for xs in pes_of for x in xs]])}
    servers = {pe: PriorityServer(preemptive=True) if cpu else PriorityServer() if by_priority else FifoServer()
               for pe, cpu in is_cpu.items()}
    shared_dram = [servers[a] for a in accels]     # their busy count sets the contention rate
    idle_pes: dict[str, None] = {}                 # priority accelerators to fill once the instant's events are in
    busy = {pe: 0.0 for pe in is_cpu}
    backlog = [deque() for _ in apps]
    active: list[_Job | None] = [None] * len(apps)
    resp = {a.name: [] for a in apps}
    work = {a.name: [] for a in apps}
    released = {a.name: 0 for a in apps}
    now = 0.0

    def end_segment(r: _Run) -> None:
        if now > r.seg_start:
            busy[r.pe] += now - r.seg_start
            if trace:
                segments.append(Span(r.pe, r.job.index, r.seg_start, now, apps[r.job.app].name, r.task))

    def start(r: _Run) -> None:
        """``r`` took its PE: its completion is due at rate 1 (a CPU) or at the contention rate (rebalance)."""
        r.t_last = r.seg_start = now
        if is_cpu[r.pe]:
            r.rate = 1.0
            r.version += 1
            push(now + r.remaining, "done", (r, r.version))
        else:
            r.rate = None                      # set (and its completion pushed) by rebalance()

    def rebalance() -> None:
        """Move the completion of every running accelerator task to the rate of the busy count now."""
        k = sum(server.current is not None for server in shared_dram)
        rate = 1.0 / (1.0 + c * (k - 1)) if k else 1.0
        for server in shared_dram:
            r = server.current
            if r is None or r.rate == rate:
                continue
            if r.rate is not None:
                r.remaining = max(0.0, r.remaining - (now - r.t_last) * r.rate)
            r.t_last, r.rate = now, rate
            r.version += 1
            push(now + r.remaining / rate, "done", (r, r.version))

    def submit(job: _Job, task: int) -> None:
        """A task of the job enters its PE: started at once, queued, or (CPU) preempting a lower priority."""
        pe = job.pes[task]
        r = _Run(job, task, pe, float(job.times[task]))
        server = servers[pe]
        if not is_cpu[pe]:
            if by_priority:                    # picked at the end of the instant: a same-time higher one wins
                server.wait(r, (apps[job.app].priority, next(arrival)))
                idle_pes[pe] = None
            elif server.submit(r):
                start(r)
            return
        cur = server.current
        if server.submit(r, (apps[job.app].priority, next(arrival))):
            if cur is not None:                # preempted: its done event goes stale, it resumes with what is left
                cur.remaining = max(0.0, cur.remaining - (now - cur.t_last))
                end_segment(cur)
                cur.version += 1
            start(r)

    def begin(job: _Job) -> None:
        """The job becomes the app's one in flight: its source stages submit their first tasks."""
        active[job.app] = job
        g = graphs[job.app]
        for j in g.sources:
            submit(job, g.first[j])

    for i, a in enumerate(apps):
        if len(draws[i]):
            push(offsets[i], "release", (i, 0))
    while events:
        t, _, what, payload = events.pop()
        if t > duration_us:
            break
        now = t
        if what == "release":
            i, n = payload
            job = _Job(i, n, now, draws[i][n], pes_of[i], graphs[i])
            released[apps[i].name] += 1
            if n + 1 < len(draws[i]):
                push(offsets[i] + (n + 1) * apps[i].period_us, "release", (i, n + 1))
            if active[i] is None:
                begin(job)
            else:
                backlog[i].append(job)
        else:
            r, version = payload
            if version != r.version or servers[r.pe].current is not r:
                continue                       # moved by a preemption or a rate change
            end_segment(r)
            if by_priority and not is_cpu[r.pe]:
                servers[r.pe].release()
                idle_pes[r.pe] = None
            else:
                nxt = servers[r.pe].finish()
                if nxt is not None:
                    start(nxt)
            job, g = r.job, graphs[r.job.app]
            stage = g.stage_of[r.task]
            if r.task + 1 < g.end[stage]:
                submit(job, r.task + 1)            # the stage's tasks run in order
            else:
                job.stages_left -= 1
                for b in g.succs[stage]:
                    job.waiting[b] -= 1
                    if not job.waiting[b]:
                        submit(job, g.first[b])
            if not job.stages_left:
                name = apps[job.app].name
                resp[name].append(now - job.release)
                work[name].append(float(job.times.sum()))
                active[job.app] = None
                if backlog[job.app]:
                    begin(backlog[job.app].popleft())
        if idle_pes and not (events and events.heap[0][0] == now):
            for pe in idle_pes:
                nxt = servers[pe].start_next()
                if nxt is not None:
                    start(nxt)
            idle_pes.clear()
        rebalance()
    now = float(duration_us)
    for server in servers.values():
        if server.current is not None:
            end_segment(server.current)

    misses = {}
    for i, a in enumerate(apps):
        late = sum(x > a.period_us for x in resp[a.name])
        pending = [j for j in [active[i], *backlog[i]] if j is not None]
        misses[a.name] = late + sum(duration_us - j.release > a.period_us for j in pending)
    frac = {pe: b / duration_us for pe, b in busy.items()}
    load = {pe: f for pe, f in frac.items() if kind_of(pe) != "cpu"}
    cpu_cores = sum(f for pe, f in frac.items() if kind_of(pe) == "cpu")
    cpu_cores += controller_load if controller_core is not None else 0.0
    rail_w = rail_power_w(p, load, cpu_cores, clocks)
    rail_j = {k: w * duration_us * 1e-6 for k, w in rail_w.items()}
    return PeriodicResult(duration_us=float(duration_us), response_us=resp, work_us=work, released=released,
                          completed={k: len(v) for k, v in resp.items()}, misses=misses, busy=frac, rail_w=rail_w,
                          rail_j=rail_j, board_energy_j=float(sum(rail_j.values())), trace=segments)


def _pe_names_of(app, pe_names: Sequence[str]) -> list[str]:
    """The PE name of each task of a seed-002 DAG app."""
    try:
        return [pe_names[i] for i in app.pe]
    except IndexError:
        raise DseError(f"app {app.name}: PE ids {list(app.pe)} must index the {len(pe_names)} PEs "
                       f"{list(pe_names)}") from None


def periodic_apps(apps, pe_names: Sequence[str]) -> tuple[list[PeriodicApp], dict[tuple[str, int], str]]:
    """Seed-002 DAG apps as one-task stages, with their placement, so a schedule-based analysis can be checked
    here. ``apps``: objects with ``name, period_us, priority, pe, time_us, preds`` per task (as
    ``dse.rt.schedule_based.MappedApp``); ``pe_names[id]`` names PE id (``PeSet.names``)."""
    out, placement = [], {}
    for a in apps:
        names = _pe_names_of(a, pe_names)
        stages = tuple(PeriodicStage(kind_of(n), (float(t),), f"t{i}")
                       for i, (n, t) in enumerate(zip(names, a.time_us)))
        edges = tuple((q, i) for i, ps in enumerate(a.preds) for q in sorted(ps))
        out.append(PeriodicApp(a.name, float(a.period_us), int(a.priority), stages, edges=edges))
        placement.update({(a.name, i): n for i, n in enumerate(names)})
    return out, placement


def pipelined_stage_apps(apps, pe_names: Sequence[str]) -> tuple[list[PeriodicApp], dict[tuple[str, int], str],
                                                                dict[str, str]]:
    """Seed-002 DAG apps in their pipelined execution (``dse.rt.schedule_based``, "pipelined"): every (app, PE)
    stage is an app of its own, ``<app>@<PE>``, released every period, its tasks run back to back in task order
    (each task processes the iteration its pipeline depth gives, so its inputs were made a period earlier: the data
    dependencies leave the timing). Returns the apps, their placement and stage app -> app."""
    out, placement, owner = [], {}, {}
    for a in apps:
        names = _pe_names_of(a, pe_names)
        for pe in dict.fromkeys(names):
            times = tuple(float(t) for n, t in zip(names, a.time_us) if n == pe)
            stage = f"{a.name}@{pe}"
            out.append(PeriodicApp(stage, float(a.period_us), int(a.priority), (PeriodicStage(kind_of(pe), times,
                                                                                              stage),)))
            placement[(stage, 0)] = pe
            owner[stage] = a.name
    return out, placement, owner


def _accelerator_pes(p: Platform) -> list[str]:
    """The board's non-CPU PEs: the GPU, the DLA cores by core id, then the NPU(s) (Xavier's order unchanged)."""
    of = lambda t: sorted(n for n, pe in p.pes.items() if pe.type == t)  # noqa: E731
    return [*of("gpu"), *[d.name for d in p.dla_pes()], *of("npu")]


def _placed(p: Platform, app: PeriodicApp, placement: Placement, controller_core: int | None) -> list[str]:
    """The PE of every task of ``app`` (its stage's PE), checked against the board and the stage kinds. A
    per-layer-mapping board's CPU PEs are its mapping cores only (the little cores run no layer)."""
    cores = p.mapping_core_ids() if p.purpose == "layer-mapping" else range(p.cpu_cores)
    valid = {*_accelerator_pes(p), *[f"CPU{k}" for k in cores]}
    out = []
    for j, stage in enumerate(app.stages):
        pe = placement.get((app.name, j))
        if pe is None:
            raise DseError(f"placement has no PE for stage {j} ({stage.label or stage.kind}) of app {app.name}")
        if pe not in valid:
            raise DseError(f"app {app.name} stage {j}: PE {pe!r} is not on {p.name} (valid: {sorted(valid)})")
        if kind_of(pe) != stage.kind:
            raise DseError(f"app {app.name} stage {j} is a {stage.kind} stage but is placed on {pe}")
        if controller_core is not None and pe == f"CPU{controller_core}":
            raise DseError(f"app {app.name} stage {j} is placed on {pe}, the controller's core "
                           f"(controller_core=None frees it)")
        out += [pe] * len(stage.base_us)
    return out
