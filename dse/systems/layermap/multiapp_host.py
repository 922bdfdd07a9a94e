"""The real check of a `multiapp` case on this host (board host-cpu, seed 002 Sec. VI for real): the chosen Pareto
solutions run periodically on the core groups with their fixed priorities (``dse.runtime.periodic``), next to
the schedule-based analysis of the same run.

The run executes segments (maximal same-PE runs of layers, one ONNX subgraph each) to their end, so the bound it
is held to is the pipelined analysis over the segments, every core group non-preemptive (blocking: the longest
lower-priority segment there). Each segment's WCET is measured on the ONNX Runtime sessions the run uses, as the
longest of two sources:
- ``TIMING_REPEATS`` runs alone on its group after ``TIMING_WARMUP``, each after ``TIMING_IDLE_S`` of sleep
  (segments start cold after the idle part of a period; ``dse.runtime.periodic.segment_times``);
- ``CALIBRATION_RUNS`` calibration runs: the same periodic run as the check, beforehand, every segment's service
  times (its runs with the runtime's dispatch delay before each; ``PeriodicRunResult.service_times_s``).
Why so many: timed back to back only, 773 of a run's 820 segments ran longer than their "WCET" and the bound was
exceeded by up to 1.4x; with the idle sleep only, still by up to 1.4x; with one calibration run, by 3 % once in 36
(app, run) checks: on this VM a segment's longest run differs by up to 1.4x from one 6 s run to the next
(MobileNet v2's first half on one core: 8.1-11.2 ms over four runs). The checked run comes after them, so its
responses are fresh samples against the bound: a measured bound is as safe as its calibration is long.
The GA planned with warm per-task medians on preemptive groups; its verdict and this one can differ, and the
check reports this one.
"""
from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import numpy as np

from dse.systems.common import say

if TYPE_CHECKING:
    import pandas as pd

TIMING_REPEATS, TIMING_WARMUP, TIMING_IDLE_S = 30, 5, 0.05
CALIBRATION_RUNS = 3


def _net_and_app(case, spec, mapping, seed: int, engines: list):
    """The app of one mapping as a PeriodicNet (its segments and a seeded input) and as the analysis' MappedApp
    (segment PEs, WCETs timed alone in us, the segments each one reads); its ONNX Runtime sessions go to
    ``engines``."""
    from dse.rt.schedule_based import MappedApp
    from dse.runtime.periodic import PeriodicNet, build_engines, segment_times
    from dse.runtime.taskgraph import partition_segments

    analysis = case.analysis(spec.benchmark)
    graph = case.graph(spec.benchmark)
    segments = partition_segments(analysis, graph.expand(np.asarray(mapping, dtype=np.int64)).tolist())
    rng = np.random.default_rng(seed)
    feed = {n: rng.standard_normal(shape).astype(np.float32) for n, shape in analysis.inputs.items()}
    net = PeriodicNet(spec.benchmark, segments, spec.period_ms / 1000, spec.priority, feed)
    groups = [pe.core_ids for pe in case.pes().pes]
    engines.extend(build_engines(segments, groups))
    wcet = [max(t) * 1e6 for t in segment_times(net, groups, repeats=TIMING_REPEATS, warmup=TIMING_WARMUP,
                                                 idle_s=TIMING_IDLE_S, engines=engines)]
    producer = {t: s.index for s in segments for t in s.outputs}
    preds = tuple(tuple(sorted({producer[t] for t in s.inputs if t in producer})) for s in segments)
    return net, MappedApp(spec.benchmark, spec.period_ms * 1000, spec.priority, tuple(s.pe for s in segments),
                          tuple(wcet), preds)


def calibrated(app, runs) -> object:
    """``app`` (a MappedApp over segments) with each segment's time the longest of its own and the segment's
    service times in ``runs`` (PeriodicRunResults: its runs with their dispatch delays)."""
    n = len(app.time_us)
    seen = [r.service_times_s(app.name, n) for r in runs]
    return dataclasses.replace(app, time_us=tuple(max([t, *(x * 1e6 for s in seen for x in s[i])])
                                                  for i, t in enumerate(app.time_us)))


def host_check(case, frame, picks: list[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The Pareto rows at ``picks`` run for real for ``check.hyperperiods`` hyperperiods each (after
    ``CALIBRATION_RUNS`` calibration runs as long): per solution and app its analysis bound (segment WCETs),
    measured worst stage response, misses and jobs; and every stage job of the checked runs
    (``host_jobs.parquet``)."""
    import pandas as pd

    from dse.rt.schedule_based import analyse
    from dse.runtime.periodic import PeriodicRuntime, close_engines
    from dse.taskgraph.mapping import decode_ids

    s = case.settings
    groups = [pe.core_ids for pe in case.pes().pes]
    seed = int(s.ga["seed"])
    iterations = [max(1, round(s.check["hyperperiods"] * s.hyperperiod_ms / a.period_ms)) for a in s.apps]
    rows, jobs = [], []
    for pos in picks:
        row = frame.iloc[pos]
        solution = int(row["solution"])
        engines: list[list] = [[] for _ in s.apps]
        try:
            built = [_net_and_app(case, a, decode_ids(row[f"{a.benchmark}_mapping"]), seed + k, engines[k])
                     for k, a in enumerate(s.apps)]
            nets = [b[0] for b in built]
            say(f"[multiapp] solution {solution}: running "
                f"{', '.join(f'{n.name} x{k}' for n, k in zip(nets, iterations))} on {len(groups)} core groups "
                f"({s.check['hyperperiods']} hyperperiods of {s.hyperperiod_ms:g} ms), {CALIBRATION_RUNS} times to "
                f"calibrate, once to check")
            # warmup=0: segment_times has just warmed every session up
            with PeriodicRuntime(nets, groups, iterations, engines=engines, warmup=0) as runtime:
                calibration = [runtime.run() for _ in range(CALIBRATION_RUNS)]
                res = runtime.run()
        finally:
            for es in engines:
                close_engines(es)
        bound = analyse([calibrated(b[1], calibration) for b in built], [False] * len(groups), "pipelined")
        for a in bound.apps:
            worst = res.worst_response_s(a.name) * 1e6
            rows.append({"solution": solution, "app": a.name, "period_us": a.period_us,
                         "schedulable": bool(a.schedulable), "bound_us": a.response_us, "worst_us": worst,
                         "misses": int(res.misses(a.name)), "jobs": len(res.responses_s(a.name)),
                         "pessimism": a.response_us / worst if worst > 0 else math.nan})
        jobs.append(res.to_frame().assign(solution=solution))
    return pd.DataFrame(rows), pd.concat(jobs, ignore_index=True) if jobs else pd.DataFrame()
