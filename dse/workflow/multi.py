"""Target `multi`: several networks on one board under deadlines with DVFS (thesis Ch. 4).

Jobs (``workflow/rules/multi.smk``), all under ``results/multi/<case>/<platform>/``:
``pareto`` (step 1, one job per network: ``pareto/<net>.parquet`` + ``tasks/<net>.parquet``) -> ``powerfit``
(idle and dynamic power sweeps over the DVFS tables -> ``powerfit.json``) -> ``combine`` (one job per FSM x
method -> ``combine/<fsm>-<method>.json``) -> ``freqtable`` (step 3 -> ``freqtable/<fsm>-<method>.parquet``) ->
``deploy`` (the periodic multi-app simulation -> ``deploy/<fsm>-<method>.parquet``) -> ``report`` (``multi.md``,
plots). Each job reads only the config parts it depends on (``config/multi.yaml``, ``config/platform.yaml``).
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dse.errors import DseError
from dse.store.atomic import write_bytes_atomic, write_json_atomic

STEP1_KEYS = ("name", "precision", "input_size", "prepost_us", "pareto")


def multi_dir(results_dir: str, name: str, platform: str) -> str:
    return str(Path(results_dir) / "multi" / name / platform)


@dataclass(frozen=True)
class MultiPlan:
    parts: dict[str, str]        # part -> YAML text
    resolved: str
    networks: tuple[str, ...]
    fsms: tuple[str, ...]
    methods: tuple[str, ...]

    def files(self, mdir: str) -> list[str]:
        return [f"{mdir}/multi.md", f"{mdir}/config.yaml", f"{mdir}/plots/multi_fps.png"]

    def combine_files(self, mdir: str, kind: str = "combine", ext: str = "json") -> list[str]:
        return [f"{mdir}/{kind}/{f}-{m}.{ext}" for f in self.fsms for m in self.methods]


def compose_sim_case(snakemake_config: dict, target: str, hint: str = ""):
    """(composed config, platform dict, loaded Platform) of a target that runs on a virtual board only."""
    from omegaconf import OmegaConf

    from dse.config import compose_config, split_overrides
    from dse.platform import load_platform

    cfg = compose_config(split_overrides(snakemake_config.get("overrides")))
    platform = OmegaConf.to_container(cfg.platform, resolve=True)
    loaded = load_platform(platform)
    if loaded.backend != "sim":
        raise DseError(f"target {target} runs on a virtual board (backend sim); platform {loaded.name} has backend "
                       f"{loaded.backend}{hint}")
    return cfg, platform, loaded


def plan_multi(snakemake_config: dict) -> dict[str, MultiPlan]:
    """Compose the config (``overrides``, e.g. ``[multi=ch4-beta]``) and resolve the multi case against the
    platform: every bad value is refused before any job runs. Writes nothing."""
    from omegaconf import OmegaConf

    from dse.config import group_choices
    from dse.multi.settings import MultiSettings

    cfg, platform, loaded = compose_sim_case(snakemake_config, "multi", " (the trt path exports the result: "
                                                                        "`dse multi export`)")
    settings = MultiSettings.resolve(cfg.multi, loaded, group_choices("benchmark"))
    full = {**settings.to_dict(), "seed": int(cfg.seed)}
    step1 = {k: full[k] for k in (*STEP1_KEYS, "seed")}
    text = {"multi": OmegaConf.to_yaml(OmegaConf.create(full)), "step1": OmegaConf.to_yaml(OmegaConf.create(step1)),
            "platform": OmegaConf.to_yaml(OmegaConf.create(platform))}
    mdir = multi_dir(cfg.results_dir, settings.name, loaded.name)
    return {mdir: MultiPlan(text, OmegaConf.to_yaml(cfg), tuple(settings.networks), tuple(settings.fsms),
                            settings.methods)}


# ---- job context ----------------------------------------------------------------------------------------------
def _part(mdir, name) -> dict:
    from omegaconf import OmegaConf

    path = Path(mdir) / "config" / f"{name}.yaml"
    if not path.exists():
        raise DseError(f"{path} is missing: plan the case first (snakemake writes it, rule multi_configure)")
    return OmegaConf.to_container(OmegaConf.load(path), resolve=True)


def load_settings(mdir):
    from dse.multi.settings import MultiSettings
    from dse.platform import load_platform

    d = _part(mdir, "multi")
    seed = int(d.pop("seed", 0))
    platform = _part(mdir, "platform")
    return MultiSettings.resolve(d, load_platform(platform)), platform, seed


@dataclass(frozen=True)
class Step1Settings:
    """What step 1 and the power fit read (``config/step1.yaml``): a change of the GA sizes, FSMs or deadlines
    does not re-measure the networks."""

    name: str
    precision: str
    input_size: int
    prepost_us: dict | None
    pareto: dict
    seed: int
    tasktime: dict | None = None

    @property
    def ga(self) -> dict:
        return {"seed": self.seed}


def load_step1(mdir):
    from dse.platform import load_platform

    d = _part(mdir, "step1")
    platform = _part(mdir, "platform")
    load_platform(platform)
    return Step1Settings(**d), platform


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _meta(settings, seed: int) -> dict:
    from dse.store.schema import versions

    return {"seed": seed, "versions": versions(), "case": settings.name}


# ---- jobs --------------------------------------------------------------------------------------------------------
def pareto(mdir: str, network: str) -> dict:
    """Step 1 for one network: its Pareto mappings and their task profiles."""
    from dse.multi.networks import network_backend
    from dse.multi.pareto import step1

    settings, platform = load_step1(mdir)
    seed = settings.seed
    _, backend = network_backend(network, platform, settings, seed)

    def progress(i, total):
        _say(f"[pareto {network}] {i}{'/' + str(total) if total else ''} candidates")

    front, tasks, summary, candidates = step1(backend, settings, progress=progress)
    out = Path(mdir)
    write_bytes_atomic(out / "candidates" / f"{network}.parquet", candidates.to_parquet(index=False))
    write_bytes_atomic(out / "pareto" / f"{network}.parquet", front.to_parquet(index=False))
    write_bytes_atomic(out / "tasks" / f"{network}.parquet", tasks.to_parquet(index=False))
    summary = {**summary, **_meta(settings, seed), "network": network, "layers": len(backend.analysis.layers),
               "feasible_positions": len(backend.analysis.feasible_cuts)}
    write_json_atomic(out / "pareto" / f"{network}.json", summary)
    _say(f"[pareto {network}] {summary['mode']}: {summary['evaluated']} evaluated, {summary['feasible']} without "
         f"DLA fallback, {summary['pareto']} Pareto mappings")
    return summary


def load_case(mdir: str):
    """The step-2 Case from the step-1 tables and the power fit."""
    from dse.backends.sim.periodic import accelerator_contention
    from dse.multi.combine import Case
    from dse.multi.pareto import task_chains
    from dse.platform import load_platform
    from dse.rt.energy import PowerFit

    settings, platform, seed = load_settings(mdir)
    p = load_platform(platform)
    fronts = {n: pd.read_parquet(Path(mdir) / "pareto" / f"{n}.parquet") for n in settings.networks}
    tasks = {n: pd.read_parquet(Path(mdir) / "tasks" / f"{n}.parquet") for n in settings.networks}
    chains, n_dla, e_dyn, mappings, bases = {}, {}, {}, {}, {}
    for n in settings.networks:
        chains[n], bases[n] = task_chains(tasks[n])
        f = fronts[n].sort_values("mapping")
        n_dla[n] = [int(x) for x in f.n_dla]
        e_dyn[n] = [{k: float(getattr(r, f"e_{k}_full_j")) for k in ("gpu", "dla", "cpu")
                     if getattr(r, f"e_{k}_full_j") > 0} for r in f.itertuples()]
        mappings[n] = [(str(r.option), tuple(int(c) for c in r.cuts)) for r in f.itertuples()]
    fit = PowerFit.from_dict(json.loads((Path(mdir) / "powerfit.json").read_text())["fit"])
    levels = dvfs_levels(p)
    return Case(settings, chains, n_dla, e_dyn, mappings, fit, levels, p.limits.max_dla_engines_total,
                contention=accelerator_contention(p) if settings.contention_margin is None
                else settings.contention_margin, n_dla_cores=len(p.dla_pes()), bases=bases), seed


def dvfs_levels(p) -> dict[str, list[float]]:
    return {"cpu": sorted(p.cpu_freq_mhz), "gpu": sorted(p.pes[p.main_pe].freq_mhz),
            "dla": sorted(p.dla_pes()[0].freq_mhz)}


GLOBAL_OF = {"GB": "GB", "PR-GB": "GB", "SOTA": "SOTA"}   # method -> its one mapping for every FSM


def global_mapping(mdir: str, kind: str) -> dict:
    """The one static mapping GB / PR-GB (``kind`` GB) or SOTA use on every FSM -> ``global/<kind>.json``."""
    from dse.multi.methods import global_mapping as gb

    case, seed = load_case(mdir)
    t0 = time.perf_counter()
    if kind == "GB":
        out = gb(case)
    elif kind == "SOTA":
        from dse.multi.sota import add_sota, sota_genes

        info = sota_genes(mdir, case, seed)
        out = {"genes": list(add_sota(case, info)), "sota": info}
    else:
        raise DseError(f"no global mapping for {kind!r}; valid: GB, SOTA")
    out.update(_meta(case.settings, seed), time_s=round(time.perf_counter() - t0, 3))
    write_json_atomic(Path(mdir) / "global" / f"{kind}.json", out)
    _say(f"[global {kind}] genes {out['genes']}")
    return out


def combine(mdir: str, fsm: str, method: str) -> dict:
    from dse.multi.methods import combine as run

    case, seed = load_case(mdir)
    if fsm not in case.settings.fsms:
        raise DseError(f"FSM {fsm!r} is not in case {case.settings.name}; FSMs: {', '.join(case.settings.fsms)}")
    genes, extra = None, {}
    if method in GLOBAL_OF:
        glob = json.loads((Path(mdir) / "global" / f"{GLOBAL_OF[method]}.json").read_text())
        genes = glob["genes"]
        if glob.get("sota"):
            from dse.multi.sota import add_sota

            add_sota(case, glob["sota"])
            extra["sota"] = glob["sota"]
        extra["global_ga"] = glob.get("ga")
    result = run(case, fsm, method, genes=genes)
    result.update(extra, **_meta(case.settings, seed))
    write_json_atomic(Path(mdir) / "combine" / f"{fsm}-{method}.json", result)
    _say(f"[combine {fsm}-{method}] max {result['max_fps']:.1f} FPS, plan {result['plan_max_fps']:.1f} FPS "
         f"({result['time_s']:.1f} s, {result['cpa_calls']} CPA calls)")
    return result


def load_result(mdir: str, fsm: str, method: str):
    """(case, seed, combine result) with SOTA's re-measured mappings added to the case."""
    case, seed = load_case(mdir)
    result = json.loads((Path(mdir) / "combine" / f"{fsm}-{method}.json").read_text())
    if result.get("sota"):
        from dse.multi.sota import add_sota

        add_sota(case, result["sota"])
    return case, seed, result


