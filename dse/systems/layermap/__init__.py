"""Per-layer mapping of one DNN onto heterogeneous PEs (seeds 002/004) on the task-graph substrate
(``dse.taskgraph``): the 002/004 solvers, a GA (``ga``) and the ILPs with a chain DP oracle (``ilp``, PuLP optional),
and the screening of their finalists. Specs: ../shared/specs/seeds-001-004.md section 1."""
from dse.systems.layermap.finalists import Screened, screen_finalists
from dse.systems.layermap.ga import GaResult, preset, run_layer_ga
from dse.systems.layermap.ilp import IlpResult, chain_dp, solve_ilp

__all__ = ["GaResult", "preset", "run_layer_ga", "IlpResult", "chain_dp", "solve_ilp", "Screened", "screen_finalists"]
