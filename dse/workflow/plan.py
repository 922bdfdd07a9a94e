"""Plan the runs of a Snakemake invocation: one composed config per benchmark, validated whole before any job
runs, split into the parts each rule depends on, so that changing an override reruns only the rules that read it.

Planning writes nothing (``snakemake -n``, ``--lint`` and ``--report`` leave the disk alone): the parts are the
outputs of rule ``configure`` (``workflow/rules/configure.smk``), whose parameter is the part's text, so
Snakemake reruns it, and what reads the part, when the text changes. Jobs read only their parts
(``dse.workflow.phases.RunContext``), never the config of a later invocation.
"""
from __future__ import annotations

import hashlib
import json

from omegaconf import DictConfig, OmegaConf

from dse.config import Plan, compose_config, run_dir, split_overrides
from dse.core.errors import DseError
from dse.search.settings import SearchSettings

# run_dir/config/<part>.yaml: the rules' inputs
RUNTIME_MIN = {"sim": 60, "ort": 240, "trt": 24 * 60}
PARTS = ("model", "platform", "measure", "search", "energy", "compare", "layermap", "lm-profile", "lm-ga", "lm-ilp",
         "lm-pareto")


# the planners of the target families other than the pipeline: config group -> (label, "module:function"), each
# called with the Snakemake config, composing and checking every case before any job runs (writes nothing)
FAMILY_PLANNERS = {"multi": ("multi case", "dse.systems.multi.jobs:plan_multi"),
                   "dataflow": ("dataflow case", "dse.systems.dataflow.jobs:plan_dataflow"),
                   "taskset": ("taskset campaign", "dse.systems.taskset.jobs:plan_taskset"),
                   "pareto": ("pareto run", "dse.systems.pareto.jobs:plan_pareto"),
                   "study": ("study", "dse.workflow.study:plan_study"),
                   "multiapp": ("multiapp case", "dse.systems.layermap.multiapp_jobs:plan_multiapp")}


def named_families(overrides) -> list[str]:
    """The families whose config group an override names (``multi=...``, ``+dataflow.ga.population=...``): the
    ones asked for, planned at once so that a bad value is one line before any job (``dse config show`` too)."""
    given = [o.split("=", 1)[0].lstrip("+~").split(".", 1)[0] for o in split_overrides(overrides)]
    return [family for family in FAMILY_PLANNERS if family in given]


def plan_family(family: str, snakemake_config: dict) -> dict[str, Plan]:
    """The plans of one family (``FAMILY_PLANNERS``); a bad value is a DseError naming the family and the value."""
    from importlib import import_module

    label, planner = FAMILY_PLANNERS[family]
    module, function = planner.split(":")
    try:
        return getattr(import_module(module), function)(snakemake_config)
    except DseError as exc:
        raise type(exc)(f"bad {label} configuration: {exc}") from None


def _yaml(content) -> str:
    return OmegaConf.to_yaml(OmegaConf.create(content))


def config_parts(cfg: DictConfig) -> tuple[dict[str, dict], tuple[str, ...], dict[str, str]]:
    """The parts of a composed config, each validated by the object a job builds from it, the mapping options the
    run explores (``search.options``, else every option of the platform) and, per target family ("pipeline",
    "layermap"), why the platform cannot run it. A layer-mapping board has no pipeline parts (search, compare)."""
    from dse.backends import MeasureSettings, sets_clocks, validate_backend
    from dse.platform.checks import over_limit
    from dse.network import check_model_source, model_source
    from dse.platform import load_platform
    from dse.search.clocks import EnergySettings
    from dse.search.settings import SearchSettings
    from dse.workflow.compare_settings import CompareSettings
    from dse.systems.layermap.settings import LayermapSettings, refusal

    platform = OmegaConf.to_container(cfg.platform, resolve=True)
    loaded = load_platform(platform)
    measure = MeasureSettings.from_config(cfg)
    source = model_source(cfg)
    check_model_source(source)
    layermap = LayermapSettings.resolve(cfg.layermap, loaded)
    parts = {"model": source, "platform": platform, "measure": measure.to_dict(), **layermap.parts()}
    refused = {"layermap": refusal(loaded, measure.precision)}
    if loaded.purpose == "layer-mapping":
        target = "`pareto` (its clocked model) or `layermap`" if loaded.raw.get("clocked") else "`layermap`"
        refused["pipeline"] = loaded.pipeline_refusal(loaded.backend) + f"; its target is {target}"
        return parts, (), refused
    validate_backend(loaded, measure)
    search = {**OmegaConf.to_container(cfg.search, resolve=True), "reuse_from": cfg.get("reuse_from")}
    search, energy = EnergySettings.split(search)   # the clock phase's keys: a part of their own
    energy.check(loaded, sets_clocks(loaded))
    # a stage gets no more streams than the platform runs (host-cpu: 4): the default, 8, is a Jetson's, and a
    # maximizer or fine-tuner asking for more is only refused (a guided search on host-cpu: 5 of its 52)
    settings = SearchSettings.from_dict(search)
    settings = settings.with_(max_streams=min(settings.max_streams, loaded.limits.max_streams_per_stage))
    # where the PEs are the host's cores (host-cpu), a pre or post thread past one per core only time-slices with
    # the inference it feeds (2-core host, E at 4 streams, 8 round-robin runs each: 1/1 threads 80.4 FPS, 2/2 80.9,
    # 4/4 80.8, 8/8 81.1, 5-11 % noise), and each maximizer or fine-tuner step past the cores costs a measurement
    if cores := loaded.shared_cores():
        settings = settings.with_(max_pre=min(settings.max_pre, cores), max_post=min(settings.max_post, cores))
    options = runnable_options(loaded, measure, settings)
    reason = over_limit(loaded, [("batch", measure.batch, "max_batch"),
                                 ("search.max_buffers", settings.max_buffers, "max_buffers"),
                                 ("search.max_pre", settings.max_pre, "max_threads"),
                                 ("search.max_post", settings.max_post, "max_threads")])
    if reason:
        raise DseError(reason)
    compare = CompareSettings.from_dict(cfg.get("compare"), seed=int(cfg.seed))
    parts.update(search=settings.to_dict(), energy=energy.to_dict(), compare=compare.to_dict())
    return parts, options, {**refused, "pipeline": ""}


