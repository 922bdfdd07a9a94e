"""The `ort` engine builder: an ONNX Runtime-optimized stage model plus its session settings for a CPU core group.

The artifact is the graph ORT saves through ``SessionOptions.optimized_model_filepath``. Level EXTENDED is the
default: its output (fused ``com.microsoft`` ops such as FusedConv) reloads and runs in any ORT CPU session;
level ALL adds NCHWc layout ops that ORT itself marks as tied to the machine that optimized them, so it is
refused. The session settings (intra-op threads = cores of the group) go into the sidecar and the key; the
concrete core ids do not (like the DLA core, they are chosen when the pipeline starts).
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from dse.engines.base import StageBuild, model_bytes
from dse.engines.cache import EngineArtifact, EngineCache
from dse.core.errors import DseError, choices_error

SAVE_LEVELS = ("ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_DISABLE_ALL")


def ort_settings(stage: StageBuild, level: str = "ORT_ENABLE_EXTENDED") -> dict:
    """The session settings of a CPU stage (pure)."""
    if stage.pe_type != "CPU":
        raise DseError(f"stage {stage.index} runs on {stage.pe}: the 'ort' builder builds CPU stages only")
    if level not in SAVE_LEVELS:
        raise choices_error("ORT optimization level to save a model at", level, SAVE_LEVELS)
    if stage.precision != "fp32":
        raise DseError(f"stage {stage.index}: the 'ort' builder runs fp32 only, got {stage.precision}")
    return {
        "backend": "ort",
        "graph_optimization_level": level,
        "intra_op_num_threads": len(stage.cpu_cores),
        "inter_op_num_threads": 1,
        "execution_mode": "ORT_SEQUENTIAL",
        "providers": ["CPUExecutionProvider"],
        "precision": stage.precision,
        "batch": stage.batch,
    }


def session_options(settings: dict, optimized_model_filepath: str | None = None):
    """``onnxruntime.SessionOptions`` from the settings dict (used at build time and by the ORT runtime)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, settings["graph_optimization_level"])
    so.intra_op_num_threads = int(settings["intra_op_num_threads"])
    so.inter_op_num_threads = int(settings["inter_op_num_threads"])
    so.execution_mode = getattr(ort.ExecutionMode, settings["execution_mode"])
    if optimized_model_filepath:
        so.optimized_model_filepath = optimized_model_filepath
    return so


def load_session(artifact: EngineArtifact | str | Path, settings: dict | None = None):
    """An inference session on a built artifact; the saved graph is already optimized, so ORT skips that step."""
    import onnxruntime as ort

    path = artifact.path if isinstance(artifact, EngineArtifact) else Path(artifact)
    settings = dict(settings or (artifact.sidecar["settings"] if isinstance(artifact, EngineArtifact) else {}))
    if not settings:
        raise DseError(f"no session settings for {path}: pass the sidecar's settings")
    settings["graph_optimization_level"] = "ORT_DISABLE_ALL"
    return ort.InferenceSession(str(path), session_options(settings), providers=settings["providers"])


class OrtEngineBuilder:
    """Builds CPU stages: optimize once with ONNX Runtime, cache the optimized graph, reuse it by content."""

    backend = "ort"

    def __init__(self, board_model: str = "host", level: str = "ORT_ENABLE_EXTENDED"):
        self.board_model = board_model
        self.level = level

    def build(self, stage: StageBuild, model, cache: EngineCache) -> EngineArtifact:
        import onnxruntime as ort

        data = model_bytes(model)
        settings = ort_settings(stage, self.level)
        key = EngineCache.make_key(data, settings, ort.__version__, self.board_model)

        def build(tmp: Path) -> dict:
            import onnx

            # a ".onnx"-less temp name would still be saved in ONNX format (ORT uses ORT format only for ".ort")
            ort.InferenceSession(data, session_options(settings, str(tmp)), providers=settings["providers"])
            before = onnx.load_from_string(data)
            after = onnx.load(str(tmp))
            return {
                "nodes_before": len(before.graph.node),
                "nodes_after": len(after.graph.node),
                "op_types": dict(sorted(Counter(
                    f"{n.domain}:{n.op_type}" if n.domain else n.op_type for n in after.graph.node).items())),
            }

        return cache.get_or_build(key, "onnx", stage.pe_type, build, settings=settings)
