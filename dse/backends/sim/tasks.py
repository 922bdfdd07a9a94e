"""The virtual board's view of a task graph: per-task times from its cost models and the analytic model with its
transfer costs and per-PE power, so that what the layer-mapping solvers plan with and what the board measures with
are one model."""
from __future__ import annotations

import numpy as np

from dse.backends.sim.cost import CostModel
from dse.backends.sim.cpu_cost import PlatformComm
from dse.graph.layers import frame_of, layer_table
from dse.taskgraph.errors import LayerMapError
from dse.taskgraph.graph import TaskGraph
from dse.taskgraph.mapping import PeSet
from dse.taskgraph.model import AnalyticModel
from dse.taskgraph.profile import KIND_CHOICES, ProfileTable, check_kind, cpu_cores_of, npu_from_cpu, tool_versions


def profile_from_sim(platform, analysis, graph: TaskGraph, kinds, precision: str = "fp32",
                     batch: int = 1) -> ProfileTable:
    """Times from the sim cost models: GPU/DLA per layer (``dse.backends.sim.cost``; a task with a layer the
    DLA cannot run is inf on ``dla``), CPU groups per layer (``dse.backends.sim.cpu_cost``), summed per
    task; ``npu`` = cpu4 / 6.5 (002 L180). Per-layer times only: the per-inference fixed cost of a
    whole engine (``per_inference_us``) belongs to no task."""
    kinds = tuple(check_kind(k) for k in kinds)
    if not kinds:
        raise LayerMapError(f"no PE kinds to time; valid choices: {KIND_CHOICES}")
    if graph.n_layers != len(analysis.layers):
        raise LayerMapError(f"task graph has {graph.n_layers} layers, the analysis {len(analysis.layers)}")
    task_of = graph.task_of_layer()

    def per_task(per_layer: np.ndarray) -> np.ndarray:
        return np.bincount(task_of, weights=per_layer, minlength=graph.n)

    columns: dict[str, np.ndarray] = {}
    accel = [k for k in kinds if k in ("gpu", "dla")]
    if accel:
        if platform.cost is None:
            raise LayerMapError(f"platform {platform.name} has no cost section: the sim cannot time "
                                f"{', '.join(accel)} (see config/platform/xavier-agx-sim.yaml)")
        model = CostModel(platform, layer_table(frame_of(analysis), digest=analysis.digest))
        for kind in accel:
            if kind == "dla" and platform.cost.dla is None:
                raise LayerMapError(f"platform {platform.name} has no DLA cost parameters; kinds it can time: gpu")
            t = per_task(model.per_layer(kind, precision, batch).t)
            if kind == "dla":
                unsupported = np.bincount(task_of, weights=(~model.dla_ok).astype(float), minlength=graph.n)
                t[unsupported > 0] = np.inf
            columns[kind] = t
    cpu_needed = sorted({cpu_cores_of(k) for k in kinds if k.startswith("cpu")} | ({4} if "npu" in kinds else set()))
    if cpu_needed:
        try:
            from dse.backends.sim.cpu_cost import cpu_layer_us
        except ImportError as exc:
            raise LayerMapError(f"CPU kinds need the sim CPU cost model (dse.backends.sim.cpu_cost.cpu_layer_us), "
                                f"which is not available: {exc}") from None
        for k in cpu_needed:
            columns[f"cpu{k}"] = per_task(np.array([cpu_layer_us(platform, layer, k, precision=precision)
                                                    for layer in analysis.layers], dtype=float))
    table = ProfileTable(kinds=tuple(columns), time_us=np.column_stack(list(columns.values())),
                source=f"sim:{platform.name}", graph_digest=graph.digest, tasks=graph.names, versions=tool_versions())
    if "npu" in kinds:
        table = npu_from_cpu(table)
    return table.select(kinds)


def analytic_model(platform, graph: TaskGraph, profile: ProfileTable, pes: PeSet, *, cpu_cpu: bool = True,
                   **options) -> AnalyticModel:
    """The model of a board: its transfer costs (``sim.cpu_cost.transfer_us``; ``cpu_cpu=False``: CPU<->CPU
    free, as 004) and, where it gives every PE kind a busy/idle power (the layer-mapping boards), the energy.
    What the solvers plan with and the virtual board measures with must be one model."""
    from dse.core.errors import DseError

    if platform.power is not None and "p_busy" not in options:
        try:
            power = [platform.pe_power_w(k) for k in pes.kinds]
            options.update(p_busy=[b for b, _ in power], p_idle=[i for _, i in power])
        except DseError:
            pass          # e.g. the Jetson profiles: board power by rail, no per-PE figures (energy stays NaN)
    return AnalyticModel(graph, profile, pes, PlatformComm(platform, cpu_cpu), **options)