def freqtable(mdir: str, fsm: str, method: str) -> pd.DataFrame:
    from dse.multi.methods import frequency_table

    case, seed, result = load_result(mdir, fsm, method)
    df = frequency_table(case, result)
    df["wcrt_ms"] = df["wcrt_ms"].map(json.dumps)
    df["seed"] = seed
    write_bytes_atomic(Path(mdir) / "freqtable" / f"{fsm}-{method}.parquet", df.to_parquet(index=False))
    return df


def powerfit(mdir: str) -> dict:
    """Idle and per-network dynamic power sweeps on the board -> the energy model's regressions."""
    from dse.multi.deploy import power_fit
    from dse.multi.networks import case_platform
    from dse.platform import load_platform

    settings, platform = load_step1(mdir)
    seed = settings.seed
    p = load_platform(case_platform(platform, settings))
    nets = sorted(f.stem for f in (Path(mdir) / "pareto").glob("*.parquet"))
    fronts = {n: pd.read_parquet(Path(mdir) / "pareto" / f"{n}.parquet") for n in nets}
    tasks = {n: pd.read_parquet(Path(mdir) / "tasks" / f"{n}.parquet") for n in nets}
    fit, records = power_fit(p, fronts, tasks, dvfs_levels(p), seed)
    out = {"fit": fit.to_dict(), **records, **_meta(settings, seed)}
    sweeps = pd.DataFrame([{"sweep": k, **r} for k in ("idle", "dynamic") for r in records[k]])
    # the board measurements behind the fit
    write_bytes_atomic(Path(mdir) / "powerfit.parquet", sweeps.assign(seed=seed).to_parquet(index=False))
    write_json_atomic(Path(mdir) / "powerfit.json", out)
    _say(f"[powerfit] static fits for {', '.join(fit.static)}; dynamic fits: {len(fit.dynamic)}")
    return out


