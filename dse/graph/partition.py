"""Cut a sanitized network into pipeline stages: one ONNX model per stage, ready for any engine builder.

Stage k holds layers ``cuts[k-1]+1 .. cuts[k]``. Its inputs are the tensors it reads that the previous stage
produces (a feasible tuple has no others) or network inputs (the input frame is available to every stage);
its outputs are the tensors the next stage reads plus the network outputs it produces. Tensor names are the network's own, so stage
k's outputs plug into stage k+1's inputs by name and calibration scales carry over.

``extract_ranges`` is the general form: any contiguous layer ranges, each reading any earlier one (the
segments of a per-layer mapping, ``dse.runtime.taskgraph``). Extraction is ``onnx.utils.Extractor`` on the
sanitized (static-shape, shape-inferred) model: it copies the nodes between the given inputs and outputs with
their value infos, and keeps opset and IR version.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from dse.store.atomic import write_bytes_atomic
from dse.core.errors import DseError
from dse.graph.tensors import node_reads as _reads

MANIFEST = "partition.json"


@dataclass
class StageModel:
    """One stage: its layer range, its boundary tensors (in a stable order) and its ONNX model."""

    index: int
    first_layer: int
    last_layer: int
    inputs: list[str]
    outputs: list[str]
    model: onnx.ModelProto
    macs: int = 0
    shapes: dict[str, list[int]] = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return self.last_layer - self.first_layer + 1

    @property
    def file_name(self) -> str:
        return f"stage_{self.index}.onnx"

    def to_bytes(self) -> bytes:
        return self.model.SerializeToString(deterministic=True)


def validate_cuts(analysis, cuts) -> tuple[int, ...]:
    """The cut tuple as ints, or a DseError naming what is wrong (out of range, not increasing, infeasible:
    the tensor that would skip a stage, or the fused chain split and the nearest feasible positions)."""
    try:
        cuts = tuple(int(c) for c in cuts)
    except (TypeError, ValueError):
        raise DseError(f"cuts must be integers (last layer index of each stage but the last), got {cuts!r}") from None
    reason = analysis.check_cuts(cuts)  # raises DseError itself for malformed tuples
    if reason:
        raise DseError(f"infeasible cut tuple {list(cuts)}: {reason}")
    return cuts


def stage_bounds(n_layers: int, cuts: tuple[int, ...]) -> list[tuple[int, int]]:
    """[(first, last), ...] per stage."""
    starts = [0] + [c + 1 for c in cuts]
    ends = list(cuts) + [n_layers - 1]
    return list(zip(starts, ends))


def _shape_of(vi: onnx.ValueInfoProto) -> list[int]:
    return [d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim]


def partition(analysis, cuts) -> list[StageModel]:
    """One StageModel per stage of the feasible tuple ``cuts`` (raises DseError when it is not feasible)."""
    cuts = validate_cuts(analysis, cuts)
    stages = extract_ranges(analysis, stage_bounds(len(analysis.layers), cuts))
    source = {t: s.index for s in stages for t in s.outputs}
    for s in stages:  # validate_cuts guarantees it; a broken guarantee must not build a wrong pipeline
        for t in s.inputs:
            if source.get(t, s.index - 1) != s.index - 1:
                raise DseError(f"infeasible cut tuple {list(cuts)}: tensor {t!r} from stage {source[t]} is read in "
                               f"stage {s.index}, skipping stage {source[t] + 1}")
    return stages


def extract_ranges(analysis, bounds, label: str = "stage") -> list[StageModel]:
    """One ONNX subgraph per layer range; ``bounds`` [(first, last), ...] cover layers 0..N-1 in order.

    Range k reads network inputs and tensors of any earlier range (the pipeline stages of a feasible tuple read
    only the previous one; the segments of a per-layer mapping read any); its outputs are the network outputs it
    produces and the tensors a later range reads, network inputs first then by producing layer.
    """
    model: onnx.ModelProto = analysis.weighted_model()
    graph = model.graph
    nodes = list(graph.node)
    if len(nodes) != len(analysis.layers):
        raise DseError(f"analysis has {len(analysis.layers)} layers but its model {len(nodes)} nodes")
    initializers = {t.name for t in graph.initializer}
    net_inputs = [vi.name for vi in graph.input if vi.name not in initializers]
    net_outputs = {vi.name for vi in graph.output}
    bounds = [(int(first), int(last)) for first, last in bounds]
    if not bounds or [f for f, _ in bounds] != [0] + [last + 1 for _, last in bounds[:-1]] \
            or any(f > last for f, last in bounds) or bounds[-1][1] != len(nodes) - 1:
        raise DseError(f"layer ranges {bounds} do not cover layers 0..{len(nodes) - 1} in order")
    range_of_layer = [k for k, (first, last) in enumerate(bounds) for _ in range(first, last + 1)]
    producer: dict[str, int] = {}  # tensor -> producing layer index
    for i, node in enumerate(nodes):
        for out in node.output:
            if out:
                producer[out] = i
    consumers: dict[str, set[int]] = {}  # tensor -> ranges that read it
    for i, node in enumerate(nodes):
        for name in _reads(node):
            if name and name not in initializers:
                consumers.setdefault(name, set()).add(range_of_layer[i])

    def order(names) -> list[str]:  # network inputs first (graph order), then by producing layer
        return sorted(names, key=lambda t: (producer.get(t, -1), net_inputs.index(t) if t in net_inputs else 0, t))

    # one Extractor (it runs shape inference once) for all ranges
    extractor = onnx.utils.Extractor(model)
    shapes = {vi.name: _shape_of(vi) for vi in list(graph.input) + list(graph.value_info) + list(graph.output)}
    out = []
    for k, (first, last) in enumerate(bounds):
        produced = {o for i in range(first, last + 1) for o in nodes[i].output if o}
        reads = {t for i in range(first, last + 1) for t in _reads(nodes[i]) if t and t not in initializers}
        inputs = reads - produced
        for t in inputs:
            if t not in producer and t not in net_inputs:
                raise DseError(f"{label} {k} reads tensor {t!r} that no layer produces and is not a network input")
        outputs = {t for t in produced if t in net_outputs or any(r > k for r in consumers.get(t, ()))}
        inputs, outputs = order(inputs), order(outputs)
        sub = extractor.extract_model(inputs, outputs)
        if len(sub.graph.node) != last - first + 1:
            raise DseError(f"{label} {k}: extraction kept {len(sub.graph.node)} nodes, expected {last - first + 1} "
                           f"(layers {first}..{last}); the model has layers that feed no output")
        sub.graph.name = f"{graph.name or 'network'}_{label}_{k}"
        del sub.metadata_props[:]
        for key, value in ((f"dse.{label}", str(k)), ("dse.layers", f"{first}-{last}")):
            sub.metadata_props.add(key=key, value=value)
        onnx.checker.check_model(sub)
        macs = int(sum(int(getattr(analysis.layers[i], "macs", 0) or 0) for i in range(first, last + 1)))
        out.append(StageModel(k, first, last, inputs, outputs, sub, macs,
                              {t: shapes.get(t, []) for t in inputs + outputs}))
    return out


def manifest(stages: list[StageModel], digest: str = "") -> dict:
    """What partition.json holds: the cuts and every stage's layer range, boundary tensors, MACs and file hash."""
    return {
        "model_digest": digest,
        "cuts": [s.last_layer for s in stages[:-1]],
        "stages": [{
            "index": s.index,
            "first_layer": s.first_layer,
            "last_layer": s.last_layer,
            "layers": s.n_layers,
            "inputs": {t: s.shapes.get(t, []) for t in s.inputs},
            "outputs": {t: s.shapes.get(t, []) for t in s.outputs},
            "macs": s.macs,
            "file": s.file_name,
            "sha256": hashlib.sha256(s.to_bytes()).hexdigest(),
        } for s in stages],
    }


