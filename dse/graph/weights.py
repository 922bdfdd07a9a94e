"""Weight-free models: a network's graph with its weights declared (name, type, shape) but not stored.

Everything but execution works from shapes: layer costs, cut feasibility, the DLA rules, the virtual boards.
A weight-free copy of yolov4 is under 1 MB where the weighted one is 246 MB, so run directories hold the
weight-free one and a backend that runs the model asks for the weights (``NetworkAnalysis.weighted_model``).

A *weight* is a floating-point initializer that no output shape depends on: everything a Conv, Gemm, MatMul,
... reads as parameters. Integer initializers (shapes, axes, indices) and the float inputs that decide a shape
(Resize/Upsample scales, Range bounds) keep their values, as do initializers read inside subgraphs.

The model's *digest* is the sha256 of its weight-free form without metadata: a weight-free and a weighted copy
of one network share it (and so share the virtual board's measurements), whatever their weights are. What the
weights are is a separate *weights id* (``weights_id``), recorded in the weight-free model's metadata.
"""
from __future__ import annotations

import hashlib

import onnx

from dse.graph.tensors import FLOAT_TYPES, node_reads

WEIGHTS_KEY = "dse.weights"   # metadata of a weight-free model: the weights id its declared initializers stand for
# (op type, input index) of the float inputs whose values decide an output shape
SHAPE_INPUTS = frozenset({("Resize", 1), ("Resize", 2), ("Upsample", 1), ("Range", 0), ("Range", 1), ("Range", 2)})
_DATA_FIELDS = ("raw_data", "float_data", "double_data", "int32_data", "int64_data", "uint64_data", "string_data")


def weight_names(graph: onnx.GraphProto) -> set[str]:
    """The initializers of ``graph`` that are weights (see the module docstring)."""
    floats = {t.name for t in graph.initializer if t.data_type in FLOAT_TYPES}
    keep: set[str] = set()
    for node in graph.node:
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            keep.update(node_reads(node))   # a subgraph reader: values may matter in ways not checked here
        for index, name in enumerate(node.input):
            if (node.op_type, index) in SHAPE_INPUTS:
                keep.add(name)
    return floats - keep


def is_stored(tensor: onnx.TensorProto) -> bool:
    """True when the tensor carries its values (inline or as external data), or has no elements."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return True
    if any(tensor.HasField(f) if f == "raw_data" else len(getattr(tensor, f)) for f in _DATA_FIELDS):
        return True
    n = 1
    for d in tensor.dims:
        n *= int(d)
    return n == 0


def declared(name: str, data_type: int, dims) -> onnx.TensorProto:
    """An initializer that declares a weight without storing it."""
    tensor = onnx.TensorProto(name=name, data_type=data_type)
    tensor.dims.extend(int(d) for d in dims)
    return tensor


def has_weights(model: onnx.ModelProto) -> bool:
    """True when every weight of the model is stored (False for a weight-free model)."""
    weights = weight_names(model.graph)
    return all(is_stored(t) for t in model.graph.initializer if t.name in weights)


def strip_weights(model: onnx.ModelProto, weights: str | None = None) -> onnx.ModelProto:
    """A weight-free copy of ``model`` (the weights' bytes are never copied); ``weights``, when given, is
    recorded as the weights id the declared initializers stand for."""
    out = onnx.ModelProto()
    for field, value in model.ListFields():
        if field.name != "graph":
            _copy_field(out, field, value)
    for field, value in model.graph.ListFields():
        if field.name != "initializer":
            _copy_field(out.graph, field, value)
    names = weight_names(model.graph)
    out.graph.initializer.extend(declared(t.name, t.data_type, t.dims) if t.name in names else t
                                 for t in model.graph.initializer)
    if weights is not None:
        props = [p for p in out.metadata_props if p.key != WEIGHTS_KEY]
        del out.metadata_props[:]
        out.metadata_props.extend(props)
        out.metadata_props.add(key=WEIGHTS_KEY, value=weights)
    return out


def _copy_field(message, field, value) -> None:
    # protobuf >= 6 has is_repeated; label is gone in 7
    if field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED:
        getattr(message, field.name).extend(value)
    elif field.type == field.TYPE_MESSAGE:
        getattr(message, field.name).CopyFrom(value)
    else:
        setattr(message, field.name, value)


def weights_of(model: onnx.ModelProto) -> str | None:
    """The weights id recorded in a weight-free model's metadata, or None."""
    return next((p.value for p in model.metadata_props if p.key == WEIGHTS_KEY), None)


def structure_digest(model: onnx.ModelProto) -> str:
    """sha256 of the model's weight-free form without metadata: equal for any weights of one network."""
    light = strip_weights(model)
    del light.metadata_props[:]
    return hashlib.sha256(light.SerializeToString(deterministic=True)).hexdigest()


def content_id(model: onnx.ModelProto) -> str:
    """The weights id of a model that stores its weights: a digest of the weights' names, types and values."""
    h = hashlib.sha256()
    names = weight_names(model.graph)
    for t in sorted((t for t in model.graph.initializer if t.name in names), key=lambda t: t.name):
        data = t.raw_data if t.HasField("raw_data") else onnx.numpy_helper.to_array(t).tobytes()
        for part in (t.name.encode(), str(t.data_type).encode(), data):
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
    return f"sha256:{h.hexdigest()[:16]}"
