"""Load an ONNX model and sanitize it into the static, folded, ordered graph that layers are counted on.

Exporters (PyTorch, PaddlePaddle, tf2onnx) leave dynamic axes, Constant/Identity nodes and shape
arithmetic (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) in the graph. TensorRT folds all of that
away, so the layers we cut must be the ones that remain after the same folding at fixed input shapes.
"""
from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from dse.core.validate import MAX_MODEL_BYTES, regular_file
from dse.core.errors import DseError
from dse.graph.tensors import dtype_name, format_shape, node_reads, rename_reads, static_shape

# What every backend can run (the virtual boards, ONNX Runtime on this host, TensorRT through the board agent):
# check_model refuses anything else when a model is loaded, whichever path loads it.
MIN_IR_VERSION = 3                            # ONNX 1.0's IR version, the oldest released one
MAX_IR_VERSION = onnx.IR_VERSION              # the newest this onnx writes (onnx 1.23: 14, as onnxruntime 1.32 reads)
MIN_OPSET = 7                                 # the oldest ai.onnx opset onnxruntime guarantees
MAX_OPSET = onnx.defs.onnx_opset_version()    # the newest this onnx knows (onnx 1.23: 28, as onnxruntime 1.32)
MAX_DIM = 2**16                               # per input dimension: far past any image side, batch or channel count
MAX_INPUT_ELEMENTS = 2**30                    # per input: 4 GiB of float32, allocated per frame by a real run
_MAX_FOLD_PASSES = 6
_NO_OP = ("Identity", "Dropout")
_LIGHT_ELEMENTS = 4096


def parse_input_shapes(specs: list[str] | None) -> dict[str, list[int]]:
    """Turn ["input:1x3x416x416", ...] (the --input-shape flag) into {"input": [1, 3, 416, 416]}."""
    shapes: dict[str, list[int]] = {}
    for spec in specs or []:
        name, sep, dims = str(spec).strip().rpartition(":")
        example = "e.g. input:1x3x416x416"
        if not sep or not name or not dims:
            raise DseError(f"bad input shape {spec!r}: expected NAME:DIMS, {example}")
        parts = dims.lower().replace(",", "x").split("x")
        try:
            values = [int(p) for p in parts]
        except ValueError:
            raise DseError(f"bad input shape {spec!r}: dimensions must be positive integers separated by 'x', "
                           f"{example}") from None
        if any(v <= 0 for v in values):
            raise DseError(f"bad input shape {spec!r}: dimensions must be positive integers, {example}")
        if name in shapes:
            raise DseError(f"input shape for {name!r} given twice ({spec!r})")
        shapes[name] = values
    return shapes


def load_model(source: str | Path | onnx.ModelProto | bytes,
               input_shapes: dict[str, list[int]] | None = None) -> onnx.ModelProto:
    """Read an ONNX model, refuse it unless every backend can run it (``check_model``), and return its sanitized
    copy (the input is never modified).

    Sanitized means: weights listed as inputs dropped from the inputs (IR version < 4 raised to 4), local
    functions inlined, every input at a static shape, shapes inferred, constants and shape subgraphs folded,
    Identity/Dropout removed, Constant nodes turned into initializers, unused initializers dropped, nodes in a
    deterministic topological order with unique names, and every tensor with a static shape (otherwise a DseError
    names the ones without).
    """
    model, label = read_model(source)
    if input_shapes:
        check_model(model, label, input_shapes)   # read_model checked the shapes the model declares
    if model.functions:
        import onnx.inliner
        model = onnx.inliner.inline_local_functions(model)
    _drop_initializer_inputs(model)
    _fix_input_shapes(model.graph, dict(input_shapes or {}), label)
    model = _fold(model, label)
    _remove_no_ops(model.graph)
    _constants_to_initializers(model.graph)
    _remove_unused_initializers(model.graph)
    _toposort(model.graph, label)
    _name_nodes(model.graph)
    model = _infer(model, label)
    _check_static(model.graph, label)
    return model