def digest(text: str) -> str:
    """A short content digest of a config text."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def runnable_options(platform, measure, settings) -> tuple[str, ...]:
    """The options the run explores: ``search.options`` (each must exist and be able to run), else every option
    of the platform that can run at the run's precision and batch (``dse.platform.checks.unrunnable_options``)."""
    from dse.platform.checks import unrunnable_options

    skipped = unrunnable_options(platform, measure.precision, measure.batch)
    for option in settings.options:
        platform.option(option)  # an unknown option fails here, naming the valid ones
        if option in skipped:
            raise DseError(f"search.options names {option}, which cannot run here: {skipped[option]}")
    options = tuple(settings.options or (o for o in platform.options if o not in skipped))
    if not options:
        raise DseError(f"no mapping option of {platform.name} can run at {measure.precision.upper()}, batch "
                       f"{measure.batch}: " + "; ".join(f"{o}: {why}" for o, why in skipped.items()))
    return options


def measurement_context(platform: dict, measure: dict, weights: str | None = None) -> str:
    """Digest of the platform and measure parts, and of the weights where the backend runs them: what a
    measurement depends on besides its configuration (whose hash covers the model's graph, option, cuts and
    parameters). Cached rows of another context are stale."""
    parts = {"platform": platform, "measure": measure, **({"weights": weights} if weights is not None else {})}
    return digest(json.dumps(parts, sort_keys=True, default=str))


def runtime_min(plan: Plan) -> int:
    """Wall-time a measuring job of a run may need (the cluster executor's ``runtime``): a virtual board explores in
    seconds, host CPU groups in minutes, a real board for hours (thesis Table 3.7: ~10 board-hours)."""
    return RUNTIME_MIN.get(plan.facts["backend"], RUNTIME_MIN["trt"])


def run_targets(plan: Plan, family: str, run: str) -> list[str]:
    """The outputs of a target family ("pipeline", "layermap") for a run, or a DseError saying why its platform
    cannot run it."""
    if plan.facts["refused"].get(family):
        raise DseError(f"{run}: {plan.facts['refused'][family]}")
    return plan.files(run, family)


def plan_runs(snakemake_config: dict) -> dict[str, Plan]:
    """Compose and validate one config per benchmark (`benchmarks=[a,b]` or the `benchmark=` override).

    Returns run directory -> its plan (one explore_option job per option). Writes nothing."""
    overrides = split_overrides(snakemake_config.get("overrides"))
    benchmarks = snakemake_config.get("benchmarks")
    if isinstance(benchmarks, str):
        benchmarks = split_overrides(benchmarks)
    runs: dict[str, Plan] = {}
    for bench in benchmarks or [None]:
        extra = [] if bench is None else [f"benchmark={bench}"]
        rd, plan = plan_run(compose_config(overrides + extra))
        if rd in runs:
            raise DseError(f"two planned runs share the directory {rd}")
        runs[rd] = plan
    return runs


def plan_run(cfg: DictConfig) -> tuple[str, Plan]:
    """(run directory, plan) of one composed config: what `plan_runs` makes per benchmark and a study per point."""
    from dse.search.clocks import EnergySettings
    from dse.systems.layermap.settings import LayermapSettings

    parts, options, refused = config_parts(cfg)
    clocks = bool(parts.get("energy")) and EnergySettings.from_dict(parts["energy"]).active
    inputs = {"pipeline": ("report.md", *(["clocks.json"] if clocks else []), "config.yaml"),
              "layermap": (*layermap_outputs(parts["layermap"]), "config.yaml"),
              "layermap_solve": tuple(LayermapSettings.from_dict(parts["layermap"]).solve_files())}
    facts = {"options": options, "strategy": parts.get("search", {}).get("strategy", SearchSettings.strategy),
             "refused": refused, "backend": parts["platform"].get("backend", "sim"), "clocks": clocks}
    plan = Plan({k: _yaml(v) for k, v in parts.items()}, OmegaConf.to_yaml(cfg), inputs=inputs, facts=facts)
    return str(run_dir(cfg)), plan


def layermap_outputs(layermap: dict) -> tuple[str, ...]:
    """What the layermap target makes in a run directory (the Pareto plot where the platform has a power model)."""
    files = ["layermap.md", "layermap.parquet", "plots/layermap_periods.png", "plots/layermap_gantt_100.png",
             "plots/layermap_gantt_cap.png"]
    return tuple(files + (["plots/layermap_pareto.png"] if layermap["energy"] else []))
