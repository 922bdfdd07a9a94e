"""What each exploration rule runs (maximize, explore_option, select_option, search, finetune): read the run's
inputs, call the phase of ``dse.search.pipeline`` (the only implementation of the method), write the result.

Every phase measures through one Evaluator whose cache is seeded from all measurement files of the run (so no
configuration is measured twice across phases or reruns) and which appends to the phase's own file in
``<run>/cache/`` (not a Snakemake output, so an interrupted job's measurements survive and the rerun resumes
from them). Jobs read only the config parts they declare (``<run>/config/<part>.yaml``). Each phase writes its
JSON result atomically at the end.
"""
from __future__ import annotations

import atexit
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import onnx
from omegaconf import OmegaConf

from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.evaluate import Evaluator
from dse.core.measurement import Measurement
from dse.store.atomic import read_json, write_json_atomic, write_text_atomic


def search_setup(network: str, precision: str, engine_root: Path, platform: str, overrides=()):
    """Config, analysis, backend, search space, settings and base configuration of one run of ``network`` built
    the way the workflow builds them (``config_parts`` validates the same parts), for in-process searches
    (``bench/``, ``dse.calibration.decisions``)."""
    from dse.backends import backend_from_config
    from dse.config import compose_config
    from dse.network import load_analysis
    from dse.search import SearchSettings
    from dse.workflow.plan import config_parts
    from dse.workflow.space import space_of

    cfg = compose_config([f"benchmark={network}", f"precision={precision}", f"platform={platform}", *overrides])
    parts = config_parts(cfg)[0]
    analysis = load_analysis(cfg)  # cached per process: fp16 and int8 share one analysis
    backend = backend_from_config(cfg, analysis, engine_root=engine_root)
    space = space_of(analysis, backend)
    settings = SearchSettings.from_dict(parts["search"])
    base = base_configuration(backend.settings, backend.platform.name, analysis)
    return cfg, analysis, backend, space, settings, base


def base_configuration(settings, platform_name: str, analysis) -> Configuration:
    """The fixed part of every configuration of a run (network, platform, precision, batch, size)."""
    return Configuration(benchmark=settings.benchmark, platform=platform_name, precision=settings.precision,
                         batch=settings.batch, input_size=int(settings.input_size), model_digest=analysis.digest)


def reused_initial(reuse_from: str | None, options, analysis) -> dict[str, tuple[int, ...]]:
    """Option -> the cuts of an earlier run's best for it (``reuse_from``: the fast re-exploration, K = 1);
    options that run had no feasible result for are left out."""
    out = {}
    for option in options if reuse_from else ():
        path = Path(reuse_from) / "options" / f"{option}.json"
        if path.exists():
            found = read_json(path)
            cuts = tuple((found.get("config") or found["best_config"])["cuts"])   # best_config: an older run's
            if cuts and analysis.check_cuts(list(cuts)) is None:
                out[option] = cuts
    return out


