"""Darknet `.cfg` -> ONNX (opset 13, float32, static shapes), so users can bring their own Darknet network.

Layer i of the cfg (sections after [net], counted from 0 as Darknet does) becomes a few readable nodes:
`conv_i` (+ `relu_i`/`leaky_i`/...), `maxpool_i`, `route_i`, `shortcut_i`, `upsample_i`, `reorg_i`,
`connected_i`, `softmax_i`, and one Sigmoid `yolo_i`/`region_i` per detection head (a graph output; box
decoding is post-processing, not part of the graph). Batch norm is folded into the conv, so the ONNX node
count matches the layer counting of TensorRT-style tools (Conv+BN fused, activation separate).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from dse.core.errors import DseError, choices_error
from dse.zoo.cfgparse import Section, parse_cfg, read_cfg
from dse.zoo.weights import DarknetWeights, RandomWeights

OPSET = 13
IR_VERSION = 8  # what TensorRT 8.x parsers accept; opset 13 needs IR >= 7
SECTIONS = ("convolutional", "conv", "maxpool", "avgpool", "route", "shortcut", "upsample", "reorg",
            "yolo", "region", "connected", "softmax", "dropout")
ACTIVATIONS = ("linear", "relu", "leaky", "logistic", "mish", "swish", "relu6", "tanh")
# Options that change what a layer computes and that this converter does not implement: refuse, never guess.
UNSUPPORTED = {"dilation": "1", "antialiasing": "0", "maxpool_depth": "0", "stride_x": None, "stride_y": None,
               "binary": "0", "xnor": "0", "share_index": None, "weights_type": "none", "reverse": "0",
               "scale": "1", "flipped": "0", "deform": "0", "assisted_excitation": "0"}
INPUT_M2, INPUT_MEAN = 1.0 / 3.0, 0.5  # an image scaled to [0, 1]


def _moments(activation: str, m2: float, mean: float) -> tuple[float, float]:
    """(E[a^2], E[a]) of a = act(y) for a Gaussian y with E[y^2] = m2, E[y] = mean.

    Random weights are scaled with these estimates so every conv's pre-activation has E[y^2] ~ 1 and
    random networks stay O(1) however deep; ReLU's closed form stands in for its smooth cousins.
    """
    if activation == "linear":
        return m2, mean
    if activation in ("logistic", "tanh"):
        return (0.3, 0.5) if activation == "logistic" else (min(m2, 1.0) * 0.6, 0.0)
    sigma = math.sqrt(max(m2 - mean * mean, 1e-12))
    z = mean / sigma
    cdf, pdf = 0.5 * (1 + math.erf(z / math.sqrt(2))), math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    return m2 * cdf + mean * sigma * pdf, mean * cdf + sigma * pdf


@dataclass(frozen=True)
class Tensor:
    """A value in the graph: ONNX name, shape without the batch axis, estimated E[x^2] and E[x]."""

    name: str
    shape: tuple[int, ...]
    m2: float = 1.0
    mean: float = 0.0


class DeclaredWeights:
    """Weight source of a weight-free model (analysis, node counting, the virtual boards): every weight is
    declared by its shape and stored nowhere, so building costs no memory and no randomness."""

    def conv(self, shape, batch_normalize, std):
        return Declared(tuple(shape)), Declared(tuple(shape[:1]))

    connected = conv

    def finish(self) -> None:
        pass


@dataclass(frozen=True)
class Declared:
    """A float32 weight of this shape, declared but not stored."""
    shape: tuple[int, ...]


MAX_LAYER_WEIGHTS = 1 << 28     # 1 GiB of fp32 in one layer: VGG-19's largest (fc6) holds 102.8 M; ONNX stops at 2 GB


def _check_weights(sec: Section, count: int) -> None:
    """Refuse a layer before its weights are drawn: a typo in a filter count would allocate them."""
    if count > MAX_LAYER_WEIGHTS:
        raise DseError(f"{sec.where()}: {count:,} weights in one layer (at most {MAX_LAYER_WEIGHTS:,}); check its "
                       "filters, size and output")


class _Converter:
    def __init__(self, sections: list[Section], batch: int, width: int, height: int, source, opset: int):
        self.sections, self.batch, self.source, self.opset = sections, batch, source, opset
        channels = sections[0].get_int("channels", 3)
        self.input = Tensor("input", (channels, height, width), INPUT_M2, INPUT_MEAN)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[tuple[str, np.ndarray]] = []
        self.layers: list[Tensor] = []
        self.outputs: list[Tensor] = []

    # -- graph building helpers -------------------------------------------------------------------
    def node(self, op: str, name: str, inputs: list[str], shape, m2: float, mean: float = 0.0, **attrs) -> Tensor:
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return Tensor(name, tuple(int(d) for d in shape), m2, mean)

    def const(self, name: str, array) -> str:
        self.inits.append((name, array if isinstance(array, Declared) else np.asarray(array)))
        return name

    def activate(self, sec: Section, x: Tensor, activation: str) -> Tensor:
        if activation == "linear":
            return x
        i, (m2, mean) = sec.index, _moments(activation, x.m2, x.mean)
        if activation == "relu":
            return self.node("Relu", f"relu_{i}", [x.name], x.shape, m2, mean)
        if activation == "leaky":
            return self.node("LeakyRelu", f"leaky_{i}", [x.name], x.shape, m2, mean, alpha=0.1)
        if activation == "logistic":
            return self.node("Sigmoid", f"logistic_{i}", [x.name], x.shape, m2, mean)
        if activation == "tanh":
            return self.node("Tanh", f"tanh_{i}", [x.name], x.shape, m2, mean)
        if activation == "relu6":
            lo = self.const(f"relu6_{i}.min", np.float32(0))
            hi = self.const(f"relu6_{i}.max", np.float32(6))
            return self.node("Clip", f"relu6_{i}", [x.name, lo, hi], x.shape, m2, mean)
        if activation == "swish":
            gate = self.node("Sigmoid", f"swish_{i}_sigmoid", [x.name], x.shape, m2, mean)
            return self.node("Mul", f"swish_{i}", [x.name, gate.name], x.shape, m2, mean)
        # mish(x) = x * tanh(softplus(x)); opset 18 has a Mish op, older opsets need the three nodes
        if self.opset >= 18:
            return self.node("Mish", f"mish_{i}", [x.name], x.shape, m2, mean)
        soft = self.node("Softplus", f"mish_{i}_softplus", [x.name], x.shape, m2, mean)
        tanh = self.node("Tanh", f"mish_{i}_tanh", [soft.name], x.shape, m2, mean)
        return self.node("Mul", f"mish_{i}", [x.name, tanh.name], x.shape, m2, mean)

    def resolve(self, sec: Section, ref: int) -> Tensor:
        """Darknet layer reference: negative = relative to this layer, otherwise absolute."""
        target = sec.index + ref if ref < 0 else ref
        if not 0 <= target < sec.index:
            raise DseError(f"{sec.where()}: layer reference {ref} points to layer {target}; "
                           f"valid: earlier layers 0..{sec.index - 1} (or -1..-{sec.index})")
        return self.layers[target]

    def spatial(self, sec: Section, x: Tensor) -> tuple[int, int, int]:
        if len(x.shape) != 3:
            raise DseError(f"{sec.where()}: needs a CxHxW input but gets a flat vector of {x.shape[0]} "
                           "(a [connected] layer came before)")
        return x.shape

    # -- one method per section type -------------------------------------------------------------
    def convolutional(self, sec: Section, x: Tensor) -> Tensor:
        c, h, w = self.spatial(sec, x)
        filters, size = sec.get_int("filters"), sec.get_int("size", 1)  # Darknet has no default filter count
        stride, groups = sec.get_int("stride", 1), sec.get_int("groups", 1)
        padding = size // 2 if sec.get_int("pad", 0) else sec.get_int("padding", 0)
        activation = sec.get_choice("activation", "logistic", ACTIVATIONS)
        bn = bool(sec.get_int("batch_normalize", 0))
        if min(filters, size, stride, groups) < 1 or c % groups or filters % groups:
            raise DseError(f"{sec.where()}: filters={filters}, size={size}, stride={stride}, groups={groups} "
                           f"invalid for {c} input channels (groups must divide both channel counts)")
        oh, ow = (h + 2 * padding - size) // stride + 1, (w + 2 * padding - size) // stride + 1
        if oh < 1 or ow < 1:
            raise DseError(f"{sec.where()}: input {h}x{w} too small for kernel {size} (use a larger input size)")
        fan_in = c // groups * size * size
        _check_weights(sec, filters * fan_in)
        weight, bias = self.source.conv((filters, c // groups, size, size), bn, math.sqrt(1 / (fan_in * x.m2)))
        name = f"conv_{sec.index}"
        inputs = [x.name, self.const(f"{name}.weight", weight), self.const(f"{name}.bias", bias)]
        y = self.node("Conv", name, inputs, (filters, oh, ow), 1.0, kernel_shape=[size, size],
                      strides=[stride, stride], pads=[padding] * 4, group=groups)
        return self.activate(sec, y, activation)

    conv = convolutional

    def _pool_geometry(self, sec: Section, x: Tensor):
        c, h, w = self.spatial(sec, x)
        stride = sec.get_int("stride", 1)
        size = sec.get_int("size", stride)
        padding = sec.get_int("padding", size - 1)  # Darknet: size-1 in total, the odd pixel at right/bottom
        begin, end = padding // 2, padding - padding // 2
        oh, ow = (h + padding - size) // stride + 1, (w + padding - size) // stride + 1
        if oh < 1 or ow < 1 or min(size, stride) < 1:
            raise DseError(f"{sec.where()}: size={size}, stride={stride} invalid for a {h}x{w} input")
        attrs = dict(kernel_shape=[size, size], strides=[stride, stride], pads=[begin, begin, end, end])
        return (c, oh, ow), attrs

    def maxpool(self, sec: Section, x: Tensor) -> Tensor:
        shape, attrs = self._pool_geometry(sec, x)
        return self.node("MaxPool", f"maxpool_{sec.index}", [x.name], shape, x.m2, x.mean, **attrs)

    def avgpool(self, sec: Section, x: Tensor) -> Tensor:
        """Darknet's [avgpool] is global; with size= (AlexeyAB's local avgpool) it is a windowed average."""
        c = self.spatial(sec, x)[0]
        if "size" not in sec.options:
            return self.node("GlobalAveragePool", f"avgpool_{sec.index}", [x.name], (c, 1, 1), x.m2, x.mean)
        shape, attrs = self._pool_geometry(sec, x)
        return self.node("AveragePool", f"avgpool_{sec.index}", [x.name], shape, x.m2, x.mean, count_include_pad=0,
                         **attrs)

    def route(self, sec: Section, x: Tensor) -> Tensor:
        """Concat of earlier layers; with groups/group_id each input contributes one channel slice."""
        sources = [self.resolve(sec, ref) for ref in sec.get_ints("layers")]
        groups, group_id = sec.get_int("groups", 1), sec.get_int("group_id", 0)
        if not sources or groups < 1 or not 0 <= group_id < groups:
            raise DseError(f"{sec.where()}: needs layers= and 0 <= group_id < groups (got groups={groups}, "
                           f"group_id={group_id})")
        if len({s.shape[1:] for s in sources}) > 1:
            raise DseError(f"{sec.where()}: routed layers have different sizes {[s.shape for s in sources]}; "
                           "choose an input size that is a multiple of the network's total stride (e.g. 32)")
        name = f"route_{sec.index}"
        if groups > 1:
            sliced = []
            for k, s in enumerate(sources):
                if s.shape[0] % groups:
                    raise DseError(f"{sec.where()}: {s.shape[0]} channels do not split into {groups} groups")
                part = s.shape[0] // groups
                sname = name if len(sources) == 1 else f"{name}_slice{k}"
                starts = self.const(f"{sname}.starts", np.array([part * group_id], np.int64))
                ends = self.const(f"{sname}.ends", np.array([part * (group_id + 1)], np.int64))
                axes = self.const(f"{sname}.axes", np.array([1], np.int64))
                sliced.append(self.node("Slice", sname, [s.name, starts, ends, axes],
                                        (part,) + s.shape[1:], s.m2, s.mean))
            sources = sliced
        if len(sources) == 1:
            return sources[0]
        channels = sum(s.shape[0] for s in sources)
        m2 = sum(s.m2 * s.shape[0] for s in sources) / channels
        mean = sum(s.mean * s.shape[0] for s in sources) / channels
        return self.node("Concat", name, [s.name for s in sources], (channels,) + sources[0].shape[1:], m2, mean,
                         axis=1)

    def shortcut(self, sec: Section, x: Tensor) -> Tensor:
        activation = sec.get_choice("activation", "linear", ACTIVATIONS)
        y = x
        for k, ref in enumerate(sec.get_ints("from")):
            other = self.resolve(sec, ref)
            if other.shape != y.shape:
                raise DseError(f"{sec.where()}: cannot add layer shapes {other.shape} and {y.shape} "
                               "(Darknet's channel-mismatch shortcut is not supported)")
            name = f"shortcut_{sec.index}" + (f"_{k}" if k else "")
            m2 = y.m2 + other.m2 + 2 * y.mean * other.mean  # fluctuations independent, means add up
            y = self.node("Add", name, [y.name, other.name], y.shape, m2, y.mean + other.mean)
        return self.activate(sec, y, activation)

    def upsample(self, sec: Section, x: Tensor) -> Tensor:
        c, h, w = self.spatial(sec, x)
        stride = sec.get_int("stride", 2)
        if stride < 1:
            raise DseError(f"{sec.where()}: stride={stride} must be >= 1 (downsampling upsample is not supported)")
        scales = self.const(f"upsample_{sec.index}.scales", np.array([1, 1, stride, stride], np.float32))
        return self.node("Resize", f"upsample_{sec.index}", [x.name, "", scales], (c, h * stride, w * stride),
                         x.m2, x.mean, mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")

    def reorg(self, sec: Section, x: Tensor) -> Tensor:
        """SpaceToDepth stand-in for Darknet's reorg.

        Darknet's reorg orders the output channels differently from ONNX SpaceToDepth, so trained
        weights downstream would see permuted channels; shapes, data volume and cost are identical,
        which is what the design-space exploration needs. Convert a trained YOLOv2 elsewhere.
        """
        c, h, w = self.spatial(sec, x)
        stride = sec.get_int("stride", 2)
        if stride < 1 or h % stride or w % stride:
            raise DseError(f"{sec.where()}: stride={stride} must divide the {h}x{w} input")
        return self.node("SpaceToDepth", f"reorg_{sec.index}", [x.name], (c * stride * stride, h // stride,
                         w // stride), x.m2, x.mean, blocksize=stride)

    def yolo(self, sec: Section, x: Tensor) -> Tensor:
        y = self.node("Sigmoid", f"{sec.type}_{sec.index}", [x.name], x.shape, 0.3, 0.5)
        self.outputs.append(y)
        return y

    region = yolo

    def _flatten(self, sec: Section, x: Tensor) -> Tensor:
        if len(x.shape) == 1:
            return x
        return self.node("Flatten", f"flatten_{sec.index}", [x.name], (int(np.prod(x.shape)),), x.m2, x.mean, axis=1)

    def connected(self, sec: Section, x: Tensor) -> Tensor:
        flat = self._flatten(sec, x)
        n_out, n_in = sec.get_int("output", 1), flat.shape[0]
        activation = sec.get_choice("activation", "logistic", ACTIVATIONS)
        bn = bool(sec.get_int("batch_normalize", 0))
        _check_weights(sec, n_out * n_in)
        weight, bias = self.source.connected((n_out, n_in), bn, math.sqrt(1 / (n_in * flat.m2)))
        name = f"connected_{sec.index}"
        inputs = [flat.name, self.const(f"{name}.weight", weight), self.const(f"{name}.bias", bias)]
        y = self.node("Gemm", name, inputs, (n_out,), 1.0, transB=1)
        return self.activate(sec, y, activation)

    def softmax(self, sec: Section, x: Tensor) -> Tensor:
        if sec.get_int("groups", 1) != 1:
            raise DseError(f"{sec.where()}: grouped softmax (groups={sec.options['groups']}) is not supported")
        flat = self._flatten(sec, x)
        return self.node("Softmax", f"softmax_{sec.index}", [flat.name], flat.shape, 1.0 / flat.shape[0], axis=1)

    def dropout(self, sec: Section, x: Tensor) -> Tensor:
        return x  # inference: identity, no node

    # -- driver -------------------------------------------------------------------------------------
    @staticmethod
    def refuse_unsupported(sec: Section) -> None:
        for key, default in UNSUPPORTED.items():
            value = sec.options.get(key)
            if value is None or (default is not None and _same(value, default)):
                continue
            allowed = f"only {key}={default} or leaving it out" if default else "leave it out"
            raise DseError(f"{sec.where()}: option {key}={value} is not supported by the converter ({allowed})")

    def run(self) -> None:
        x = self.input
        for sec in self.sections[1:]:
            if sec.type not in SECTIONS:
                raise DseError(f"{sec.where()}: {choices_error('section', sec.type, SECTIONS)}")
            self.refuse_unsupported(sec)
            x = getattr(self, sec.type)(sec, x)
            self.layers.append(x)
        if not self.layers:
            raise DseError(f"{self.sections[0].source}: the cfg has no layers after [net]")
        self.source.finish()
        if not self.outputs:
            self.outputs.append(self.layers[-1])

    def model(self, doc: str, metadata: dict[str, str]) -> onnx.ModelProto:
        def info(t: Tensor):
            return helper.make_tensor_value_info(t.name, TensorProto.FLOAT, [self.batch, *t.shape])
        inits = [TensorProto(name=name, data_type=TensorProto.FLOAT, dims=a.shape) if isinstance(a, Declared)
                 else numpy_helper.from_array(np.ascontiguousarray(a), name) for name, a in self.inits]
        graph = helper.make_graph(self.nodes, doc, [info(self.input)], [info(t) for t in self.outputs], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="dse.zoo", ir_version=IR_VERSION)
        helper.set_model_props(model, metadata)
        return model


def _same(value: str, default: str) -> bool:
    try:
        return float(value) == float(default)
    except ValueError:
        return value.strip().lower() == default


def _load(cfg: str | Path | list[Section]) -> list[Section]:
    if isinstance(cfg, list):
        return cfg
    if isinstance(cfg, Path) or "[" not in cfg:
        return read_cfg(cfg)
    return parse_cfg(cfg)


def _converter(sections, input_size, batch, source, opset) -> _Converter:
    net = sections[0]
    if isinstance(input_size, int):
        input_size = (input_size, input_size)
    width, height = input_size if input_size else (net.get_int("width", 416), net.get_int("height", 416))
    batch = batch if batch is not None else net.get_int("batch", 1)
    if min(width, height, batch) < 1:
        raise DseError(f"input size {width}x{height} and batch {batch} must be positive")
    if opset < OPSET:
        raise DseError(f"opset {opset} is too old; valid: {OPSET} or newer")
    conv = _Converter(sections, batch, width, height, source, opset)
    conv.run()
    return conv


def convert(cfg: str | Path | list[Section], input_size: int | tuple[int, int] | None = None,
            batch: int | None = None, seed: int = 0, weights: str | Path | None = None,
            opset: int = OPSET, weight_free: bool = False) -> onnx.ModelProto:
    """Convert a Darknet cfg (path, text or parsed sections) to ONNX.

    input_size overrides [net] width/height (an int, or (width, height)); batch overrides [net] batch.
    Parameters come from `weights` (a Darknet .weights file) or, without it, seeded random numbers
    scaled so every conv's pre-activation has unit second moment (same seed -> identical bytes).
    weight_free=True declares the parameters without storing them (``dse.graph.weights``); ``weights`` is then
    not read.
    """
    sections = _load(cfg)
    source = DeclaredWeights() if weight_free else DarknetWeights(weights) if weights else RandomWeights(seed)
    conv = _converter(sections, input_size, batch, source, opset)
    _, height, width = conv.input.shape
    meta = {"source": sections[0].source, "input_size": f"{width}x{height}", "batch": str(conv.batch)}
    if not weight_free:
        meta["weights"] = Path(weights).name if weights else f"random(seed={seed})"
    return conv.model(Path(sections[0].source).stem, meta)


def count_nodes(cfg: str | Path | list[Section], input_size: int | tuple[int, int] | None = None) -> int:
    """ONNX node count (the thesis' 'number of layers') without materializing any weights."""
    return len(_converter(_load(cfg), input_size, 1, DeclaredWeights(), OPSET).nodes)
