"""Per-layer mapping of a DNN onto heterogeneous PEs (seeds 002/004): a task graph with a per-PE profile table,
a layer-mapping configuration, an analytic evaluator (period, latency, CPU utilization, energy) and a task-graph
DES for Gantt charts; the 002/004 solvers: a GA (``ga``) and the ILPs with a chain DP oracle (``ilp``, PuLP
optional). Specs: ../shared/specs/seeds-001-004.md section 1."""
from dse.layermap.errors import LayerMapError
from dse.layermap.ga import GaResult, preset, run_layer_ga
from dse.layermap.ilp import IlpResult, chain_dp, solve_ilp
from dse.layermap.finalists import Screened, screen_finalists
from dse.layermap.evaluate import AnalyticModel, Evaluation, Incremental, LinearComm
from dse.layermap.mapping import CpuConfig, LayerMapping, Pe, PeSet, validate
from dse.layermap.profile import ProfileTable, freq_correct, npu_from_cpu
from dse.layermap.simulate import SimResult, simulate
from dse.layermap.taskgraph import TaskGraph, build_task_graph

__all__ = ["LayerMapError", "TaskGraph", "build_task_graph", "ProfileTable", "freq_correct", "npu_from_cpu",
           "CpuConfig", "Pe", "PeSet", "LayerMapping", "validate", "AnalyticModel", "Evaluation", "Incremental",
           "LinearComm", "SimResult", "simulate", "GaResult", "preset", "run_layer_ga", "IlpResult", "chain_dp",
           "solve_ilp", "Screened", "screen_finalists"]
