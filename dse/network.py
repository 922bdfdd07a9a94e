"""The benchmark's network: build or load the model the config names, and analyze it (cached per process)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import onnx
from omegaconf import DictConfig

from dse.errors import DseError


def model_source(cfg: DictConfig) -> dict:
    """The settings that decide the model's bytes (and so the analysis): a hashable, JSON-able dict."""
    b = cfg.benchmark
    return {
        "model": str(b.model), "weights": None if b.weights is None else str(b.weights),
        "input_size": int(b.input_size), "batch": int(cfg.batch), "seed": int(cfg.seed),
        "input_shapes": {str(k): [int(d) for d in v] for k, v in (b.input_shapes or {}).items()},
    }


def check_model_source(source: dict) -> None:
    """Fail now, naming the bad value, if the model cannot be built: an .onnx/.cfg file that is not there, an
    unknown zoo name, weights that are missing (planning calls this before any job runs)."""
    from dse.zoo.registry import resolve

    model = source["model"]
    if model.endswith(".onnx"):
        if not Path(model).is_file():
            raise DseError(f"benchmark.model {model!r}: no such file")
    else:
        try:
            resolve(model)   # the zoo's own resolution: a zoo name or a .cfg file
        except DseError as exc:
            raise DseError(f"benchmark.model: {exc}") from None
    if source["weights"] is not None and not Path(source["weights"]).is_file():
        raise DseError(f"benchmark.weights {source['weights']!r}: no such file")


def build_model(source: dict) -> onnx.ModelProto:
    """A zoo name or a Darknet .cfg -> converted ONNX; an .onnx path -> loaded as is (sanitized later)."""
    from dse import zoo

    model = source["model"]
    if model.endswith(".onnx"):
        from dse.graph.model import read_model

        return read_model(model)[0]
    if model.endswith(".cfg") and not Path(model).is_file():
        raise DseError(f"benchmark.model {model!r}: no such file")
    return zoo.build_network(model, input_size=source["input_size"], batch=source["batch"],
                             seed=source["seed"], weights=source["weights"])


def input_shapes_for(model: onnx.ModelProto, source: dict) -> dict[str, list[int]]:
    """Given shapes, or for a single 4-D image input with dynamic dims: (batch, C, size, size)."""
    if source["input_shapes"]:
        return source["input_shapes"]
    init = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in init]
    if len(inputs) != 1:
        return {}
    dims = inputs[0].type.tensor_type.shape.dim
    if len(dims) != 4 or all(d.HasField("dim_value") and d.dim_value > 0 for d in dims):
        return {}
    size, batch = source["input_size"], source["batch"]
    fixed = [batch, dims[1].dim_value or 3, size, size]
    return {inputs[0].name: [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else f
                             for d, f in zip(dims, fixed)]}


def analyze_source(source: dict):
    from dse.graph.analysis import analyze

    model = build_model(source)
    return analyze(model, input_shapes_for(model, source) or None)


@lru_cache(maxsize=8)
def _cached(key: str):
    import json

    return analyze_source(json.loads(key))


def load_analysis(cfg: DictConfig):
    """The NetworkAnalysis of the configured benchmark (built once per process and source)."""
    import json

    return _cached(json.dumps(model_source(cfg), sort_keys=True))
