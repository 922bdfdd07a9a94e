"""Backends measure a Configuration: `sim` (virtual boards), `ort` (this host's CPU core groups), `trt`
(TensorRT on a Jetson through the board agent). Each implements ``dse.backends.base.Backend`` and is built
the same way: platform + analysed network + ``MeasureSettings`` + engine cache.
"""
from __future__ import annotations

from pathlib import Path

from dse.backends.base import Backend, MeasureSettings, supports
from dse.core.errors import choices_error

BACKENDS = ("sim", "ort", "trt")

__all__ = ["BACKENDS", "Backend", "MeasureSettings", "backend_from_config", "capabilities_of", "make_backend",
           "sets_clocks", "supports", "validate_backend"]


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


def capabilities_of(kind: str) -> frozenset[str]:
    """What a backend kind declares it can do (``dse.backends.base``), without building one."""
    return _backend_class(kind).capabilities


def validate_backend(platform, settings: MeasureSettings) -> None:
    """Refuse now, naming why, a platform or settings the platform's backend cannot measure with."""
    _backend_class(platform.backend).validate(platform, settings)


def sets_clocks(platform) -> bool:
    """Whether the platform's backend applies power modes and clocks (``Backend.sets_clocks``)."""
    return _backend_class(platform.backend).sets_clocks(platform)


def make_backend(platform, analysis, settings: MeasureSettings, *, engine_root: str | Path) -> Backend:
    """The backend ``platform`` names, measuring ``analysis`` with ``settings``, engines under ``engine_root``."""
    from dse.engines.cache import EngineCache
    from dse.platform import load_platform

    platform = load_platform(platform)
    cls = _backend_class(platform.backend)
    return cls(platform, analysis, settings, engine_cache=EngineCache(engine_root, platform.name))


def backend_from_config(cfg, analysis=None, *, engine_root: str | Path | None = None) -> Backend:
    """The backend of a composed config (the CLI's way in): its platform, its benchmark's network and settings,
    engines under ``results_dir/engines`` unless given."""
    if analysis is None:
        from dse.network import load_analysis

        analysis = load_analysis(cfg)
    root = engine_root if engine_root is not None else Path(cfg.results_dir) / "engines"
    return make_backend(cfg.platform, analysis, MeasureSettings.from_config(cfg), engine_root=root)
