"""Layers of a sanitized ONNX model and where it may be cut into pipeline stages.

Feasibility (DESIGN.md "feasible tuple"): with cuts (c1 < c2 < ...), ci the last layer of stage i,
every tensor produced in stage k is consumed only in stage k or k+1. Network inputs may be read by
any stage and network outputs may leave any stage. A subgraph (If/Loop/Scan) reading an outer tensor
counts as its node consuming it. A single position c is infeasible when it
- splits a fusible chain: Conv/ConvTranspose/Gemm/BatchNormalization whose only consumer is a
  BatchNormalization or an activation (TensorRT fuses them into one kernel; chains link, e.g.
  Conv -> BatchNormalization -> Relu); every position from the chain's first to last-but-one layer
  is blocked, so the rule holds even when the topological order puts other layers in between;
- is crossed by a shape-computation value (produced by Shape/Size or computed only from such values
  and constants): stages exchange activations, not graph metadata;
- is crossed by a tensor that is not a plain activation: only floating-point tensors (FLOAT,
  FLOAT16, BFLOAT16, DOUBLE) of rank >= 1 may cross (integer indices, bool conditions, 0-d scalars
  and quantized int8 tensors between QuantizeLinear/DequantizeLinear may not).
"""
from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable

import onnx

from dse.core.errors import DseError
from dse.graph import cuts as cutmath
from dse.graph.cost import layer_macs, small_attrs
from dse.graph.model import load_model
from dse.graph.tensors import FLOAT_TYPES, dtype_name, dtype_size, node_reads, static_shape, subgraphs
from dse.graph.weights import content_id, has_weights, structure_digest, weights_of

FUSION_HEADS = frozenset({"Conv", "ConvTranspose", "Gemm", "BatchNormalization"})
ACTIVATIONS = frozenset({
    "Relu", "LeakyRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "PRelu", "Elu", "Selu",
    "Softplus", "Softsign", "Mish", "Celu", "ThresholdedRelu", "Gelu",
})
FUSION_TAILS = ACTIVATIONS | {"BatchNormalization"}
SHAPE_SOURCES = frozenset({"Shape", "Size"})


@dataclass(frozen=True)
class Layer:
    """One node of the sanitized graph, with its static shapes and cost."""
    index: int
    name: str
    op_type: str
    inputs: tuple[str, ...]  # activation tensors read (explicit inputs, then names its subgraphs read)
    outputs: tuple[str, ...]
    output_shapes: tuple[tuple[int, ...], ...]
    macs: int
    param_bytes: int  # initializer bytes read (weights, bias, its subgraphs' own; a shared one counts per reader)
    activation_bytes: int  # bytes of its outputs
    input_bytes: int  # bytes of its activation inputs
    attrs: dict


@dataclass(frozen=True)
class _Tensor:
    name: str
    producer: int
    consumers: tuple[int, ...]  # sorted layer indices
    elem_type: int
    shape: tuple[int, ...] | None
    shape_value: bool

    @property
    def last(self) -> int:
        return self.consumers[-1] if self.consumers else self.producer

    @property
    def plain(self) -> bool:
        return self.elem_type in FLOAT_TYPES and self.shape is not None and len(self.shape) >= 1


