"""Rule `compare`: every exploration method on the same backend, evaluator cache and run, in one job.

Methods: Base(G), Base(D), Interleaved, Interleaved + tuned, Profiled (profile-based GA), the
comprehensive GA, the fine-tuning GA, exhaustive search, random search with the run's own search's
budget, plain Optuna (TPE, and Optuna's random sampler) through ask/tell with the same budget, the
proposed method and the guided one (the run's own search.strategy is read from its phases, not rerun; the
other runs here on the options the run explored). "The same budget" is the run's own search's. Each method
measures through its own Evaluator whose cache holds every earlier measurement of the run (so no
configuration is measured twice across methods) and whose new rows go to `cache/compare-<method>.parquet`
with the method as strategy and `<method>/<phase>` as phase. "Points measured" of a method counts the
distinct configurations it asked for, whether or not another method had measured them first.

Baseline-only mapping options (a single DLA stage for Base(D); the interleaved stage) are added to
the platform for this job only, so the run's own search never explores them.
Settings: the optional `compare` node of the run config (Hydra: `+compare.ga.population=24`).
"""
from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from dse.store.atomic import read_json
from dse.core.configuration import Configuration
from dse.core.errors import DseError, choices_error
from dse.platform import Platform
from dse.report.tables import TUPLE_PHASES
from dse.search.baselines import DLA_ONLY, INTERLEAVED, base_d_config, base_g_config, interleaved_config
from dse.search.study import Study
from dse.search.result import StrategyResult
from dse.workflow.compare_settings import METHODS, OPTUNA_SAMPLERS, RUN_STRATEGIES, SLUG, CompareSettings
from dse.workflow.phases import RunContext, own_rows

def with_baseline_options(platform: Platform) -> Platform:
    """The platform plus the baseline-only options its PEs allow (those it declares win): a single DLA stage
    for Base(D); a stage interleaving frames over the GPU and the DLAs, where the backend runs one."""
    from dse.backends import capabilities_of
    from dse.backends.base import INTERLEAVED as CAN_INTERLEAVE
    from dse.platform import platform_from_dict

    dlas = platform.dla_pes()
    extra = {}
    if dlas and DLA_ONLY not in platform.options:
        extra[DLA_ONLY] = [{"pe_type": "DLA", "core": dlas[0].core or 0}]
    if dlas and INTERLEAVED not in platform.options and CAN_INTERLEAVE in capabilities_of(platform.backend):
        extra[INTERLEAVED] = [{"pe_type": "GPU", "interleaved": True}]
    if not extra:
        return platform
    raw = dict(platform.raw)
    raw["extra_options"] = {**(raw.get("extra_options") or {}), **extra}
    return platform_from_dict(raw)


class Comparison:
    """A run directory prepared for comparing methods: backend with baseline options, space, bounds."""

    def __init__(self, run: str | Path, settings: CompareSettings | None = None):
        self.ctx = RunContext(Path(run))
        self.settings = settings or CompareSettings.from_dict(self.ctx.part("compare"))
        self.backend = self.ctx.make_backend(with_baseline_options(self.ctx.platform))
        from dse.workflow.space import space_of

        self.space = space_of(self.ctx.analysis, self.backend)
        self.options = self.ctx.options()          # what the run's own search explored
        self.bounds = read_json(self.ctx.run / "maximize.json")["bounds"]
        self.base = self.ctx.base
        self._studies: dict[str, Study] = {}

    def study(self, method: str) -> Study:
        """The method's study, made once: an evaluator (cache = every file of the run, re-read where another
        method's evaluator wrote since) writing the method's own file."""
        if method not in self._studies:
            slug = SLUG[method]
            ev = self.ctx.evaluator(f"compare-{slug}", f"compare {method}", backend=self.backend)
            self._studies[method] = Study(ev, strategy=method, phase_prefix=slug)
        return self._studies[method]

    @functools.cached_property
    def _own_frame(self) -> pd.DataFrame:
        """Every row of the run's own search (read once: a comparison writes only its methods' own files)."""
        frame = own_rows(self.ctx.run, self.ctx.settings.strategy, self.ctx.measurement_context)
        if not len(frame):
            raise DseError(f"{self.ctx.run}/cache has no measurements of the run's own search: run its phases first")
        # the phases' own rows (a row another strategy's run wrote first, e.g. the maximizer's, keeps its label)
        return frame[frame["strategy"] != "Base(G)"]

    @property
    def own_method(self) -> str:
        """The method name of the run's own search (``Guided`` by default, ``Proposed`` for the thesis' one)."""
        return next(m for m, s in RUN_STRATEGIES.items() if s == self.ctx.settings.strategy)

    def own_search_rows(self, reruns: bool = False) -> pd.DataFrame:
        """The run's own search's rows, one per configuration it asked for (``reruns``: instead, its re-runs of
        configurations it had measured, repeat > 0)."""
        from dse.store import RETRIED_STATUSES

        frame = self._own_frame
        if reruns:
            return frame[frame["repeat"] > 0].reset_index(drop=True)
        # one row per configuration: its answer, or its error where no later try succeeded
        retry = frame["status"].isin(RETRIED_STATUSES)
        frame = frame.assign(_retry=retry).sort_values(["_retry", "timestamp"]).drop_duplicates("config_hash")
        return frame.drop(columns="_retry").sort_values("timestamp").reset_index(drop=True)