def read_model(source) -> tuple[onnx.ModelProto, str]:
    """(a copy of the ONNX model, a label for messages) from a ModelProto, bytes or a path; anything that is not
    a readable ONNX model (a text file, a truncated file, a directory) is a DseError naming the file, and so is a
    model no backend can run (``check_model``, before its external weights are read)."""
    folder = None   # of a file: where its external data lies
    if isinstance(source, onnx.ModelProto):
        model = onnx.ModelProto()
        model.CopyFrom(source)
        label = f"model {source.graph.name or '(unnamed)'!r}"
    elif isinstance(source, (bytes, bytearray)):
        try:
            model, label = onnx.load_from_string(bytes(source)), "model bytes"
        except Exception as exc:  # protobuf raises DecodeError; keep the reason
            raise DseError(f"model bytes is not an ONNX model: {exc}") from None
    else:
        path = Path(source)
        label, folder = str(path), path.parent
        if not path.exists():
            raise DseError(f"model file {label!r} not found")
        if path.is_dir():
            raise DseError(f"{label} is not an ONNX model: it is a directory")
        regular_file(path, "model file", MAX_MODEL_BYTES)
        try:
            model = onnx.load(str(path), load_external_data=False)
        except Exception as exc:
            raise DseError(f"{label} is not an ONNX model: {exc}") from None
    _check_is_onnx(model, label)
    check_model(model, label)
    if folder is not None:
        try:
            onnx.external_data_helper.load_external_data_for_model(model, str(folder))
        except Exception as exc:
            raise DseError(f"{label}: cannot load its external data (weights file next to the model): {exc}") \
                from None
    return model, label


def _check_is_onnx(model: onnx.ModelProto, label: str) -> None:
    """Protobuf parses many byte strings as an (empty) ModelProto: demand what every real model has."""
    problems = []
    if model.ir_version <= 0:
        problems.append("no IR version")
    if not model.opset_import:
        problems.append("no opset import")
    if not model.graph.node:
        problems.append("no graph nodes")
    if not model.graph.output:
        problems.append("no graph outputs")
    if problems:
        raise DseError(f"{label} is not an ONNX model: {', '.join(problems)}")


