"""The real check of a `multiapp` case on this host (board host-cpu, seed 002 Sec. VI for real): the chosen Pareto
solutions run periodically on the core groups with their fixed priorities (``dse.runtime.periodic``), next to
the schedule-based analysis of the same run.

The run executes segments (maximal same-PE runs of layers, one ONNX subgraph each) to their end, so the bound it
is held to is the pipelined analysis over the segments, every core group non-preemptive (blocking: the longest
lower-priority segment there), with each segment's time the longest of ``TIMING_REPEATS`` runs alone on its group
after ``TIMING_WARMUP``: a measured WCET, taken just before the run. The GA planned with per-task medians on
preemptive groups; its verdict and this one can differ, and the check reports this one.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from dse.systems.common import say

if TYPE_CHECKING:
    import pandas as pd

TIMING_REPEATS, TIMING_WARMUP = 30, 5


def _net_and_app(case, spec, mapping, seed: int):
    """The app of one mapping as a PeriodicNet (its segments and a seeded input) and as the analysis' MappedApp
    (segment PEs, measured WCETs in us, the segments each one reads)."""
    from dse.rt.schedule_based import MappedApp
    from dse.runtime.periodic import PeriodicNet, segment_times
    from dse.runtime.taskgraph import partition_segments

    analysis = case.analysis(spec.benchmark)
    graph = case.graph(spec.benchmark)
    segments = partition_segments(analysis, graph.expand(np.asarray(mapping, dtype=np.int64)).tolist())
    rng = np.random.default_rng(seed)
    feed = {n: rng.standard_normal(shape).astype(np.float32) for n, shape in analysis.inputs.items()}
    net = PeriodicNet(spec.benchmark, segments, spec.period_ms / 1000, spec.priority, feed)
    groups = [pe.core_ids for pe in case.pes().pes]
    wcet = [max(t) * 1e6 for t in segment_times(net, groups, repeats=TIMING_REPEATS, warmup=TIMING_WARMUP)]
    producer = {t: s.index for s in segments for t in s.outputs}
    preds = tuple(tuple(sorted({producer[t] for t in s.inputs if t in producer})) for s in segments)
    return net, MappedApp(spec.benchmark, spec.period_ms * 1000, spec.priority, tuple(s.pe for s in segments),
                          tuple(wcet), preds)


def host_check(case, frame, picks: list[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The Pareto rows at ``picks`` run for real for ``check.hyperperiods`` hyperperiods each: per solution and
    app its analysis bound (segment WCETs), measured worst stage response, misses and jobs; and every stage job
    (``host_jobs.parquet``)."""
    import pandas as pd

    from dse.rt.schedule_based import analyse
    from dse.runtime.periodic import run_periodic
    from dse.taskgraph.mapping import decode_ids

    s = case.settings
    groups = [pe.core_ids for pe in case.pes().pes]
    seed = int(s.ga["seed"])
    rows, jobs = [], []
    for pos in picks:
        row = frame.iloc[pos]
        solution = int(row["solution"])
        built = [_net_and_app(case, a, decode_ids(row[f"{a.benchmark}_mapping"]), seed + k)
                 for k, a in enumerate(s.apps)]
        nets, mapped = [b[0] for b in built], [b[1] for b in built]
        bound = analyse(mapped, [False] * len(groups), "pipelined")
        iterations = [max(1, round(s.check["hyperperiods"] * s.hyperperiod_ms / a.period_ms)) for a in s.apps]
        say(f"[multiapp] solution {solution}: running {', '.join(f'{n.name} x{k}' for n, k in zip(nets, iterations))}"
            f" on {len(groups)} core groups ({s.check['hyperperiods']} hyperperiods of {s.hyperperiod_ms:g} ms)")
        res = run_periodic(nets, groups, iterations)
        for a in bound.apps:
            worst = res.worst_response_s(a.name) * 1e6
            rows.append({"solution": solution, "app": a.name, "period_us": a.period_us,
                         "schedulable": bool(a.schedulable), "bound_us": a.response_us, "worst_us": worst,
                         "misses": int(res.misses(a.name)), "jobs": len(res.responses_s(a.name)),
                         "pessimism": a.response_us / worst if worst > 0 else math.nan})
        jobs.append(res.to_frame().assign(solution=solution))
    return pd.DataFrame(rows), pd.concat(jobs, ignore_index=True) if jobs else pd.DataFrame()