def _answer(m, asked, *, extra: dict | None = None, reruns=()) -> StrategyResult:
    """A method's answer ``m`` with everything it asked for (``asked``: its study's, the configurations its runner
    measured around the strategy included) and ``extra``, the method's column of comparison.parquet (``reruns``:
    its own re-runs of configurations it had measured: board runs, no new engines)."""
    return StrategyResult(m.config if m is not None else None, m, list(asked), extra or {}, list(reruns))


RUNNERS: dict[str, Callable[[Comparison, str, dict], StrategyResult]] = {}


def runs(*methods: str):
    """Register a function as the runner of ``methods``: ``(comparison, method, earlier results) -> answer``."""
    def register(fn):
        for m in methods:
            RUNNERS[m] = fn
        return fn
    return register


def run_method(cmp: Comparison, method: str, results: dict) -> StrategyResult:
    """Run one method (``results``: the answers of the methods before it)."""
    if method not in RUNNERS:
        raise choices_error("comparison method", method, METHODS)
    return RUNNERS[method](cmp, method, results)


@runs("Base(G)")
def _base_g(cmp: Comparison, method: str, results: dict) -> StrategyResult:
    study = cmp.study(method)
    return _answer(study.measure(base_g_config(cmp.base, cmp.space), "baseline"), study.asked)


@runs("Base(D)")
def _base_d(cmp: Comparison, method: str, results: dict) -> StrategyResult:
    study = cmp.study(method)
    if DLA_ONLY not in cmp.space.options:
        raise _Skip("no single-DLA stage can run here (no DLA, or not at this precision and batch)")
    return _answer(study.measure(base_d_config(cmp.base), "baseline"), study.asked)


@runs("Interleaved", "Interleaved+tuned")
def _interleaved(cmp: Comparison, method: str, results: dict) -> StrategyResult:
    from dse.search.baselines import interleaved_tuned

    study = cmp.study(method)
    if INTERLEAVED not in cmp.space.options:
        raise _Skip("no interleaved stage can run here (the backend has none, or not at this precision)")
    if method == "Interleaved":
        return _answer(study.measure(interleaved_config(cmp.base), "baseline"), study.asked)
    r = interleaved_tuned(cmp.space, study, cmp.base, cmp.bounds, cmp.ctx.settings)
    return _answer(r.measurement, study.asked, extra=r.extra)


@runs("Profiled")
def _profiled(cmp: Comparison, method: str, results: dict) -> StrategyResult:
    from dse.search.ga_profiled import profiled_search

    study, space, ctx = cmp.study(method), cmp.space, cmp.ctx
    ratio, how = _dla_ratio(cmp, results)
    if space.gpu_layer_profile is None:
        raise _Skip(f"the {cmp.backend.name!r} backend gives no per-layer GPU profile")
    profile = space.gpu_layer_profile()
    r = profiled_search(space, study, cmp.base, cmp.options, profile, ratio, cmp.bounds, ctx.settings,
                        cmp.settings.profiled_ga)
    e = r.extra   # comparison.parquet's extra_json is this dict as written, in this key order
    extra = {**{k: e[k] for k in ("option", "cuts", "estimate_ms", "estimated_fps", "dla_ratio", "evaluations",
                                  "start")}, "fps": r.fps, "history": e["history"], "ratio_from": how}
    # Table 3.11: estimate vs measurement for the Profiled mapping and the run's own search's mapping
    start = Configuration.from_dict(e["start"])
    extra["estimates"] = [_estimate_row("Profiled", start, study.measure(start, "start"), profile, ratio, space)]
    if _own_best(cmp) is not None:
        found = Configuration.from_dict(read_json(ctx.run / "search.json")["config"])
        own = cmp.own_method
        pm = cmp.study(own).evaluator.evaluate(found, phase=f"{SLUG[own]}/recheck", strategy=own)
        extra["estimates"].append(_estimate_row(own, found, pm, profile, ratio, space))
    return _answer(r.measurement, study.asked, extra=extra)