def check_model(model: onnx.ModelProto, label: str,
                input_shapes: Mapping[str, Sequence[int]] | None = None) -> None:
    """Refuse a model that no backend can run, before anything reads its graph: one DseError line naming the bad
    value and what is valid. Valid means: IR version MIN_IR_VERSION..MAX_IR_VERSION and ai.onnx opset
    MIN_OPSET..MAX_OPSET (what onnx and onnxruntime read), every tensor written once, and exactly one input (weights
    listed as inputs aside): a float32 tensor of rank 4 (the NCHW image every application feeds), each dimension
    1..MAX_DIM and at most MAX_INPUT_ELEMENTS in all, at ``input_shapes`` where they are given. ``read_model``, the
    one reader of every path (``load_model``: analysis, the sim, ort and trt backends' weighted model, inspect,
    partition; ``dse.network.build_model``), calls it on every model it returns; ``load_model`` again at the given
    input shapes."""
    if not MIN_IR_VERSION <= model.ir_version <= MAX_IR_VERSION:
        raise DseError(f"{label}: IR version {model.ir_version} is not supported; supported IR versions: "
                       f"{MIN_IR_VERSION}..{MAX_IR_VERSION}")
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx") and not MIN_OPSET <= opset.version <= MAX_OPSET:
            raise DseError(f"{label}: opset {opset.version} (ai.onnx) is not supported; supported opsets: "
                           f"{MIN_OPSET}..{MAX_OPSET} (onnx.version_converter.convert_version converts a model)")
    graph = model.graph
    weights = {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}
    sources = weights | {vi.name for vi in graph.input}
    writers: dict[str, str] = {}
    for index, node in enumerate(graph.node):
        writer = f"{node.op_type} {node.name or f'#{index}'!r}"
        for name in node.output:
            if not name:
                continue
            if name in writers or name in sources:
                first = writers.get(name, "a graph input" if name not in weights else "an initializer")
                raise DseError(f"{label}: tensor {name!r} is written twice, by {first} and by {writer}; every "
                               f"tensor must have one writer (rename one of them)")
            writers[name] = writer
    inputs = [vi for vi in graph.input if vi.name not in weights]
    if len(inputs) != 1:
        listed = f" ({_describe_inputs(inputs)})" if inputs else ""
        raise DseError(f"{label}: {len(inputs)} inputs{listed}; dse runs models with exactly one input, the image "
                       f"(float32 NCHW): make the others constants (initializers) or cut them off the model")
    vi = inputs[0]
    if not vi.type.HasField("tensor_type"):
        raise DseError(f"{label}: input {vi.name!r} is not a tensor (sequence/map inputs are not supported); the "
                       f"input must be a float32 NCHW image tensor")
    tensor_type = vi.type.tensor_type
    if tensor_type.elem_type != onnx.TensorProto.FLOAT:
        raise DseError(f"{label}: input {vi.name!r} {format_shape(vi)} is {dtype_name(tensor_type.elem_type)}; the "
                       f"input must be FLOAT (float32), the image every backend feeds: export the model with a "
                       f"float32 input")
    declared = list(tensor_type.shape.dim) if tensor_type.HasField("shape") else None
    given = (input_shapes or {}).get(vi.name)
    rank = len(declared) if declared is not None else (len(given) if given is not None else None)
    if rank is not None and rank != 4:
        raise DseError(f"{label}: input {vi.name!r} {format_shape(vi)} has rank {rank}; the input must be an image "
                       f"tensor of rank 4, NCHW (batch, channels, height, width)")
    zero = [axis for axis, d in enumerate(declared or []) if d.HasField("dim_value") and d.dim_value == 0]
    if zero:
        raise DseError(f"{label}: input {vi.name!r} {format_shape(vi)} has size 0 on axis {zero[0]}; each dimension "
                       f"must be 1..{MAX_DIM:,} (name a dynamic one, dim_param, and give its size with "
                       f"benchmark.input_shapes or --input-shape)")
    if given is not None:
        dims, shown = [int(d) for d in given], "[" + ",".join(str(d) for d in given) + "]"
    else:
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in declared or []]
        shown = format_shape(vi)
    for axis, d in enumerate(dims):
        if d is not None and not 1 <= d <= MAX_DIM:
            raise DseError(f"{label}: input {vi.name!r} {shown} has size {d:,} on axis {axis}; each dimension "
                           f"must be 1..{MAX_DIM:,}")
    if dims and None not in dims and _numel(dims) > MAX_INPUT_ELEMENTS:
        raise DseError(f"{label}: input {vi.name!r} {shown} has {_numel(dims):,} elements; at most "
                       f"{MAX_INPUT_ELEMENTS:,} (4 GiB of float32) per input")


def _drop_initializer_inputs(model: onnx.ModelProto) -> None:
    """Old exporters (IR version < 4, where every initializer had to be a graph input too) list weights as graph
    inputs: treat them as the constants they are, and stamp the model IR version 4 (IR_VERSION_2019_1_22 in
    onnx.proto: "initializers need not be graph inputs"), so that shape inference and ONNX Runtime read its
    initializers as constants rather than as inputs left without a shape."""
    graph = model.graph
    weights = {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}
    keep = [vi for vi in graph.input if vi.name not in weights]
    if len(keep) != len(graph.input):
        del graph.input[:]
        graph.input.extend(keep)
    model.ir_version = max(model.ir_version, onnx.Version.IR_VERSION_2019_1_22)


def _describe_inputs(inputs) -> str:
    return ", ".join(f"{vi.name} {format_shape(vi)}" for vi in inputs) or "(none)"


