"""Target `dataflow`: DNNs inside dataflow applications, co-mapped under group deadlines (thesis Ch. 5).

Jobs (``workflow/rules/dataflow.smk``), all under ``results/dataflow/<case>/<platform>/``: ``pareto`` (step 1 with
the Ch. 5 objectives, one job per network, the same job as target ``multi``: ``pareto/<net>.parquet`` +
``tasks/<net>.parquet``) -> ``comap`` (one job per deadline x method x seed -> ``comap/<fps>-<method>-s<seed>.json``)
-> ``deploy`` (the chosen co-mapping in the periodic simulation -> ``deploy/<fps>-<method>-s<seed>.parquet``) ->
``report`` (``dataflow.md``, ``dataflow.parquet``, plots). Each job reads only the config parts it depends on.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from dse.config import Plan
from dse.core.errors import DseError
from dse.store.atomic import write_bytes_atomic, write_json_atomic
from dse.systems.dataflow.case_dir import GRAPHS_KEY, load_problem
from dse.systems.common import compose_sim_case, deployment_evaluator, say
from dse.systems.multi.case_dir import STEP1_KEYS


def dataflow_dir(results_dir: str, name: str, platform: str) -> str:
    return str(Path(results_dir) / "dataflow" / name / platform)


def job_name(fps: float, method: str, seed: int) -> str:
    return f"{fps:g}-{method}-s{seed}"


def plan_dataflow(snakemake_config: dict) -> dict[str, Plan]:
    """Compose the config (``overrides``, e.g. ``[dataflow=ch5-random-16]``) and resolve the case against the
    platform: every bad value is refused before any job runs. Writes nothing."""
    from omegaconf import OmegaConf

    from dse.config import group_choices
    from dse.systems.dataflow.graphs import graph_names, graph_spec
    from dse.systems.dataflow.settings import DataflowSettings

    cfg, platform, loaded = compose_sim_case(snakemake_config, "dataflow")
    settings = DataflowSettings.resolve(cfg.dataflow, loaded, group_choices("benchmark"), graph_names())
    # the graphs themselves, not only their names: editing a graph's YAML reruns the co-mapping jobs, and a run
    # keeps the graphs it was computed with
    graphs = {name: graph_spec(name) for g in settings.groups for name in g.graphs}
    full = {**settings.to_dict(), "seed": int(cfg.seed), GRAPHS_KEY: graphs}
    step1 = {k: full[k] for k in (*STEP1_KEYS, "tasktime", "seed")}
    text = {"dataflow": OmegaConf.to_yaml(OmegaConf.create(full)),
            "step1": OmegaConf.to_yaml(OmegaConf.create(step1)),
            "platform": OmegaConf.to_yaml(OmegaConf.create(platform))}
    jobs = tuple(job_name(f, m, s) for f in settings.fps for m in settings.methods for s in settings.seeds)
    ddir = dataflow_dir(cfg.results_dir, settings.name, loaded.name)
    nets = tuple(settings.benchmarks)
    inputs = {"profiles": tuple(f"{k}/{n}.parquet" for n in nets for k in ("pareto", "tasks")),
              "comappings": tuple([f"comap/{j}.json" for j in jobs] + [f"deploy/{j}.parquet" for j in jobs])}
    return {ddir: Plan(text, OmegaConf.to_yaml(cfg), ("dataflow.md", "dataflow.parquet", "config.yaml"), inputs,
                       {"networks": nets, "jobs": jobs})}


def _meta(settings, seed: int) -> dict:
    from dse.store.schema import versions

    return {"seed": seed, "versions": versions(), "case": settings.name}


def _parse(job: str) -> tuple[float, str, int]:
    fps, rest = job.split("-", 1)
    method, seed = rest.rsplit("-s", 1)
    return float(fps), method, int(seed)


# ---- jobs --------------------------------------------------------------------------------------------------------
def comap(ddir: str, fps: float, method: str, seed: int) -> dict:
    """One method at one deadline with one GA seed -> ``comap/<fps>-<method>-s<seed>.json``."""
    from dse.systems.dataflow.comap import outcome_dict, run_method

    settings, _, case_seed, problem = load_problem(ddir)
    if method not in settings.methods:
        raise DseError(f"method {method!r} is not in case {settings.name}; methods: {', '.join(settings.methods)}")
    ga = {**settings.ga, "seed": seed}
    out = run_method(problem, method, fps, ga, loose_fps=float(settings.ga.get("loose_fps", 10.0)))
    result = {**outcome_dict(problem, out), **_meta(settings, case_seed), "ga_seed": seed}
    write_json_atomic(Path(ddir) / "comap" / f"{job_name(fps, method, seed)}.json", result)
    state = f"max U {result['max_u']:.3f}, max R/p {result['max_wcrt_ratio']:.3f}" if result["feasible"] \
        else f"no feasible solution ({result['reason']})"
    say(f"[comap {job_name(fps, method, seed)}] {state}; {result['time_s']:.1f} s, {result['evaluations']} "
         f"evaluations")
    return result


def deploy(ddir: str, fps: float, method: str, seed: int) -> pd.DataFrame:
    """The chosen co-mapping run in the periodic simulation (synchronous release, then a random phase)."""
    from dse.platform import load_platform
    from dse.systems.dataflow.deploy import deploy_runs
    from dse.systems.multi.networks import case_platform

    settings, platform, case_seed, problem = load_problem(ddir)
    name = job_name(fps, method, seed)
    result = json.loads((Path(ddir) / "comap" / f"{name}.json").read_text())
    ev = deployment_evaluator(load_platform(case_platform(platform, settings)), case_seed,
                              Path(ddir) / "cache" / f"deploy-{name}.parquet")
    df = deploy_runs(ev, problem, result, settings, seed=case_seed)
    write_bytes_atomic(Path(ddir) / "deploy" / f"{name}.parquet", df.to_parquet(index=False))
    if len(df):
        say(f"[deploy {name}] {int(df.misses.sum())} deadline misses in {int(df.jobs.sum())} group jobs; worst "
             f"response / WCRT {df.max_response_over_wcrt.max():.3f}")
    else:
        say(f"[deploy {name}] nothing to run: no feasible co-mapping")
    return df


def report(ddir: str) -> str:
    from dse.systems.dataflow.report import write_report

    text = write_report(ddir)
    say(f"[report] {Path(ddir) / 'dataflow.md'}")
    return text


def run_step(step: str, ddir: str, job: str | None) -> None:
    """``dse workflow dataflow-<step>``: comap/deploy need ``--job fps-method-sSEED``."""
    if step in ("comap", "deploy"):
        if not job:
            raise DseError(f"workflow dataflow-{step} needs --job FPS-METHOD-sSEED (e.g. 25-entire-ga-s0)")
        try:
            fps, method, seed = _parse(job)
        except ValueError:
            raise DseError(f"--job {job!r} is not FPS-METHOD-sSEED (e.g. 25-entire-ga-s0)") from None
        (comap if step == "comap" else deploy)(ddir, fps, method, seed)
    elif step == "report":
        report(ddir)
    else:
        raise DseError(f"unknown dataflow step {step!r}; valid: comap, deploy, report")

