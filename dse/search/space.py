"""What a search strategy may know: the network's cut structure and the platform's mapping options.

Strategies never see a backend: they ask a ``dse.search.study.Study`` for measurements.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dse.core.errors import DseError, choices_error

STAGE_TYPES = ("GPU", "DLA", "PND", "CPU")


def stage_width(stage_type: str) -> int:
    """PEs a stage of this type keeps busy: a PND stage runs its engine on two PEs, so it needs at least two
    streams, may have twice a single PE's streams, and takes half the time of one PE. The one place for
    that rule: every strategy scales by it."""
    return 2 if stage_type == "PND" else 1


@dataclass
class SearchSpace:
    """Network + platform facts the strategies need, with no backend knowledge.

    ``stage_pe_types`` maps each mapping option to its per-stage PE type; its length minus one is the
    number of cuts of that option. ``main_pe`` names the PE whose utilization drives Algorithm 2.
    """

    n_layers: int
    feasible_cuts: list[int]
    check_cuts: Callable[[tuple[int, ...]], str | None]
    stage_pe_types: dict[str, list[str]]
    main_pe: str = "GPU"
    gpu_layer_profile: Callable[[], list[float]] | None = None
    # for model-based strategies: per option the stages' cost classes and PEs, and the network's per-layer facts
    stage_roles: dict | None = None
    network_facts: Callable[[], object] | None = None
    # what a measurement costs on the board (``dse.platform.BoardCosts``) and the frames it runs: a strategy
    # that weighs candidates by board time prefers those whose engines are built already
    board_costs: object | None = None
    run_frames: int = 0
    # ``Platform.shared_cores``: where the PEs are the host's own CPU cores (host-cpu), their number; 0 where
    # threads have cores of their own
    shared_cores: int = 0
    # ``feasibility(cuts) is None`` without the reason, where the network offers a faster test of it
    feasible_tuple: Callable[[tuple[int, ...]], bool] | None = None

    def __post_init__(self):
        self.feasible_cuts = sorted({int(c) for c in self.feasible_cuts if 0 <= int(c) < self.n_layers - 1})
        for option, types in self.stage_pe_types.items():
            if not types:
                raise DseError(f"mapping option {option!r} has no stages")
            for t in types:
                if t not in STAGE_TYPES and t != self.main_pe:
                    raise choices_error(f"stage PE type of option {option!r}", t, STAGE_TYPES)

    @property
    def options(self) -> list[str]:
        return list(self.stage_pe_types)

    def stages(self, option: str) -> list[str]:
        try:
            return list(self.stage_pe_types[option])
        except KeyError:
            raise choices_error("mapping option", option, self.stage_pe_types) from None

    def n_cuts(self, option: str) -> int:
        return len(self.stages(option)) - 1

    def main_only_option(self) -> str:
        """The option that runs the whole network on the main PE (E on Xavier): the maximizer's option."""
        for option, types in self.stage_pe_types.items():
            if list(types) == [self.main_pe]:
                return option
        raise DseError(f"no mapping option runs the whole network on {self.main_pe}; options: "
                       f"{', '.join(f'{o}={t}' for o, t in self.stage_pe_types.items())}")

    def feasibility(self, cuts: Sequence[int]) -> str | None:
        """None if ``cuts`` is a feasible ordered tuple, else why not (order and range checked here)."""
        cuts = tuple(int(c) for c in cuts)
        return self._malformed(cuts) or self.check_cuts(cuts)

    def is_feasible(self, cuts: Sequence[int]) -> bool:
        """``feasibility(cuts) is None``, faster where the network gives ``feasible_tuple``."""
        if self.feasible_tuple is None:
            return self.feasibility(cuts) is None
        cuts = tuple(int(c) for c in cuts)
        return self._malformed(cuts) is None and self.feasible_tuple(cuts)

    def _malformed(self, cuts: tuple[int, ...]) -> str | None:
        """Why ``cuts`` is no ordered tuple of this network's positions, or None."""
        if list(cuts) != sorted(set(cuts)):
            return f"cuts {list(cuts)} are not strictly increasing"
        if cuts and (cuts[0] < 0 or cuts[-1] >= self.n_layers - 1):
            return f"cuts {list(cuts)} out of range 0..{self.n_layers - 2}"
        return None