@dataclass
class RunContext:
    """A planned run directory: its config parts, network analysis, platform, backend and search space."""

    run: Path

    def part(self, name: str) -> dict:
        from dse.config import read_part

        return read_part(self.run, name)

    @cached_property
    def platform(self):
        from dse.platform import load_platform

        return load_platform(self.part("platform"))

    @cached_property
    def measure_settings(self):
        from dse.backends.base import MeasureSettings

        return MeasureSettings.from_dict(self.part("measure"))

    @cached_property
    def settings(self):
        from dse.search import SearchSettings

        return SearchSettings.from_dict(self.part("search"))

    @cached_property
    def analysis(self):
        """The analysis of the run's weight-free model.onnx; a backend that runs the network gets its weights
        from the shared ``<results_dir>/models`` cache (``dse.network.weighted_model``)."""
        from dse.graph.analysis import NetworkAnalysis
        from dse.network import materializer

        path = self.run / "model.onnx"
        if not path.exists():
            raise DseError(f"{path} is missing: run the analyze step first")
        return NetworkAnalysis(onnx.load(str(path), load_external_data=False),
                               materializer(self.part("model"), self.results_dir / "models"))

    @property
    def results_dir(self) -> Path:
        """The run directory is ``<results_dir>/<benchmark>/<platform>/<variant>``."""
        return self.run.parents[2]

    @property
    def engine_root(self) -> Path:
        return self.results_dir / "engines"

    def make_backend(self, platform=None):
        """The run's backend (on ``platform`` instead of the run's own, for the comparison's extra options)."""
        from dse.backends import make_backend

        return make_backend(platform or self.platform, self.analysis, self.measure_settings,
                            engine_root=self.engine_root)

    @cached_property
    def lease(self):
        """The board of the farm this job measures on (``DSE_BOARDS``, set by the Snakefile from ``--config
        boards=...``), held until the process ends; None without a farm."""
        from dse.farm.lease import acquire, farm_boards, farm_from_env

        names = farm_from_env()
        if not names:
            return None
        lease = acquire(farm_boards(self.platform.name, names), job=str(self.run))
        atexit.register(lease.release)
        print(f"[lease] {self.run}: measuring on board {lease.board}", file=sys.stderr, flush=True)
        return lease

    @cached_property
    def backend(self):
        """The run's backend; on a farm, on the leased board (its transport replaces the platform's)."""
        lease = self.lease
        if lease is None:
            return self.make_backend()
        from dse.farm.lease import LeasedBackend

        if self.platform.backend != "trt" and not lease.board.local:
            raise DseError(f"board {lease.board}: backend {self.platform.backend} measures on this host only; "
                           "its target must be local")
        platform = self.part("platform")
        platform["transport"] = {**(platform.get("transport") or {}), **lease.board.transport()}
        return LeasedBackend(self.make_backend(platform), lease)

    @cached_property
    def space(self):
        from dse.workflow.space import search_space

        return search_space(self.analysis, self.platform, self.measure_settings, lambda: self.backend)

    @property
    def base(self) -> Configuration:
        return base_configuration(self.measure_settings, self.platform.name, self.analysis)

    def options(self) -> list[str]:
        return list(self.settings.options or self.space.options)

    def initial(self, options) -> dict[str, tuple[int, ...]]:
        return reused_initial(self.settings.reuse_from, options, self.analysis)

    @cached_property
    def measurement_context(self) -> str:
        from dse.backends import capabilities_of
        from dse.backends.base import RUNS_MODEL
        from dse.workflow.plan import measurement_context

        runs_model = RUNS_MODEL in capabilities_of(self.platform.backend)
        return measurement_context(self.part("platform"), self.part("measure"),
                                   weights=self.analysis.weights_id if runs_model else None)

    def evaluator(self, phase_file: str, label: str, backend=None) -> Evaluator:
        """Measures through ``backend`` (the run's by default) into ``cache/<phase_file>.parquet``; the cache
        holds every measurement of the run in this run's measurement context, the files of jobs running beside it
        included (they are listed again at every refresh)."""
        cache_dir = self.run / "cache"
        return Evaluator(backend or self.backend, cache_dir / f"{phase_file}.parquet",
                         cache_files=lambda: sorted(cache_dir.glob("*.parquet")), seed=self.measure_settings.seed,
                         on_measure=_progress(label), context=self.measurement_context)


def _progress(label: str):
    """A progress line every few measurements (stderr: the console, while the log keeps the summary)."""
    state = {"n": 0, "best": 0.0}

    def report(m: Measurement, phase: str, strategy: str) -> None:
        state["n"] += 1
        state["best"] = max(state["best"], m.fps if m.ok else 0.0)
        if state["n"] % 10 == 1:
            print(f"[{label}] {state['n']} measured, best {state['best']:.1f} FPS so far", file=sys.stderr,
                  flush=True)
    return report


# the run's own phases per search.strategy (their files in cache/): a run directory that switched strategy
# keeps the other one's files, which the report and the comparison must not count
PHASE_FILES = {"proposed": ("maximize", "explore-*", "search", "finetune", "clocks"),
               "guided": ("maximize", "guided", "finetune", "clocks")}


def _done(ctx: RunContext, phase_file: str, label: str, ev: Evaluator, best: float) -> None:
    """Record which configurations the phase asked for (``cache/<phase_file>.asked.json``: the run's files
    may also hold rows of an earlier search with other settings, which this run did not ask for) and say so."""
    write_json_atomic(ctx.run / "cache" / f"{phase_file}.asked.json", sorted(ev.asked))
    retried = f", {ev.stale_errors} earlier error row(s) not replayed" if ev.stale_errors else ""
    print(f"[{label}] done: {ev.measured} measured, {ev.reused} reused from cache{retried}, best {best:.1f} FPS",
          file=sys.stderr, flush=True)


