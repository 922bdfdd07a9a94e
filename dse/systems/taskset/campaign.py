"""The schedulability campaign of seed 003 (Sec. 6.2-6.3, Figs. 10-12, Tables 5-7): per scenario and threshold,
N random task sets, each decided under every configuration of the scenario.

One row per (threshold, set, configuration) is kept (``campaign.parquet``); ``summarize`` turns them into the
success ratio and the mean number of instances per schedulable set. Configurations whose option sets nest imply
each other (a set that fits a configuration fits every superset; one that does not fit does not fit any subset),
so each set asks the solver about the largest configuration first, then the smallest, then the rest."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import pandas as pd

from dse.core.validate import check_keys
from dse.core.validate import bounded_int
from dse.systems.taskset.errors import TasksetError
from dse.systems.taskset.generate import generate_set, set_rng
from dse.systems.taskset.schedule import Schedule, Scheduler
from dse.systems.taskset.variants import VariantTable


@dataclass(frozen=True)
class CampaignSettings:
    scenario: str
    sets: int = 1000
    thresholds: tuple[float, ...] = tuple(round(1.0 + 0.2 * k, 1) for k in range(16))
    seed: int = 0
    units: str = "physical"
    margin: float = 0.1
    solver: str = "highs"
    time_limit_s: float = 20.0

    def __post_init__(self):
        bounded_int(self.sets, "sets", 1, 10**7)
        bounded_int(self.seed, "seed", 0, 2**32 - 1)
        bad = [t for t in self.thresholds if isinstance(t, bool) or not (isinstance(t, (int, float)) and t > 0)]
        if bad or not self.thresholds:
            raise TasksetError(f"thresholds must be numbers > 0, got {bad or list(self.thresholds)}")

    def to_dict(self) -> dict:
        return {**asdict(self), "thresholds": list(self.thresholds)}

    def check(self, table: VariantTable) -> None:
        """Everything that can be refused before a campaign starts (named value, valid choices)."""
        from dse.ilp import check_solver
        from dse.systems.taskset.units import unit_model

        table.scenario(self.scenario)
        unit_model(self.units)
        check_solver(self.solver, self.time_limit_s)
        if not 0 < self.margin <= min(self.thresholds):
            raise TasksetError(f"margin must be in (0, smallest threshold {min(self.thresholds)}], got {self.margin}")


CAMPAIGN_KEYS = ("sets", "thresholds", "units", "margin", "solver", "time_limit_s")
TABLE_KEYS = ("name", "unit", "frame", "variants", "measure", "scenarios", "scenario", "run_scenarios",
              *CAMPAIGN_KEYS)


def from_config(node: dict, scenario: str | None = None, seed: int = 0,
                measured: dict | None = None) -> tuple[VariantTable, CampaignSettings]:
    """The variant table and one scenario's campaign settings from a ``config/taskset/*.yaml`` node. A node with
    ``measure`` instead of ``variants`` gets its times from ``measured`` (the ``variants.yaml`` a job wrote:
    unit, frame, variants); without them the table holds no times, for checking a plan."""
    check_keys(node, TABLE_KEYS, "key of taskset", TasksetError)
    if node.get("measure") is not None:
        from dse.systems.taskset.measured import MeasureSpec

        if node.get("variants"):
            raise TasksetError(f"taskset {node.get('name')}: give either variants (a table) or measure, not both")
        MeasureSpec.from_dict(node["measure"])
        table = VariantTable.from_dict({**node, **(measured or {})}, measured_later=measured is None)
    else:
        table = VariantTable.from_dict(node)
    kwargs = {k: node[k] for k in CAMPAIGN_KEYS if node.get(k) is not None}
    if "thresholds" in kwargs:
        kwargs["thresholds"] = tuple(kwargs["thresholds"])
    settings = CampaignSettings(scenario or str(node.get("scenario")), seed=int(seed), **kwargs)
    settings.check(table)
    return table, settings


def decide_configurations(scheduler: Scheduler, times: np.ndarray, configurations: dict[str, tuple[str, ...]]
                          ) -> dict[str, Schedule]:
    """Every configuration's answer for one set, solving as few as the nesting allows."""
    names = list(configurations)
    by_size = sorted(names, key=lambda c: len(configurations[c]))
    order = [by_size[-1], by_size[0], *reversed(by_size[1:-1])] if len(names) > 1 else names
    out: dict[str, Schedule] = {}
    for name in order:
        opts = set(configurations[name])
        if any(d.feasible and set(configurations[c]) <= opts for c, d in out.items()):
            out[name] = Schedule(True, "implied", "feasible")
        elif any(d.feasible is False and opts <= set(configurations[c]) for c, d in out.items()):
            out[name] = Schedule(False, "implied", "infeasible")
        else:
            out[name] = scheduler.decide(times, configurations[name])
    return {n: out[n] for n in names}


def run_campaign(table: VariantTable, settings: CampaignSettings,
                 progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """One row per (threshold, set, configuration): n_tasks, ref_util (sum of reference times / frame),
    feasible (NaN = undecided), decided_by, status, seconds (solver time)."""
    scenario = table.scenario(settings.scenario)
    scheduler = Scheduler(table.frame_ms, settings.units, settings.solver, settings.time_limit_s)
    r = table.option_index(scenario.reference)
    rows, total, done = [], len(settings.thresholds) * int(settings.sets), 0
    for threshold in settings.thresholds:
        rng = set_rng(settings.seed, scenario.name, threshold)
        for k in range(int(settings.sets)):
            types, times = generate_set(rng, table, scenario.reference, threshold, settings.margin)
            ref_util = float(times[:, r].sum() / table.frame_ms) if len(times) else 0.0
            counts = np.bincount(types, minlength=len(table.types))
            mix = " ".join(f"{table.types[i]}:{c}" for i, c in enumerate(counts) if c)
            for name, d in decide_configurations(scheduler, times, scenario.configurations).items():
                rows.append((scenario.name, settings.units, float(threshold), k, len(types), ref_util, mix, name,
                             np.nan if d.feasible is None else float(d.feasible), d.decided_by, d.status,
                             d.seconds))
            done += 1
            if progress:
                progress(done, total)
    return pd.DataFrame(rows, columns=["scenario", "units", "threshold", "set", "n_tasks", "ref_util", "mix",
                                       "configuration", "feasible", "decided_by", "status", "seconds"])


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Per scenario, configuration and threshold: success ratio, mean instances per schedulable set (NaN when
    none is schedulable: the tables' "x"), sets, undecided sets."""
    f = frame.assign(ok=frame.feasible == 1.0, undecided=frame.feasible.isna())
    f = f.assign(n_ok=f.n_tasks.where(f.ok))
    g = f.groupby(["scenario", "units", "configuration", "threshold"], sort=False)
    out = g.agg(success=("ok", "mean"), mean_instances=("n_ok", "mean"), sets=("ok", "size"),
                undecided=("undecided", "sum")).reset_index()
    return out


def timed_campaign(table: VariantTable, settings: CampaignSettings, progress=None) -> tuple[pd.DataFrame, dict]:
    """``run_campaign`` plus the run's facts: wall seconds, how each answer was reached."""
    t0 = time.perf_counter()
    frame = run_campaign(table, settings, progress)
    facts = {"wall_s": round(time.perf_counter() - t0, 2), "rows": len(frame),
             "decided_by": {k: int(v) for k, v in frame.decided_by.value_counts().items()},
             "undecided": int(frame.feasible.isna().sum()), "ilp_s": round(float(frame.seconds.sum()), 2)}
    return frame, facts
