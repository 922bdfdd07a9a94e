"""The per-network numbers the cost model needs, extracted once from the layer table (``layers.parquet``).

The table is what ``dse.graph.analysis`` writes: one row per sanitized ONNX node with its MACs, bytes,
shapes and attributes. Everything here is per image (batch 1) and plain numpy, so each candidate
configuration costs O(stages) through prefix sums instead of touching ONNX again.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from dse.dla.features import table_features

# activations TensorRT fuses into the producing convolution (no launch, no extra memory pass)
FUSIBLE_ACTIVATIONS = frozenset({"Relu", "LeakyRelu", "Clip", "BatchNormalization", "Mish", "PRelu",
                                 "HardSigmoid", "Softplus", "Tanh", "Sigmoid", "Mul"})
# layers that cost nothing on the GPU (in-place views / concatenation by writing into the output buffer)
FREE_ON_GPU = frozenset({"Concat", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
CONV_OPS = frozenset({"Conv", "ConvTranspose"})
GEMM_OPS = frozenset({"Gemm", "MatMul"})


def _as_list(value) -> list:
    if value is None:
        return []
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return []
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return [value]
        return parsed if isinstance(parsed, list) else [parsed]
    if isinstance(value, dict):
        return [value]
    try:
        return list(value)
    except TypeError:
        return [value]


def _as_dict(value) -> dict:
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            out = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError:
            return {}
        return out if isinstance(out, dict) else {}
    return {}


def _shape_elems(shape) -> int:
    """Elements of one image's share of a tensor (the first dim is the batch)."""
    dims = [int(d) for d in _as_list(shape) if isinstance(d, (int, float)) or str(d).isdigit()]
    if not dims:
        return 0
    body = dims[1:] if len(dims) > 1 else dims
    return int(np.prod(body, dtype=np.int64))


@dataclass
class LayerTable:
    """Arrays over layers 0..N-1 (per image) plus the tensor graph the cost model needs."""

    names: list[str]
    op_types: list[str]
    macs: np.ndarray            # per image
    param_bytes: np.ndarray
    in_bytes: np.ndarray        # per image, fp32
    out_bytes: np.ndarray       # per image, fp32
    out_elems: np.ndarray       # per image
    kind: list[str]             # conv, conv_1x1, conv_grouped, conv_depthwise, gemm, eltwise, free, head
    fused: np.ndarray           # bool: folded into its producer on both PEs
    out_channels: np.ndarray    # channels of the first output (0 if unknown)
    crossing_bytes: np.ndarray  # [c]: fp32 bytes per image of tensors produced at <= c and read after c
    input_bytes: float          # network input per image, fp32
    boxes: int                  # candidate boxes per image of the detection heads (for post-processing)
    batch: int                  # batch the table was analysed at
    digest: str
    leaf: np.ndarray | None = None   # bool: no layer reads its outputs (e.g. a YOLO head feeding only outputs)
    features: list[dict] = field(default_factory=list)   # per layer, what the DLA rules check (dse.dla.features)
    inputs: list[list[str]] = field(default_factory=list)    # per layer, the tensors it reads / writes (when stored)
    outputs: list[list[str]] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.names)


def _detect_boxes(names: list[str], op_types: list[str], out_shapes: list[list]) -> int:
    """3 (or 5 for region) anchors per grid cell of every detection head; 0 if none is named yolo_/region_."""
    total = 0
    for name, op, shapes in zip(names, op_types, out_shapes):
        low = name.lower()
        if not (low.startswith("yolo") or low.startswith("region")):
            continue
        for shape in shapes:
            dims = [int(d) for d in _as_list(shape) if isinstance(d, (int, float))]
            if len(dims) >= 4:
                anchors = 5 if low.startswith("region") else 3
                total += anchors * dims[-1] * dims[-2]
                break
    return total


def frame_of(analysis):
    """The layer DataFrame of a NetworkAnalysis (it carries the tensor names: exact fusion and cut bytes)."""
    return analysis.to_frame()


