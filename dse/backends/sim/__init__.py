"""The sim backend: a calibrated discrete-event simulation of pipelined GPU/DLA inference on a virtual board."""
from dse.backends.sim.backend import SimBackend
from dse.backends.sim.cost import CostModel, Phase, StageCost
from dse.graph.layers import LayerTable, frame_of, layer_table

__all__ = ["SimBackend", "CostModel", "Phase", "StageCost", "LayerTable", "frame_of", "layer_table"]
