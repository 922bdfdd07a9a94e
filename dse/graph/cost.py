"""Per-layer work estimate (multiply-accumulates) and the attributes worth keeping, from static shapes.

MAC convention (one number per layer, comparable across layers):
- Conv: output elements x (Cin/group) x kernel area  (= prod(out) x prod(W.shape[1:]))
- ConvTranspose: input elements x (Cout/group) x kernel area  (= prod(X) x prod(W.shape[1:]))
- Gemm / MatMul: output elements x the reduced dimension K
- LSTM / GRU / RNN: sequence x batch x (W and R weight elements)
- MaxPool / AveragePool / LpPool: output elements x kernel area; global pools, reductions,
  Softmax-like ops: input elements
- data movement (Reshape, Transpose, Concat, Split, Slice, Gather, Pad, Cast, ...): 0
- everything else (element-wise math, activations, normalizations, Resize, If, ...): output elements
"""
from __future__ import annotations

import math

import onnx

DATA_MOVEMENT = frozenset({
    "Reshape", "Transpose", "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND", "Squeeze",
    "Unsqueeze", "Flatten", "Pad", "Tile", "Expand", "Cast", "CastLike", "Shape", "Size", "Identity",
    "Dropout", "DepthToSpace", "SpaceToDepth", "ScatterND", "ScatterElements", "ConstantOfShape", "Range",
    "NonZero", "Compress", "SplitToSequence", "ConcatFromSequence", "SequenceAt", "SequenceConstruct",
    "Constant", "EyeLike", "Trilu", "ReverseSequence", "Optional", "OptionalGetElement",
})
INPUT_SIZED = frozenset({
    "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "Softmax", "LogSoftmax", "Hardmax", "ReduceMean",
    "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
    "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin", "TopK",
})
WINDOWED = frozenset({"MaxPool", "AveragePool", "LpPool"})
_KEEP_ATTRS = frozenset({
    "kernel_shape", "strides", "pads", "dilations", "group", "auto_pad", "alpha", "beta", "gamma", "epsilon",
    "axis", "axes", "perm", "mode", "keepdims", "transA", "transB", "ceil_mode", "count_include_pad",
    "output_padding", "coordinate_transformation_mode", "nearest_mode", "to", "min", "max", "approximate",
    "hidden_size", "direction", "blocksize", "num_outputs", "largest", "sorted", "k", "split",
})


def _prod(shape) -> int:
    return math.prod(int(d) for d in shape) if shape is not None else 0


def layer_macs(op_type: str, attrs: dict, input_shapes: list[tuple[int, ...] | None],
               output_shapes: list[tuple[int, ...]]) -> int:
    """MACs of one layer under the convention in this module's docstring.

    input_shapes follow the node's explicit inputs (weights included); None where unknown/absent.
    """
    out = _prod(output_shapes[0]) if output_shapes else 0
    first = input_shapes[0] if input_shapes else None
    weight = input_shapes[1] if len(input_shapes) > 1 else None
    if op_type in DATA_MOVEMENT:
        return 0
    if op_type == "Conv" and weight is not None:
        return out * _prod(weight[1:])
    if op_type == "ConvTranspose" and weight is not None and first is not None:
        return _prod(first) * _prod(weight[1:])
    if op_type == "Gemm" and first is not None and len(first) == 2:
        k = first[0] if attrs.get("transA") else first[1]
        return out * int(k)
    if op_type in ("MatMul", "MatMulInteger", "QLinearMatMul") and first is not None and first:
        return out * int(first[-1])
    if op_type in ("LSTM", "GRU", "RNN") and first is not None and len(input_shapes) > 2:
        steps = _prod(first[:2])
        return steps * (_prod(input_shapes[1]) + _prod(input_shapes[2]))
    if op_type in WINDOWED:
        return out * _prod(attrs.get("kernel_shape", ()))
    if op_type in INPUT_SIZED and first is not None:
        return _prod(first)
    return out


def small_attrs(node: onnx.NodeProto) -> dict:
    """The node's small, useful attributes as plain Python values (strings decoded, graphs/tensors left out)."""
    result = {}
    for attr in node.attribute:
        if attr.name not in _KEEP_ATTRS:
            continue
        value = onnx.helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, (list, tuple)):
            if len(value) > 16:
                continue
            value = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
        elif not isinstance(value, (int, float, str)):
            continue
        result[attr.name] = value
    return result