def phase_files(run: Path, strategy: str, suffix: str) -> list[Path]:
    """The files ``cache/<phase><suffix>`` of the phases of ``strategy``, in phase order."""
    return [p for pattern in PHASE_FILES[strategy] for p in sorted((run / "cache").glob(f"{pattern}{suffix}"))]


def asked_by_phases(run: Path, strategy: str) -> set[str] | None:
    """Configuration hashes the run's phases asked for (None for a run from before these records)."""
    files = phase_files(run, strategy, ".asked.json")
    return {h for p in files for h in read_json(p)} if files else None


def own_rows(run: Path, strategy: str, context: str | None = None):
    """The rows of ``strategy``'s own phase files (not another strategy's or a comparison method's, which may
    re-run the same configurations), only configurations its phases asked for: what its report counts."""
    from dse.store import combine

    frame = combine(phase_files(run, strategy, ".parquet"), context=context)
    asked = asked_by_phases(run, strategy)
    return frame if asked is None else frame[frame["config_hash"].isin(asked)].reset_index(drop=True)


def _read(run: Path, name: str) -> dict:
    return read_json(run / name)


def maximize(run: str | Path) -> dict:
    """Base(G) and the parameter maximizer: maximize.json."""
    from dse.search import maximize_phase

    ctx = RunContext(Path(run))
    ev = ctx.evaluator("maximize", "maximize")
    out = maximize_phase(ctx.space, ev, ctx.base, ctx.settings).to_dict()
    write_json_atomic(ctx.run / "maximize.json", out)
    _done(ctx, "maximize", "maximize", ev, out["fps"])
    return out


def explore_option(run: str | Path, option: str) -> dict:
    """Global-only exploration of one mapping option: options/<option>.json."""
    from dse.search import explore_phase

    ctx = RunContext(Path(run))
    bounds = _read(ctx.run, "maximize.json")["bounds"]
    ev = ctx.evaluator(f"explore-{option}", f"explore {option}")
    result = explore_phase(ctx.space, ev, ctx.base, bounds, ctx.settings, option, ctx.initial([option]).get(option))
    out = result.to_dict()
    write_json_atomic(ctx.run / "options" / f"{option}.json", out)
    _done(ctx, f"explore-{option}", f"explore {option}", ev, out["fps"])
    return out


def select_option(run: str | Path, options: list[str]) -> dict:
    """The best option after the global phase and the shortlist the search refines: selected.json."""
    from dse.search import select_phase

    ctx = RunContext(Path(run))
    fps = {o: _read(ctx.run, f"options/{o}.json")["fps"] for o in options}
    out = select_phase(ctx.space, fps, ctx.settings).to_dict()
    write_json_atomic(ctx.run / "selected.json", out)
    print(f"[select] option {out['selected']} ({fps[out['selected']]:.1f} FPS) of " +
          ", ".join(f"{o} {v:.1f}" for o, v in fps.items()) + f"; full search of {', '.join(out['shortlist'])}",
          file=sys.stderr, flush=True)
    return out


def search(run: str | Path) -> dict:
    """Global + local search (Algorithms 2 and 3) on each shortlisted option, or with search.strategy=guided
    the model-guided exploration of every option: search.json."""
    from dse.search import search_phase

    ctx = RunContext(Path(run))
    if ctx.settings.strategy == "guided":
        return guided(ctx)
    shortlist = _read(ctx.run, "selected.json")["shortlist"]
    bounds = _read(ctx.run, "maximize.json")["bounds"]
    ev = ctx.evaluator("search", f"search {'/'.join(shortlist)}")
    refined = search_phase(ctx.space, ev, ctx.base, bounds, ctx.settings, shortlist, ctx.initial(shortlist),
                           progress=lambda msg: print(f"[search] {msg}", file=sys.stderr, flush=True))
    out = refined.to_dict()
    write_json_atomic(ctx.run / "search.json", out)
    _done(ctx, "search", f"search {out['selected']}", ev, out["fps"])
    return out


