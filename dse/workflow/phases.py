"""One function per exploration rule (maximize, explore_option, select_option, search, finetune).

Every phase measures through one Evaluator whose cache is seeded from all measurement files of the
run (so no configuration is measured twice across phases or reruns) and which appends to the phase's
own file in `<run>/cache/` (not a Snakemake output, so an interrupted job's measurements survive and
the rerun resumes from them). Each phase writes its JSON result atomically at the end.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import onnx
from omegaconf import OmegaConf

from dse.configuration import Configuration
from dse.errors import DseError
from dse.evaluate import Evaluator
from dse.measurement import Measurement
from dse.store.atomic import write_json_atomic, write_text_atomic


def stage_pe_types(platform_cfg) -> dict[str, list[str]]:
    """Per mapping option, the stage PE types the strategies reason about (GPU | DLA | PND | CPU)."""
    if str(platform_cfg.backend) == "ort":
        from dse.runtime.cpu_groups import host_platform

        return {name: ["CPU"] * o.n_stages for name, o in host_platform(platform_cfg).options.items()}
    from dse.platform import load_platform

    platform = load_platform(platform_cfg)
    out = {}
    for name, option in platform.options.items():
        out[name] = ["GPU" if s.pe_type == "gpu" else ("PND" if s.pnd else "DLA") for s in option.stages]
    return out


def search_space(cfg, analysis, backend):
    """Network + platform facts for the strategies (with the backend's GPU profile when it has one)."""
    from dse.search import SearchSpace

    profile = ((lambda: backend.gpu_layer_profile(str(cfg.precision), int(cfg.batch)))
               if hasattr(backend, "gpu_layer_profile") else None)
    return SearchSpace(
        n_layers=len(analysis.layers), feasible_cuts=analysis.feasible_cuts,
        check_cuts=lambda cuts: analysis.check_cuts(list(cuts)), stage_pe_types=stage_pe_types(cfg.platform),
        main_pe=str(cfg.platform.get("main_pe", "GPU")), gpu_layer_profile=profile)


def search_settings(cfg):
    from dse.search import SearchSettings

    return SearchSettings.from_dict(OmegaConf.to_container(cfg.search, resolve=True))


def base_configuration(cfg, analysis) -> Configuration:
    """The fixed part of every configuration of a run (network, platform, precision, batch, size)."""
    return Configuration(benchmark=str(cfg.benchmark.name), platform=str(cfg.platform.name),
                         precision=str(cfg.precision), batch=int(cfg.batch),
                         input_size=int(cfg.benchmark.input_size), model_digest=analysis.digest)


@dataclass
class RunContext:
    """A planned run directory with its config, network analysis, backend and base configuration."""

    run: Path

    @cached_property
    def cfg(self):
        from dse.workflow.plan import load_run_config

        return load_run_config(self.run)

    @cached_property
    def analysis(self):
        from dse.graph.analysis import NetworkAnalysis

        path = self.run / "model.onnx"
        if not path.exists():
            raise DseError(f"{path} is missing: run the analyze step first")
        return NetworkAnalysis(onnx.load(str(path)))

    @cached_property
    def backend(self):
        from dse.backends import make_backend

        return make_backend(self.cfg, self.analysis)

    @cached_property
    def settings(self):
        return search_settings(self.cfg)

    @cached_property
    def space(self):
        return search_space(self.cfg, self.analysis, self.backend)

    @property
    def base(self) -> Configuration:
        return base_configuration(self.cfg, self.analysis)

    def options(self) -> list[str]:
        return list(self.settings.options or self.space.options)

    @cached_property
    def measurement_context(self) -> str:
        from dse.workflow.plan import measurement_context

        return measurement_context(self.cfg)

    def evaluator(self, phase_file: str, label: str, backend=None) -> Evaluator:
        """Measures through ``backend`` (the run's by default) into ``cache/<phase_file>.parquet``; the cache
        holds every measurement of the run so far in this run's measurement context."""
        cache_dir = self.run / "cache"
        store = cache_dir / f"{phase_file}.parquet"
        others = sorted(p for p in cache_dir.glob("*.parquet") if p != store)
        return Evaluator(backend or self.backend, store, cache_files=others, seed=int(self.cfg.seed),
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


def _done(label: str, ev: Evaluator, best: float) -> None:
    print(f"[{label}] done: {ev.measured} measured, {ev.reused} reused from cache, best {best:.1f} FPS",
          file=sys.stderr, flush=True)


def maximize(run: str | Path) -> dict:
    from dse.search import maximize as maximize_params

    ctx = RunContext(Path(run))
    ev = ctx.evaluator("maximize", "maximize")
    main = ctx.space.main_only_option()
    # Base(G): the whole network on the main PE, one context, no pre/post overlap (the JEDI baseline)
    ev.evaluate(ctx.base.with_(option=main, streams=(1,)), phase="baseline", strategy="Base(G)")
    result = maximize_params(ev, ctx.base, ctx.settings, main)
    out = result.to_dict()
    write_json_atomic(ctx.run / "maximize.json", out)
    _done("maximize", ev, out["fps"])
    return out


def explore_option(run: str | Path, option: str) -> dict:
    """Global-only exploration of one mapping option (thesis: picks the option)."""
    from dse.search import explore_option as explore

    ctx = RunContext(Path(run))
    if option not in ctx.space.options:
        raise DseError(f"unknown mapping option {option!r}; valid choices: {', '.join(ctx.space.options)}")
    bounds = json.loads((ctx.run / "maximize.json").read_text())["bounds"]
    ev = ctx.evaluator(f"explore-{option}", f"explore {option}")
    result = explore(ctx.space, ev, option, bounds, ctx.settings, "global", _reused_initial(ctx, option),
                     base=ctx.base)
    out = result.to_dict()
    write_json_atomic(ctx.run / "options" / f"{option}.json", out)
    _done(f"explore {option}", ev, out["fps"])
    return out


def _reused_initial(ctx: RunContext, option: str):
    """Cuts of an earlier run's best for this option (`reuse_from=RUN_DIR`): the fast re-exploration (K = 1)."""
    reuse = ctx.cfg.get("reuse_from")
    if not reuse:
        return None
    path = Path(reuse) / "options" / f"{option}.json"
    if not path.exists():
        return None
    cuts = json.loads(path.read_text())["best_config"]["cuts"]
    return tuple(cuts) if cuts and ctx.analysis.check_cuts(list(cuts)) is None else None


def select_option(run: str | Path, options: list[str]) -> dict:
    """The best option after the global phase, and the shortlist the search refines (search.refine_within)."""
    from dse.search import select_option as pick, shortlist

    run = Path(run)
    ctx = RunContext(run)
    fps = {o: json.loads((run / "options" / f"{o}.json").read_text())["fps"] for o in options}
    selected = pick(fps)
    out = {"selected": selected, "shortlist": shortlist(fps, ctx.settings.refine_within), "option_fps": fps}
    write_json_atomic(run / "selected.json", out)
    print(f"[select] option {selected} ({fps[selected]:.1f} FPS) of " +
          ", ".join(f"{o} {v:.1f}" for o, v in fps.items()) + f"; full search of {', '.join(out['shortlist'])}",
          file=sys.stderr, flush=True)
    return out


def search(run: str | Path) -> dict:
    """Global + local search (Algorithms 2 and 3) on each shortlisted option; the best of them wins."""
    from dse.search import refine, select_option as pick

    ctx = RunContext(Path(run))
    shortlist = json.loads((ctx.run / "selected.json").read_text())["shortlist"]
    bounds = json.loads((ctx.run / "maximize.json").read_text())["bounds"]
    ev = ctx.evaluator("search", f"search {'/'.join(shortlist)}")
    initial = {o: cuts for o in shortlist if (cuts := _reused_initial(ctx, o)) is not None}
    results = refine(ctx.space, ev, ctx.base, shortlist, bounds, ctx.settings, initial,
                     progress=lambda msg: print(f"[search] {msg}", file=sys.stderr, flush=True))
    selected = pick(results)
    out = {**results[selected].to_dict(), "selected": selected, "refined": {o: r.fps for o, r in results.items()}}
    write_json_atomic(ctx.run / "search.json", out)
    _done(f"search {selected}", ev, out["fps"])
    return out


def finetune(run: str | Path) -> dict:
    """Fine-tune threads, buffers and streams of the search's best; write best.yaml."""
    from dse.search import finetune as tune

    ctx = RunContext(Path(run))
    found = json.loads((ctx.run / "search.json").read_text())
    start = Configuration.from_dict(found["best_config"])
    ev = ctx.evaluator("finetune", "finetune")
    result = tune(ctx.space, ev, start, ctx.settings)
    m = result.measurement
    best = {
        "benchmark": ctx.base.benchmark, "platform": ctx.base.platform, "backend": ctx.backend.name,
        "fps": float(m.fps), "latency_ms_p50": float(m.latency_ms_p50), "latency_ms_p99": float(m.latency_ms_p99),
        "energy_j_per_frame": float(m.energy_j_per_frame), "power_w": float(m.power_w),
        "util": {k: float(v) for k, v in m.util.items()}, "stage_ms": [float(x) for x in m.stage_ms],
        "config_hash": result.config.hash, "config": result.config.to_dict(),
        "search_fps": float(found["fps"]), "param_points": int(result.points), "seed": int(ctx.cfg.seed),
    }
    write_text_atomic(ctx.run / "best.yaml", OmegaConf.to_yaml(OmegaConf.create(best)))
    _done("finetune", ev, best["fps"])
    return best
