"""How CE/TLP options occupy the Xavier's units within one frame (spec 5.4; the paper leaves it open, L465).

``physical`` (default, exact for one frame): units DLA0/DLA1, two 4-SM GPU halves, three CPU pairs (the six
usable cores). dla1 runs on one DLA, dla2 on both; rc4/tc4 on one GPU half, rc8/tc8 on both; cpu2 on one pair,
cpu4 on pairs 0+1, cpu6 on all three. A frame schedule exists iff every unit's summed time fits the frame: run
the block tasks first on all their units, then the 4-core tasks, then the single-unit ones.

``per_config``: the same, except that Tensor-core and CUDA-core options get separate GPU units, i.e. every
enabled configuration of the paper's set {GPU^TC, GPU^RC+TC, ...} is its own pair of 100 % bins. It over-counts
the GPU, but it is the one reading that reaches the paper's NVDLA-scenario tail (2.8-3.4)."""
from __future__ import annotations

import numpy as np

from dse.systems.taskset.errors import TasksetError
from dse.systems.taskset.variants import OPTIONS

UNIT_MODELS = ("physical", "per_config")

_PHYSICAL = {"dla1": ("D0", "D1"), "dla2": ("D0+D1",), "rc4": ("G0", "G1"), "rc8": ("G0+G1",),
             "tc4": ("G0", "G1"), "tc8": ("G0+G1",), "cpu2": ("P0", "P1", "P2"), "cpu4": ("P0+P1",),
             "cpu6": ("P0+P1+P2",)}
_PER_CONFIG = {**_PHYSICAL, "rc4": ("R0", "R1"), "rc8": ("R0+R1",), "tc4": ("T0", "T1"), "tc8": ("T0+T1",)}


def unit_model(name: str) -> tuple[tuple[str, ...], list[tuple[int, np.ndarray]]]:
    """(unit names, placements): one (option index, boolean mask over the units) per way an option can run."""
    if name not in UNIT_MODELS:
        raise TasksetError(f"unknown unit model {name!r}; valid choices: {', '.join(UNIT_MODELS)}")
    spec = _PHYSICAL if name == "physical" else _PER_CONFIG
    units = tuple(sorted({u for places in spec.values() for p in places for u in p.split("+")}))
    placements = []
    for j, option in enumerate(OPTIONS):
        for p in spec[option]:
            placements.append((j, np.array([u in p.split("+") for u in units])))
    return units, placements
