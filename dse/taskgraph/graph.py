"""The task graph a per-layer mapping assigns: layers with their fusible chains folded into one task.

A mapping may place every task on any PE, so a fused chain (Conv -> BN -> act, Conv -> act; the rule of
``dse.graph.analysis``: a head whose only consumer is a BN/activation reading it as its data input) must be one
task: no backend would split it. Edges carry the bytes one task hands another (the sum over the tensors the
producer makes and the consumer reads), at the element size of the run's precision. Tasks are numbered in a
topological order (ties by first layer), which is the order every evaluator and the DES rely on.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from dse.graph.model import topological_order
from dse.taskgraph.errors import LayerMapError

ELEMENT_BYTES = {"fp32": 4, "fp16": 2, "int8": 1}


@dataclass(frozen=True, eq=False)
class TaskGraph:
    """Tasks 0..n-1 in topological order; edges ``src[e] -> dst[e]`` (src < dst) carrying ``nbytes[e]``."""

    names: tuple[str, ...]
    layers: tuple[tuple[int, ...], ...]     # analysis layer indices folded into each task
    op_types: tuple[str, ...]               # "Conv+Relu" for a fused chain
    macs: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    precision: str = "fp32"
    digest: str = ""
    in_edges: tuple[np.ndarray, ...] = field(init=False, repr=False)   # per task: indices of edges into it
    out_edges: tuple[np.ndarray, ...] = field(init=False, repr=False)  # per task: indices of edges out of it

    def __post_init__(self):
        n = len(self.names)
        if not (len(self.layers) == len(self.op_types) == n):
            raise LayerMapError(f"task graph: {n} names, {len(self.layers)} layer tuples, {len(self.op_types)} op types")
        put = lambda k, v: object.__setattr__(self, k, v)
        put("names", tuple(str(x) for x in self.names))
        put("layers", tuple(tuple(int(i) for i in t) for t in self.layers))
        put("op_types", tuple(str(x) for x in self.op_types))
        put("macs", np.asarray(self.macs, dtype=np.int64).reshape(n))
        src, dst = np.asarray(self.src, dtype=np.int64), np.asarray(self.dst, dtype=np.int64)
        nbytes = np.asarray(self.nbytes, dtype=np.float64)
        if not (src.shape == dst.shape == nbytes.shape) or src.ndim != 1:
            raise LayerMapError(f"task graph edges: src {src.shape}, dst {dst.shape}, nbytes {nbytes.shape} differ")
        bad = np.flatnonzero((src < 0) | (dst >= n) | (src >= dst))
        if len(bad):
            e = int(bad[0])
            raise LayerMapError(f"task graph edge {e}: {src[e]} -> {dst[e]} is not forward in 0..{n - 1} "
                                f"(tasks must be numbered in topological order)")
        if (nbytes < 0).any():
            raise LayerMapError(f"task graph: negative edge bytes {float(nbytes.min())}")
        order = np.lexsort((dst, src))
        src, dst, nbytes = src[order], dst[order], nbytes[order]
        if len(src) > 1 and ((src[1:] == src[:-1]) & (dst[1:] == dst[:-1])).any():
            raise LayerMapError("task graph: duplicate edge (merge the bytes of tensors between the same two tasks)")
        for k, v in (("src", src), ("dst", dst), ("nbytes", nbytes)):
            v.setflags(write=False)
            put(k, v)
        if self.precision not in ELEMENT_BYTES:
            raise LayerMapError(f"unknown precision {self.precision!r}; valid choices: {', '.join(ELEMENT_BYTES)}")
        put("in_edges", tuple(np.flatnonzero(dst == i) for i in range(n)))
        put("out_edges", tuple(np.flatnonzero(src == i) for i in range(n)))
        if not self.digest:
            put("digest", self._content_digest())

    def _content_digest(self) -> str:
        body = {"names": self.names, "layers": self.layers, "op_types": self.op_types, "macs": self.macs.tolist(),
                "src": self.src.tolist(), "dst": self.dst.tolist(), "nbytes": self.nbytes.tolist(),
                "precision": self.precision}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def n_layers(self) -> int:
        return sum(len(t) for t in self.layers)

    def preds(self, i: int) -> np.ndarray:
        return self.src[self.in_edges[i]]

    def succs(self, i: int) -> np.ndarray:
        return self.dst[self.out_edges[i]]

    def task_of_layer(self) -> np.ndarray:
        """[n_layers]: the task each analysis layer belongs to."""
        out = np.full(self.n_layers, -1, dtype=np.int64)
        for t, layers in enumerate(self.layers):
            out[list(layers)] = t
        return out

    def expand(self, task_values) -> np.ndarray:
        """Per-task values (a PE id, a time) -> per-layer values: every layer gets its task's value."""
        values = np.asarray(task_values)
        if values.shape[:1] != (self.n,):
            raise LayerMapError(f"expand needs one value per task ({self.n}), got shape {values.shape}")
        return values[self.task_of_layer()]

    def task_index(self, key) -> int:
        """A task by index (int or digit string) or by name (the name of its first layer)."""
        text = str(key).strip()
        if text in self.names:
            return self.names.index(text)
        if text.isdigit() and int(text) < self.n:
            return int(text)
        raise LayerMapError(f"unknown task {key!r}; valid choices: 0..{self.n - 1} or a task name "
                            f"({', '.join(self.names[:6])}{' ...' if self.n > 6 else ''})")


