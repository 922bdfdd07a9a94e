"""The DLA explainer on unseen third-party models: the PaddleOCR v4 detector, recognizer and the v2 direction
classifier, as shipped in the `rapidocr-onnxruntime` wheel (fetched from PyPI with `pip download --no-deps`, the
ONNX files read out of the wheel; nothing of the package is installed or imported).

Checks per model x platform (every DLA rule set): every layer gets a verdict, every off-DLA verdict a reason; for
single-DLA-stage configurations at several cuts, the per-stage loadables and fallback layers of `dse inspect --dla`
equal what the sim backend charges in its measurement. Writes bench/results/dla_third_party.json.

Run: ``python -m bench.dla_third_party [--wheel-dir DIR]``
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import zipfile
from pathlib import Path

from bench.machine import write_result

OUT = Path(__file__).resolve().parent / "results" / "dla_third_party.json"
WHEEL = "rapidocr-onnxruntime==1.4.4"
MODELS = {"ch_PP-OCRv4_det_infer.onnx": "x:1x3x640x640", "ch_PP-OCRv4_rec_infer.onnx": "x:1x3x48x320",
          "ch_ppocr_mobile_v2.0_cls_infer.onnx": "x:1x3x48x192"}
PLATFORMS = ("xavier-agx-sim", "xavier-agx-jp5-sim", "orin-agx-jp6-sim", "orin-agx-jp7-sim")


def fetch(wheel_dir: Path) -> dict[str, Path]:
    """The ONNX files of the wheel, extracted once into ``wheel_dir``."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    wheels = sorted(wheel_dir.glob("rapidocr_onnxruntime-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheel_dir), WHEEL],
                       check=True)
        wheels = sorted(wheel_dir.glob("rapidocr_onnxruntime-*.whl"))
    out = {}
    with zipfile.ZipFile(wheels[-1]) as zf:
        for member in zf.namelist():
            name = Path(member).name
            if name in MODELS:
                target = wheel_dir / name
                if not target.exists():
                    target.write_bytes(zf.read(member))
                out[name] = target
    return out


def check(path: Path, shape: str, platform: str) -> dict:
    from dse.backends.sim import SimBackend
    from dse.core.configuration import Configuration
    from dse.report.dla_fallback import explain
    from dse.graph.analysis import analyze
    from dse.graph.model import parse_input_shapes
    from dse.platform import load_platform

    analysis = analyze(str(path), parse_input_shapes([shape]))
    backend = SimBackend(load_platform(platform), analysis)
    whole = explain(backend, precision="fp16")
    feasible = [c for c in analysis.feasible_cuts if 0 < c < len(analysis.layers) - 2]
    equal, configs = 0, 0
    for cut in (feasible[len(feasible) // 4], feasible[len(feasible) // 2], feasible[3 * len(feasible) // 4]):
        config = Configuration(benchmark=path.stem, platform=platform, option="A", cuts=(cut,), streams=(1, 1),
                               precision="fp16", input_size=backend.input_size)
        m = backend.measure(config)
        ex = explain(backend, config=config)
        configs += 1
        equal += int(m.dla_loadables == ex.stages[0].loadables and m.fallback_layers == ex.stages[0].fallback_layers
                     and m.fallback_reasons == ex.reason_counts)
    off = [v for v in whole.layers if not v.on_dla]
    return {"model": path.name, "platform": platform, "ruleset": whole.ruleset, "layers": len(whole.layers),
            "dla_layers": len(whole.layers) - len(off), "with_reason": sum(bool(v.reason) for v in off),
            "unknown_ops": sorted({v.op for v in off if v.check.endswith("/unknown")}),
            "whole_network_loadables": whole.stages[0].loadables, "reasons": whole.reason_counts,
            "configs_checked": configs, "loadables_equal": equal}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel-dir", type=Path, default=Path.home() / ".cache" / "dse" / "third-party")
    ap.add_argument("--output", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rows = []
    for name, path in fetch(args.wheel_dir).items():
        for platform in PLATFORMS:
            row = check(path, MODELS[name], platform)
            rows.append(row)
            print(f"{name:38s} {row['ruleset']:14s} {row['dla_layers']:4d}/{row['layers']:<4d} on DLA, "
                  f"{row['with_reason']} reasons for {row['layers'] - row['dla_layers']} off, "
                  f"{row['whole_network_loadables']} loadables, equal {row['loadables_equal']}/{row['configs_checked']}",
                  flush=True)
    write_result(args.output, {"command": "python -m bench.dla_third_party", "wheel": WHEEL, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
