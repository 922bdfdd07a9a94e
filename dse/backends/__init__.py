"""Backends measure a Configuration: `sim` (virtual boards), `ort` (this host's CPU core groups),
`trt` (TensorRT on a Jetson through the board agent). All are built the same way, from a composed config.
"""
from __future__ import annotations

from pathlib import Path

from dse.errors import choices_error

BACKENDS = ("sim", "ort", "trt")


def _backend_class(kind: str):
    if kind == "sim":
        from dse.backends.sim import SimBackend

        return SimBackend
    if kind == "ort":
        from dse.backends.ort import OrtBackend

        return OrtBackend
    if kind == "trt":
        from dse.backends.trt import TrtBackend

        return TrtBackend
    raise choices_error("platform.backend", kind, BACKENDS)


def make_backend(cfg, analysis=None, *, engine_root: str | Path | None = None):
    """The backend the config's platform names, for the config's benchmark (analysis built if not given)."""
    from dse.engines.cache import EngineCache

    if analysis is None:
        from dse.network import load_analysis

        analysis = load_analysis(cfg)
    cls = _backend_class(str(cfg.platform.backend))
    b = cfg.benchmark
    kwargs = dict(preprocess=str(b.preprocess), sample_size=int(b.sample_size), warmup=int(b.warmup),
                  seed=int(cfg.seed), input_size=int(b.input_size), benchmark=str(b.name))
    if engine_root is None:
        engine_root = Path(cfg.results_dir) / "engines"
    kwargs["engine_cache"] = EngineCache(engine_root, str(cfg.platform.name))
    if cls.__name__ != "SimBackend":
        model = str(b.model)
        kwargs.update(application=str(b.application), model=None if model.endswith(".onnx") else model)
    return cls(cfg.platform, analysis, **kwargs)