def guided(ctx: RunContext) -> dict:
    """The guided exploration straight after the maximizer (whose measurements it learns from): search.json
    (the same keys the fine-tuner and the report read) with the guided rounds."""
    from dse.search import guided_phase

    bounds = _read(ctx.run, "maximize.json")["bounds"]
    ev = ctx.evaluator("guided", "guided")
    asked = read_json(ctx.run / "cache" / "maximize.asked.json")
    known = [m for m in (ev.cache.get((h, 0)) for h in asked) if m is not None]
    found = guided_phase(ctx.space, ev, ctx.base, bounds, ctx.settings, known,
                         progress=lambda msg: print(f"[guided] {msg}", file=sys.stderr, flush=True))
    out = found.to_dict()
    write_json_atomic(ctx.run / "search.json", out)
    _done(ctx, "guided", f"guided ({out['unique_tuples']} tuples, {out['stopped']})", ev, out["fps"])
    return out


def finetune(run: str | Path) -> dict:
    """Fine-tune threads, buffers and streams of the search's best (or of each of the guided search's
    finalists, keeping the best): best.yaml."""
    from dse.search import finetune_phase

    ctx = RunContext(Path(run))
    found = _read(ctx.run, "search.json")
    ev = ctx.evaluator("finetune", "finetune")
    starts = [Configuration.from_dict(c) for c in found.get("finalists") or [found["config"]]]
    result = finetune_phase(ctx.space, ev, starts, ctx.settings, float(found.get("noise") or 0.0),
                            int(found.get("reruns_used") or 0), found.get("rerun_account"))
    m = result.measurement
    best = {
        "benchmark": ctx.base.benchmark, "platform": ctx.base.platform, "backend": ctx.backend.name,
        "fps": float(m.fps), "latency_ms_p50": float(m.latency_ms_p50), "latency_ms_p99": float(m.latency_ms_p99),
        "energy_j_per_frame": m.energy_j_per_frame, "power_w": m.power_w,   # null where not measured
        "util": {k: float(v) for k, v in m.util.items()}, "stage_ms": [float(x) for x in m.stage_ms],
        "config_hash": result.config.hash, "config": result.config.to_dict(),
        "search_fps": float(found["fps"]), "param_points": int(result.extra["points"]), "seed": ctx.measure_settings.seed,
    }
    write_text_atomic(ctx.run / "best.yaml", OmegaConf.to_yaml(OmegaConf.create(best)))
    _done(ctx, "finetune", "finetune", ev, best["fps"])
    return best


def clocks(run: str | Path) -> dict:
    """The clock phase (``dse.search.clocks``): the best mappings of the run x power modes x clocks, the answer by
    ``search.objective`` under ``search.min_fps``, the front: clocks.json and plots/energy_front.png. A min_fps
    nothing reaches is recorded (feasible: false, with the best FPS), not an error."""
    import pandas as pd

    from dse.report.plots import energy_front
    from dse.search.clocks import PHASE, EnergySettings, clock_phase, mapping_candidates
    from dse.search.study import Study

    ctx = RunContext(Path(run))
    settings = EnergySettings.from_dict(ctx.part("energy"))
    best = Configuration.from_dict(OmegaConf.to_container(OmegaConf.load(ctx.run / "best.yaml"))["config"])
    ev = ctx.evaluator(PHASE, PHASE)
    asked = asked_by_phases(ctx.run, ctx.settings.strategy) or set()
    measured = [m for m in (ev.cache.get((h, 0)) for h in sorted(asked)) if m is not None]
    candidates = mapping_candidates(best, measured, settings.mappings)
    study = Study(ev, ctx.settings.strategy)
    result = clock_phase(study, ctx.platform, candidates, settings,
                         progress=lambda msg: print(f"[clocks] {msg}", file=sys.stderr, flush=True))
    out = result.to_dict()
    write_json_atomic(ctx.run / "clocks.json", out)
    energy_front(pd.DataFrame(out["points"]), out["chosen"], out["reference"], settings.min_fps,
                 ctx.run / "plots" / "energy_front.png")
    _done(ctx, PHASE, PHASE, ev, out["chosen"]["fps"] if out["chosen"] else 0.0)
    if not out["feasible"]:
        print(f"[clocks] infeasible: {out['reason']}", file=sys.stderr, flush=True)
    return out
