"""Target `multi`: several networks on one board under deadlines with DVFS (thesis Ch. 4).

Jobs (``workflow/rules/multi.smk``), all under ``results/multi/<case>/<platform>/``:
``pareto`` (step 1, one job per network: ``pareto/<net>.parquet`` + ``tasks/<net>.parquet``, every board profile a
row of ``cache/step1-<net>.parquet`` in the store's schema) -> ``powerfit``
(idle and dynamic power sweeps over the DVFS tables -> ``powerfit.json``) -> ``combine`` (one job per FSM x
method -> ``combine/<fsm>-<method>.json``) -> ``freqtable`` (step 3 -> ``freqtable/<fsm>-<method>.parquet``) ->
``deploy`` (the periodic multi-app simulation -> ``deploy/<fsm>-<method>.parquet``, every run a row of
``cache/deploy-<fsm>-<method>.parquet``) -> ``report`` (``multi.md``,
plots). Each job reads only the config parts it depends on (``config/multi.yaml``, ``config/platform.yaml``).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd

from dse.config import Plan
from dse.core.errors import DseError
from dse.systems.multi.case_dir import STEP1_KEYS, dvfs_levels, load_case, load_result, load_settings, load_step1
from dse.store.atomic import write_bytes_atomic, write_json_atomic
from dse.systems.common import compose_sim_case, deployment_evaluator, say


def multi_dir(results_dir: str, name: str, platform: str) -> str:
    return str(Path(results_dir) / "multi" / name / platform)


def plan_multi(snakemake_config: dict) -> dict[str, Plan]:
    """Compose the config (``overrides``, e.g. ``[multi=ch4-beta]``) and resolve the multi case against the
    platform: every bad value is refused before any job runs. Writes nothing."""
    from omegaconf import OmegaConf

    from dse.config import group_choices
    from dse.systems.multi.settings import MultiSettings

    cfg, platform, loaded = compose_sim_case(snakemake_config, "multi", " (the trt path exports the result: "
                                                                        "`dse multi export`)")
    settings = MultiSettings.resolve(cfg.multi, loaded, group_choices("benchmark"))
    full = {**settings.to_dict(), "seed": int(cfg.seed)}
    step1 = {k: full[k] for k in (*STEP1_KEYS, "seed")}
    text = {"multi": OmegaConf.to_yaml(OmegaConf.create(full)), "step1": OmegaConf.to_yaml(OmegaConf.create(step1)),
            "platform": OmegaConf.to_yaml(OmegaConf.create(platform))}
    mdir = multi_dir(cfg.results_dir, settings.name, loaded.name)
    nets = tuple(settings.networks)
    runs = [f"{f}-{m}" for f in settings.fsms for m in settings.methods]
    inputs = {"fronts": tuple(f"pareto/{n}.parquet" for n in nets),
              "profiles": tuple(f"{k}/{n}.parquet" for n in nets for k in ("pareto", "tasks")),
              "deployments": tuple([f"combine/{r}.json" for r in runs] + [f"deploy/{r}.parquet" for r in runs])}
    facts = {"networks": nets, "fsms": tuple(settings.fsms), "methods": tuple(settings.methods)}
    return {mdir: Plan(text, OmegaConf.to_yaml(cfg), ("multi.md", "config.yaml", "plots/multi_fps.png"), inputs,
                       facts)}


def _meta(settings, seed: int) -> dict:
    from dse.store.schema import versions

    return {"seed": seed, "versions": versions(), "case": settings.name}


# ---- jobs --------------------------------------------------------------------------------------------------------
def pareto(mdir: str, network: str) -> dict:
    """Step 1 for one network: its Pareto mappings and their task profiles."""
    from dse.systems.multi.networks import network_backend
    from dse.systems.multi.pareto import evaluators, step1

    settings, platform = load_step1(mdir)
    seed = settings.seed
    _, backend = network_backend(network, platform, settings, seed)

    def progress(i, total):
        say(f"[pareto {network}] {i}{'/' + str(total) if total else ''} candidates")

    out = Path(mdir)
    objectives, wcet = evaluators(backend, settings, out / "cache" / f"step1-{network}.parquet")
    front, tasks, summary, candidates = step1(objectives, wcet, settings, progress=progress)
    say(f"[pareto {network}] {objectives.measured + wcet.measured} profiles recorded, "
        f"{objectives.reused + wcet.reused} answered by {objectives.store}")
    write_bytes_atomic(out / "candidates" / f"{network}.parquet", candidates.to_parquet(index=False))
    write_bytes_atomic(out / "pareto" / f"{network}.parquet", front.to_parquet(index=False))
    write_bytes_atomic(out / "tasks" / f"{network}.parquet", tasks.to_parquet(index=False))
    summary = {**summary, **_meta(settings, seed), "network": network, "layers": len(backend.analysis.layers),
               "feasible_positions": len(backend.analysis.feasible_cuts)}
    write_json_atomic(out / "pareto" / f"{network}.json", summary)
    say(f"[pareto {network}] {summary['mode']}: {summary['evaluated']} evaluated, {summary['feasible']} without "
         f"DLA fallback, {summary['pareto']} Pareto mappings")
    return summary


GLOBAL_OF = {"GB": "GB", "PR-GB": "GB", "SOTA": "SOTA"}   # method -> its one mapping for every FSM


def global_mapping(mdir: str, kind: str) -> dict:
    """The one static mapping GB / PR-GB (``kind`` GB) or SOTA use on every FSM -> ``global/<kind>.json``."""
    from dse.systems.multi.methods import global_mapping as gb

    case, seed = load_case(mdir)
    t0 = time.perf_counter()
    if kind == "GB":
        out = gb(case)
    elif kind == "SOTA":
        from dse.systems.multi.sota import add_sota, sota_genes

        info = sota_genes(load_settings(mdir)[1], case, seed, Path(mdir) / "cache")
        out = {"genes": list(add_sota(case, info)), "sota": info}
    else:
        raise DseError(f"no global mapping for {kind!r}; valid: GB, SOTA")
    out.update(_meta(case.settings, seed), time_s=round(time.perf_counter() - t0, 3))
    write_json_atomic(Path(mdir) / "global" / f"{kind}.json", out)
    say(f"[global {kind}] genes {out['genes']}")
    return out


def combine(mdir: str, fsm: str, method: str) -> dict:
    from dse.systems.multi.methods import combine as run

    case, seed = load_case(mdir)
    if fsm not in case.settings.fsms:
        raise DseError(f"FSM {fsm!r} is not in case {case.settings.name}; FSMs: {', '.join(case.settings.fsms)}")
    genes, extra = None, {}
    if method in GLOBAL_OF:
        glob = json.loads((Path(mdir) / "global" / f"{GLOBAL_OF[method]}.json").read_text())
        genes = glob["genes"]
        if glob.get("sota"):
            from dse.systems.multi.sota import add_sota

            add_sota(case, glob["sota"])
            extra["sota"] = glob["sota"]
        extra["global_ga"] = glob.get("ga")
    result = run(case, fsm, method, genes=genes)
    result.update(extra, **_meta(case.settings, seed))
    write_json_atomic(Path(mdir) / "combine" / f"{fsm}-{method}.json", result)
    say(f"[combine {fsm}-{method}] max {result['max_fps']:.1f} FPS, plan {result['plan_max_fps']:.1f} FPS "
         f"({result['time_s']:.1f} s, {result['cpa_calls']} CPA calls)")
    return result


def freqtable(mdir: str, fsm: str, method: str) -> pd.DataFrame:
    from dse.systems.multi.methods import frequency_table

    case, seed, result = load_result(mdir, fsm, method)
    df = frequency_table(case, result)
    df["wcrt_ms"] = df["wcrt_ms"].map(json.dumps)
    df["seed"] = seed
    write_bytes_atomic(Path(mdir) / "freqtable" / f"{fsm}-{method}.parquet", df.to_parquet(index=False))
    return df


def powerfit(mdir: str) -> dict:
    """Idle and per-network dynamic power sweeps on the board -> the energy model's regressions."""
    from dse.systems.multi.deploy import power_fit
    from dse.systems.multi.networks import case_platform
    from dse.platform import load_platform

    settings, platform = load_step1(mdir)
    seed = settings.seed
    p = load_platform(case_platform(platform, settings))
    nets = sorted(f.stem for f in (Path(mdir) / "pareto").glob("*.parquet"))
    fronts = {n: pd.read_parquet(Path(mdir) / "pareto" / f"{n}.parquet") for n in nets}
    tasks = {n: pd.read_parquet(Path(mdir) / "tasks" / f"{n}.parquet") for n in nets}
    ev = deployment_evaluator(p, seed, Path(mdir) / "cache" / "powerfit.parquet")
    fit, records = power_fit(ev, fronts, tasks, dvfs_levels(p), seed)
    out = {"fit": fit.to_dict(), **records, **_meta(settings, seed)}
    sweeps = pd.DataFrame([{"sweep": k, **r} for k in ("idle", "dynamic") for r in records[k]])
    # the board measurements behind the fit
    write_bytes_atomic(Path(mdir) / "powerfit.parquet", sweeps.assign(seed=seed).to_parquet(index=False))
    write_json_atomic(Path(mdir) / "powerfit.json", out)
    say(f"[powerfit] static fits for {', '.join(fit.static)}; dynamic fits: {len(fit.dynamic)}")
    return out