class NetworkAnalysis:
    """Layers, costs and cut feasibility of one sanitized model (build it with `analyze`).

    ``model`` may be weight-free (``dse.graph.weights``): all of the analysis reads shapes only. A backend that
    runs the network asks ``weighted_model()``, which calls ``materialize(digest, weights_id)`` for a
    weight-free model and checks that what it returns is this network.
    """

    def __init__(self, model: onnx.ModelProto,
                 materialize: Callable[[str, str | None], onnx.ModelProto] | None = None):
        self.model = model
        self._materialize = materialize
        self._weighted: onnx.ModelProto | None = None
        graph = model.graph
        self._weights = {t.name: t for t in graph.initializer}
        infos = {vi.name: vi for vi in list(graph.value_info) + list(graph.input) + list(graph.output)}
        self.inputs = {vi.name: list(static_shape(vi) or []) for vi in graph.input if vi.name not in self._weights}
        self.outputs = {vi.name: list(static_shape(infos.get(vi.name, vi)) or []) for vi in graph.output}
        self._output_names = set(self.outputs)
        self.layers = self._build_layers(graph, infos)
        self._tensors = self._build_tensors(graph, infos)
        self._ordered = sorted(self._tensors.values(),
                               key=lambda t: (t.producer, self.layers[t.producer].outputs.index(t.name)))
        n = len(self.layers)
        self._positions = max(n - 1, 0)
        self.fused_chains = self._fusion_chains(graph)       # (head, tail, ...): never split, one task each
        self._fused_chain_at = {}                             # position -> the fused chain a cut there would split
        for chain in self.fused_chains:
            for c in range(chain[0], chain[-1]):
                self._fused_chain_at.setdefault(c, chain)
        self._blocked = self._block_positions()
        self.feasible_cuts = [c for c in range(self._positions) if self._blocked[c] is None]
        self._feasible_mask = [b is None for b in self._blocked]
        self._reach = self._compute_reach()

    @cached_property
    def digest(self) -> str:
        """sha256 of the sanitized model's weight-free form: the identity of what is cut and costed, whatever the
        weights (``dse.graph.weights.structure_digest``; computed on first use)."""
        return structure_digest(self.model)

    @cached_property
    def weights_id(self) -> str | None:
        """What the weights are (``random(seed=S)``, ``sha256:...``), None when nothing says: part of what a
        measurement that runs the model depends on."""
        recorded = weights_of(self.model)
        if recorded is not None or not has_weights(self.model):
            return recorded
        return content_id(self.model)

    def weighted_model(self) -> onnx.ModelProto:
        """The sanitized model with its weights (what ONNX Runtime and TensorRT run), made once per analysis."""
        if self._weighted is None:
            if has_weights(self.model):
                self._weighted = self.model
            elif self._materialize is None:
                raise DseError(f"model {self.model.graph.name!r} is weight-free (its weights are declared, not "
                               "stored) and nothing says where its weights come from: analyse the model file "
                               "that has them")
            else:
                model = self._materialize(self.digest, self.weights_id)
                if structure_digest(model) != self.digest:
                    raise DseError(f"the weights of model {self.model.graph.name!r} came with another graph "
                                   f"(digest {structure_digest(model)[:16]}, analysed {self.digest[:16]}): its "
                                   "source changed since it was analysed; analyse it again")
                self._weighted = model
        return self._weighted

    # -- construction -------------------------------------------------------------------------------------
    def _shape_of(self, name: str, infos) -> tuple[int, ...] | None:
        if name in self._weights:
            return tuple(int(d) for d in self._weights[name].dims)
        vi = infos.get(name)
        return static_shape(vi) if vi is not None else None

    def _bytes_of(self, name: str, infos) -> int:
        if name in self._weights:
            t = self._weights[name]
            return _numel(t.dims) * dtype_size(t.data_type)
        vi = infos.get(name)
        if vi is None:
            return 0
        shape = static_shape(vi)
        return _numel(shape) * dtype_size(vi.type.tensor_type.elem_type) if shape is not None else 0

    def _build_layers(self, graph: onnx.GraphProto, infos) -> list[Layer]:
        layers = []
        for index, node in enumerate(graph.node):
            reads = node_reads(node)
            activations = tuple(r for r in reads if r not in self._weights)
            params = [r for r in reads if r in self._weights]
            outputs = tuple(o for o in node.output if o)
            out_shapes = tuple(self._shape_of(o, infos) or () for o in outputs)
            in_shapes = [self._shape_of(i, infos) if i else None for i in node.input]
            attrs = small_attrs(node)
            if node.op_type in ("Conv", "ConvTranspose") and "kernel_shape" not in attrs and len(in_shapes) > 1 \
                    and in_shapes[1] is not None:
                attrs["kernel_shape"] = list(in_shapes[1][2:])
            layers.append(Layer(
                index=index, name=node.name, op_type=node.op_type, inputs=activations, outputs=outputs,
                output_shapes=out_shapes,
                macs=int(layer_macs(node.op_type, attrs, in_shapes, list(out_shapes))),
                param_bytes=sum(self._bytes_of(p, infos) for p in params)
                + sum(_initializer_bytes(sub) for sub in subgraphs(node)),
                activation_bytes=sum(self._bytes_of(o, infos) for o in outputs),
                input_bytes=sum(self._bytes_of(a, infos) for a in activations),
                attrs=attrs))
        return layers

    def _build_tensors(self, graph: onnx.GraphProto, infos) -> dict[str, _Tensor]:
        consumers: dict[str, set[int]] = {}
        for layer in self.layers:
            for name in layer.inputs:
                consumers.setdefault(name, set()).add(layer.index)
        tensors: dict[str, _Tensor] = {}
        for layer in self.layers:
            derived = [tensors[i].shape_value for i in layer.inputs if i in tensors]
            from_inputs = any(i not in tensors for i in layer.inputs)  # reads a network input
            shape_value = layer.op_type in SHAPE_SOURCES or (bool(derived) and all(derived) and not from_inputs)
            for name in layer.outputs:
                vi = infos.get(name)
                elem = vi.type.tensor_type.elem_type if vi is not None and vi.type.HasField("tensor_type") else 0
                tensors[name] = _Tensor(name, layer.index, tuple(sorted(consumers.get(name, ()))), elem,
                                        self._shape_of(name, infos), shape_value)
        return tensors

    def _fusion_chains(self, graph: onnx.GraphProto) -> list[tuple[int, ...]]:
        """The fusible chains (head, tail, tail...) as layer indices, by head."""
        nxt: dict[int, int] = {}
        for layer, node in zip(self.layers, graph.node):
            if layer.op_type not in FUSION_HEADS or len(layer.outputs) != 1:
                continue
            t = self._tensors[layer.outputs[0]]
            if t.name in self._output_names or len(t.consumers) != 1:
                continue
            q = t.consumers[0]
            tail = graph.node[q]
            if tail.op_type in FUSION_TAILS and tail.input and tail.input[0] == t.name \
                    and list(tail.input).count(t.name) == 1 and not any(True for _ in subgraphs(tail)):
                nxt[layer.index] = q
        targets = set(nxt.values())
        chains = []
        for head in sorted(nxt):
            if head in targets:
                continue
            chain = [head]
            while chain[-1] in nxt:
                chain.append(nxt[chain[-1]])
            chains.append(tuple(chain))
        return chains

    def _block_positions(self) -> list[tuple | None]:
        blocked: list[tuple | None] = [None] * self._positions
        for c, chain in self._fused_chain_at.items():
            blocked[c] = ("fused", chain)
        for t in self._tensors.values():
            if t.last <= t.producer or (t.plain and not t.shape_value):
                continue
            kind = "shape" if t.shape_value else "plain"
            for c in range(t.producer, t.last):
                if blocked[c] is None:
                    blocked[c] = (kind, t.name)
        return blocked

    def _compute_reach(self) -> list[int]:
        """reach[c]: smallest position the cut after c allows next (see dse.graph.cuts)."""
        last_by_producer = [0] * max(len(self.layers), 1)
        for t in self._tensors.values():
            last_by_producer[t.producer] = max(last_by_producer[t.producer], t.last)
        reach, running = [], -1
        for c in range(self._positions):
            running = max(running, last_by_producer[c])
            reach.append(max(c + 1, running))
        return reach

    # -- feasibility ----------------------------------------------------------------------------------------
    def _layer_text(self, i: int) -> str:
        layer = self.layers[i]
        return f"layer {i} {layer.op_type} '{layer.name}'"

    def _nearest_text(self, c: int) -> str:
        lo, hi = self.nearest_feasible(c)
        return f"nearest feasible positions: {'none' if lo is None else lo}, {'none' if hi is None else hi}"

    def position_reason(self, c: int) -> str | None:
        """Why a single cut after layer c is infeasible, or None when it is feasible."""
        (c,) = cutmath.validate_cuts((c,), len(self.layers))
        block = self._blocked[c]
        if block is None:
            return None
        kind, what = block
        if kind == "fused":
            chain = " -> ".join(f"{self.layers[i].op_type} '{self.layers[i].name}'" for i in what)
            return f"cut after layer {c} splits the fused chain {chain}; {self._nearest_text(c)}"
        t = self._tensors[what]
        consumer = next(i for i in t.consumers if i > c)
        where = f"produced by {self._layer_text(t.producer)}, consumed by {self._layer_text(consumer)}"
        if kind == "shape":
            return (f"cut after layer {c} crosses shape-computation tensor '{t.name}' ({where}); "
                    f"{self._nearest_text(c)}")
        shape = list(t.shape) if t.shape is not None else "unknown shape"
        return (f"cut after layer {c} crosses tensor '{t.name}' ({dtype_name(t.elem_type)} {shape}, {where}) "
                f"which is not a plain activation: only floating-point tensors of rank >= 1 may cross stages; "
                f"{self._nearest_text(c)}")

    def check_cuts(self, cuts) -> str | None:
        """None if the cut tuple is feasible, else the first reason, naming the tensor or layers.

        Malformed tuples (positions out of 0..N-2, not strictly increasing) raise DseError.
        """
        cuts = cutmath.validate_cuts(cuts, len(self.layers))
        for c in cuts:
            reason = self.position_reason(c)
            if reason is not None:
                return reason
        for j, (c, nxt) in enumerate(zip(cuts, cuts[1:])):
            if self._reach[c] <= nxt:
                continue
            stages = cutmath.stage_of(cuts, len(self.layers))
            for t in self._ordered:
                if t.producer <= c < t.last and t.last > nxt:
                    consumer = next(i for i in t.consumers if i > nxt)
                    s0, s1 = stages[t.producer], stages[consumer]
                    skipped = f"stage {s0 + 1}" if s1 - s0 == 2 else f"stages {s0 + 1}-{s1 - 1}"
                    return (f"tensor '{t.name}' produced in stage {s0} ({self._layer_text(t.producer)}) is "
                            f"consumed in stage {s1} ({self._layer_text(consumer)}): it would skip {skipped}")
        return None

    def is_feasible(self, cuts) -> bool:
        """``check_cuts(cuts) is None`` without composing the reason (the searches ask it of every pair of cuts):
        every position is feasible and each cut lets the next one through (``reach``)."""
        cuts = cutmath.validate_cuts(cuts, len(self.layers))
        return all(self._feasible_mask[c] for c in cuts) and all(self._reach[c] <= nxt
                                                                for c, nxt in zip(cuts, cuts[1:]))

    def count_tuples(self, k: int) -> int:
        """Number of feasible k-cut tuples, by dynamic programming over positions (no enumeration)."""
        return cutmath.count_tuples(self._feasible_mask, self._reach, k)

    def stage_of(self, cuts) -> list[int]:
        """Stage index of every layer under a (valid, not necessarily feasible) cut tuple."""
        return cutmath.stage_of(cutmath.validate_cuts(cuts, len(self.layers)), len(self.layers))

    def crossing_tensors(self, cuts) -> list[list[str]]:
        """Per boundary i: the tensors stage i hands to stage i+1, in producer order.

        For a feasible tuple these are the tensors produced in stage i and read in stage i+1. For an
        infeasible one, every tensor produced before the boundary and read after it is listed (it would
        need relaying). Network inputs are never listed: every stage reads them directly.
        """
        cuts = cutmath.validate_cuts(cuts, len(self.layers))
        return [[t.name for t in self._ordered if t.producer <= c < t.last] for c in cuts]

    def nearest_feasible(self, c: int) -> tuple[int | None, int | None]:
        """The nearest feasible single-cut positions strictly below and strictly above c (None if none)."""
        lo = bisect_left(self.feasible_cuts, c)
        hi = bisect_right(self.feasible_cuts, c)
        return (self.feasible_cuts[lo - 1] if lo > 0 else None,
                self.feasible_cuts[hi] if hi < len(self.feasible_cuts) else None)

    # -- reports --------------------------------------------------------------------------------------------
    def to_frame(self):
        """One row per layer (JSON text for the nested columns, so the frame writes to Parquet as is)."""
        import pandas as pd

        rows = [{
            "index": layer.index, "name": layer.name, "op_type": layer.op_type, "macs": layer.macs,
            "param_bytes": layer.param_bytes, "activation_bytes": layer.activation_bytes,
            "input_bytes": layer.input_bytes,
            "inputs": json.dumps(list(layer.inputs)), "outputs": json.dumps(list(layer.outputs)),
            "output_shapes": json.dumps([list(s) for s in layer.output_shapes]),
            "attrs": json.dumps(layer.attrs, sort_keys=True),
        } for layer in self.layers]
        columns = ["index", "name", "op_type", "macs", "param_bytes", "activation_bytes", "input_bytes",
                   "inputs", "outputs", "output_shapes", "attrs"]
        frame = pd.DataFrame(rows, columns=columns)
        return frame.astype({"index": "int64", "macs": "int64", "param_bytes": "int64",
                             "activation_bytes": "int64", "input_bytes": "int64"})

    @property
    def macs(self) -> int:
        return sum(layer.macs for layer in self.layers)

    @property
    def params_bytes(self) -> int:
        """Bytes of all initializers (each counted once, subgraph ones included)."""
        return _initializer_bytes(self.model.graph)

    def op_types(self) -> dict[str, int]:
        """Histogram of layer op types, most frequent first."""
        counts = Counter(layer.op_type for layer in self.layers)
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def summary(self) -> dict:
        """The JSON of `dse inspect --json`."""
        opsets = {(o.domain or "ai.onnx"): int(o.version) for o in self.model.opset_import}
        return {
            "name": self.model.graph.name,
            "producer": " ".join(p for p in (self.model.producer_name, self.model.producer_version) if p),
            "opset": opsets,
            "layers": len(self.layers),
            "inputs": self.inputs,
            "outputs": self.outputs,
            "macs": self.macs,
            "params_bytes": self.params_bytes,
            "activation_bytes": sum(layer.activation_bytes for layer in self.layers),
            "op_types": self.op_types(),
            "positions": self._positions,
            "feasible_cuts": list(self.feasible_cuts),
            "feasible_count": len(self.feasible_cuts),
            "tuples": {str(k): self.count_tuples(k) for k in (1, 2, 3)},
            "digest": self.digest,
            "weights": self.weights_id,
        }


def _numel(dims) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


def _initializer_bytes(graph: onnx.GraphProto) -> int:
    total = sum(_numel(t.dims) * dtype_size(t.data_type) for t in graph.initializer)
    for node in graph.node:
        for sub in subgraphs(node):
            total += _initializer_bytes(sub)
    return total


def analyze(source: str | Path | onnx.ModelProto, input_shapes: dict[str, list[int]] | None = None
            ) -> NetworkAnalysis:
    """Load, sanitize and analyse a model (see dse.graph.model.load_model for the sanitizing)."""
    return NetworkAnalysis(load_model(source, input_shapes))


__all__ = ["Layer", "NetworkAnalysis", "analyze", "ACTIVATIONS", "FUSION_HEADS", "FUSION_TAILS"]
