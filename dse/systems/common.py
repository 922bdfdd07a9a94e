"""What the systems' jobs share: the composed case of a target that runs on a virtual board only, and progress
lines on stderr (Snakemake keeps stdout for itself)."""
from __future__ import annotations

import sys

from dse.core.errors import DseError


def compose_sim_case(snakemake_config: dict, target: str, hint: str = ""):
    """(composed config, platform dict, loaded Platform) of a target that runs on a virtual board only."""
    from omegaconf import OmegaConf

    from dse.config import compose_config, split_overrides
    from dse.platform import load_platform

    cfg = compose_config(split_overrides(snakemake_config.get("overrides")))
    platform = OmegaConf.to_container(cfg.platform, resolve=True)
    loaded = load_platform(platform)
    if loaded.backend != "sim":
        raise DseError(f"target {target} runs on a virtual board (backend sim); platform {loaded.name} has backend "
                       f"{loaded.backend}{hint}")
    return cfg, platform, loaded


def deployment_evaluator(platform, seed: int, store):
    """The evaluator of periodic deployment runs (``dse.backends.sim.deployment``) on ``platform`` (a Platform),
    recording into ``store``: multi's deployments and power fit and dataflow's deployment check."""
    from dse.backends.base import MeasureSettings
    from dse.backends.sim.deployment import DeploymentBackend
    from dse.evaluate import Evaluator

    board = DeploymentBackend(platform, MeasureSettings(seed=seed))
    return Evaluator(board, store, seed=seed, context=board.context)


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
