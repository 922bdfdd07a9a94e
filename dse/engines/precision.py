"""ONNX passes that put a stage's precision into the model itself, for strongly typed TensorRT networks.

TensorRT 11 removed the precision builder flags (``BuilderFlag.FP16``/``INT8``) and implicit INT8 calibration:
every network is strongly typed, so an FP16 stage needs FP16 tensors and an INT8 stage explicit
QuantizeLinear/DequantizeLinear pairs (NVIDIA, "Migrating from TensorRT 10.x to 11.x", "Strongly Typed Networks
Are Now Required"; see docs/tensorrt.md). Two passes, pure onnx + numpy, built from what a stage already has:

- ``insert_qdq``: symmetric INT8 Q/DQ on the activation inputs of Conv/Gemm/MatMul from the stage's calibration
  scales (TensorRT cache scale = amax/127 per tensor) and per-output-channel symmetric Q/DQ on their weights;
- ``to_fp16``: float tensors and initializers to float16, with Casts at the stage inputs/outputs so the stage I/O
  stays float32, and every input the ONNX operator schema types without float16 (e.g. Resize ``scales``) kept
  float32.

Why ours: NVIDIA points to ModelOpt for both (AutoCast, ONNX quantization), a large extra dependency;
Polygraphy's ``ConvertToFp16`` delegates to onnxconverter-common, which is not a dependency here, and
Polygraphy has no Q/DQ insertion from a calibration cache. Both passes are checked here with onnx's checker and
strict shape inference and run in ONNX Runtime / onnx's reference evaluator; the TensorRT builds that consume them
are UNTESTED ON HARDWARE.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from dse.core.errors import DseError

FLOAT, FLOAT16 = TensorProto.FLOAT, TensorProto.FLOAT16
# op -> indices of the inputs that carry activations (quantized with calibration scales) or weights (initializers)
QDQ_INPUTS = {"Conv": (0, 1), "Gemm": (0, 1), "MatMul": (0, 1)}
INT8_MAX = 127.0


def _default_opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


# --- INT8: explicit Q/DQ --------------------------------------------------------------------------------------

def insert_qdq(model: onnx.ModelProto, scales: Mapping[str, float]) -> onnx.ModelProto:
    """A copy of ``model`` with INT8 Q/DQ in front of every Conv/Gemm/MatMul input.

    Activations: per-tensor, scale from ``scales`` (a calibration cache's ``tensor -> amax/127``), zero point 0
    (TensorRT quantizes symmetrically). Weights (initializers): per output channel, scale = max|w|/127 along the
    channel, zero point 0. One Q/DQ pair per tensor, shared by its consumers. Raises DseError when an activation
    has no scale (the stage would silently stay float) or when the opset has no per-axis Q/DQ (< 13).
    """
    opset = _default_opset(model)
    if opset < 13:
        raise DseError(f"INT8 Q/DQ needs opset >= 13 (per-channel QuantizeLinear/DequantizeLinear take an axis "
                       f"since opset 13); the stage has opset {opset}: re-export the network at opset 13 or later")
    model = copy.deepcopy(model)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    names = _all_names(graph)
    dq_of: dict[str, str] = {}  # tensor -> its dequantized twin
    nodes: list[onnx.NodeProto] = []

    def add_const(name: str, value: np.ndarray) -> str:
        name = _fresh(name, names)
        graph.initializer.append(numpy_helper.from_array(value, name))
        return name

    def qdq(tensor: str, scale: np.ndarray, axis: int | None) -> str:
        scale_name = add_const(f"{tensor}_qdq_scale", scale.astype(np.float32))
        zero_name = add_const(f"{tensor}_qdq_zero_point", np.zeros(scale.shape, np.int8))
        attrs = {} if axis is None else {"axis": axis}
        q, dq = _fresh(f"{tensor}_quantized", names), _fresh(f"{tensor}_dequantized", names)
        nodes.append(helper.make_node("QuantizeLinear", [tensor, scale_name, zero_name], [q],
                                      name=_fresh(f"{tensor}_QuantizeLinear", names), **attrs))
        nodes.append(helper.make_node("DequantizeLinear", [q, scale_name, zero_name], [dq],
                                      name=_fresh(f"{tensor}_DequantizeLinear", names), **attrs))
        return dq

    for node in graph.node:
        for i in QDQ_INPUTS.get(node.op_type, ()) if node.domain in ("", "ai.onnx") else ():
            if i >= len(node.input) or not node.input[i]:
                continue
            tensor = node.input[i]
            if tensor not in dq_of:
                if tensor in inits:
                    weights = numpy_helper.to_array(inits[tensor])
                    if weights.dtype != np.float32:
                        continue
                    axis = _weight_axis(node, i, weights.ndim)
                    dq_of[tensor] = qdq(tensor, _channel_scales(weights, axis), axis)
                else:
                    if tensor not in scales:
                        raise DseError(f"INT8 stage: the calibration cache has no scale for tensor {tensor!r} "
                                       f"(input {i} of {node.op_type} {node.name!r}); calibrate the network again")
                    scale = float(scales[tensor])
                    if not np.isfinite(scale) or scale <= 0:
                        raise DseError(f"INT8 stage: calibration scale of {tensor!r} is {scale}, expected > 0")
                    dq_of[tensor] = qdq(tensor, np.array(scale, np.float32), None)
            node.input[i] = dq_of[tensor]
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(model)
    return model


def _weight_axis(node: onnx.NodeProto, index: int, ndim: int) -> int | None:
    """The output-channel axis of a weight input (None: per-tensor, for a MatMul's constant left operand)."""
    if node.op_type == "Conv":
        return 0  # [M, C/group, kH, kW]
    if node.op_type == "Gemm":
        if index == 0:
            return None
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return 0 if trans_b else 1  # B is [N, K] with transB, else [K, N]
    return ndim - 1 if index == 1 and ndim >= 1 else None  # MatMul: B [..., K, N]


def _channel_scales(weights: np.ndarray, axis: int | None) -> np.ndarray:
    """Symmetric INT8 scales max|w|/127, per channel along ``axis`` (a scalar for None); an all-zero channel gets 1."""
    if axis is None:
        amax = np.array(np.abs(weights).max() if weights.size else 0.0)
    else:
        other = tuple(d for d in range(weights.ndim) if d != axis)
        amax = np.abs(weights).max(axis=other) if other else np.abs(weights)
    return np.where(amax > 0, amax / INT8_MAX, 1.0).astype(np.float32)


# --- FP16 ---------------------------------------------------------------------------------------------------

def to_fp16(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` computing in float16 with float32 graph inputs/outputs (same names, same types).

    Every float32 tensor becomes float16 (initializers, Constant values, Cast targets, subgraph I/O) except where
    the operator schema (at the model's opset) does not admit float16: such an input is fed a float32 twin, such
    an output is consumed through a Cast to float16. Nodes of other domains get float32, as before.
    """
    model = copy.deepcopy(model)
    types = _elem_types(onnx.shape_inference.infer_shapes(model).graph)
    converter = _Fp16(types, _default_opset(model), _all_names(model.graph))
    graph = model.graph
    _clear_value_info(graph)
    renamed = {}
    inputs = {vi.name for vi in graph.input}
    for vi in graph.output:  # the stage outputs keep their name and float32: computed under another name first
        if types.get(vi.name) == FLOAT and vi.name not in inputs:
            inner = _fresh(f"{vi.name}_fp16", converter.names)
            _rename_uses(graph, vi.name, inner)
            for node in graph.node:
                node.output[:] = [inner if o == vi.name else o for o in node.output]
            types[inner] = FLOAT
            renamed[vi.name] = inner
    scope = converter.graph(graph, parent=None)
    for name, inner in renamed.items():
        scope.nodes.append(helper.make_node("Cast", [inner], [name], to=FLOAT,
                                            name=_fresh(f"{name}_Cast", converter.names)))
    del graph.node[:]
    graph.node.extend(scope.nodes)
    _drop_unused_initializers(graph)
    return onnx.shape_inference.infer_shapes(model)


class _Scope:
    """One graph being rewritten: its new node list and the float16/float32 names ("views") of its tensors."""

    def __init__(self, graph: onnx.GraphProto, parent: "_Scope | None"):
        self.graph = graph
        self.parent = parent
        self.nodes: list[onnx.NodeProto] = []
        self.views: dict[str, dict[int, str]] = {}  # tensor -> {elem type: name holding it in that type}
        self.fp32_inits: dict[str, np.ndarray] = {}  # float initializers converted to fp16: their float32 data


class _Fp16:
    def __init__(self, types: dict[str, int], opset: int, names: set[str]):
        self.types = types
        self.opset = opset
        self.names = names

    def graph(self, graph: onnx.GraphProto, parent: _Scope | None) -> _Scope:
        scope = _Scope(graph, parent)
        for vi in graph.input:
            if self.types.get(vi.name) == FLOAT:
                if parent is not None:  # a subgraph's formal input is fed float16 by its node
                    vi.type.tensor_type.elem_type = FLOAT16
                scope.views[vi.name] = {vi.type.tensor_type.elem_type: vi.name}
        for init in graph.initializer:
            if init.data_type == FLOAT:
                data = numpy_helper.to_array(init)
                init.CopyFrom(numpy_helper.from_array(data.astype(np.float16), init.name))
                scope.fp32_inits[init.name] = data
                scope.views[init.name] = {FLOAT16: init.name}
        for vi in graph.input:  # IR < 4 lists initializers as inputs too: they keep their initializer's type
            if vi.name in scope.fp32_inits:
                vi.type.tensor_type.elem_type = FLOAT16
        for node in graph.node:
            self.node(node, scope)
        if parent is not None:
            for vi in graph.output:
                if self.types.get(vi.name) == FLOAT:
                    vi.name = self.view(scope, vi.name, FLOAT16)
                    vi.type.tensor_type.elem_type = FLOAT16
            del graph.node[:]
            graph.node.extend(scope.nodes)
        return scope

    def node(self, node: onnx.NodeProto, scope: _Scope) -> None:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                self.graph(attr.g, scope)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    self.graph(g, scope)
        schema = _schema(node, self.opset)
        for i, name in enumerate(node.input):
            if name and self.types.get(name) == FLOAT:
                node.input[i] = self.view(scope, name, FLOAT16 if _admits_fp16(schema, i, True) else FLOAT)
        outputs_fp16 = [bool(o) and self.types.get(o) == FLOAT and _admits_fp16(schema, i, False)
                        for i, o in enumerate(node.output)]
        if any(outputs_fp16):
            _retype_attributes(node)
        scope.nodes.append(node)
        for o, fp16 in zip(node.output, outputs_fp16):
            if o and self.types.get(o) == FLOAT:
                scope.views[o] = {FLOAT16 if fp16 else FLOAT: o}

    @staticmethod
    def owner(scope: _Scope, name: str) -> _Scope:
        """The scope where ``name`` is produced (its own name is one of its views there)."""
        s = scope
        while s is not None:
            if name in s.views.get(name, {}).values():
                return s
            s = s.parent
        raise DseError(f"fp16 conversion: tensor {name!r} has no producer in scope")

    def view(self, scope: _Scope, name: str, want: int) -> str:
        """The name of ``name`` in elem type ``want``, adding a float32 initializer twin or a Cast on first use."""
        s = scope
        while s is not None:
            if want in s.views.get(name, {}):
                return s.views[name][want]
            s = s.parent
        owner = self.owner(scope, name)
        suffix = "fp16" if want == FLOAT16 else "fp32"
        twin = _fresh(f"{name}_{suffix}", self.names)
        if name in owner.fp32_inits and want == FLOAT:
            owner.graph.initializer.append(numpy_helper.from_array(owner.fp32_inits[name], twin))
            owner.views[name][want] = twin
        else:
            scope.nodes.append(helper.make_node("Cast", [name], [twin], to=want,
                                                name=_fresh(f"{twin}_Cast", self.names)))
            scope.views.setdefault(name, {})[want] = twin
        return twin


def _schema(node: onnx.NodeProto, opset: int):
    if node.domain not in ("", "ai.onnx"):
        return None
    try:
        return onnx.defs.get_schema(node.op_type, opset)
    except onnx.defs.SchemaError:
        return None


def _admits_fp16(schema, index: int, is_input: bool) -> bool:
    """Whether the schema's formal parameter at ``index`` accepts tensor(float16) (no schema: it does not)."""
    if schema is None:
        return False
    params = schema.inputs if is_input else schema.outputs
    if not params:
        return False
    param = params[min(index, len(params) - 1)]
    allowed = next((c.allowed_type_strs for c in schema.type_constraints if c.type_param_str == param.type_str),
                   [param.type_str])
    return "tensor(float16)" in allowed


def _retype_attributes(node: onnx.NodeProto) -> None:
    """Attributes that fix a float32 output type: Cast/``dtype`` targets and Constant/ConstantOfShape values."""
    for attr in node.attribute:
        if attr.name in ("to", "dtype") and attr.type == onnx.AttributeProto.INT and attr.i == FLOAT:
            attr.i = FLOAT16
        elif attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == FLOAT:
            attr.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(attr.t).astype(np.float16), attr.t.name))
        elif node.op_type == "Constant" and attr.name in ("value_float", "value_floats"):
            value = np.array(attr.f if attr.name == "value_float" else list(attr.floats), np.float16)
            attr.CopyFrom(helper.make_attribute("value", numpy_helper.from_array(value)))


def _elem_types(graph: onnx.GraphProto, out: dict[str, int] | None = None) -> dict[str, int]:
    """tensor name -> ONNX elem type over the graph and its subgraphs (inputs, outputs, value infos, initializers)."""
    out = {} if out is None else out
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            out[vi.name] = vi.type.tensor_type.elem_type
    for init in graph.initializer:
        out[init.name] = init.data_type
    for node in graph.node:
        for attr in node.attribute:
            for g in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)):
                _elem_types(g, out)
    return out


def _subgraphs(graph: onnx.GraphProto):
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield attr.g
            elif attr.type == onnx.AttributeProto.GRAPHS:
                yield from attr.graphs


def _clear_value_info(graph: onnx.GraphProto) -> None:
    """Types change: shape inference recomputes the value infos afterwards."""
    del graph.value_info[:]
    for g in _subgraphs(graph):
        _clear_value_info(g)


def _rename_uses(graph: onnx.GraphProto, old: str, new: str) -> None:
    for node in graph.node:
        node.input[:] = [new if i == old else i for i in node.input]
    for g in _subgraphs(graph):
        _rename_uses(g, old, new)
        for vi in g.output:
            if vi.name == old:
                vi.name = new


def _used_names(graph: onnx.GraphProto, out: set[str] | None = None) -> set[str]:
    out = set() if out is None else out
    for node in graph.node:
        out.update(node.input)
    out.update(vi.name for vi in graph.output)
    for g in _subgraphs(graph):
        _used_names(g, out)
    return out


def _drop_unused_initializers(graph: onnx.GraphProto) -> None:
    used = _used_names(graph)
    keep = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    for g in _subgraphs(graph):
        _drop_unused_initializers(g)


def _all_names(graph: onnx.GraphProto, out: set[str] | None = None) -> set[str]:
    """Every tensor and node name in the graph and its subgraphs (new names must not collide with any)."""
    out = set() if out is None else out
    out.update(vi.name for vi in list(graph.input) + list(graph.output) + list(graph.value_info))
    out.update(t.name for t in graph.initializer)
    for node in graph.node:
        out.update(node.input)
        out.update(node.output)
        out.add(node.name)
    for g in _subgraphs(graph):
        _all_names(g, out)
    return out


def _fresh(base: str, names: set[str]) -> str:
    name, n = base, 1
    while name in names:
        name, n = f"{base}_{n}", n + 1
    names.add(name)
    return name