def _fix_input_shapes(graph: onnx.GraphProto, shapes: dict[str, list[int]], label: str) -> None:
    names = [vi.name for vi in graph.input]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise DseError(f"unknown input {unknown[0]!r} in --input-shape; the inputs of {label} are: "
                       f"{_describe_inputs(graph.input)}")
    missing = []
    for vi in graph.input:
        tensor_type = vi.type.tensor_type
        if vi.name in shapes:
            given = shapes[vi.name]
            if tensor_type.HasField("shape"):
                dims = tensor_type.shape.dim
                if len(dims) != len(given):
                    raise DseError(f"input {vi.name!r} of {label} has rank {len(dims)} {format_shape(vi)} but "
                                   f"--input-shape gives {len(given)} dimensions {given}")
                for axis, (dim, value) in enumerate(zip(dims, given)):
                    if dim.HasField("dim_value") and dim.dim_value > 0 and dim.dim_value != value:
                        raise DseError(f"input {vi.name!r} of {label} has static size {dim.dim_value} on axis "
                                       f"{axis} {format_shape(vi)}; --input-shape gives {value}")
            tensor_type.ClearField("shape")
            for value in given:
                tensor_type.shape.dim.add().dim_value = value
        elif static_shape(vi) is None:
            missing.append(vi)
    if missing:
        parts = []
        for vi in missing:
            example = _example_shape(vi)
            parts.append(f"input {vi.name!r} has dynamic shape {format_shape(vi)}; give it with "
                         f"--input-shape {vi.name}:{example}")
        raise DseError(f"{label}: " + "; ".join(parts) + " (your real sizes)")
    # Exporters store symbolic shapes of intermediate tensors: recompute them from the fixed inputs.
    graph.ClearField("value_info")
    for out in graph.output:
        if out.type.HasField("tensor_type") and static_shape(out) is None:
            out.type.tensor_type.ClearField("shape")


def _example_shape(vi: onnx.ValueInfoProto) -> str:
    if not vi.type.tensor_type.HasField("shape"):
        return "1x3x416x416"
    dims = []
    for axis, dim in enumerate(vi.type.tensor_type.shape.dim):
        if dim.HasField("dim_value") and dim.dim_value > 0:
            dims.append(str(dim.dim_value))
        else:
            dims.append("1" if axis == 0 else "416")
    return "x".join(dims)


def _infer(model: onnx.ModelProto, label: str) -> onnx.ModelProto:
    """Shape inference on a copy without big weight data (serializing weights dominates otherwise)."""
    graph = model.graph
    light = onnx.ModelProto()
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    lg = light.graph
    lg.name = graph.name
    lg.node.extend(graph.node)
    lg.input.extend(graph.input)
    lg.output.extend(graph.output)
    # value_info is recomputed: an exporter's symbolic shapes (e.g. torch.export dynamic dims) would mask the static ones
    lg.sparse_initializer.extend(graph.sparse_initializer)
    for tensor in graph.initializer:
        if _numel(tensor.dims) <= _LIGHT_ELEMENTS:  # shapes, axes, scales: data propagation needs values
            lg.initializer.append(tensor)
        else:
            stub = lg.initializer.add()
            stub.name = tensor.name
            stub.data_type = tensor.data_type
            stub.dims.extend(tensor.dims)
    try:
        inferred = onnx.shape_inference.infer_shapes(light, check_type=False, strict_mode=False, data_prop=True)
    except Exception as exc:
        raise DseError(f"shape inference failed on {label}: {exc}") from None
    graph.ClearField("value_info")
    graph.value_info.extend(inferred.graph.value_info)
    del graph.output[:]
    graph.output.extend(inferred.graph.output)
    return model


def _numel(dims) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


def _fold_static_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Replace Shape nodes of statically shaped tensors by constants, honouring the start/end attributes of
    opset >= 15 (onnx-graphsurgeon's shape folding ignores them and would fold a wrong value)."""
    import numpy as np

    known: dict[str, list[int]] = {}
    for vi in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        dims = vi.type.tensor_type.shape.dim
        if vi.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims):
            known[vi.name] = [d.dim_value for d in dims]
    for t in model.graph.initializer:
        known[t.name] = list(t.dims)
    keep = []
    for node in model.graph.node:
        if node.op_type == "Shape" and node.input[0] in known:
            shape = known[node.input[0]]
            attrs = {a.name: a.i for a in node.attribute}
            start, end = attrs.get("start", 0), attrs.get("end", len(shape))
            value = np.array(shape[slice(start, end)], dtype=np.int64)
            model.graph.initializer.append(onnx.numpy_helper.from_array(value, node.output[0]))
        else:
            keep.append(node)
    if len(keep) != len(model.graph.node):
        del model.graph.node[:]
        model.graph.node.extend(keep)
    return model


