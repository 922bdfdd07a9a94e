"""A network as a graph of tasks mapped onto processing elements (seeds 002/004, DESIGN section 8): the task graph,
per-PE time tables, mappings, the analytic period/latency/energy model and the task-graph discrete-event run.
Shared by the per-layer mapping system, the virtual boards that measure a mapping, the clocked TX2 and task sets."""
from dse.taskgraph.errors import LayerMapError
from dse.taskgraph.graph import TaskGraph, build_task_graph
from dse.taskgraph.mapping import CpuConfig, LayerMapping, Pe, PeSet, validate
from dse.taskgraph.model import AnalyticModel, Evaluation, Incremental, LinearComm
from dse.taskgraph.profile import ProfileTable, freq_correct, npu_from_cpu
from dse.taskgraph.simulate import TaskGraphRun, simulate

__all__ = ["LayerMapError", "TaskGraph", "build_task_graph", "ProfileTable", "freq_correct", "npu_from_cpu",
           "CpuConfig", "Pe", "PeSet", "LayerMapping", "validate", "AnalyticModel", "Evaluation", "Incremental",
           "LinearComm", "TaskGraphRun", "simulate"]
