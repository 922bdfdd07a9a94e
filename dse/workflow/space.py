"""The search space of one run, made where the backend is known: the network's cut structure and the platform's
options that can run at the run's precision and batch, with the per-layer GPU profile where the platform's backend
declares one. It lives in the composition root so that ``dse.search`` never imports a backend."""
from __future__ import annotations

import functools
from collections.abc import Callable

from dse.backends import capabilities_of
from dse.backends.base import GPU_LAYER_PROFILE
from dse.platform.checks import unrunnable_options
from dse.search.board_model import network_facts, roles_of_platform
from dse.search.space import SearchSpace


def space_of(analysis, backend) -> SearchSpace:
    """The network's cut structure and the backend's platform options (see ``search_space``)."""
    return search_space(analysis, backend.platform, backend.settings, lambda: backend)


def search_space(analysis, platform, settings, backend: Callable[[], object]) -> SearchSpace:
    """``settings``: ``MeasureSettings``. ``backend()`` makes the backend on first use, so a phase that never asks
    for the GPU profile never builds one (strategies see only the profile, never the backend)."""
    profile = None
    if GPU_LAYER_PROFILE in capabilities_of(platform.backend):
        def profile() -> list[float]:
            return backend().gpu_layer_profile(settings.precision, settings.batch)

    skipped = unrunnable_options(platform, settings.precision, settings.batch)
    kinds = {o: k for o, k in platform.stage_kinds().items() if o not in skipped}
    roles = {o: r for o, r in roles_of_platform(platform).items() if o in kinds}

    @functools.cache
    def facts_of():
        return network_facts(analysis, platform, profile() if profile else None)

    return SearchSpace(n_layers=len(analysis.layers), feasible_cuts=analysis.feasible_cuts,
                       check_cuts=lambda cuts: analysis.check_cuts(list(cuts)), stage_pe_types=kinds,
                       feasible_tuple=lambda cuts: analysis.is_feasible(list(cuts)),
                       main_pe=platform.main_kind, gpu_layer_profile=profile, stage_roles=roles,
                       network_facts=facts_of, board_costs=platform.board_costs,
                       run_frames=settings.sample_size + (settings.warmup or 0),
                       shared_cores=platform.shared_cores())