def _fold(model: onnx.ModelProto, label: str) -> onnx.ModelProto:
    """Shape inference and constant folding (shape subgraphs included) until nothing changes."""
    import onnx_graphsurgeon as gs

    keep = {"ir_version": model.ir_version, "producer_name": model.producer_name,
            "producer_version": model.producer_version, "domain": model.domain,
            "model_version": model.model_version, "doc_string": model.doc_string}
    opsets = list(model.opset_import)
    metadata = list(model.metadata_props)
    logger = gs.logger.G_LOGGER
    old_severity = logger.severity
    logger.severity = logger.CRITICAL
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)  # folding sessions warn about every optimizer no-op
    try:
        signature = [n.op_type for n in model.graph.node]
        for _ in range(_MAX_FOLD_PASSES):
            model = _fold_static_shapes(_infer(model, label))
            graph = gs.import_onnx(model)
            graph.fold_constants(fold_shapes=True, error_ok=True, flatten_subgraphs=True)
            graph.cleanup(remove_unused_graph_inputs=False)  # keep the exporter's order
            model = gs.export_onnx(graph, do_type_check=False)
            current = [n.op_type for n in model.graph.node]
            if current == signature:
                break
            signature = current
        model = _infer(model, label)  # shapes of what the last fold made constant (e.g. Resize sizes)
    except DseError:
        raise
    except Exception as exc:
        raise DseError(f"constant folding failed on {label}: {type(exc).__name__}: {exc}") from None
    finally:
        logger.severity = old_severity
        onnxruntime.set_default_logger_severity(2)
    for key, value in keep.items():
        setattr(model, key, value)
    del model.opset_import[:]
    model.opset_import.extend(opsets)
    del model.metadata_props[:]
    model.metadata_props.extend(metadata)
    return model


def _remove_no_ops(graph: onnx.GraphProto) -> None:
    """Drop Identity and inference-mode Dropout, keeping graph output names stable."""
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node_reads(node):
            readers[name] = readers.get(name, 0) + 1
    outputs = {o.name for o in graph.output}
    sources = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    produced = {o for n in graph.node for o in n.output if o}

    alias: dict[str, str] = {}

    def resolve(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    renamed_producers: dict[str, str] = {}
    keep = []
    for node in graph.node:
        removable = node.op_type in _NO_OP and node.domain in ("", "ai.onnx") and len(node.input) >= 1
        if removable and node.op_type == "Dropout" and len(node.output) > 1 and node.output[1]:
            removable = readers.get(node.output[1], 0) == 0 and node.output[1] not in outputs
        if not removable:
            keep.append(node)
            continue
        src, dst = resolve(node.input[0]), node.output[0]
        if dst not in outputs:
            alias[dst] = src
        elif src in produced and src not in outputs and src not in sources and src not in renamed_producers:
            # The graph output keeps its name: the producer writes it directly.
            renamed_producers[src] = dst
            outputs.add(src)  # a second Identity from the same source must stay
        else:
            keep.append(node)
    if len(keep) == len(graph.node):
        return
    del graph.node[:]
    graph.node.extend(keep)
    mapping = {name: resolve(name) for name in alias}
    mapping = {k: renamed_producers.get(v, v) for k, v in mapping.items()}
    mapping.update(renamed_producers)
    rename_reads(graph.node, mapping)
    for node in graph.node:
        for i, name in enumerate(node.output):
            if name in renamed_producers:
                node.output[i] = renamed_producers[name]


def _constants_to_initializers(graph: onnx.GraphProto) -> None:
    """Constant nodes that folding left (e.g. feeding only subgraphs) become initializers: not layers."""
    keep = []
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.output) == 1:
            value = _constant_value(node)
            if value is not None:
                value.name = node.output[0]
                graph.initializer.append(value)
                continue
        keep.append(node)
    if len(keep) != len(graph.node):
        del graph.node[:]
        graph.node.extend(keep)