def deploy(mdir: str, fsm: str, method: str) -> pd.DataFrame:
    """A method's mapping and frequency table on the virtual board (periodic runs per scenario and FPS), every run
    a row of ``cache/deploy-<fsm>-<method>.parquet``."""
    from dse.systems.multi.deploy import deploy_rows
    from dse.systems.multi.networks import case_platform
    from dse.platform import load_platform

    case, seed, result = load_result(mdir, fsm, method)
    table = pd.read_parquet(Path(mdir) / "freqtable" / f"{fsm}-{method}.parquet")
    _, platform, _ = load_settings(mdir)
    ev = deployment_evaluator(load_platform(case_platform(platform, case.settings)), seed,
                              Path(mdir) / "cache" / f"deploy-{fsm}-{method}.parquet")
    say(f"[deploy {fsm}-{method}] {int(table.feasible.sum())}/{len(table)} feasible scenario x FPS entries")
    df = deploy_rows(ev, case, result, table, seed=seed)
    df["seed"] = seed
    write_bytes_atomic(Path(mdir) / "deploy" / f"{fsm}-{method}.parquet", df.to_parquet(index=False))
    misses = int(df.misses.sum()) if len(df) else 0
    say(f"[deploy {fsm}-{method}] {len(df)} runs ({ev.measured} measured, {ev.reused} answered by {ev.store}), "
        f"{misses} deadline misses")
    return df


def report(mdir: str) -> str:
    from dse.systems.multi.report import write_report

    text = write_report(mdir)
    say(f"[report] {Path(mdir) / 'multi.md'}")
    return text
