"""The benchmark's network: build or load the model the config names, and analyze it (cached per process)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import onnx
from omegaconf import DictConfig

from dse.core.validate import MAX_MODEL_BYTES, MAX_TEXT_BYTES, regular_file
from dse.core.errors import DseError


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
        regular_file(model, "benchmark.model", MAX_MODEL_BYTES)
    else:
        if model.endswith(".cfg"):
            regular_file(model, "benchmark.model", MAX_TEXT_BYTES)
        try:
            resolve(model)   # the zoo's own resolution: a zoo name or a .cfg file
        except DseError as exc:
            raise DseError(f"benchmark.model: {exc}") from None
    if source["weights"] is not None:
        regular_file(source["weights"], "benchmark.weights", 2 * MAX_MODEL_BYTES)


def build_model(source: dict, weight_free: bool = False) -> onnx.ModelProto:
    """A zoo name or a Darknet .cfg -> converted ONNX; an .onnx path -> loaded as is (sanitized later).
    ``weight_free`` declares a converted network's weights without storing them (an .onnx keeps its own)."""
    from dse import zoo

    model = source["model"]
    if model.endswith(".onnx"):
        from dse.graph.model import read_model

        return read_model(model)[0]
    if model.endswith(".cfg"):
        regular_file(model, "benchmark.model", MAX_TEXT_BYTES)
    return zoo.build_network(model, input_size=source["input_size"], batch=source["batch"],
                             seed=source["seed"], weights=source["weights"], weight_free=weight_free)


def random_weights(source: dict) -> bool:
    """True when the source's weights are the converter's seeded random numbers (nothing to read from a file)."""
    return not source["model"].endswith(".onnx") and source["weights"] is None


def input_shapes_for(model: onnx.ModelProto, source: dict) -> dict[str, list[int]]:
    """Given shapes, or for a single 4-D image input with dynamic dims: (batch, C, size, size)."""
    if source["input_shapes"]:
        return source["input_shapes"]
    init = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in init]
    if len(inputs) != 1:
        return {}
    dims = inputs[0].type.tensor_type.shape.dim
    size, batch = source["input_size"], source["batch"]
    if len(dims) == 4 and all(d.HasField("dim_value") and d.dim_value > 0 for d in dims):
        have = [d.dim_value for d in dims]
        if have[0] != batch or have[2:] != [size, size]:     # the run would be filed and labelled by the config's
            raise DseError(f"benchmark.model {source['model']!r}: input {inputs[0].name!r} is static {have}, but "
                           f"the run is set to batch {batch} and input size {size}: set batch={have[0]} "
                           f"benchmark.input_size={have[2]}, or give a model with dynamic batch and size")
        return {}
    if len(dims) != 4:
        return {}
    fixed = [batch, dims[1].dim_value or 3, size, size]
    return {inputs[0].name: [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else f
                             for d, f in zip(dims, fixed)]}


def analyze_source(source: dict, models: str | Path | None = None):
    """The NetworkAnalysis of a model source, on its weight-free form (``dse.graph.weights``).

    Seeded random weights are never made here: the converter declares them. Weights from a file (.weights, an
    .onnx) are read, to sanitize the graph as given and to name them (``weights_id``), then dropped; a backend
    that runs the model gets them back through ``weighted_model``, cached under ``models`` when given.
    """
    from dse.graph.analysis import NetworkAnalysis
    from dse.graph.model import load_model
    from dse.graph.weights import content_id, strip_weights

    weight_free = random_weights(source)
    model = build_model(source, weight_free=weight_free)
    sanitized = load_model(model, input_shapes_for(model, source) or None)
    del model
    weights = f"random(seed={source['seed']})" if weight_free else content_id(sanitized)
    return NetworkAnalysis(strip_weights(sanitized, weights), materializer(source, models))


def materializer(source: dict, models: str | Path | None):
    """``materialize(digest, weights_id)`` for ``NetworkAnalysis``: ``weighted_model`` of this source."""
    return lambda digest, weights: weighted_model(source, digest, weights, models)


def weighted_model(source: dict, digest: str, weights: str | None, models: str | Path | None = None
                   ) -> onnx.ModelProto:
    """The sanitized model of ``source`` with its weights, as analysed (``digest``, ``weights``).

    With ``models`` (``<results_dir>/models``, beside the engines) it is built once per digest and weights and
    reused by every job and run; a source whose weights are no longer the analysed ones (an .onnx or .weights
    file replaced since) is refused, naming the step to rerun.
    """
    from dse.graph.model import load_model
    from dse.graph.weights import content_id

    def build() -> onnx.ModelProto:
        model = build_model(source)
        sanitized = load_model(model, input_shapes_for(model, source) or None)
        got = f"random(seed={source['seed']})" if random_weights(source) else content_id(sanitized)
        if got != weights:
            raise DseError(f"benchmark.model {source['model']!r}: its weights are now {got}, not the analysed "
                           f"{weights}: the file changed since the analyze step; rerun it (snakemake --forcerun "
                           "analyze)")
        return sanitized

    if models is None:
        return build()
    import hashlib

    from dse.engines.cache import EngineCache

    models = Path(models)
    cache = EngineCache(models.parent, models.name)
    built: list[onnx.ModelProto] = []

    def write(tmp: Path) -> dict:
        built.append(build())
        tmp.write_bytes(built[0].SerializeToString())
        return {"model": source["model"], "weights": weights, "digest": digest}

    key = hashlib.sha256(f"{digest}:{weights}".encode()).hexdigest()
    artifact = cache.get_or_build(key, "onnx", "model", write, settings={"source": source})
    return built[0] if built else onnx.load(str(artifact.path))


@lru_cache(maxsize=8)
def _cached(key: str, models: str | None):
    import json

    return analyze_source(json.loads(key), models)


def load_analysis(cfg: DictConfig):
    """The NetworkAnalysis of the configured benchmark (built once per process and source); its weights, when a
    backend runs it, are cached under ``<results_dir>/models``."""
    import json

    return _cached(json.dumps(model_source(cfg), sort_keys=True), str(Path(cfg.results_dir) / "models"))
