"""Energy as an objective of the pipeline DSE on the virtual Xavier: power modes and clocks.

1. Target: yolov4 INT8, ``search.objective=energy search.min_fps=150 search.pareto=true``: the answer must use
   <= 70 % of the energy per frame of the FPS-optimal configuration at MAXN (the thesis reports about -55 % against
   its baseline). Both are means of 5 fresh re-runs. The search and the clock phase are the workflow's own
   functions (``run_search``, ``mapping_candidates``, ``clock_phase``).
2. Reference for the clock phase's greedy (Algorithm 6): every clock triple of MAXN's tables (8 GPU x 10 DLA x
   15 CPU = 1,200) on the answer's mapping; its best feasible points re-measured the same way.
3. Table 3.8 energies (J per 5,000 images, MAXN) at 512x512 and 608x608: Base(G) and the re-explored
   configuration of each network (the calibration's candidates), within 25 %, and the shape "re-explored uses less
   energy than Base(G)" in every row.
4. The thesis' "up to -55 % energy" (Sec. 3.6.4.1, Figs. 3.9(b)/3.10(b)) is the FPS-optimal configuration at MAXN
   without clock tuning against Base(G) (GPU only, one thread each, the same input): like for like, that is the
   FPS-optimal reference against Base(G), re-measured the same way. The clocked answer against Base(G) is
   reported beside it as ours alone (the thesis tuned no clocks there).
5. Ch. 4's frequency tables as anchors (Table 4.9(b), l. 1474-1485), read from the clock phase's points per mapping
   at MAXN: for each FPS floor (the Pareto mode's 90-40 % of the mapping's top FPS, and min_fps) the least-energy
   point that reaches it, its three best candidates re-measured 5 times (one sample's noise would pick clocks by
   luck). Shapes: the GPU clock falls (never rises) as the floor loosens; the DLA clock stays at its
   maximum (the thesis never lowers it).

Run: ``python -m bench.energy_modes``; writes bench/results/energy_modes.json.
"""
from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.machine import write_result

OUT = Path(__file__).resolve().parent / "results" / "energy_modes.json"
TARGET_RATIO = 0.70
REPEATS = 5
# Table 3.8 (thesis l. 897-922): (network, size) -> (baseline FPS, J, re-explored option, FPS, J)
TABLE_3_8 = {("yolov4", 512): (49, 1897, "PND-A", 155, 1361), ("yolov4-tiny", 512): (91, 658, "E", 576, 346),
             ("yolov4-csp", 512): (40, 1951, "PND-A", 169, 1250), ("cspnet", 512): (54, 1806, "E", 113, 1521),
             ("yolov4", 608): (42, 2544, "PND-A", 106, 1998), ("yolov4-tiny", 608): (78, 826, "E", 415, 482),
             ("yolov4-csp", 608): (34, 2572, "PND-A", 121, 1795), ("cspnet", 608): (42, 2544, "E", 78, 2254)}
TOL = 0.25


def target(min_fps: float) -> dict:
    from dse.calibration.anchors import base_g
    from dse.evaluate import Evaluator
    from dse.search import run_search
    from dse.search.clocks import EnergySettings, clock_phase, mapping_candidates
    from dse.search.study import Study
    from dse.workflow.phases import search_setup

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        _, _, backend, space, settings, base = search_setup("yolov4", "int8", Path(tmp), "xavier-agx-sim",
                                                            ("search.strategy=proposed",))
        study = Study(Evaluator(backend))
        found = run_search(space, study, base, settings)
        searched = study.measured
        energy = EnergySettings(objective="energy", min_fps=min_fps, pareto=True, repeats=REPEATS)
        cands = mapping_candidates(found.config, list(study.memo.values()), energy.mappings)
        t1 = time.perf_counter()
        result = clock_phase(study, backend.platform, cands, energy)
        t2 = time.perf_counter()
        grid = exhaustive_clocks(study, backend.platform, result.extra["chosen"], min_fps)
        base = study.rerun(base_g("yolov4", backend.platform.name, "int8"), "base-g", range(1, REPEATS + 1))
        out = result.to_dict()
        tables = frequency_tables(study, out["points"], backend.platform, min_fps)
    front = [p for p in out["points"] if p["on_front"]]
    base_j = float(np.mean([m.energy_j_per_frame for m in base]))
    return {"min_fps": min_fps, "search_measurements": searched, "clock_measurements": result.extra["measured"],
            "search_s": round(t1 - t0, 1), "clock_phase_s": round(t2 - t1, 1),
            "chosen": _brief(out["chosen"]), "reference": _brief(out["reference"]),
            "energy_ratio": out["energy_ratio"], "target_ratio": TARGET_RATIO,
            "met": out["energy_ratio"] is not None and out["energy_ratio"] <= TARGET_RATIO,
            "modes_on_front": sorted({p["power_mode"] for p in front}), "front_points": len(front),
            "exhaustive_clocks": grid,
            "greedy_vs_exhaustive": (out["chosen"]["energy_j_per_frame"] / grid["best"]["energy_j_per_frame"]
                                     if grid["best"] else None),
            "base_g": {"fps": float(np.mean([m.fps for m in base])), "energy_j_per_frame": base_j},
            "energy_vs_base_g": out["chosen"]["energy_j_per_frame"] / base_j,
            "fps_optimal_energy_vs_base_g": out["reference"]["energy_j_per_frame"] / base_j,
            "frequency_tables": tables}


