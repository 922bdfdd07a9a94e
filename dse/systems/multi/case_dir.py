"""A multi case directory as its jobs and its report read it: the resolved settings, the step-1 settings, the case
(fronts, chains, power fit, DVFS levels) and a method's combine result."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dse.config import read_part


STEP1_KEYS = ("name", "precision", "input_size", "prepost_us", "pareto")


# ---- job context ----------------------------------------------------------------------------------------------
def load_settings(mdir):
    from dse.systems.multi.settings import MultiSettings
    from dse.platform import load_platform

    d = read_part(mdir, "multi")
    seed = int(d.pop("seed", 0))
    platform = read_part(mdir, "platform")
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

    d = read_part(mdir, "step1")
    platform = read_part(mdir, "platform")
    load_platform(platform)
    return Step1Settings(**d), platform


def load_case(mdir: str):
    """The step-2 Case from the step-1 tables and the power fit."""
    from dse.backends.sim.periodic import accelerator_contention
    from dse.systems.multi.combine import Case
    from dse.systems.multi.pareto import task_chains
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


def load_result(mdir: str, fsm: str, method: str):
    """(case, seed, combine result) with SOTA's re-measured mappings added to the case."""
    case, seed = load_case(mdir)
    result = json.loads((Path(mdir) / "combine" / f"{fsm}-{method}.json").read_text())
    if result.get("sota"):
        from dse.systems.multi.sota import add_sota

        add_sota(case, result["sota"])
    return case, seed, result
