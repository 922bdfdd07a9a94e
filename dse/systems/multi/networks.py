"""The boards and networks of a multi-network case: one sim backend per network at the case's precision and input
size, on the run's platform with the case's pre/post-processing costs (spec 1.5-5: at 256x256 the Ch. 3 model,
fitted at 416, is far above the board's)."""
from __future__ import annotations

import copy

from dse.core.validate import check_keys
from dse.core.errors import DseError


def prepost_of(prepost_us: dict | None, network: str | None = None) -> dict | None:
    """The {pre, post} costs of ``network``: ``prepost_us`` is one {pre, post} for every network or a map from
    benchmark to {pre, post} (the board profiles differ per network, e.g. HOPES' post 0.23-2.54 ms, spec 3.4)."""
    if not prepost_us:
        return None
    d = dict(prepost_us)
    if set(d) <= {"pre", "post"}:
        return d
    if network is None:
        return None
    if network not in d:
        raise DseError(f"prepost_us has no entry for {network!r}; it lists {sorted(d)} (or give one {{pre, post}})")
    sub = dict(d[network] or {})
    check_keys(sub, ("pre", "post"), f"key of prepost_us.{network}")
    return sub


def case_platform(platform: dict, settings, network: str | None = None) -> dict:
    """The platform dict with the case's fixed pre/post costs (per frame, at maximum CPU frequency) and, if the
    case gives one, its task-time model (``tasktime``: the board's per-task jitter under the case's software)."""
    p = copy.deepcopy(dict(platform))
    prepost = prepost_of(settings.prepost_us, network)
    if prepost:
        pp = dict(p.get("prepost") or {})
        pp["pre"] = {**dict(pp.get("pre") or {}), "per_batch_us": float(prepost.get("pre", 0.0)),
                     "per_image_us": 0.0, "per_image_pixels_us": 0.0}
        pp["post"] = {**dict(pp.get("post") or {}), "per_batch_us": float(prepost.get("post", 0.0)),
                      "per_box_us": 0.0}
        p["prepost"] = pp
    if getattr(settings, "tasktime", None):
        p["tasks"] = dict(settings.tasktime)
    return p


def network_backend(network: str, platform: dict, settings, seed: int, results_dir: str = "results"):
    """(analysis, SimBackend-like backend) of ``network`` (a benchmark name) at the case's size and precision."""
    from pathlib import Path

    from dse.backends import MeasureSettings, make_backend
    from dse.config import compose_config
    from dse.network import load_analysis

    cfg = compose_config([f"benchmark={network}", f"benchmark.input_size={settings.input_size}",
                          f"precision={settings.precision}", "batch=1", f"seed={seed}",
                          "benchmark.preprocess=resize"])
    analysis = load_analysis(cfg)
    backend = make_backend(case_platform(platform, settings, network), analysis, MeasureSettings.from_config(cfg),
                           engine_root=Path(results_dir) / "engines")
    return analysis, backend
