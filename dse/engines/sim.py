"""The sim "engine" of a stage: its cost summary (phases, loadables, fallback) stored through the EngineCache.

The key is the model digest + layer range + build settings, never ONNX bytes: the sim needs no stage
ONNX per candidate. A DLA engine is keyed without its core (one engine serves both cores, like TensorRT).
"""
from __future__ import annotations

import json
from pathlib import Path

from dse.core.configuration import Configuration
from dse.engines.cache import EngineArtifact, EngineCache

EXT = "simengine"


def stage_settings(stage, config: Configuration) -> dict:
    return {"backend": "sim", "pe_type": stage.pe_type, "precision": config.precision, "batch": config.batch,
            "input_size": config.input_size}


def stage_key(platform, model_digest: str, stage, config: Configuration) -> str:
    content = f"{model_digest}:{stage.first}-{stage.last}"
    return EngineCache.make_key(content, stage_settings(stage, config), platform.toolkit_version,
                                platform.board_model)


def build_stage_engine(cache: EngineCache, platform, model_digest: str, stage,
                       config: Configuration) -> EngineArtifact:
    """Get or build (write the stage cost summary JSON) the sim engine of one stage."""
    settings = stage_settings(stage, config)

    def build(tmp: Path) -> dict:
        summary = stage.summary()
        tmp.write_text(json.dumps(summary, indent=1, sort_keys=True))
        return {"total_us": summary["total_us"], "loadables": summary["loadables"],
                "fallback_layers": summary["fallback_layers"]}

    return cache.get_or_build(stage_key(platform, model_digest, stage, config), EXT, stage.pe_type, build, settings)