@runs("Comprehensive GA")
def _comprehensive_ga(cmp: Comparison, method: str, results: dict) -> StrategyResult:
    from dse.search.ga_comprehensive import comprehensive_ga

    study = cmp.study(method)
    r = comprehensive_ga(cmp.space, study, cmp.base, cmp.options, cmp.bounds, cmp.ctx.settings, cmp.settings.ga)
    return _answer(r.measurement, study.asked, extra={"history": r.extra["history"]})


@runs("Fine-tuning GA")
def _finetune_ga(cmp: Comparison, method: str, results: dict) -> StrategyResult:
    from dse.search.ga_finetune import finetune_ga

    study = cmp.study(method)
    found = Configuration.from_dict(read_json(cmp.ctx.run / "search.json")["config"])
    study.measure(found, "start")   # the run's answer (already measured by its own search)
    r = finetune_ga(cmp.space, study, found, cmp.ctx.settings, cmp.settings.finetune_ga)
    return _answer(r.measurement, study.asked,
                   extra={"history": r.extra["history"], "mapping_points": len(_own_mapping_points(cmp)),
                          "param_points": len(study.asked) - 1})


@runs("Exhaustive")
def _exhaustive(cmp: Comparison, method: str, results: dict) -> StrategyResult:
    from dse.search.exhaustive import exhaustive_search

    study, s = cmp.study(method), cmp.settings
    r = exhaustive_search(cmp.space, study, cmp.base, cmp.options, cmp.bounds, cmp.ctx.settings,
                          max_cuts=s.exhaustive_max_cuts, cap=s.exhaustive_cap)
    return _answer(r.measurement, study.asked, extra={k: r.extra[k] for k in ("tuples", "coverage")})


@runs("Random")
def _random(cmp: Comparison, method: str, results: dict) -> StrategyResult:
    from dse.search.random_search import random_search

    study, budget = cmp.study(method), len(cmp.own_search_rows())
    r = random_search(cmp.space, study, cmp.base, cmp.options, cmp.bounds, cmp.ctx.settings, budget,
                      seed=cmp.ctx.settings.seed)
    return _answer(r.measurement, study.asked, extra=r.extra)


@runs(*OPTUNA_SAMPLERS)
def _optuna(cmp: Comparison, method: str, results: dict) -> StrategyResult:
    import importlib.util

    study = cmp.study(method)
    if importlib.util.find_spec("optuna") is None:   # an optional extra: the rest of the comparison still runs
        raise _Skip("optuna is not installed: pip install -e '.[optuna]'")
    from dse.search.optuna_search import optuna_search

    budget = len(cmp.own_search_rows())   # the same budget rule as Random
    r = optuna_search(cmp.space, study, cmp.base, cmp.options, cmp.bounds, cmp.ctx.settings, budget,
                      sampler=OPTUNA_SAMPLERS[method], seed=cmp.ctx.settings.seed)
    return _answer(r.measurement, study.asked, extra={k: r.extra[k] for k in ("budget", "trials")})


@runs(*RUN_STRATEGIES)
def _run_strategy(cmp: Comparison, method: str, results: dict) -> StrategyResult:
    """The run's own search.strategy is read from its phases, not rerun; the other one runs here on the options
    the run explored."""
    ctx, study = cmp.ctx, cmp.study(method)
    if RUN_STRATEGIES[method] == ctx.settings.strategy:
        from dse.store import row_to_measurement

        rows = cmp.own_search_rows()
        asked = [(r["phase"], row_to_measurement(r)) for r in rows.to_dict("records")]
        reruns = [row_to_measurement(r) for r in cmp.own_search_rows(reruns=True).to_dict("records")]
        return _answer(_own_best(cmp), asked, reruns=reruns,
                       extra={"mapping_points": len(_own_mapping_points(cmp)),
                              "param_points": int((rows["phase"] == "finetune").sum())})
    from dse.search import run_search

    r = run_search(cmp.space, study, cmp.base, ctx.settings.with_(strategy=RUN_STRATEGIES[method]), options=cmp.options)
    return _answer(r.measurement, study.asked, reruns=study.reruns,
                   extra={"mapping_points": r.extra["unique_tuples"], "param_points": r.extra["param_points"]})


