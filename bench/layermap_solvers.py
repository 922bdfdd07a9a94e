"""Speed of the 002/004 solvers on synthetic instances: the kang2020 ILP (HiGHS, Eq. 4 exact) on a 30-task chain
of spec 8.1's shape (4 single cores + a GPU 2.5x faster, comm 600 us CPU<->GPU, 50 us CPU<->CPU; target <= 30 s),
the same ILP on a 30-task random DAG under the same time limit (reported, usually not optimal), and the
kang2020 GA (memetic) for 60,000 evaluations on both (target <= 60 s each), with its period against the ILP's.

Run: ``python -m bench.layermap_solvers [--tasks 30 --evals 60000 --time-limit 60]``;
writes bench/results/layermap_solvers.json.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from bench.machine import load_average, write_result
from dse.taskgraph import AnalyticModel, PeSet, ProfileTable, TaskGraph
from dse.systems.layermap import run_layer_ga, solve_ilp

OUT = Path(__file__).resolve().parent / "results" / "layermap_solvers.json"
ILP_TARGET_S, GA_TARGET_S = 30.0, 60.0


def comm_8_1(nbytes, src: str, dst: str):
    """Spec 8.1's transfer costs: 600 us to or from the GPU, 50 us between CPU cores."""
    return np.full(np.shape(nbytes), 600.0 if "gpu" in (src, dst) else 50.0)


def instance(n: int, seed: int, dag: bool) -> AnalyticModel:
    rng = np.random.default_rng(seed)
    src, dst = [], []
    for j in range(1, n):
        preds = {j - 1} | ({i for i in range(j - 1) if rng.random() < 0.1} if dag else set())
        src += sorted(preds)
        dst += [j] * len(preds)
    g = TaskGraph(names=tuple(f"t{i}" for i in range(n)), layers=tuple((i,) for i in range(n)),
                  op_types=("Conv",) * n, macs=np.ones(n), src=src, dst=dst, nbytes=np.full(len(src), 1e5))
    cpu = rng.uniform(300, 3000, n)
    times = np.column_stack([cpu, np.maximum(300.0, cpu / 2.5)])
    prof = ProfileTable(kinds=("cpu1", "gpu"), time_us=times, source="bench", graph_digest=g.digest, tasks=g.names)
    return AnalyticModel(g, prof, PeSet.build("1-1-1-1", ["gpu"]), comm_8_1)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=30)
    ap.add_argument("--evals", type=int, default=60_000)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--output", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rows = []
    for name, dag in (("chain", False), ("dag", True)):
        model = instance(args.tasks, 1, dag)
        ilp = solve_ilp(model, formulation="kang2020", clusters="exact", time_limit=args.time_limit)
        t0 = time.perf_counter()
        ga = run_layer_ga(model, "kang2020", seed=0, budget=args.evals, stall=0, generations=10**6)
        ga_s = time.perf_counter() - t0
        rows.append({"instance": name, "tasks": args.tasks, "edges": int(len(model.graph.src)), "pes": model.P,
                     "ilp_status": ilp.status, "ilp_period_us": ilp.objective, "ilp_bound_us": ilp.bound,
                     "ilp_gap": ilp.gap, "ilp_s": ilp.seconds, "ilp_vars": ilp.n_vars,
                     "ga_period_us": ga.fitness, "ga_evals": ga.evaluations, "ga_moves": ga.moves,
                     "ga_generations": ga.generations, "ga_s": ga_s,
                     "ga_vs_ilp": ga.fitness / ilp.objective if np.isfinite(ilp.objective) else None})
    print(f"{'instance':8} {'n':>3} {'edges':>5} {'ILP status':>11} {'ILP us':>9} {'gap':>7} {'ILP s':>7} "
          f"{'GA us':>9} {'evals':>6} {'moves':>6} {'GA s':>6} {'GA/ILP':>7}")
    for r in rows:
        print(f"{r['instance']:8} {r['tasks']:>3} {r['edges']:>5} {r['ilp_status']:>11} {r['ilp_period_us']:>9.1f} "
              f"{r['ilp_gap']:>7.2%} {r['ilp_s']:>7.2f} {r['ga_period_us']:>9.1f} {r['ga_evals']:>6} "
              f"{r['ga_moves']:>6} {r['ga_s']:>6.2f} {(r['ga_vs_ilp'] or float('nan')):>7.4f}")
    payload = {"rows": rows, "targets": {"ilp_s": ILP_TARGET_S, "ga_s": GA_TARGET_S}, "evals": args.evals,
               "time_limit_s": args.time_limit, "load_average": load_average()}
    write_result(args.output, payload)
    return payload


if __name__ == "__main__":
    main()
