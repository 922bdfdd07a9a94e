"""The boards and networks of a multi-network case: one sim backend per network at the case's precision and input
size, on the run's platform with the case's pre/post-processing costs (spec 1.5-5: at 256x256 the Ch. 3 model,
fitted at 416, is far above the board's)."""
from __future__ import annotations

import copy

from dse.multi.settings import MultiSettings


def case_platform(platform: dict, settings: MultiSettings) -> dict:
    """The platform dict with the case's fixed pre/post costs (per frame, at maximum CPU frequency)."""
    p = copy.deepcopy(dict(platform))
    if settings.prepost_us:
        pp = dict(p.get("prepost") or {})
        pp["pre"] = {**dict(pp.get("pre") or {}), "per_batch_us": float(settings.prepost_us.get("pre", 0.0)),
                     "per_image_us": 0.0, "per_image_pixels_us": 0.0}
        pp["post"] = {**dict(pp.get("post") or {}), "per_batch_us": float(settings.prepost_us.get("post", 0.0)),
                      "per_box_us": 0.0}
        p["prepost"] = pp
    return p


def network_backend(network: str, platform: dict, settings: MultiSettings, seed: int, results_dir: str = "results"):
    """(analysis, SimBackend-like backend) of ``network`` (a benchmark name) at the case's size and precision."""
    from pathlib import Path

    from dse.backends import MeasureSettings, make_backend
    from dse.config import compose_config
    from dse.network import load_analysis

    cfg = compose_config([f"benchmark={network}", f"benchmark.input_size={settings.input_size}",
                          f"precision={settings.precision}", "batch=1", f"seed={seed}",
                          "benchmark.preprocess=resize"])
    analysis = load_analysis(cfg)
    backend = make_backend(case_platform(platform, settings), analysis, MeasureSettings.from_config(cfg),
                           engine_root=Path(results_dir) / "engines")
    return analysis, backend