class _Skip(Exception):
    """A method that does not apply to this platform (recorded as skipped, with the reason)."""


def _own_best(cmp: Comparison):
    path = cmp.ctx.run / "best.yaml"
    if not path.exists():
        return None
    best = OmegaConf.to_container(OmegaConf.load(path))
    cfg = Configuration.from_dict(best["config"])
    return cmp.study(cmp.own_method).evaluator.cache.get((cfg.hash, 0))


def _own_mapping_points(cmp: Comparison) -> set:
    rows = cmp.own_search_rows()
    sub = rows[rows["phase"].isin(TUPLE_PHASES)]
    return {(o, tuple(int(c) for c in cuts)) for o, cuts in zip(sub["option"], sub["cuts"])}


def _dla_ratio(cmp: Comparison, results: dict) -> tuple[float, str]:
    """Whole-network DLA time / GPU time from the Base(D) and Base(G) stage times (the only DLA figure a
    board gives), else the search setting."""
    g, d = (results[m].measurement if m in results else None for m in ("Base(G)", "Base(D)"))
    if g is None and DLA_ONLY in cmp.space.options:
        g = cmp.study("Base(G)").measure(base_g_config(cmp.base, cmp.space), "baseline")
    if d is None and DLA_ONLY in cmp.space.options:
        d = cmp.study("Base(D)").measure(base_d_config(cmp.base), "baseline")
    if g and d and g.ok and d.ok and g.stage_ms and d.stage_ms:
        return float(d.stage_ms[0] / g.stage_ms[0]), "Base(D)/Base(G) stage times"
    return float(cmp.ctx.settings.dla_ratio), "search.dla_ratio"


def _estimate_row(label: str, cfg: Configuration, m, profile, ratio: float, space) -> dict:
    from dse.search.ga_profiled import stage_estimates_ms

    est = stage_estimates_ms(profile, cfg.cuts, space.stages(cfg.option), ratio, per_execution=True)
    meas = [float(x) for x in (m.stage_ms or [])]
    return {"mapping": label, "option": cfg.option, "cuts": list(cfg.cuts), "estimate_ms": est, "measured_ms": meas,
            "estimate_sum_ms": sum(est), "measured_sum_ms": sum(meas),
            "difference_pct": 100 * (sum(meas) - sum(est)) / sum(meas) if sum(meas) else 0.0}


def compare(run: str | Path, settings: CompareSettings | None = None) -> dict:
    """Run every configured method, write comparison.parquet, comparison.md and the plots."""
    from dse.report.compare import write_comparison

    cmp = Comparison(run, settings)
    results: dict[str, StrategyResult] = {}
    confirmed: dict[str, list[float]] = {}
    skipped: dict[str, str] = {}
    for method in cmp.settings.methods:
        print(f"[compare] {method}", file=sys.stderr, flush=True)
        try:
            results[method] = run_method(cmp, method, results)
        except _Skip as why:
            skipped[method] = str(why)
            continue
        confirmed[method] = confirm(cmp, method, results[method].measurement)
    return write_comparison(cmp, results, confirmed, skipped)


CONFIRM_FIRST = 1000


def confirm(cmp: Comparison, method: str, m) -> list[float]:
    """FPS of ``repeats`` fresh re-runs of a method's answer (thesis: the final configuration is run five
    times and averaged). A search keeps the luckiest of many noisy single runs; re-running removes that
    bias, so methods that measured many points are not favoured by their noise. The re-runs go through the
    evaluator: recorded in the method's file and not re-run by a rerun of the job. Their repeat indices start at
    ``CONFIRM_FIRST``, past any a search re-runs its own candidates with (the guided one ranks on repeats from 1:
    those samples chose its answer)."""
    if m is None or not m.ok:
        return []
    ev = cmp.study(method).evaluator
    return [float(ev.evaluate(m.config, phase=f"{SLUG[method]}/confirm", strategy=method, repeat=i).fps)
            for i in range(CONFIRM_FIRST, CONFIRM_FIRST + cmp.settings.repeats)]