def frequency_tables(study, points: list[dict], platform, min_fps: float) -> list[dict]:
    """Per mapping at MAXN, Table 4.9(b)'s view: per FPS floor, the clocks of the least-energy point reaching it
    (its three best candidates by one sample, re-measured; the best mean that still reaches the floor)."""
    from dse.platform.modes import mode_levels, power_mode
    from dse.search.clocks import FRONT_FLOORS, remeasured

    dla_max = mode_levels(platform, power_mode(platform, "MAXN"))["dla"][-1]
    fresh = range(1, REPEATS + 1)
    out = []
    for key in dict.fromkeys((p["option"], tuple(p["cuts"])) for p in points):
        mine = [p for p in points if (p["option"], tuple(p["cuts"])) == key and p["status"] == "ok"
                and p["power_mode"] == "MAXN"]
        top = max(p["fps"] for p in mine)
        rows = []
        for floor in sorted({min_fps, *(f * top for f in FRONT_FLOORS)}, reverse=True):
            near = sorted((p for p in mine if p["fps"] >= floor), key=lambda p: p["energy_j_per_frame"])[:3]
            means = [r for r in (remeasured(study, p, fresh) for p in near) if r["fps"] >= floor]
            if means:
                b = min(means, key=lambda r: r["energy_j_per_frame"])
                rows.append({"floor_fps": round(floor, 1), "gpu_mhz": b["gpu_mhz"], "cpu_mhz": b["cpu_mhz"],
                             "dla_mhz": b["dla_mhz"], "fps": round(b["fps"], 1),
                             "energy_j_per_frame": round(b["energy_j_per_frame"], 4)})
        gpu = [r["gpu_mhz"] for r in rows]
        out.append({"option": key[0], "cuts": list(key[1]), "rows": rows,
                    "gpu_falls": all(a >= b for a, b in zip(gpu, gpu[1:])),
                    "dla_at_max": sum(r["dla_mhz"] == dla_max for r in rows), "entries": len(rows)})
    return out


def exhaustive_clocks(study, platform, chosen: dict, min_fps: float) -> dict:
    """Every MAXN clock triple on the answer's mapping; the best three feasible re-measured like the answer."""
    from dse.core.configuration import Configuration
    from dse.platform.modes import clock_extra, mode_levels, power_mode
    from dse.search.clocks import PHASE, point_row, remeasured

    config = Configuration.from_dict(chosen["config"]).with_(extra={})
    levels = mode_levels(platform, power_mode(platform, "MAXN"))
    rows = []
    for g, d, c in itertools.product(levels["gpu"], levels["dla"], levels["cpu"]):
        mhz = {"gpu": g, "dla": d, "cpu": c}
        m = study.measure(config.with_(extra=clock_extra(platform, "MAXN", mhz)), PHASE)
        if m.ok and m.fps >= min_fps:
            rows.append(point_row(m, "MAXN", mhz))
    best3 = sorted(rows, key=lambda r: r["energy_j_per_frame"])[:3]
    ranked = sorted((remeasured(study, r, range(1, REPEATS + 1)) for r in best3),
                    key=lambda r: (r["fps"] < min_fps, r["energy_j_per_frame"]))
    return {"points": len(levels["gpu"]) * len(levels["dla"]) * len(levels["cpu"]), "feasible": len(rows),
            "best": _brief(ranked[0]) if ranked else None}


def table_3_8() -> list[dict]:
    from dse.calibration.anchors import Networks, base_g, tuned_e
    from dse.core.configuration import Configuration
    from dse.platform import load_platform

    plat = load_platform("xavier-agx-sim")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        nets = Networks(plat, Path(tmp))
        for (name, size), (b_fps, b_j, option, r_fps, r_j) in TABLE_3_8.items():
            be = nets.backend(name, size)
            base = be.measure(base_g(name, plat.name, "int8", size))
            cands = [tuned_e(be, name, "int8", size)]
            if option == "PND-A":       # the calibration's re-explored candidates (thesis cut 72)
                cuts = nets.map_cuts(name, (72,), size)
                cands += [be.measure(Configuration(benchmark=name, platform=plat.name, option="PND-A", cuts=cuts,
                                                   streams=(4, s2), buffers=12, pre_threads=pre, post_threads=2,
                                                   precision="int8", input_size=size))
                          for s2 in (2, 3, 4) for pre in (2, 3)]
            best = max((m for m in cands if m.ok), key=lambda m: m.fps)
            ours_b, ours_r = base.energy_j_per_frame * 5000, best.energy_j_per_frame * 5000
            rows.append({"network": name, "size": size, "published_base_j": b_j, "sim_base_j": round(ours_b),
                         "published_reexplored_j": r_j, "sim_reexplored_j": round(ours_r),
                         "sim_option": best.config.option, "sim_base_fps": base.fps, "sim_reexplored_fps": best.fps,
                         "base_ok": abs(ours_b / b_j - 1) <= TOL, "reexplored_ok": abs(ours_r / r_j - 1) <= TOL,
                         "shape_ok": ours_r < ours_b})
    return rows


