"""Engine builders (sim, ort, trt) behind one interface, and the content-addressed artifact cache."""
from dse.engines.base import EngineBuilder, StageBuild
from dse.engines.cache import EngineArtifact, EngineCache

__all__ = ["EngineArtifact", "EngineBuilder", "EngineCache", "StageBuild"]
