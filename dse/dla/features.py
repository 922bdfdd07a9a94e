"""The per-layer facts the DLA rules are checked against, from the analysed layer table (attributes, static
shapes, the tensors each layer reads). A fact the table cannot give (a network input's shape, a constant
operand) is left out and its rules are not checked: the verdict never guesses a failure."""
from __future__ import annotations

from math import prod

CONV_LIKE = frozenset({"Conv", "ConvTranspose"})
POOLS = frozenset({"MaxPool", "AveragePool", "LpPool"})
GLOBAL_POOLS = frozenset({"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})
ELEMENTWISE = frozenset({"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Equal", "Greater", "Less", "Sum",
                         "And", "Or", "Xor", "Mod", "GreaterOrEqual", "LessOrEqual"})
AXIS_OPS = frozenset({"Concat", "Softmax", "LogSoftmax", "Split", "Gather", "Flatten"})


def _ints(value) -> list[int]:
    if value is None:
        return []
    if isinstance(value, (int, float)):
        return [int(value)]
    return [int(v) for v in value]


def broadcast_kind(out_shape, in_shapes, n_inputs: int, const_elems: int | None) -> str:
    """How an element-wise layer's operands relate to its output: 'none' (equal shapes, NCHW), 'channel' (one is
    NC11), 'scalar' (one is N111 or a scalar), 'other'. A constant operand is not an activation: its size comes
    from the layer's parameter bytes (``const_elems``)."""
    if not out_shape:
        return "other"
    n, c = (out_shape[0], out_shape[1]) if len(out_shape) > 1 else (out_shape[0], 1)
    full = prod(int(d) for d in out_shape)
    sizes = [prod(int(d) for d in s) for s in in_shapes if s is not None]
    if n_inputs < 2 and const_elems is not None:
        sizes.append(const_elems * n)   # a constant is broadcast over the batch
    kinds = {"none" if e == full else "channel" if e == n * c else "scalar" if e == n else "other" for e in sizes}
    for k in ("other", "channel", "scalar"):
        if k in kinds:
            return k
    return "none"


def layer_features(op: str, attrs: dict, out_shape: list[int] | None, in_shapes: list[list[int] | None],
                   n_inputs: int, const_elems: int | None = None) -> dict:
    """Features of one layer: see ``rulesets/*.yaml`` for the names. ``in_shapes`` holds the shapes of its
    activation inputs (None where unknown); ``n_inputs`` counts them (constants are not activations);
    ``const_elems`` is the element count of its constant operands (fp32 parameter bytes / 4)."""
    f: dict = {}
    if out_shape:
        f["rank"] = len(out_shape)
        if len(out_shape) > 1:
            f["max_dim"] = max(int(d) for d in out_shape[1:])
    first_in = in_shapes[0] if in_shapes else None
    if op in CONV_LIKE or op in POOLS:
        kernel = _ints(attrs.get("kernel_shape"))
        if kernel:
            f["kernel"] = max(kernel)
            f["spatial_dims"] = len(kernel)
        f["stride"] = max(_ints(attrs.get("strides")) or [1])
        f["pad"] = max(_ints(attrs.get("pads")) or [0])
        f["dilation"] = max(_ints(attrs.get("dilations")) or [1])
        if op in CONV_LIKE:
            f["groups"] = int(attrs.get("group", 1) or 1)
            if out_shape and len(out_shape) > 1:
                f["out_channels"] = int(out_shape[1])
            if first_in and len(first_in) > 1:
                f["in_channels"] = int(first_in[1])
    elif op in GLOBAL_POOLS:
        f["global"] = True
        if first_in and len(first_in) > 2:
            f["kernel"] = max(int(d) for d in first_in[2:])
            f["spatial_dims"] = len(first_in) - 2
    if op in AXIS_OPS and out_shape:
        axis = int(attrs.get("axis", 1 if op != "Softmax" else -1))
        f["axis"] = axis + len(out_shape) if axis < 0 else axis
    if op in ("Resize", "Upsample"):
        mode = str(attrs.get("mode", "nearest")).lower()
        f["mode"] = "linear" if mode in ("linear", "bilinear") else mode
        if first_in and out_shape and len(first_in) == len(out_shape) > 2:
            ratios = [o / i for o, i in zip(out_shape[2:], first_in[2:]) if i]
            if ratios:
                f["scale"] = max(ratios)
                f["integer_scale"] = all(abs(r - round(r)) < 1e-9 for r in ratios)
    if op in ELEMENTWISE and n_inputs:   # (no tensor names stored: unknown)
        f["broadcast"] = broadcast_kind(out_shape, in_shapes, n_inputs, const_elems)
    return f


def table_features(op_types: list[str], attrs: list[dict], inputs: list[list[str]], out_shapes: list[list],
                   outputs: list[list[str]], param_bytes=None) -> list[dict]:
    """Features of every layer of a layer table (the columns ``dse.graph.layers.layer_table`` parses)."""
    shape_of: dict[str, list[int]] = {}
    for outs, shapes in zip(outputs, out_shapes):
        for t, s in zip(outs, shapes or []):
            if s:
                shape_of[t] = [int(d) for d in s]
    out = []
    for i, (op, a, ins, shapes) in enumerate(zip(op_types, attrs, inputs, out_shapes)):
        first = [int(d) for d in shapes[0]] if shapes and shapes[0] else None
        const = int(param_bytes[i]) // 4 if param_bytes is not None and param_bytes[i] else None
        out.append(layer_features(op, a, first, [shape_of.get(t) for t in ins], len(ins), const))
    return out
