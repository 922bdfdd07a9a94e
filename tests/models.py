"""Test ONNX models built with onnx.helper, shaped like real exports (no torch or paddle here).

Reusable by every test module: `from tests.models import pytorch_style_convnet, ...`.
Each builder is deterministic (fixed seeds) and returns an onnx.ModelProto that passes onnx.checker.
"""
from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSETS = (11, 13, 17, 21)
IR_FOR_OPSET = {11: 6, 12: 7, 13: 7, 14: 7, 15: 8, 16: 8, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10}


class GraphBuilder:
    """Appends nodes the way exporters write them, with opset-dependent signatures handled in one place."""

    def __init__(self, opset: int = 17, seed: int = 0, prefix: str = "/", style: str = "torch"):
        self.opset = opset
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.prefix = prefix
        self.style = style
        self._count: dict[str, int] = {}

    # -- naming -------------------------------------------------------------------------------------------
    def _name(self, op: str) -> str:
        n = self._count.get(op, 0)
        self._count[op] = n + 1
        if self.style == "paddle":
            return f"p2o.{op}.{n}"
        return f"{self.prefix}{op.lower()}_{n}/{op}"

    def _tensor(self, node_name: str, i: int = 0) -> str:
        if self.style == "paddle":
            return f"{node_name.split('.', 1)[1].lower().replace('.', '_')}.tmp_{i}"
        return f"{node_name}_output_{i}"

    # -- primitives ---------------------------------------------------------------------------------------
    def node(self, op: str, inputs: list[str], n_out: int = 1, out: str | list[str] | None = None,
             name: str | None = None, **attrs) -> str | list[str]:
        """Append one node; returns its output name (or names when n_out > 1)."""
        name = name or self._name(op)
        if out is None:
            outs = [self._tensor(name, i) for i in range(n_out)]
        else:
            outs = [out] if isinstance(out, str) else list(out)
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def weight(self, shape, scale: float = 0.2, name: str | None = None) -> str:
        name = name or f"{self.prefix}w{len(self.initializers)}"
        data = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.initializers.append(numpy_helper.from_array(data, name))
        return name

    def init(self, value, dtype=np.float32, name: str | None = None) -> str:
        """An initializer holding a given value."""
        name = name or f"{self.prefix}c{len(self.initializers)}"
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def const(self, value, dtype=np.int64) -> str:
        """A Constant node, as PyTorch exports scalars and axes."""
        tensor = numpy_helper.from_array(np.asarray(value, dtype=dtype))
        return self.node("Constant", [], value=tensor)

    def _axes_input(self, axes) -> str:
        return self.const(np.asarray(axes, dtype=np.int64))

    # -- layers ---------------------------------------------------------------------------------------------
    def conv(self, x: str, cin: int, cout: int, k: int = 3, stride: int = 1, pad: int | None = None,
             group: int = 1, bias: bool = True) -> str:
        pad = k // 2 if pad is None else pad
        inputs = [x, self.weight([cout, cin // group, k, k], scale=1.0 / math.sqrt(cin * k * k / group))]
        if bias:
            inputs.append(self.weight([cout], scale=0.1))
        return self.node("Conv", inputs, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4,
                         dilations=[1, 1], group=group)

    def bn(self, x: str, c: int) -> str:
        scale = self.init(1.0 + 0.1 * self.rng.standard_normal(c))
        bias = self.init(0.1 * self.rng.standard_normal(c))
        mean = self.init(0.1 * self.rng.standard_normal(c))
        var = self.init(0.5 + self.rng.random(c))
        return self.node("BatchNormalization", [x, scale, bias, mean, var], epsilon=1e-5, momentum=0.9)

    def hardswish(self, x: str) -> str:
        if self.opset >= 14:
            return self.node("HardSwish", [x])
        gate = self.node("HardSigmoid", [x], alpha=1.0 / 6, beta=0.5)
        return self.node("Mul", [x, gate])

    def clip(self, x: str, lo: float, hi: float) -> str:
        return self.node("Clip", [x, self.const(lo, np.float32), self.const(hi, np.float32)])

    def gelu(self, x: str) -> str:
        """The Erf form PyTorch exports for nn.GELU before opset 20."""
        scaled = self.node("Div", [x, self.const(math.sqrt(2.0), np.float32)])
        erf = self.node("Erf", [scaled])
        plus = self.node("Add", [erf, self.const(1.0, np.float32)])
        prod = self.node("Mul", [x, plus])
        return self.node("Mul", [prod, self.const(0.5, np.float32)])

    def unsqueeze(self, x: str, axes: list[int]) -> str:
        if self.opset < 13:
            return self.node("Unsqueeze", [x], axes=axes)
        return self.node("Unsqueeze", [x, self._axes_input(axes)])

    def squeeze(self, x: str, axes: list[int]) -> str:
        if self.opset < 13:
            return self.node("Squeeze", [x], axes=axes)
        return self.node("Squeeze", [x, self._axes_input(axes)])

    def split(self, x: str, sizes: list[int], axis: int) -> list[str]:
        if self.opset < 13:
            return self.node("Split", [x], n_out=len(sizes), axis=axis, split=sizes)
        return self.node("Split", [x, self._axes_input(sizes)], n_out=len(sizes), axis=axis)

    def reduce(self, op: str, x: str, axes: list[int] | None, keepdims: int) -> str:
        """ReduceMean's axes became an input in opset 18, ReduceSum's in opset 13."""
        input_since = 13 if op == "ReduceSum" else 18
        if axes is None:
            return self.node(op, [x], keepdims=keepdims)
        if self.opset < input_since:
            return self.node(op, [x], axes=axes, keepdims=keepdims)
        return self.node(op, [x, self._axes_input(axes)], keepdims=keepdims)

    def slice(self, x: str, starts, ends, axes) -> str:
        return self.node("Slice", [x, self.const(starts), self.const(ends), self.const(axes)])

    def resize_double(self, x: str) -> str:
        """Nearest 2x upsample whose `sizes` come from Shape arithmetic (F.interpolate(size=...) export)."""
        shape = self.node("Shape", [x])
        nc = self.slice(shape, [0], [2], [0])
        hw = self.slice(shape, [2], [4], [0])
        hw2 = self.node("Mul", [hw, self.const([2], np.int64)])
        sizes = self.node("Concat", [nc, hw2], axis=0)
        if self.opset < 13:
            roi = self.const(np.zeros(0, np.float32), np.float32)
            scales = self.const(np.zeros(0, np.float32), np.float32)
            return self.node("Resize", [x, roi, scales, sizes], mode="nearest",
                             coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        return self.node("Resize", [x, "", "", sizes], mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor")

    def flatten_computed(self, x: str) -> str:
        """x.view(x.size(0), -1): Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""
        shape = self.node("Shape", [x])
        batch = self.node("Gather", [shape, self.const(0)], axis=0)
        batch1 = self.unsqueeze(batch, [0])
        target = self.node("Concat", [batch1, self.const([-1])], axis=0)
        return self.node("Reshape", [x, target])

    def gemm(self, x: str, cin: int, cout: int) -> str:
        return self.node("Gemm", [x, self.weight([cout, cin], 1.0 / math.sqrt(cin)), self.weight([cout], 0.1)],
                         alpha=1.0, beta=1.0, transB=1)

    def model(self, inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
              name: str = "test") -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="tests.models")
        model.ir_version = IR_FOR_OPSET.get(self.opset, 10)
        onnx.checker.check_model(model)
        return model


def _float_input(name: str, dims) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def pytorch_style_convnet(opset: int = 17) -> onnx.ModelProto:
    """A small classifier as torch.onnx.export writes it with dynamic batch/height/width.

    Input 'input' [batch,3,height,width] (height, width divisible by 2); outputs 'logits' [batch,10]
    (through an Identity), 'score' [batch,16] (from an If whose branches read outer tensors) and
    'stride2' (an intermediate feature map that is also consumed later).
    Contains Conv->BN->Relu, a residual Add, HardSwish, Clip, Split, Resize with computed sizes,
    a skip Concat, an Erf GELU, Dropout, ReduceMean, a computed-shape flatten, Gemm, Constant and
    Identity nodes.
    """
    b = GraphBuilder(opset, seed=opset)
    x = b.node("Identity", ["input"])
    t = b.node("Relu", [b.bn(b.conv(x, 3, 8), 8)])
    res = b.node("Relu", [b.bn(b.conv(t, 8, 8), 8)])
    res = b.bn(b.conv(res, 8, 8), 8)
    full = b.node("Relu", [b.node("Add", [res, t])])
    s2 = b.hardswish(b.conv(full, 8, 16, stride=2))
    s2 = b.node("Identity", [s2], out="stride2")
    t = b.clip(b.conv(s2, 16, 16, k=1), 0.0, 6.0)
    left, right = b.split(t, [8, 8], axis=1)
    t = b.node("Concat", [b.node("Sigmoid", [left]), right], axis=1)
    up = b.resize_double(t)
    t = b.node("Concat", [up, full], axis=1)
    t = b.gelu(b.conv(t, 24, 16))
    t = b.node("Dropout", [t])
    feat = b.reduce("ReduceMean", t, [2, 3], keepdims=1)
    flat = b.flatten_computed(feat)
    logits = b.node("Identity", [b.gemm(flat, 16, 10)], out="logits")
    total = b.reduce("ReduceSum", logits, None, keepdims=0)
    cond = b.node("Greater", [total, b.const(0.0, np.float32)])
    then_graph = helper.make_graph(
        [helper.make_node("Mul", [flat, "if_two"], ["then_out"], name="then_mul")], "then_branch", [],
        [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(2.0, np.float32), "if_two")])
    if opset < 13:
        squeeze = helper.make_node("Squeeze", [feat], ["else_out"], name="else_squeeze", axes=[2, 3])
        else_inits = []
    else:
        squeeze = helper.make_node("Squeeze", [feat, "else_axes"], ["else_out"], name="else_squeeze")
        else_inits = [numpy_helper.from_array(np.array([2, 3], np.int64), "else_axes")]
    else_graph = helper.make_graph([squeeze], "else_branch", [],
                                   [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, None)],
                                   else_inits)
    b.node("If", [cond], out="score", name="/head/If", then_branch=then_graph, else_branch=else_graph)
    return b.model(
        [_float_input("input", ["batch", 3, "height", "width"])],
        [_float_input("logits", ["batch", 10]), _float_input("score", ["batch", 16]),
         _float_input("stride2", ["batch", 16, "floor(height/2)", "floor(width/2)"])],
        name=f"torch_convnet_opset{opset}")


def paddle_style_detector(opset: int = 13) -> onnx.ModelProto:
    """A two-scale YOLO-like detector as paddle2onnx writes it (p2o.* names, int32 shape math, Cast).

    Input 'image' [N,3,H,W] dynamic (H, W divisible by 4); output 'boxes' [N, 3*(H/2*W/2 + H/4*W/4), 6].
    The first head's output is consumed only by the final Concat: a long-lived tensor that makes
    many cut tuples infeasible.
    """
    b = GraphBuilder(opset, seed=100 + opset, prefix="", style="paddle")
    t = b.hardswish(b.bn(b.conv("image", 3, 8, stride=2), 8))
    t = b.hardswish(b.bn(b.conv(t, 8, 8), 8))
    heads = []
    for scale, cin in ((0, 8), (1, 16)):
        if scale == 1:
            t = b.hardswish(b.bn(b.conv(t, 8, 16, stride=2), 16))
            t = b.node("LeakyRelu", [b.bn(b.conv(t, 16, 16, k=1), 16)], alpha=0.1)
        p = b.conv(t, cin, 18, k=1)
        shape = b.node("Cast", [b.node("Shape", [p])], to=TensorProto.INT32)
        n = b.slice(shape, [0], [1], [0])
        hw = b.slice(shape, [2], [4], [0])
        area = b.reduce("ReduceProd", hw, [0], keepdims=1) if opset < 18 else \
            b.node("ReduceProd", [hw, b._axes_input([0])], keepdims=1)
        target = b.node("Concat", [n, b.const([3, 6], np.int32), area], axis=0)
        target = b.node("Cast", [target], to=TensorProto.INT64)
        r = b.node("Reshape", [p, target])
        r = b.node("Transpose", [r], perm=[0, 1, 3, 2])
        r = b.node("Reshape", [r, b.const([0, -1, 6])])
        heads.append(b.node("Sigmoid", [r]))
        if scale == 0:
            t = b.conv(t, 8, 8, k=3)
            t = b.node("Relu", [t])
    b.node("Concat", heads, axis=1, out="boxes")
    return b.model([_float_input("image", ["N", 3, "H", "W"])],
                   [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["N", "M", 6])],
                   name=f"paddle_detector_opset{opset}")


def chain_model(blocks: int = 400, opset: int = 17, channels: int = 4) -> onnx.ModelProto:
    """A long chain of small residual blocks (about 5 nodes each) for speed checks.

    Every 25th block flattens with a computed shape and reshapes back, so folding has real work.
    Input 'x' [batch, channels, 8, 8] with a dynamic batch.
    """
    b = GraphBuilder(opset, seed=7)
    t = "x"
    for i in range(blocks):
        y = b.node("Relu", [b.bn(b.conv(t, channels, channels), channels)])
        y = b.conv(y, channels, channels, k=1)
        t = b.node("Add", [y, t])
        if i % 25 == 24:
            flat = b.flatten_computed(t)
            t = b.node("Reshape", [flat, b.const([-1, channels, 8, 8])])
    return b.model([_float_input("x", ["batch", channels, 8, 8])], [_float_input(t, ["batch", channels, 8, 8])],
                   name=f"chain{blocks}")


def random_dag_model(seed: int, n_layers: int = 14) -> onnx.ModelProto:
    """A random static DAG of same-shape layers with skip connections, for property tests.

    Mixes Conv->Relu chains (fusible), element-wise binaries reading older tensors (long edges),
    and makes every otherwise unused tensor a graph output, some consumed tensors too.
    """
    rng = np.random.default_rng(seed)
    b = GraphBuilder(13, seed=seed)
    tensors = ["x"]
    consumed: set[str] = set()
    for _ in range(n_layers):
        kind = rng.integers(0, 5)
        recent = tensors[-1] if rng.random() < 0.6 else tensors[int(rng.integers(0, len(tensors)))]
        if kind == 0:
            out = b.conv(recent, 2, 2, k=1)
        elif kind == 1:
            out = b.node(["Relu", "Sigmoid", "Tanh"][int(rng.integers(0, 3))], [recent])
        elif kind == 2 and len(tensors) > 1:
            other = tensors[int(rng.integers(0, len(tensors)))]
            out = b.node(["Add", "Mul", "Sub"][int(rng.integers(0, 3))], [recent, other])
            consumed.add(other)
        else:
            out = b.node("Relu", [b.conv(recent, 2, 2, k=3)])
            tensors.append(b.nodes[-2].output[0])
            consumed.add(recent)
            consumed.add(b.nodes[-2].output[0])
        consumed.add(recent)
        tensors.append(out)
    outputs = [t for t in tensors[1:] if t not in consumed]
    extra = [t for t in tensors[1:] if t in consumed and rng.random() < 0.15]
    return b.model([_float_input("x", [1, 2, 4, 4])],
                   [_float_input(t, [1, 2, 4, 4]) for t in outputs + extra], name=f"random_dag_{seed}")


def model_inputs(model: onnx.ModelProto, shapes: dict[str, list[int]], seed: int = 0) -> dict[str, np.ndarray]:
    """Random float32 feeds for a model at the given input shapes (for ONNX Runtime comparisons)."""
    rng = np.random.default_rng(seed)
    weights = {t.name for t in model.graph.initializer}
    return {vi.name: rng.standard_normal(shapes[vi.name]).astype(np.float32)
            for vi in model.graph.input if vi.name not in weights}


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of a model on ONNX Runtime's CPU provider, by output name."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))