def deploy(mdir: str, fsm: str, method: str) -> pd.DataFrame:
    """A method's mapping and frequency table on the virtual board (periodic runs per scenario and FPS)."""
    from dse.multi.deploy import deploy_rows
    from dse.multi.networks import case_platform
    from dse.platform import load_platform

    case, seed, result = load_result(mdir, fsm, method)
    table = pd.read_parquet(Path(mdir) / "freqtable" / f"{fsm}-{method}.parquet")
    _, platform, _ = load_settings(mdir)

    def progress(i, n):
        if i % 4 == 0:
            _say(f"[deploy {fsm}-{method}] {i}/{n} scenario x FPS runs")

    df = deploy_rows(load_platform(case_platform(platform, case.settings)), case, result, table, seed=seed,
                     progress=progress)
    df["seed"] = seed
    write_bytes_atomic(Path(mdir) / "deploy" / f"{fsm}-{method}.parquet", df.to_parquet(index=False))
    misses = int(df.misses.sum()) if len(df) else 0
    _say(f"[deploy {fsm}-{method}] {len(df)} runs, {misses} deadline misses")
    return df


def report(mdir: str) -> str:
    from dse.multi.report import write_report

    text = write_report(mdir)
    _say(f"[report] {Path(mdir) / 'multi.md'}")
    return text
