"""Per-layer mapping configurations (option ``LM:<cpu_config>[+GPU...]``, the mapping in ``extra``, spec 1.2) in
the backends: what the ``ort`` and ``sim`` backends share to check one and to turn it into PEs and task ids.

A backend holds one ``LayerMapSupport`` for its analysed network; ``check`` gives the reason a mapping cannot run
on the platform (a CPU configuration that does not split the platform's cores, naming the valid ones; an
accelerator it lacks; a mapping for another task graph; a PE id out of range) or None; ``resolve`` gives the
``LayerMapping``, its ``PeSet`` over the platform's cores and the ``TaskGraph`` the ids refer to. The task graph
is built once per precision from the backend's analysis.
"""
from __future__ import annotations

import numpy as np

from dse.platform.checks import check_bounds
from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.taskgraph.mapping import CpuConfig, LayerMapping, PeSet, check_pe_ids
from dse.taskgraph.graph import TaskGraph, build_task_graph


def is_layer_mapping(config: Configuration) -> bool:
    return config.option.startswith("LM:")


def stage_mapping(graph: TaskGraph, layer_stage) -> tuple[int, ...]:
    """Per-layer stage ids (``analysis.stage_of(cuts)``) -> one PE id per task: the contiguous mapping of a cut
    tuple, stage i on PE i. A cut inside a fused chain has no such mapping."""
    layer_stage = np.asarray(layer_stage)
    ids = tuple(int(layer_stage[layers[0]]) for layers in graph.layers)
    split = [t for t, layers in enumerate(graph.layers) if len(set(layer_stage[list(layers)].tolist())) > 1]
    if split:
        raise DseError(f"a cut splits the fused task {split[0]} ({graph.names[split[0]]}); cut between tasks")
    return ids


class LayerMapSupport:
    """Checks and resolves LM configurations of one analysed network on one platform."""

    def __init__(self, platform, analysis):
        self.platform, self.analysis = platform, analysis
        self._graphs: dict[str, TaskGraph] = {}

    def graph(self, precision: str) -> TaskGraph:
        if precision not in self._graphs:
            self._graphs[precision] = build_task_graph(self.analysis, precision)
        return self._graphs[precision]

    def accelerators(self) -> dict[str, int]:
        """How many PEs of each accelerator kind the platform has."""
        out: dict[str, int] = {}
        for p in self.platform.pes.values():
            if p.type in ("gpu", "dla", "npu"):
                out[p.type] = out.get(p.type, 0) + 1
        return out

    def resolve(self, config: Configuration) -> tuple[LayerMapping, PeSet, TaskGraph]:
        """Raise (a DseError naming the value and the valid choices) when the mapping cannot run here."""
        if self.analysis is None:
            raise DseError("a per-layer mapping needs the network's analysis; this backend holds only a layer table")
        config.validate()
        mapping = LayerMapping.from_configuration(config)
        cores = self.platform.mapping_core_ids()
        try:
            CpuConfig.parse(mapping.cpu_config.name, n_cores=len(cores))
        except DseError as exc:
            raise DseError(f"{exc} (platform {self.platform.name} has cores {cores})") from None
        have = self.accelerators()
        for kind in set(mapping.accelerators):
            n = mapping.accelerators.count(kind)
            if n > have.get(kind, 0):
                raise DseError(f"option {config.option} asks for {n} {kind.upper()} PE(s); platform "
                               f"{self.platform.name} has {have.get(kind, 0)} (its accelerators: "
                               f"{', '.join(f'{v} {k.upper()}' for k, v in have.items()) or 'none'})")
        pes = mapping.pes(cores)
        graph = self.graph(config.precision)
        if mapping.graph_digest and mapping.graph_digest != graph.digest:
            raise DseError(f"the mapping was made for task graph {mapping.graph_digest}; this network's "
                           f"{config.precision} task graph is {graph.digest}")
        check_pe_ids(mapping.array, graph, pes, what="layer_map")
        return mapping, pes, graph

    def check(self, config: Configuration) -> str | None:
        try:
            mapping, _, _ = self.resolve(config)
        except DseError as exc:
            return str(exc)
        for kind in dict.fromkeys(mapping.accelerators):
            precisions = sorted(self.platform.precisions_of(kind))
            if config.precision not in precisions:
                return (f"the {kind.upper()} of {self.platform.name} runs precision(s) {', '.join(precisions)}, "
                        f"not {config.precision}")
        return check_bounds(config, self.platform)


__all__ = ["LayerMapSupport", "is_layer_mapping", "stage_mapping"]
