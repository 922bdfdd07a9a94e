"""Small facts about ONNX tensors: element sizes, static shapes, and names read from inside subgraphs."""
from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import onnx

FLOAT_TYPES = frozenset({
    onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE})


def dtype_size(elem_type: int) -> int:
    """Bytes per element of an ONNX element type (0 for strings and unknown types)."""
    if elem_type in (onnx.TensorProto.UNDEFINED, onnx.TensorProto.STRING):
        return 0
    try:
        return int(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).itemsize)
    except (KeyError, TypeError, ValueError):
        return 0


def dtype_name(elem_type: int) -> str:
    """'FLOAT', 'INT64', ... for messages."""
    try:
        return onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"type {elem_type}"


def static_shape(value_info: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    """The shape of a tensor value as ints, or None when its rank or any dimension is unknown."""
    if not value_info.type.HasField("tensor_type"):
        return None
    tensor_type = value_info.type.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    dims = []
    for dim in tensor_type.shape.dim:
        if not dim.HasField("dim_value") or dim.dim_value < 0:
            return None
        dims.append(int(dim.dim_value))
    return tuple(dims)


def format_shape(value_info: onnx.ValueInfoProto) -> str:
    """'[?,3,?,?]' style text of a possibly dynamic shape; '[unknown rank]' without a shape."""
    if not value_info.type.HasField("tensor_type") or not value_info.type.tensor_type.HasField("shape"):
        return "[unknown rank]"
    dims = []
    for dim in value_info.type.tensor_type.shape.dim:
        dims.append(str(dim.dim_value) if dim.HasField("dim_value") and dim.dim_value >= 0 else "?")
    return "[" + ",".join(dims) + "]"


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs held in a node's attributes (If branches, Loop/Scan bodies)."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def outer_references(graph: onnx.GraphProto) -> list[str]:
    """Names a subgraph reads from its enclosing scopes, in first-use order (nested subgraphs included)."""
    local = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    local |= {t.name for t in graph.sparse_initializer}
    seen: dict[str, None] = {}
    for node in graph.node:
        for name in node.input:
            if name and name not in local:
                seen.setdefault(name)
        for sub in subgraphs(node):
            for name in outer_references(sub):
                if name not in local:
                    seen.setdefault(name)
        local.update(o for o in node.output if o)
    for out in graph.output:
        if out.name not in local:
            seen.setdefault(out.name)
    return list(seen)


def node_reads(node: onnx.NodeProto) -> list[str]:
    """Every tensor a node reads: its explicit inputs, then names its subgraphs take from outside."""
    names: dict[str, None] = {n: None for n in node.input if n}
    for sub in subgraphs(node):
        for name in outer_references(sub):
            names.setdefault(name)
    return list(names)


def rename_reads(nodes: Iterable[onnx.NodeProto], mapping: dict[str, str]) -> None:
    """Rewrite tensor names read by nodes, inside subgraphs too (SSA names make this safe)."""
    for node in nodes:
        for i, name in enumerate(node.input):
            if name in mapping:
                node.input[i] = mapping[name]
        for sub in subgraphs(node):
            rename_reads(sub.node, mapping)
            for out in sub.output:
                if out.name in mapping:
                    out.name = mapping[out.name]