def build_task_graph(analysis, precision: str = "fp32") -> TaskGraph:
    """The task graph of a NetworkAnalysis: one task per layer outside fused chains, one per chain."""
    if precision not in ELEMENT_BYTES:
        raise LayerMapError(f"unknown precision {precision!r}; valid choices: {', '.join(ELEMENT_BYTES)}")
    layers = analysis.layers
    group = list(range(len(layers)))           # layer -> representative (the chain head)
    for chain in analysis.fused_chains:
        for i in chain:
            group[i] = chain[0]
    members: dict[int, list[int]] = {}
    for i, g in enumerate(group):
        members.setdefault(g, []).append(i)
    producer = {name: group[layer.index] for layer in layers for name in layer.outputs}
    size = {name: int(np.prod(shape, dtype=np.int64)) * ELEMENT_BYTES[precision]
            for layer in layers for name, shape in zip(layer.outputs, layer.output_shapes)}
    edge_bytes: dict[tuple[int, int], int] = {}
    for g, idx in members.items():
        reads = {name for i in idx for name in layers[i].inputs if name in producer and producer[name] != g}
        for name in reads:
            key = (producer[name], g)
            edge_bytes[key] = edge_bytes.get(key, 0) + size.get(name, 0)
    # topological order of the groups, ties (and so the layer order whenever possible) by first layer
    succ: dict[int, list[int]] = {g: [] for g in members}
    for a, b in edge_bytes:
        succ[a].append(b)
    order = topological_order(succ)
    if len(order) != len(members):
        raise LayerMapError("the layer graph has a cycle once fused chains are folded; cannot order its tasks")
    task = {g: t for t, g in enumerate(order)}
    src, dst, nbytes = [], [], []
    for (a, b), v in sorted(edge_bytes.items(), key=lambda kv: (task[kv[0][0]], task[kv[0][1]])):
        src.append(task[a])
        dst.append(task[b])
        nbytes.append(v)
    return TaskGraph(
        names=tuple(layers[g].name for g in order),
        layers=tuple(tuple(members[g]) for g in order),
        op_types=tuple("+".join(layers[i].op_type for i in members[g]) for g in order),
        macs=np.array([sum(layers[i].macs for i in members[g]) for g in order], dtype=np.int64),
        src=np.array(src, dtype=np.int64), dst=np.array(dst, dtype=np.int64), nbytes=np.array(nbytes, dtype=float),
        precision=precision)


__all__ = ["TaskGraph", "build_task_graph", "ELEMENT_BYTES"]
