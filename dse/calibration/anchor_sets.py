"""Which published figures calibrate which virtual board: ``dse calibrate`` picks the anchor set by the profile's
``board_model``, so a board is never judged against another board's figures."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from dse.core.errors import DseError


@dataclass(frozen=True)
class AnchorSet:
    board_model: str
    source: str
    evaluate: Callable[..., list]   # (profile dict, quick, cache dir, seed) -> [Anchor]
    fit_parameters: tuple[str, ...]
    decisions: bool = False         # the Table 3.5 option choices (``--decisions``) apply


def _xavier(profile: dict, quick: bool, cache: Path, seed: int) -> list:
    from dse.calibration.anchors import Networks, anchors
    from dse.platform import platform_from_dict

    return anchors(Networks(platform_from_dict(profile), cache_dir=cache, seed=seed), quick=quick)


def _tx2(profile: dict, quick: bool, cache: Path, seed: int) -> list:
    from dse.calibration.tx2 import table2_anchors
    from dse.platform import platform_from_dict

    return table2_anchors(platform_from_dict(profile))     # 27 rows in milliseconds: --quick changes nothing


def _sets() -> dict[str, AnchorSet]:
    from dse.calibration.fit import DEFAULT_PARAMETERS
    from dse.calibration.tx2 import FIT_PARAMETERS

    return {s.board_model: s for s in (
        AnchorSet("jetson-agx-xavier", "CALIBRATION.md (thesis Ch. 3-4, public JEDI figures) and the JEDI README",
                  _xavier, DEFAULT_PARAMETERS, decisions=True),
        AnchorSet("jetson-tx2", "seed 001 Table 2: TensorRT on one A57 core + the GPU at 3 x 3 clocks", _tx2,
                  FIT_PARAMETERS))}


def anchor_set(platform: str, profile: dict) -> AnchorSet:
    """The anchor set of the profile's board, or an error naming the platforms that have one."""
    sets = _sets()
    board = profile.get("board_model")
    if board in sets:
        return sets[board]
    raise DseError(f"platform {platform} (board_model {board}) has no published anchors to calibrate against; "
                   f"platforms with anchors: {', '.join(platforms_with_anchors(sets))}")


def platforms_with_anchors(sets: dict[str, AnchorSet] | None = None) -> list[str]:
    from omegaconf import OmegaConf

    from dse.config import compose_config, group_choices

    sets = sets if sets is not None else _sets()
    out = []
    for name in group_choices("platform"):
        board = OmegaConf.select(compose_config([f"platform={name}"]), "platform.board_model")
        if board in sets:
            out.append(name)
    return out
