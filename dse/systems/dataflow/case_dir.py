"""A dataflow case directory as its jobs and its report read it: the resolved settings and the co-mapping problem
(the groups' graphs and every network's step-1 candidates)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from dse.config import read_part

GRAPHS_KEY = "graph_specs"   # the dataflow part's copy of every named graph the groups use (name -> its YAML)


def _case(ddir):
    """The case's parts, read once: (settings, platform dict, Platform, case seed, the graphs stored by name)."""
    from dse.systems.dataflow.settings import DataflowSettings
    from dse.platform import load_platform

    d = read_part(ddir, "dataflow")
    seed = int(d.pop("seed", 0))
    graphs = d.pop(GRAPHS_KEY, None) or {}
    platform = read_part(ddir, "platform")
    p = load_platform(platform)
    return DataflowSettings.resolve(d, p), platform, p, seed, graphs


def load_settings(ddir):
    settings, platform, _, seed, _ = _case(ddir)
    return settings, platform, seed


def load_problem(ddir):
    """(settings, platform dict, seed, Problem) from the config parts and the step-1 tables."""
    from dse.systems.dataflow.comap import Candidates, Group, Problem
    from dse.systems.dataflow.graphs import load_graph, random_graph
    from dse.systems.multi.pareto import task_chains

    settings, platform, p, seed, stored = _case(ddir)
    cands = {}
    for n in settings.benchmarks:
        front = pd.read_parquet(Path(ddir) / "pareto" / f"{n}.parquet").sort_values("mapping")
        chains, bases = task_chains(pd.read_parquet(Path(ddir) / "tasks" / f"{n}.parquet"))
        labels = [f"{r.option} {'-'.join(str(int(c)) for c in r.cuts)}".strip() for r in front.itertuples()]
        cands[n] = Candidates(chains, [int(x) for x in front.n_dla], labels, bases)
    groups = [Group(g.name, i, tuple(load_graph(stored.get(x, x)) for x in g.graphs), g.dl, g.graft)
              for i, g in enumerate(settings.groups)]
    rnd = settings.random_graphs
    if rnd:
        count = int(rnd["count"])
        for k in range(count):       # below every named group (spec 3.6 #6); WCETs scaled by 16/#graphs (l. 1846)
            g = random_graph(f"R{k + 1}", [int(rnd.get("seed", 0)), k], int(rnd.get("tasks", 10)),
                             cpu_us=tuple(rnd.get("cpu_us", (100, 500))), gpu_us=tuple(rnd.get("gpu_us", (10, 100))),
                             gpu_only_share=float(rnd.get("gpu_only_share", 0.5)), scale=16 / count)
            groups.append(Group(g.name, len(groups), (g,), ()))
    problem = Problem(groups, dict(settings.networks), cands, list(range(settings.cpu_cores)),
                      n_dla_cores=len(p.dla_pes()), dla_limit=p.limits.max_dla_engines_total)
    return settings, platform, seed, problem