def _constant_value(node: onnx.NodeProto) -> onnx.TensorProto | None:
    for attr in node.attribute:
        if attr.name == "value":
            tensor = onnx.TensorProto()
            tensor.CopyFrom(attr.t)
            return tensor
        simple = {"value_float": (attr.f, np.float32), "value_int": (attr.i, np.int64),
                  "value_floats": (list(attr.floats), np.float32), "value_ints": (list(attr.ints), np.int64)}
        if attr.name in simple:
            data, dtype = simple[attr.name]
            return numpy_helper.from_array(np.array(data, dtype=dtype))
    return None


def _remove_unused_initializers(graph: onnx.GraphProto) -> None:
    used = {name for node in graph.node for name in node_reads(node)} | {o.name for o in graph.output}
    keep = [t for t in graph.initializer if t.name in used]
    if len(keep) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(keep)


def topological_order(succ: dict[int, list[int]]) -> list[int]:
    """Kahn's order of the keys of ``succ`` (key -> its successors), the smallest ready key first, so an order
    that is already valid stays as it is; shorter than ``succ`` when there is a cycle."""
    waiting = dict.fromkeys(succ, 0)
    for targets in succ.values():
        for t in targets:
            waiting[t] += 1
    ready = [k for k, w in waiting.items() if w == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for t in succ[k]:
            waiting[t] -= 1
            if waiting[t] == 0:
                heapq.heappush(ready, t)
    return order


def _toposort(graph: onnx.GraphProto, label: str) -> None:
    """Stable topological order: the exporter's order wherever it is already valid (Kahn + min-index heap)."""
    nodes = list(graph.node)
    producer = {}
    for index, node in enumerate(nodes):
        for name in node.output:
            if name:
                producer[name] = index
    available = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    available |= {t.name for t in graph.sparse_initializer}
    users: dict[int, list[int]] = {i: [] for i in range(len(nodes))}
    for index, node in enumerate(nodes):
        deps = set()
        for name in node_reads(node):
            if name in producer:
                deps.add(producer[name])
            elif name not in available:
                raise DseError(f"{label}: node {node.name or node.op_type!r} reads tensor {name!r} that no node, "
                               f"input or initializer provides")
        deps.discard(index)
        for dep in deps:
            users[dep].append(index)
    order = topological_order(users)
    if len(order) != len(nodes):
        placed = set(order)
        stuck = [nodes[i].name or nodes[i].op_type for i in range(len(nodes)) if i not in placed][:5]
        raise DseError(f"{label}: the graph has a cycle (involving {', '.join(stuck)})")
    if order != list(range(len(nodes))):
        del graph.node[:]
        graph.node.extend(nodes[i] for i in order)


def _name_nodes(graph: onnx.GraphProto) -> None:
    """Every layer gets a unique, stable name: messages and stage files refer to layers by name."""
    taken: set[str] = set()
    for index, node in enumerate(graph.node):
        name = node.name or f"{node.op_type}_{index}"
        if name in taken:
            suffix = 1
            while f"{name}_{suffix}" in taken:
                suffix += 1
            name = f"{name}_{suffix}"
        taken.add(name)
        node.name = name


def _check_static(graph: onnx.GraphProto, label: str) -> None:
    infos = {vi.name: vi for vi in list(graph.value_info) + list(graph.output) + list(graph.input)}
    bad = []
    for node in graph.node:
        for name in node.output:
            if not name:
                continue
            vi = infos.get(name)
            if vi is None or static_shape(vi) is None or vi.type.tensor_type.elem_type == 0:
                shape = format_shape(vi) if vi is not None else "[unknown]"
                bad.append(f"{name!r} {shape} from {node.op_type} {node.name!r}")
    if bad:
        shown = "; ".join(bad[:8]) + (f"; and {len(bad) - 8} more" if len(bad) > 8 else "")
        raise DseError(f"{label}: {len(bad)} tensors have no static shape after folding at the given input "
                       f"shapes: {shown}. Data-dependent ops (NonZero, NonMaxSuppression, ...) or custom ops "
                       f"the shape inference does not know cannot be partitioned; cut them off the model first")


__all__ = ["parse_input_shapes", "load_model", "check_model"]
