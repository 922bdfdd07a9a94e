"""The agent's ``measure``: read the JSON config, load the stage engines, run the shared pipeline with the
application's pre/post-processing, sample tegrastats, and return one JSON-able result.

Config (written by ``dse.backends.trt.agent_config``)::

    {"stages": [{"streams": 2, "engines": [{"path": "...", "pe": "DLA0", "dla_core": 0}, ...]}, ...],
     "frames": 500, "warmup": 50, "buffers": 4, "pre_threads": 1, "post_threads": 1, "batch": 1,
     "application": "yolo", "app_options": {...}, "inputs": {name: shape}, "outputs": {name: shape},
     "tegrastats": {"enabled": true, "interval_ms": 100}, "zero_copy": null, "timeout_s": 600,
     "clocks": null}

``clocks`` (optional): the power mode and clocks to run at (``dse.board.clocks``); the board is put back as it was
after the run, and the result's ``clocks`` says what was applied.

UNTESTED ON HARDWARE (see dse.board).
"""
from __future__ import annotations

import platform
import time
import traceback
from typing import Any, Callable, Dict, Optional

from dse.board import clocks

REQUIRED = ("stages", "frames", "application", "inputs", "outputs")


def check_config(cfg: Dict[str, Any]) -> Optional[str]:
    """Why a config cannot run, or None (pure: unit-tested without TensorRT)."""
    missing = [k for k in REQUIRED if k not in cfg]
    if missing:
        return "agent config lacks %s" % ", ".join(missing)
    if not cfg["stages"]:
        return "agent config has no stages"
    for i, st in enumerate(cfg["stages"]):
        if int(st.get("streams", 0)) < 1:
            return "stage %d needs at least one stream" % i
        engines = st.get("engines") or []
        if not 1 <= len(engines) <= 2:
            return "stage %d must list one engine (or two for PND), got %d" % (i, len(engines))
        for e in engines:
            if not e.get("path"):
                return "stage %d: an engine without a path" % i
    for key in ("frames", "buffers", "pre_threads", "post_threads", "batch"):
        if int(cfg.get(key, 1)) < 1:
            return "%s must be >= 1, got %s" % (key, cfg.get(key))
    return None


def versions() -> Dict[str, str]:
    out = {"python": platform.python_version()}
    try:
        import numpy

        out["numpy"] = numpy.__version__
    except ImportError:  # pragma: no cover
        pass
    try:
        import tensorrt

        out["tensorrt"] = tensorrt.__version__
    except ImportError:
        pass
    return out


def failed(reason: str) -> Dict[str, Any]:
    return {"status": "failed", "reason": reason, "fps": 0.0, "versions": versions()}


def measure(cfg: Dict[str, Any], engine_factory: Optional[Callable[..., Any]] = None) -> Dict[str, Any]:
    """Run the configuration; never raises (a failure is a result with its reason).

    ``engine_factory(path, pe, dla_core, zero_copy)`` defaults to the TensorRT engine.
    """
    reason = check_config(cfg)
    if reason:
        return failed(reason)
    try:
        from dse.apps import create_application
        from dse.runtime.pipeline import StagePlan

        if engine_factory is None:
            from dse.board.trt_engine import TrtStageEngine as engine_factory  # noqa: N813
        app = create_application(cfg["application"], cfg.get("app_options") or {}, cfg["inputs"], cfg["outputs"])
        t_load = time.perf_counter()
        plans = []
        for st in cfg["stages"]:
            engines = [engine_factory(e["path"], e.get("pe", "GPU"), e.get("dla_core"), cfg.get("zero_copy"))
                       for e in st["engines"]]
            plans.append(StagePlan(engines=engines, streams=int(st["streams"])))
        load_s = time.perf_counter() - t_load
    except Exception as exc:
        return failed("loading failed: %s: %s" % (type(exc).__name__, exc))

    clock_state = None
    if cfg.get("clocks"):
        try:
            clock_state = clocks.apply(cfg["clocks"])
        except Exception as exc:   # a ClockError, or a malformed spec: the run must not go on at other clocks
            _close(plans)
            return failed("cannot set clocks: %s" % exc)
    try:
        result = _run(cfg, app, plans, load_s, clock_state)
    finally:
        problems = clocks.restore(clock_state) if clock_state is not None else []
    if problems:   # the board stays at other settings than before the run: say so, loudly
        result["clocks_not_restored"] = problems
    return result


def _close(plans) -> None:
    for plan in plans:
        for e in plan.engines:
            e.close()


def _run(cfg: Dict[str, Any], app, plans, load_s: float, clock_state: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    from dse.board.tegrastats import TegraStats
    from dse.runtime.pipeline import Pipeline

    ts_cfg = cfg.get("tegrastats") or {}
    stats = TegraStats(int(ts_cfg.get("interval_ms", 100))) if ts_cfg.get("enabled", True) else None
    pipe = Pipeline(plans, lambda fid, slot: app.frame_inputs(fid), app.postprocess, frames=int(cfg["frames"]),
                    warmup=int(cfg.get("warmup", 0)), pre_threads=int(cfg.get("pre_threads", 1)),
                    post_threads=int(cfg.get("post_threads", 1)), buffers=int(cfg.get("buffers", 1)),
                    images_per_job=int(cfg.get("batch", 1)), keep_results=False,
                    timeout_s=float(cfg.get("timeout_s", 600)))
    if stats is not None:
        stats.start()
    t0 = time.perf_counter()
    try:
        res = pipe.run()
    except Exception as exc:  # the pipeline records thread errors itself; this is a setup failure
        return failed("run failed: %s" % "".join(traceback.format_exception_only(type(exc), exc)).strip())
    finally:
        if stats is not None:
            stats.stop()
    t1 = time.perf_counter()
    _close(plans)
    if not res.ok:
        return failed("run failed: %s" % res.error)
    power = stats.summary(t1 - res.window_s, t1) if stats is not None else {"power_w": None, "gpu_util": None}
    util = dict(res.util)
    if power.get("gpu_util") is not None:
        util["GPU_tegrastats"] = power["gpu_util"]
    power_w = power.get("power_w")   # None: no tegrastats samples, so no power figure (not 0 W)
    return {"status": "ok", "reason": "", "fps": res.fps, "latency_ms_p50": res.latency_ms_p50,
            "latency_ms_p99": res.latency_ms_p99, "util": util, "stage_util": res.stage_util,
            "stage_ms": res.stage_ms, "cpu_util": res.cpu_util, "power_w": power_w,
            "energy_j_per_frame": power_w / res.fps if power_w is not None and res.fps > 0 else None,
            "frames": res.frames,
            "window_s": res.window_s, "load_s": load_s, "measure_s": t1 - t0,
            "tegrastats": {k: v for k, v in power.items() if k != "power_w"}, "versions": versions(),
            "clocks": clock_state["applied"] if clock_state is not None else None}