def write_partition(stages: list[StageModel], out_dir: str | Path, digest: str = "") -> Path:
    """Write stage_<k>.onnx files and partition.json (last: the manifest commits the set); returns its path.

    Every file goes through a temp file + fsync + rename; stage files of an earlier partition with more
    stages are removed so the directory always matches its manifest.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise DseError(f"{out} is a file: give a directory for the stage models")
    out.mkdir(parents=True, exist_ok=True)
    for s in stages:
        write_bytes_atomic(out / s.file_name, s.to_bytes())
    keep = {s.file_name for s in stages}
    for old in out.glob("stage_*.onnx"):
        if old.name not in keep:
            old.unlink()
    path = out / MANIFEST
    write_bytes_atomic(path, (json.dumps(manifest(stages, digest), indent=1) + "\n").encode())
    return path


def _session(model: onnx.ModelProto):
    """ORT session with graph optimizations off and one thread: whole model and stages run the same kernels.

    With optimizations on, ORT fuses differently on each side of a cut (Conv+activation inside a stage, not
    across it), which changes float rounding; the check is about the partition, not about ORT's fusions.
    (Polygraphy's ``SessionFromOnnx`` sets the optimization level but not the thread counts, hence our own.)
    """
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _chain_runner(stages: list[StageModel], model: onnx.ModelProto):
    """A Polygraphy runner for the chained stages (Polygraphy runs one model per runner; a pipeline is ours).

    Each stage is fed only from the network inputs and what the previous stage hands over, as on the board; the
    runner returns the network outputs the stages produce, so a missing one shows as missing.
    """
    from polygraphy.backend.base import BaseRunner
    from polygraphy.common import TensorMetadata

    initializers = {t.name for t in model.graph.initializer}
    inputs = [vi for vi in model.graph.input if vi.name not in initializers]
    outputs = [vi.name for vi in model.graph.output]

    class StageChainRunner(BaseRunner):
        def __init__(self):
            super().__init__(name="stages")

        def activate_impl(self):
            self.sessions = [_session(s.model) for s in stages]

        def get_input_metadata_impl(self):
            meta = TensorMetadata()
            for vi in inputs:
                meta.add(vi.name, onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type), _shape_of(vi))
            return meta

        def infer_impl(self, feed_dict):
            start = time.perf_counter()
            feeds = dict(feed_dict)
            available, produced = feeds, {}
            for s, sess in zip(stages, self.sessions):
                step = dict(zip(s.outputs, sess.run(s.outputs, {t: available[t] for t in s.inputs})))
                produced.update(step)
                available = {**feeds, **step}  # the next stage sees the network inputs and what this one hands over
            self.inference_time = time.perf_counter() - start
            return {name: produced[name] for name in outputs if name in produced}

        def deactivate_impl(self):
            del self.sessions

    return StageChainRunner()


def check_partition(analysis, stages: list[StageModel], seed: int = 0, atol: float = 1e-5) -> dict[str, float]:
    """Max abs difference per network output between the whole model and the chained stages (both in ORT).

    Polygraphy's Comparator runs both (``OnnxrtRunner`` for the whole model, ``_chain_runner`` for the stages) on one
    seeded input from its DataLoader (floats uniform in [-1, 1], so the negative side of every activation is
    exercised) and ``SimpleCompareFunc`` judges the max abs error (``CompareFunc.simple`` is deprecated in 0.53).
    Raises DseError when an output is missing from the chain, has another shape, or differs by more than ``atol``.
    """
    from polygraphy.backend.onnxrt import OnnxrtRunner
    from polygraphy.comparator import Comparator, DataLoader, SimpleCompareFunc
    from polygraphy.exception import PolygraphyException
    from polygraphy.logger import G_LOGGER

    model = analysis.weighted_model()
    names = [vi.name for vi in model.graph.output]
    floats = {vi.name: (-1.0, 1.0) for vi in model.graph.input
              if np.issubdtype(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type), np.floating)}
    runners = [OnnxrtRunner(lambda: _session(model), name="whole"), _chain_runner(stages, model)]
    # Polygraphy logs every step; our message says what failed
    with G_LOGGER.verbosity(G_LOGGER.CRITICAL):
        try:
            results = Comparator.run(runners, data_loader=DataLoader(seed=seed, val_range=floats))
        except PolygraphyException as exc:
            raise DseError(f"partition check could not run the models: {exc}") from exc
        whole, chained = (iterations[0] for _, iterations in results)
        for name in names:
            if name not in chained:
                raise DseError(f"network output {name!r} is produced by no stage")
            if whole[name].shape != chained[name].shape:
                raise DseError(f"network output {name!r}: whole model shape {whole[name].shape}, "
                               f"stages give {chained[name].shape}")
        compare = SimpleCompareFunc(atol=atol, rtol=0.0, check_error_stat="max",
                                    find_output_func=lambda name, index, result: [name])
        accuracy = Comparator.compare_accuracy(results, compare_func=compare)
    matches = accuracy[0][("whole", "stages")][0]  # the one compare function, the one pair, the one iteration
    diffs = {name: float(matches[name].max_absdiff) if whole[name].size else 0.0 for name in names}
    bad = [name for name in names if not matches[name]]
    if bad:
        raise DseError("partition check failed: " + ", ".join(f"{k} max abs diff {diffs[k]:.3g}" for k in bad)
                       + f" > {atol:g}")
    return diffs
