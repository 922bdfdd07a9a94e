"""Could shared-DRAM contention make the board prefer PND-A where the virtual board prefers PND-B?

For every Table 3.5 row whose decisions bench (``bench/results/calibration_decisions.json``) polished both PND-A and
PND-B, the noise-free FPS of each and the DRAM bytes a frame moves on the GPU and on the DLAs (the cost model's
rooflines, ``CostModel.dram_bytes``; a DLA stage's few GPU-fallback layers count on the DLA). The traffic each PE's
co-runners put on the DRAM follows: a DLA core sees the GPU's and the other core's, the GPU both DLAs'.

A contention slow-down grows with the co-runners' traffic. Fig. 3.12 bounds it for a DLA in PND-A: its stage runs
9.02 ms per frame alone, so two cores allow 221.7 FPS, and the pipeline ran 216 (2.6 % at most). Linear in the
co-runners' traffic, a DLA in PND-B then slows at most 2.6 % x (its co-runners' traffic / PND-A's), and the GPU's
co-runners carry less traffic in PND-B on most rows. ``closes`` says whether that bound reaches PND-B's lead.

Run: ``python -m bench.dram_demand [--decisions PATH] [--output PATH]`` (a few seconds per row).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from bench.calibration_decisions import polished_rows
from bench.machine import write_result

RESULTS = Path(__file__).resolve().parent / "results"
FIG_3_12_DLA_SLOWDOWN = 1 - 216.0 / (2 * 1e6 / 9020.0)   # Yolov4 INT8 PND-A: DLA stage 9,020 us alone, 216 FPS


def demand(backend, config) -> dict:
    """Noise-free FPS and DRAM megabytes per frame on the GPU and on the DLAs of one configuration."""
    cm = backend.cost_model(config.input_size)
    moved = {"gpu": 0.0, "dla": 0.0}
    for stage in backend.plan(config).stages:
        moved[stage.pe_type] += cm.dram_bytes(stage.first, stage.last, stage.pe_type, config.precision,
                                              config.batch) / config.batch
    fps = backend.measure(config).fps
    gpu, dla = moved["gpu"] / 1e6, moved["dla"] / 1e6
    # GB/s each PE's co-runners move: a DLA core sees the GPU and the other core (half the DLA traffic)
    return {"fps": round(fps, 2), "gpu_mb": round(gpu, 2), "dla_mb": round(dla, 2),
            "dla_sees_gbs": round((gpu + dla / 2) * fps / 1e3, 2), "gpu_sees_gbs": round(dla * fps / 1e3, 2)}


def row(network: str, precision: str, published: str, configs: dict, platform: str) -> dict:
    from dse.core.configuration import Configuration
    from dse.workflow.phases import search_setup

    with tempfile.TemporaryDirectory(prefix="dse-dram-") as tmp:
        _, analysis, backend, *_ = search_setup(network, precision, Path(tmp), platform, ("platform.noise.sigma=0",))
        a, b = (demand(backend, Configuration.from_dict({**configs[o], "model_digest": analysis.digest})) for o in ("PND-A", "PND-B"))
    lead = b["fps"] / a["fps"] - 1
    dla_ratio = b["dla_sees_gbs"] / a["dla_sees_gbs"]
    # PND-B's DLAs slow at most this much more than PND-A's (its GPU, seeing less traffic, slows less)
    bound = FIG_3_12_DLA_SLOWDOWN * max(dla_ratio - 1, 0.0)
    return {"network": network, "precision": precision, "published": published, "PND-A": a, "PND-B": b,
            "pnd_b_lead": round(lead, 4),
            "dla_traffic_ratio": round(dla_ratio, 3),
            "gpu_traffic_ratio": round(b["gpu_sees_gbs"] / a["gpu_sees_gbs"], 3),
            "contention_bound": round(bound, 4), "closes": lead <= bound if lead > 0 else None}


def main(argv=None) -> int:
    args, platform, decided = polished_rows(__doc__, RESULTS / "dram_demand.json", argv)
    rows = [row(r["network"], r["precision"], r["published"], r["configs"], platform)
            for r in decided if {"PND-A", "PND-B"} <= set(r["configs"])]
    print("| network | precision | Table 3.5 | PND-B lead | DLA co-runner traffic B/A | GPU co-runner traffic B/A | "
          "contention bound | closes |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        closes = {None: "-", True: "yes", False: "no"}[r["closes"]]
        print(f"| {r['network']} | {r['precision']} | {r['published']} | {100 * r['pnd_b_lead']:+.1f} % | "
              f"{r['dla_traffic_ratio']:.2f} | {r['gpu_traffic_ratio']:.2f} | {100 * r['contention_bound']:.1f} % | "
              f"{closes} |")
    against = [r for r in rows if r["published"] == "PND-A" and r["pnd_b_lead"] > 0]
    print(f"PND-B ahead where Table 3.5 chose PND-A: {len(against)} of {len(rows)} rows; the contention bound closes "
          f"{sum(r['closes'] for r in against)} of them (Fig. 3.12's bound on a PND-A DLA: "
          f"{100 * FIG_3_12_DLA_SLOWDOWN:.1f} %)")
    write_result(args.output, {"decisions": str(args.decisions), "platform": platform,
                               "fig_3_12_dla_slowdown": round(FIG_3_12_DLA_SLOWDOWN, 4), "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
