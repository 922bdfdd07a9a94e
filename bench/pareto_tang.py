"""Seed 001's claims on tx2-sim, through the `pareto` target's own job (dse.systems.pareto.jobs.run) with the paper's
NSGA-II settings (population 5000, 100 generations): for VGG19, AlexNet and Emotion-FER+, the re-measured
NSGA-II front must dominate or equal the 156-point TensorRT baseline front, reach throughput the baseline cannot
for AlexNet (001 Sec. 5: above 100 img/s only ours exists), with both hypervolumes reported, and one NSGA-II run
must take <= 2 min here.

Run: ``python -m bench.pareto_tang [--population N --generations G]``; writes bench/results/pareto_tang.json.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench.machine import write_result

OUT = Path(__file__).resolve().parent / "results" / "pareto_tang.json"
NETWORKS = ("vgg19", "alexnet", "emotion-ferplus")
SECONDS = 120.0


def run_one(network: str, population: int, generations: int, results_dir: str) -> dict:
    from dse.store.atomic import write_text_atomic
    from dse.systems.pareto.jobs import plan_pareto, run

    overrides = [f"platform=tx2-sim", f"benchmark={network}", f"pareto.population={population}",
                 f"pareto.generations={generations}", f"results_dir={results_dir}"]
    (pdir, plan), = plan_pareto({"overrides": overrides}).items()
    for part, text in plan.parts.items():
        write_text_atomic(Path(pdir) / "config" / f"{part}.yaml", text)
    return run(pdir)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--population", type=int, default=5000)
    ap.add_argument("--generations", type=int, default=100)
    ap.add_argument("--networks", nargs="+", default=list(NETWORKS))
    ap.add_argument("--output", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.networks:
            s = run_one(n, args.population, args.generations, tmp)
            rows[n] = {"nsga2": s["nsga2"], "baseline": s["trt-baseline"],
                       "baseline_front_dominated_or_equalled": s["baseline_points_dominated_or_equalled"],
                       "nsga2_seconds": s["search"]["seconds"], "evaluations": s["search"]["evaluations"],
                       "model_error": s["model_error"]}
    print(f"{'network':16s} {'dominated':>9s} {'HV nsga2':>9s} {'HV base':>9s} {'max fps':>8s} {'base':>8s} "
          f"{'seconds':>8s}")
    for n, r in rows.items():
        print(f"{n:16s} {r['baseline_front_dominated_or_equalled']:9.0%} {r['nsga2']['hypervolume']:9.4g} "
              f"{r['baseline']['hypervolume']:9.4g} {r['nsga2']['max_fps']:8.2f} {r['baseline']['max_fps']:8.2f} "
              f"{r['nsga2_seconds']:8.1f}")
    met = {"dominates_all": all(r["baseline_front_dominated_or_equalled"] == 1.0 for r in rows.values()),
           # 001 Sec. 5: AlexNet above 100 img/s only with the method (its TensorRT tops out at 81 there)
           "alexnet_above_100_only_ours": ("alexnet" not in rows or (rows["alexnet"]["nsga2"]["max_fps"] > 100
                                                                     >= rows["alexnet"]["baseline"]["max_fps"])),
           "seconds_within": all(r["nsga2_seconds"] <= SECONDS for r in rows.values())}
    print("targets:", met)
    write_result(args.output, {"population": args.population, "generations": args.generations, "rows": rows,
                               "met": met})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