def layer_table(frame, digest: str | None = None) -> LayerTable:
    """Build the arrays from a layer DataFrame (``NetworkAnalysis.to_frame()`` / ``layers.parquet``).

    With ``inputs``/``outputs`` columns (tensor names) fusion and the bytes crossing every cut are exact;
    without them, an activation right after a convolution fuses and a cut carries its layer's output.
    """
    df = frame.sort_values("index") if "index" in frame.columns else frame
    n = len(df)
    names = [str(x) for x in df["name"]]
    ops = [str(x) for x in df["op_type"]]
    inputs = [[str(t) for t in _as_list(v)] for v in df["inputs"]] if "inputs" in df else [[] for _ in range(n)]
    outputs = [[str(t) for t in _as_list(v)] for v in df["outputs"]] if "outputs" in df else [[] for _ in range(n)]
    out_shapes = [_as_list(v) for v in df["output_shapes"]] if "output_shapes" in df else [[] for _ in range(n)]
    if out_shapes and out_shapes[0] and not isinstance(out_shapes[0][0], list):
        out_shapes = [[s] if s and not isinstance(s[0], list) else s for s in out_shapes]
    attrs = [_as_dict(v) for v in df["attrs"]] if "attrs" in df else [{} for _ in range(n)]

    batch = 1
    for shapes in out_shapes:
        if shapes and shapes[0] and isinstance(shapes[0][0], (int, float)) and int(shapes[0][0]) > 0:
            batch = int(shapes[0][0])
            break

    def col(name: str) -> np.ndarray:
        if name not in df:
            return np.zeros(n)
        return np.nan_to_num(np.asarray(df[name], dtype=float))

    macs = col("macs") / batch
    param_bytes = col("param_bytes")
    out_elems = np.array([sum(_shape_elems(s) for s in shapes) for shapes in out_shapes], dtype=float)
    out_bytes = col("activation_bytes") / batch
    if not out_bytes.any():
        out_bytes = out_elems * 4.0
    in_bytes = col("input_bytes") / batch

    producer: dict[str, int] = {}
    for i, outs in enumerate(outputs):
        for t in outs:
            producer[t] = i
    consumers: dict[str, list[int]] = {}
    for i, ins in enumerate(inputs):
        for t in ins:
            consumers.setdefault(t, []).append(i)
    tensor_bytes: dict[str, float] = {}
    for i, outs in enumerate(outputs):
        per = out_bytes[i] / max(len(outs), 1)
        for k, t in enumerate(outs):
            shp = out_shapes[i][k] if k < len(out_shapes[i]) else None
            e = _shape_elems(shp) if shp is not None else 0
            tensor_bytes[t] = e * 4.0 if e else per

    kind: list[str] = []
    out_channels = np.array([float(shapes[0][1]) if shapes and len(shapes[0]) >= 2 else 0.0
                             for shapes in out_shapes])
    for i in range(n):
        op, a, low = ops[i], attrs[i], names[i].lower()
        ks = [int(k) for k in _as_list(a.get("kernel_shape"))] or [0]
        if low.startswith("yolo") or low.startswith("region"):
            kind.append("head")
        elif op in CONV_OPS:
            group = int(a.get("group", 1) or 1)
            out_c = 0
            if out_shapes[i] and len(out_shapes[i][0]) >= 2:
                out_c = int(out_shapes[i][0][1])
            if group > 1 and out_c and group >= out_c:
                kind.append("conv_depthwise")
            elif group > 1:
                kind.append("conv_grouped")
            elif max(ks) <= 1:
                kind.append("conv_1x1")
            else:
                kind.append("conv")
        elif op in GEMM_OPS:
            kind.append("gemm")
        elif op in FREE_ON_GPU:
            kind.append("free")
        else:
            kind.append("eltwise")

    has_graph = bool(producer) and any(inputs)
    fused = np.zeros(n, dtype=bool)
    for i in range(n):
        if ops[i] not in FUSIBLE_ACTIVATIONS or kind[i] == "head":
            continue
        if not has_graph:  # no tensor names stored: an activation right after its convolution fuses
            p = i - 1
            if p >= 0 and (ops[p] in CONV_OPS or fused[p]) and out_shapes[p] == out_shapes[i]:
                fused[i] = True
            continue
        srcs = [producer[t] for t in inputs[i] if t in producer]
        if len(srcs) != 1:
            continue
        p = srcs[0]
        chain_ok = ops[p] in CONV_OPS or (fused[p] and ops[p] in FUSIBLE_ACTIVATIONS)
        single = all(len(consumers.get(t, [])) == 1 for t in outputs[p])
        if chain_ok and single and p == i - 1:
            fused[i] = True

    # bytes crossing each cut position: tensor produced at p, last read at q > p crosses cuts p..q-1;
    # network outputs (read by post-processing) are read "after the last layer".
    diff = np.zeros(n + 1)
    for t, p in producer.items():
        readers = consumers.get(t, [])
        q = max(readers) if readers else n
        if not readers or q <= p:
            q = n if not readers else q
        if q > p:
            diff[p] += tensor_bytes.get(t, 0.0)
            diff[q] -= tensor_bytes.get(t, 0.0)
    crossing = np.cumsum(diff)[:n] if has_graph else out_bytes.copy()
    first_reads = [t for ins in inputs for t in ins if t not in producer]
    input_bytes = 0.0
    if "input_bytes" in df and n:
        input_bytes = float(in_bytes[0])
    if not input_bytes and first_reads:
        input_bytes = float(out_elems[0] * 4.0)

    if digest is None:
        h = hashlib.sha256()
        h.update(json.dumps([names, ops, macs.tolist()]).encode())
        digest = h.hexdigest()[:16]
    return LayerTable(names=names, op_types=ops, macs=macs, param_bytes=param_bytes, in_bytes=in_bytes,
                      out_bytes=out_bytes, out_elems=out_elems, kind=kind, fused=fused, out_channels=out_channels,
                      crossing_bytes=crossing, input_bytes=input_bytes,
                      boxes=_detect_boxes(names, ops, out_shapes), batch=batch, digest=digest,
                      leaf=np.array([bool(outs) and not any(consumers.get(t) for t in outs) for outs in outputs],
                                    dtype=bool),
                      features=table_features(ops, attrs, inputs, out_shapes, outputs, param_bytes), inputs=inputs, outputs=outputs)
