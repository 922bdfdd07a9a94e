"""A model of the board learned from its own measurements: stage times per PE class, then pipeline throughput.

It uses what a real board gives and nothing more: one per-layer GPU profile (TensorRT's IProfiler; on a board
without one, the layers' MACs), the per-stage times (``stage_ms``) and FPS of measured configurations, and the
platform's DLA operator rules (which layers fall back to the GPU and split a DLA engine into loadables). There
is no per-layer DLA profile on a board (thesis Sec. 3.5), so the DLA's cost of each group of layers is inferred
from measured DLA stage times by non-negative least squares over layer groups: two DLA stages that differ by a
group of layers tell that group's cost (the differencing trick of HaX-CoNN), with a prior towards one DLA/GPU
ratio where no measurement separates the groups.

Stage time of a GPU or CPU stage = a * (profile mass of its layers) + b + c * [stage starts after a cut];
of a DLA stage = sum_j w_j * (profile mass of its DLA layers in group j) + l * loadables + r * (MB reformatted
at its DLA runs' boundaries) + f * (profile mass of its fallback layers) + b + c * [after a cut], where the
reformat, fallback and fixed terms run on the GPU. Throughput = min over PEs of capacity / demand per frame,
over stages of streams / stage time, and buffers / latency; fitted per option by one log-scale factor (GPU
kernels of concurrent streams overlap, which no sum of times shows). An ensemble of fits on resampled
measurements with jittered priors gives each prediction its uncertainty: wide where no measurement covers the
layers a candidate puts on the DLA, narrow where many do.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

DLA = "dla"


@dataclass(frozen=True)
class StageRole:
    """What the model needs of one stage of a mapping option: the cost class whose layer costs apply (``gpu``,
    ``dla`` or ``cpu<cores>``), the PEs it keeps busy (a PND stage spreads its frames over them) and, for a
    DLA stage, the PE its fallback layers and reformats run on."""

    cost_class: str
    resources: tuple[str, ...]
    fallback: str | None = None
    split: bool = False          # frames alternate over the resources (PND) instead of using all at once

    @property
    def is_dla(self) -> bool:
        return self.cost_class == DLA


def roles_of_platform(platform) -> dict[str, list[StageRole]]:
    """Option -> per-stage roles, from the platform's PEs (the main PE hosts DLA fallback)."""
    out = {}
    for name, option in platform.options.items():
        roles = []
        for spec in option.stages:
            pes = platform.stage_pes(spec)
            if spec.pe_type == "dla":
                roles.append(StageRole(DLA, tuple(p.name for p in pes), fallback=platform.main_pe,
                                       split=len(pes) > 1))
            elif spec.pe_type == "cpu":
                cores = tuple(sorted({c for p in pes for c in (p.cores or (0,))}))
                roles.append(StageRole(f"cpu{len(cores)}", tuple(f"core{c}" for c in cores)))
            else:
                roles.append(StageRole(spec.pe_type, tuple(p.name for p in pes)))
        out[name] = roles
    return out


