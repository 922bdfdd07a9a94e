"""A configuration's true FPS on a virtual board: what infinitely many re-runs would average to.

The measurement noise is off (a backend built with ``platform.noise.sigma=0``), and the per-task jitter, which
stays, is averaged over ``TRUE_DRAWS`` draws (repeats 0, 1, ...). One draw is not enough: where many streams share
the accelerators, one 600-frame window is far from the mean of many (Yolov4-tiny INT8 D (25,29,49) with streams
7,7,6,1: 841-901 FPS over eight draws, mean 867; repeat 0 alone gave the luckiest, 900.8). Benches compare answers
by it next to their noisy re-runs; the decisions choose between an option's polishes by it.
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    from dse.core.configuration import Configuration

TRUE_DRAWS = 8           # task-jitter draws a true FPS averages


def true_fps(quiet) -> Callable[..., float]:
    """``true(config, draws=TRUE_DRAWS)``: the mean FPS (0 where refused) of ``draws`` jitter draws of ``config`` on
    the noise-free backend ``quiet``, each draw measured once (memoized): ``draws=1`` is repeat 0 alone."""
    from dse.search.study import score

    seen: dict[tuple[str, int], float] = {}       # (config hash, jitter draw) -> FPS

    def draw(config: Configuration, r: int) -> float:
        if (config.hash, r) not in seen:
            seen[(config.hash, r)] = score(quiet.measure(config, repeat=r))
        return seen[(config.hash, r)]

    def true(config: Configuration, draws: int = TRUE_DRAWS) -> float:
        return statistics.mean(draw(config, r) for r in range(draws))
    return true


def board_overrides(overrides: Iterable[str]) -> list[str]:
    """The overrides that make the board: all but the measurement noise's, which moves no true FPS (a reference or
    a decision made at one noise level holds at another)."""
    return [o for o in overrides if not o.startswith("platform.noise.")]


def noise_free(network: str, precision: str, tmp: Path, platform: str, overrides: Iterable[str]
               ) -> Callable[..., float]:
    """``true_fps`` on the virtual board of a run with these ``overrides``: its measurement noise off
    (``platform.noise.sigma=0``), every other override kept; ``tmp`` holds the backend's engine cache."""
    from dse.workflow.phases import search_setup

    return true_fps(search_setup(network, precision, tmp / "noise-free", platform,
                                 (*board_overrides(overrides), "platform.noise.sigma=0"))[2])
