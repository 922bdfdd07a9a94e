"""Algorithm 5, MapStageToPE (thesis l. 1233-1267): stages of every app onto concrete PEs.

Apps are visited in decreasing order of their largest DLA-stage WCET; after each app, the apps it runs together
with in some scenario. CPU tasks go round robin over the cores, DLA stages alternate DLA0/DLA1, GPU stages go to
the one GPU. Visiting co-running apps right after each other spreads their DLA stages over both cores; with every
pair co-running (FSM-C alpha) some pairs still share a DLA, which is why PR < LC there (l. 1481-1483).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from dse.rt.model import Stage


def map_stages(chains: Mapping[str, Sequence[Stage]], scenarios: Sequence[Sequence[str]], cpu_cores: Sequence[int],
               n_dla: int = 2) -> dict[tuple[str, int], str]:
    """(app, stage index) -> PE name for every app of ``chains`` (app -> its stage chain)."""
    def dla_key(app):
        return max((s.wcet_us for s in chains[app] if s.kind == "dla"), default=0.0)

    order = sorted(chains, key=dla_key, reverse=True)          # stable: ties keep the app order
    neighbours = {a: [b for b in order if b != a and any(a in sc and b in sc for sc in scenarios)] for a in order}
    placement: dict[tuple[str, int], str] = {}
    idx = {"cpu": 0, "dla": 0}

    def place(app):
        if (app, 0) in placement:
            return
        for k, stage in enumerate(chains[app]):
            if stage.kind == "cpu":
                placement[app, k] = f"CPU{cpu_cores[idx['cpu'] % len(cpu_cores)]}"
                idx["cpu"] += 1
            elif stage.kind == "gpu":
                placement[app, k] = "GPU"
            else:
                placement[app, k] = f"DLA{idx['dla'] % n_dla}"
                idx["dla"] += 1

    for a in order:
        place(a)
        for b in neighbours[a]:
            place(b)
    return placement