@dataclass
class NetworkFacts:
    """Per-layer facts the model builds on: a relative cost (the GPU profile in ms, or MACs), which layers the
    DLA runs, which unsupported layers split a DLA engine, and the bytes crossing each layer boundary."""

    weight: np.ndarray
    dla_ok: np.ndarray
    splits: np.ndarray
    crossing_bytes: np.ndarray   # [i]: bytes leaving layer i for later layers ([n-1]: the network's outputs)
    input_bytes: float
    profiled: bool
    groups: int = 12

    def __post_init__(self):
        n = len(self.weight)
        self.weight = np.asarray(self.weight, dtype=float)
        on_dla = np.asarray(self.dla_ok, dtype=bool)
        runs = ~np.asarray(self.splits, dtype=bool)     # layers inside a DLA run (leaf fallbacks do not split)
        w = self.weight
        self.cum_w = np.concatenate([[0.0], np.cumsum(w)])
        self.cum_fall = np.concatenate([[0.0], np.cumsum(w * ~on_dla)])
        mass = np.cumsum(w * on_dla)
        total = mass[-1] if n and mass[-1] > 0 else 1.0
        self.group_of = np.minimum((mass - 1e-12) * self.groups // total, self.groups - 1).astype(int).clip(0)
        dla_mass = np.zeros((n, self.groups))
        dla_mass[np.arange(n), self.group_of] = w * on_dla
        self.cum_group = np.vstack([np.zeros(self.groups), np.cumsum(dla_mass, axis=0)])
        # DLA runs: a run starts at i when i is in a run and i-1 is not; its reformats move the bytes entering
        # its first layer and leaving its last one
        prev = np.concatenate([[False], runs[:-1]])
        nxt = np.concatenate([runs[1:], [False]])
        starts = runs & ~prev
        ends = runs & ~nxt
        self.runs = runs
        self.cum_starts = np.concatenate([[0], np.cumsum(starts)])
        into = np.concatenate([[self.input_bytes], self.crossing_bytes[:-1]])
        self.cum_in = np.concatenate([[0.0], np.cumsum(np.where(starts, into, 0.0))])
        self.cum_out = np.concatenate([[0.0], np.cumsum(np.where(ends, self.crossing_bytes, 0.0))])
        self.into = into

    @property
    def n(self) -> int:
        return len(self.weight)

    def mass(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.cum_w[b + 1] - self.cum_w[a]

    def gpu_features(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """[mass, 1, after a cut] per stage a..b (inclusive)."""
        return np.column_stack([self.mass(a, b), np.ones(len(a)), (a > 0).astype(float)])

    def dla_features(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """[DLA mass per group..., loadables, MB reformatted, fallback mass, 1, after a cut] per stage a..b."""
        groups = self.cum_group[b + 1] - self.cum_group[a]
        loadables = self.cum_starts[b + 1] - self.cum_starts[a + 1] + self.runs[a]
        # runs clipped by the stage: one entering at a, one leaving at b
        moved = (self.cum_in[b + 1] - self.cum_in[a + 1] + np.where(self.runs[a], self.into[a], 0.0)
                 + self.cum_out[b] - self.cum_out[a] + np.where(self.runs[b], self.crossing_bytes[b], 0.0))
        fall = self.cum_fall[b + 1] - self.cum_fall[a]
        return np.column_stack([groups, loadables, moved / 1e6, fall, np.ones(len(a)), (a > 0).astype(float)])


def network_facts(analysis, platform, profile: Sequence[float] | None) -> NetworkFacts:
    """The facts of one network on one platform (``profile``: per-layer GPU ms, None where the board gives none)."""
    from dse.graph.layers import frame_of, layer_table

    table = layer_table(frame_of(analysis), digest=getattr(analysis, "digest", None))
    rules = platform.dla_rules
    ok = rules.layer_support(table) if rules is not None else np.zeros(table.n, dtype=bool)
    leaf = table.leaf if table.leaf is not None else np.zeros(table.n, dtype=bool)
    if profile is not None:
        weight = np.asarray(profile, dtype=float)
    else:  # relative cost from MACs (plus a floor per layer for memory-bound layers)
        macs = np.asarray(table.macs, dtype=float)
        weight = (macs + 0.02 * macs.mean()) / max(macs.sum(), 1.0)
    return NetworkFacts(weight=weight, dla_ok=ok, splits=~ok & ~leaf, crossing_bytes=np.asarray(table.crossing_bytes,
                        dtype=float), input_bytes=float(table.input_bytes), profiled=profile is not None)


def nnls(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    from scipy.optimize import nnls as _nnls

    return _nnls(a, y, maxiter=50 * a.shape[1])[0]


@dataclass
class StageRow:
    """One measured stage: its cost class, layers a..b and time (ms)."""

    cost_class: str
    a: int
    b: int
    ms: float


@dataclass
class Observation:
    """One measured configuration as the model sees it."""

    option: str
    cuts: tuple[int, ...]
    streams: tuple[int, ...]
    buffers: int
    fps: float
    pre: int = 0          # its pre-processing threads (0: unknown, no host bound)
    post: int = 0         # its post-processing threads (0: unknown)
    cpu: float = 0.0      # CPU utilization, all cores (0: unknown)
    accel: float = 0.0    # utilization of its busiest accelerator (0: unknown, or a stage on CPU cores)


@dataclass
class Priors:
    """Where the model starts before measurements separate its parameters."""

    dla_ratio: float = 2.8       # DLA/GPU time of a layer (search.dla_ratio)
    jitter: float = 0.35         # log-spread of a group's ratio around the common one (ensemble members)
    strength: float = 0.5        # prior weight, in measurements
    members: int = 8             # ensemble size
    noise: float = 0.01          # relative noise of one FPS measurement (search.guided_noise)


def _stage_bounds(cuts: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """First and last layer of every stage for a batch of cut tuples (rows)."""
    m = len(cuts)
    return (np.hstack([np.zeros((m, 1), dtype=int), cuts + 1]),
            np.hstack([cuts, np.full((m, 1), n - 1, dtype=int)]))


@dataclass
class BoardModel:
    """Fitted stage-time coefficients per cost class, the GPU's overlap capacity and per-option corrections."""

    facts: NetworkFacts
    roles: dict[str, list[StageRole]]
    fits: dict[str, np.ndarray]                  # cost class -> coefficients, members x features
    capacity: float = 1.0                        # frames of main-PE work that overlap (concurrent kernels)
    option_capacity: dict[str, float] = field(default_factory=dict)   # the same, where an option's data tell
    log_kappa: dict[str, float] = field(default_factory=dict)
    kappa_sd: dict[str, float] = field(default_factory=dict)
    default_log_kappa: float = 0.0
    default_kappa_sd: float = 0.15
    main_resource: str = "GPU"
    # per option: measured cut tuples and what the model missed there (log measured - log predicted)
    residuals: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    length: float = 8.0                          # layers over which a measured residual carries to neighbours
    lengths: dict[str, float] = field(default_factory=dict)   # the same, where an option's residuals tell
    noise: float = 0.01                          # relative noise of one measurement
    # ms of pre- and of post-processing per frame on one thread: n threads let at most n frames per that time in
    # or out (0: no measurement bounds it). Two costs, not one: a detector's pre-processing (resize, normalize)
    # may cost several times its post-processing, and the fewer threads of the two is not what binds
    pre_ms: float = 0.0
    post_ms: float = 0.0
    # (option, pre, post) -> the FPS the host lets through there, from measurements the host held back: a fully
    # busy CPU (the best FPS per CPU utilization: pre, post and stage threads share the cores, and with every core
    # busy more threads only contend) or idle accelerators (the best FPS, plus twice the noise: the host threads
    # slow each other down as they get more, which one per-thread cost does not capture)
    host_fps: dict[tuple[str, int, int], float] = field(default_factory=dict)

    # ---- prediction -----------------------------------------------------------------------------------------
    def stage_times(self, option: str, cuts: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per stage: (total ms, ms on the fallback PE) as members x tuples arrays."""
        cuts = np.asarray(cuts, dtype=int).reshape(len(cuts), -1)
        first, last = _stage_bounds(cuts, self.facts.n)
        out = []
        for k, role in enumerate(self.roles[option]):
            coef = self.fits[role.cost_class]
            if role.is_dla:
                x = self.facts.dla_features(first[:, k], last[:, k])
                g = self.facts.groups
                gpu_cols = [g + 1, g + 2, g + 3, g + 4]   # reformats, fallback, fixed costs
                out.append((coef @ x.T, coef[:, gpu_cols] @ x[:, gpu_cols].T))
            else:
                total = coef @ self.facts.gpu_features(first[:, k], last[:, k]).T
                out.append((total, np.zeros_like(total)))
        return out

    def raw_fps(self, option: str, cuts: np.ndarray, streams: Sequence[int], buffers: int,
                threads: tuple[int, int] | None = None) -> np.ndarray:
        """Members x tuples FPS before the option's correction."""
        main, other = self.bounds(option, cuts, streams, buffers, threads)
        return 1000.0 * np.minimum(other, self.option_capacity.get(option, self.capacity) / np.maximum(main, 1e-6))

    def bounds(self, option: str, cuts: np.ndarray, streams: Sequence[int], buffers: int,
               threads: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(main PE's ms per frame, the tightest other bound in frames per ms), members x tuples: the raw FPS is
        1000 x min(other, capacity / main) for whatever overlap capacity the main PE has. ``threads``: (pre,
        post) threads (None: no host bound)."""
        times = self.stage_times(option, cuts)
        demand: dict[str, np.ndarray] = {}
        latency = 0.0
        bound = None
        for (total, fallback), role, s in zip(times, self.roles[option], streams):
            total = np.maximum(total, 1e-6)
            own = total - fallback
            share = own / len(role.resources) if role.split else own
            for r in role.resources:
                demand[r] = demand.get(r, 0.0) + share
            if role.fallback:
                demand[role.fallback] = demand.get(role.fallback, 0.0) + fallback
            stage_bound = s / total
            bound = stage_bound if bound is None else np.minimum(bound, stage_bound)
            latency = latency + total
        main = demand.pop(self.main_resource, np.zeros_like(bound))
        for d in demand.values():
            bound = np.minimum(bound, 1.0 / np.maximum(d, 1e-6))
        for n, ms in zip(threads or (), (self.pre_ms, self.post_ms)):
            if n and ms:
                bound = np.minimum(bound, n / ms)
        return main, np.minimum(bound, buffers / np.maximum(latency, 1e-6))

    def host_ceiling(self, threads: tuple[int, int] | None, option: str | None = None) -> float:
        """The FPS the (pre, post) thread pools and, for ``option`` at these threads, the host (``host_fps``) let
        through at most (inf where no bound is known): a ceiling that no accelerator-side correction lifts."""
        pools = [n * 1000.0 / ms for n, ms in zip(threads or (), (self.pre_ms, self.post_ms)) if n and ms]
        held = self.host_fps.get((option, *threads), math.inf) if threads and option else math.inf
        return min([*pools, held])

    def threads_for(self, fps: float) -> tuple[int, int]:
        """The fewest (pre, post) threads whose host bounds let ``fps`` through (1 where none is known)."""
        return tuple(max(1, math.ceil(fps * ms / 1000.0 - 1e-9)) if ms else 1
                     for ms in (self.pre_ms, self.post_ms))

    def predict(self, option: str, cuts: np.ndarray, streams: Sequence[int], buffers: int,
                threads: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(mean FPS, log-scale sd) per tuple. The parametric model's miss at measured tuples carries to their
        neighbours (a Gaussian process on the log residual, ``length`` layers wide), so near a measurement the
        prediction follows it and the uncertainty shrinks to the noise; far from all, the ensemble's spread and
        the option's residual spread remain."""
        cuts = np.asarray(cuts, dtype=int).reshape(len(cuts), -1)
        raw = np.log(np.maximum(self.raw_fps(option, cuts, streams, buffers, threads), 1e-9))
        mean = raw.mean(axis=0) + self.log_kappa.get(option, self.default_log_kappa)
        s2 = self.kappa_sd.get(option, self.default_kappa_sd) ** 2
        ens = raw.var(axis=0)
        shrink = np.ones(len(cuts))
        if option in self.residuals:
            at, r = self.residuals[option]
            length = self.lengths.get(option, self.length)
            k_xx = self._kernel(at, at, length) * s2 + np.eye(len(at)) * self.noise ** 2
            k_sx = self._kernel(cuts, at, length) * s2
            solve = np.linalg.solve(k_xx, np.column_stack([r, k_sx.T]))
            mean = mean + k_sx @ solve[:, 0]
            gp_var = np.maximum(s2 - np.einsum("ij,ji->i", k_sx, solve[:, 1:]), self.noise ** 2 / 4)
            shrink = gp_var / s2
        sd = np.sqrt(ens * shrink + s2 * shrink)
        # the option's correction and the residual fix the accelerators' side; the host's ceiling still holds
        return np.exp(np.minimum(mean, math.log(self.host_ceiling(threads, option)))), sd

    @staticmethod
    def _kernel(x: np.ndarray, y: np.ndarray, length: float) -> np.ndarray:
        if x.shape[1] == 0:
            return np.ones((len(x), len(y)))
        d2 = ((x[:, None, :].astype(float) - y[None, :, :]) ** 2).sum(axis=2)
        return np.exp(-d2 / (2 * length ** 2))

    def fit_lengths(self) -> None:
        """Per option with four or more measured tuples, the residual's length scale that explains them best
        (Gaussian-process marginal likelihood over a grid from the default to a quarter of the network): a
        miss that drifts slowly over the cut positions then carries as far as it does."""
        grid = self.length * np.array([1.0, 1.5, 2.25, 3.4, 5.0, 7.6])
        grid = grid[grid <= max(self.length, self.facts.n / 4)]
        for option, (at, r) in self.residuals.items():
            if len(at) < 4 or at.shape[1] == 0:
                continue
            s2 = self.kappa_sd.get(option, self.default_kappa_sd) ** 2

            def log_ml(length: float) -> float:
                k = self._kernel(at, at, length) * s2 + np.eye(len(at)) * self.noise ** 2
                sign, logdet = np.linalg.slogdet(k)
                return -0.5 * (float(r @ np.linalg.solve(k, r)) + logdet) if sign > 0 else -math.inf

            self.lengths[option] = float(max(grid, key=log_ml))


def fit_board_model(facts: NetworkFacts, roles: Mapping[str, list[StageRole]], stages: Sequence[StageRow],
                    observations: Sequence[Observation], priors: Priors | None = None, *, seed: int = 0,
                    main_resource: str = "GPU") -> BoardModel:
    """Fit the stage-time classes on ``stages`` (NNLS with priors, an ensemble of resampled fits), then the
    main PE's overlap capacity and the per-option corrections on ``observations``."""
    priors = priors or Priors()
    rng = np.random.default_rng(seed)
    classes = {r.cost_class for rs in roles.values() for r in rs}
    fits: dict[str, np.ndarray] = {}
    by_class = {c: [s for s in stages if s.cost_class == c] for c in classes}
    ref_ms = _reference_ms(stages, facts)
    # GPU-like classes first: the DLA fit needs the main class's slope for its fallback prior
    order = sorted(classes, key=lambda c: (c == DLA, c))
    slopes: dict[str, float] = {}
    for c in order:
        rows = by_class[c]
        if c == DLA:
            gpu_slope = slopes.get(_main_class(roles, main_resource), 1.0)
            fits[c] = _fit_dla(facts, rows, priors, gpu_slope, ref_ms, rng)
        else:
            slope0 = _slope_prior(c, slopes, facts)
            fits[c] = _fit_linear(facts, rows, priors, slope0, ref_ms, rng)
            slopes[c] = float(np.median(fits[c][:, 0]))
    model = BoardModel(facts, dict(roles), fits, main_resource=main_resource, noise=priors.noise,
                       length=max(3.0, facts.n / 32))
    obs = [o for o in observations if o.fps > 0 and o.option in model.roles]
    res = _fit_throughput(model, obs)
    cuts: dict[str, list] = {}
    for o in obs:
        cuts.setdefault(o.option, []).append(list(o.cuts))
    model.residuals = {k: (np.array(cuts[k], dtype=int).reshape(len(r), -1), r - model.log_kappa[k])
                       for k, r in res.items()}
    model.fit_lengths()
    return model


def _main_class(roles: Mapping[str, list[StageRole]], main_resource: str) -> str:
    for rs in roles.values():
        for r in rs:
            if r.resources == (main_resource,):
                return r.cost_class
    return "gpu"


def _reference_ms(stages: Sequence[StageRow], facts: NetworkFacts) -> float:
    ms = [s.ms for s in stages if s.ms > 0]
    return float(np.median(ms)) if ms else max(float(facts.cum_w[-1]), 1e-3)


def _slope_prior(cost_class: str, slopes: Mapping[str, float], facts: NetworkFacts) -> float:
    """A class's prior time per unit of profile mass: 1 for the profiled GPU; a CPU group of k cores ~ one of
    m cores scaled by m/k; otherwise the mean of the fitted ones."""
    if cost_class.startswith("cpu") and cost_class[3:].isdigit():
        known = [(int(c[3:]), v) for c, v in slopes.items() if c.startswith("cpu") and c[3:].isdigit()]
        if known:
            k, v = known[0]
            return v * k / int(cost_class[3:])
    if slopes:
        return float(np.mean(list(slopes.values())))
    return 1.0 if facts.profiled else float(facts.cum_w[-1]) or 1.0


def _solve(x: np.ndarray, y: np.ndarray, prior_rows: np.ndarray, prior_y: np.ndarray) -> np.ndarray:
    """Relative-error NNLS (each measured row weighted by 1/y) with prior rows appended."""
    w = 1.0 / np.maximum(y, 1e-6)
    a = np.vstack([x * w[:, None], prior_rows]) if len(x) else prior_rows
    t = np.concatenate([np.ones(len(y)), prior_y]) if len(x) else prior_y
    return nnls(a, t)


def _resample(n: int, member: int, rng) -> np.ndarray:
    return np.arange(n) if member == 0 or n == 0 else rng.integers(0, n, n)


def _fit_linear(facts, rows, priors: Priors, slope0: float, ref_ms: float, rng) -> np.ndarray:
    a = np.array([r.a for r in rows], dtype=int)
    b = np.array([r.b for r in rows], dtype=int)
    y = np.array([r.ms for r in rows], dtype=float)
    x = facts.gpu_features(a, b) if len(rows) else np.zeros((0, 3))
    scale = np.array([max(float(facts.cum_w[-1]), 1e-9), ref_ms, ref_ms]) / ref_ms
    # prior: the slope near slope0, the fixed costs near 0 (weak), in relative-error units
    p_rows = np.diag(math.sqrt(priors.strength) * scale * np.array([1.0, 0.1, 0.1]))
    coefs = []
    for m in range(priors.members):
        idx = _resample(len(y), m, rng)
        jit = math.exp(rng.normal(0, priors.jitter)) if m else 1.0
        coefs.append(_solve(x[idx], y[idx], p_rows, p_rows @ np.array([slope0 * jit, 0.0, 0.0])))
    return np.array(coefs)


def _fit_dla(facts: NetworkFacts, rows, priors: Priors, gpu_slope: float, ref_ms: float, rng) -> np.ndarray:
    g = facts.groups
    a = np.array([r.a for r in rows], dtype=int)
    b = np.array([r.b for r in rows], dtype=int)
    y = np.array([r.ms for r in rows], dtype=float)
    x = facts.dla_features(a, b) if len(rows) else np.zeros((0, g + 5))
    # the common ratio: a one-ratio fit (groups summed) anchors the groups' prior where data exist
    ratio = priors.dla_ratio * gpu_slope
    if len(rows):
        xs = np.column_stack([x[:, :g].sum(axis=1), x[:, g:]])
        p = np.diag(math.sqrt(priors.strength) * np.array([float(xs[:, 0].mean()) / ref_ms, .05, .05, .05, .05, .05]))
        common = _solve(xs, y, p, p @ np.array([ratio, 0, 0, gpu_slope, 0, 0]))
        ratio = float(common[0]) or ratio
    group_mass = np.maximum(facts.cum_group[-1], 1e-12)
    scale = np.concatenate([group_mass / ref_ms, [0.05, 0.05, float(facts.cum_fall[-1]) / ref_ms + 0.05, 0.05, 0.05]])
    p_rows = np.diag(math.sqrt(priors.strength) * scale)
    coefs = []
    for m in range(priors.members):
        idx = _resample(len(y), m, rng)
        jit = np.exp(rng.normal(0, priors.jitter, g)) if m else np.ones(g)
        target = np.concatenate([ratio * jit, [0.0, 0.0, gpu_slope, 0.0, 0.0]])
        coefs.append(_solve(x[idx], y[idx], p_rows, p_rows @ target))
    return np.array(coefs)


CAPACITIES = np.round(np.arange(1.0, 2.5001, 0.025), 3)
CPU_BUSY = 0.9      # a measurement this CPU-busy bounds its option at its threads ...
ACCEL_BUSY = 0.9    # ... and so does one whose every accelerator was less busy than this (the host held it back)


def _fit_throughput(model: BoardModel, obs: Sequence[Observation]) -> dict[str, np.ndarray]:
    """The main PE's overlap capacity (the grid value under which each option's measurements differ least from
    the prediction up to one factor), then per option with three or more measurements its own capacity pulled
    towards the common one, and each option's log correction, shrunk towards the common one (two
    pseudo-observations), with its residual spread. Returns the residuals (log measured - log raw) per option.
    Each observation's stage times are predicted once: a capacity only changes the final min."""
    if not obs:
        return {}
    # host bounds: FPS <= pre x 1000 / pre_ms for every measurement, so pre_ms is at most the least pre x 1000 /
    # FPS seen (an upper bound, met where the pre threads were what held a configuration back); post the same
    model.pre_ms = min((o.pre * 1000.0 / o.fps for o in obs if o.pre), default=0.0)
    model.post_ms = min((o.post * 1000.0 / o.fps for o in obs if o.post), default=0.0)
    for o in obs:
        if not o.pre:
            continue
        if o.cpu >= CPU_BUSY:
            held = o.fps / o.cpu
        elif 0 < o.accel < ACCEL_BUSY:
            held = o.fps * (1 + 2 * model.noise)
        else:
            continue
        key = (o.option, o.pre, o.post)
        model.host_fps[key] = max(model.host_fps.get(key, 0.0), held)
    parts = []
    for o in obs:
        main, other = model.bounds(o.option, np.array([o.cuts], dtype=int).reshape(1, -1), o.streams, o.buffers,
                                   (o.pre, o.post))
        parts.append((o.option, max(float(main[0, 0]), 1e-6), float(other[0, 0]), math.log(o.fps)))

    def residuals(capacity_of) -> dict[str, np.ndarray]:
        out: dict[str, list[float]] = {}
        for option, main, other, log_fps in parts:
            raw = 1000.0 * min(other, capacity_of(option) / main)
            out.setdefault(option, []).append(log_fps - math.log(max(raw, 1e-9)))
        return {k: np.array(v) for k, v in out.items()}

    sse = {}
    for cap in CAPACITIES:
        sse[float(cap)] = {o: float(np.sum((r - r.mean()) ** 2)) for o, r in residuals(lambda _, c=float(cap): c).items()}
    model.capacity = min(sse, key=lambda c: (sum(sse[c].values()), c))
    counts: dict[str, int] = {}
    for o in obs:
        counts[o.option] = counts.get(o.option, 0) + 1
    pull = 2 * model.noise ** 2 / 0.1 ** 2      # a 0.1 step from the common capacity costs two noise variances
    for option, n in counts.items():
        if n >= 3:
            model.option_capacity[option] = min(sse, key=lambda c: (sse[c][option] + pull * (c - model.capacity) ** 2, c))
    res = residuals(lambda option: model.option_capacity.get(option, model.capacity))
    means = np.array([float(r.mean()) for r in res.values()])
    common = float(np.median(means))
    model.default_log_kappa = common
    model.default_kappa_sd = max(0.08, float(np.std(means)) if len(means) > 2 else 0.15)
    n0 = 2.0
    for option, r in res.items():
        n = len(r)
        model.log_kappa[option] = (float(r.sum()) + n0 * common) / (n + n0)
        spread = (float(np.sum((r - r.mean()) ** 2)) + n0 * model.default_kappa_sd ** 2) / (n + n0)
        model.kappa_sd[option] = math.sqrt(max(spread - model.noise ** 2, (model.noise / 2) ** 2))
    return res