def _brief(d: dict | None) -> dict | None:
    if not d:
        return None
    keys = ("option", "cuts", "streams", "buffers", "pre_threads", "post_threads", "power_mode", "gpu_mhz",
            "dla_mhz", "cpu_mhz", "fps", "power_w", "energy_j_per_frame", "reruns")
    return {k: d.get(k) for k in keys}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-fps", type=float, default=150.0)
    ap.add_argument("--output", type=Path, default=OUT)
    args = ap.parse_args(argv)
    t = target(args.min_fps)
    c, r = t["chosen"], t["reference"]
    print(f"yolov4 INT8, min_fps {args.min_fps:g}: answer {c['option']} {c['power_mode']} GPU {c['gpu_mhz']} / DLA "
          f"{c['dla_mhz']} / CPU {c['cpu_mhz']} MHz: {c['fps']:.1f} FPS, {c['energy_j_per_frame']:.4f} J/frame; "
          f"FPS-optimal at MAXN {r['fps']:.1f} FPS, {r['energy_j_per_frame']:.4f} J/frame; ratio "
          f"{t['energy_ratio']:.3f} (target <= {TARGET_RATIO}: {'met' if t['met'] else 'MISSED'}); "
          f"{t['clock_measurements']} clock-phase measurements in {t['clock_phase_s']} s after "
          f"{t['search_measurements']} search measurements")
    g = t["exhaustive_clocks"]
    print(f"exhaustive MAXN clocks on the answer's mapping: {g['feasible']} of {g['points']} feasible, best "
          f"{g['best']['energy_j_per_frame']:.4f} J/frame at {g['best']['fps']:.1f} FPS (GPU {g['best']['gpu_mhz']} / "
          f"DLA {g['best']['dla_mhz']} / CPU {g['best']['cpu_mhz']}); greedy / exhaustive {t['greedy_vs_exhaustive']:.3f}")
    print(f"answer vs Base(G) ({t['base_g']['fps']:.1f} FPS, {t['base_g']['energy_j_per_frame']:.4f} J/frame): "
          f"FPS-optimal at MAXN {t['fps_optimal_energy_vs_base_g']:.3f} (like for like with the thesis' up to -55 %, "
          f"no clock tuning); the clocked answer {t['energy_vs_base_g']:.3f} (ours alone)")
    for ft in t["frequency_tables"]:
        print(f"frequency table {ft['option']} {ft['cuts']}: " + "; ".join(
            f"{r['floor_fps']:g} FPS: GPU {r['gpu_mhz']:g} CPU {r['cpu_mhz']:g} DLA {r['dla_mhz']:g}" for r in ft["rows"])
              + f"  | GPU falls as the floor loosens: {'yes' if ft['gpu_falls'] else 'NO'}; DLA at max in "
                f"{ft['dla_at_max']} of {ft['entries']}")
    rows = table_3_8()
    for row in rows:
        print(f"Table 3.8 {row['network']} {row['size']}: Base(G) {row['sim_base_j']} J (paper {row['published_base_j']},"
              f" {'ok' if row['base_ok'] else 'MISS'}), re-explored {row['sim_option']} {row['sim_reexplored_j']} J "
              f"(paper {row['published_reexplored_j']}, {'ok' if row['reexplored_ok'] else 'MISS'}), shape "
              f"{'ok' if row['shape_ok'] else 'MISS'}")
    within = sum(r["base_ok"] for r in rows) + sum(r["reexplored_ok"] for r in rows)
    print(f"Table 3.8 energies within {TOL:.0%}: {within} of {2 * len(rows)}; shape re-explored < Base(G): "
          f"{sum(r['shape_ok'] for r in rows)} of {len(rows)}")
    write_result(args.output, {"target": t, "table_3_8": rows,
                               "table_3_8_within": within, "table_3_8_rows": 2 * len(rows),
                               "median_abs_error": float(np.median(
                                   [abs(r["sim_base_j"] / r["published_base_j"] - 1) for r in rows]
                                   + [abs(r["sim_reexplored_j"] / r["published_reexplored_j"] - 1) for r in rows]))})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
