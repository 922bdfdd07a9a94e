"""Global search heuristic (thesis Algorithm 2) over the sampled candidate cut set.

- Policy set chosen by the main PE's (GPU's) utilization of a tuple: above T, move each cut one
  candidate step left or right, or shift all cuts left or right; otherwise move the cuts that bound
  GPU stages so the GPU stages get more layers (each such cut alone, and all of them together).
- A policy that improves FPS is applied again from the new tuple ("continue with P_i again").
- Top-K tuples by FPS are the frontier: each round expands the best Top-K tuple that still has a new
  (unmeasured, feasible) neighbour under its policy set, applying every policy from it; the search
  ends when no new tuple can be selected. K therefore widens (10) or narrows (1) the searched area.
- Full mode: whenever a measured tuple has utilization >= T and has just entered Top-K, Algorithm 3
  runs from it; its results only update the best configuration.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from dse.core.configuration import Configuration
from dse.core.measurement import Measurement
from dse.search.local_search import local_search
from dse.search.moves import Directions, move, single
from dse.search.params import search_config
from dse.search.study import StudyView, score
from dse.search.result import StrategyResult
from dse.search.space import SearchSpace


@dataclass
class TopEntry:
    cuts: tuple[int, ...]
    fps: float
    util: float


def balanced_policies(n_cuts: int) -> list[Directions]:
    """Around a well-utilized tuple: one cut left/right, all cuts left/right (duplicates dropped)."""
    out: list[Directions] = []
    for i in range(n_cuts):
        out += [single(n_cuts, i, -1), single(n_cuts, i, +1)]
    out += [tuple([-1] * n_cuts), tuple([+1] * n_cuts)]
    return list(dict.fromkeys(out))


def main_pe_policies(stage_types: Sequence[str], main_pe: str) -> list[Directions]:
    """Moves that give the main-PE (GPU) stages more layers: a cut between a GPU stage and another
    PE moves towards the other PE's side; each such cut alone, then all of them together."""
    n = len(stage_types) - 1
    dirs = []
    for i in range(n):
        left, right = stage_types[i] == main_pe, stage_types[i + 1] == main_pe
        dirs.append(-1 if right and not left else (+1 if left and not right else 0))
    movers = [i for i, d in enumerate(dirs) if d]
    out = [single(n, i, dirs[i]) for i in movers]
    if len(movers) > 1:
        out.append(tuple(dirs))
    return out


def global_search(space: SearchSpace, tracker: StudyView, base: Configuration, option: str,
                  streams: Sequence[int], bounds: Mapping[str, int], candidates: Sequence[int],
                  initial: Sequence[int], *, threshold: float, top_k: int, full: bool,
                  pipeline_buffers: bool = True) -> StrategyResult:
    """The best configuration measured (the local searches' included); ``extra``: the final Top-K (``top_k``,
    best first) and the tuples Algorithm 3 started from (``local_starts``), which decide whether the explorer
    lowers T and runs again."""
    mark = tracker.study.measured
    types = space.stages(option)
    n = len(types) - 1
    positions = sorted(set(candidates) | set(initial))
    balanced = balanced_policies(n)
    towards_main = main_pe_policies(types, space.main_pe) or balanced

    def policies(util: float) -> list[Directions]:
        return balanced if util > threshold else towards_main

    top: list[TopEntry] = []
    visited: dict[tuple[int, ...], TopEntry] = {}
    local_starts: list[tuple[int, ...]] = []
    best_cfg: Configuration | None = None
    best_m: Measurement | None = None

    def update_best(cfg: Configuration, m: Measurement) -> None:  # conf_best
        nonlocal best_cfg, best_m
        if best_m is None or score(m) > score(best_m):
            best_cfg, best_m = cfg, m

    def run(cuts: tuple[int, ...]) -> TopEntry:
        cfg = search_config(base, option, cuts, streams, bounds, pipeline_buffers)
        m = tracker.measure(cfg, "global")
        entry = TopEntry(cuts, score(m), float(m.util.get(space.main_pe, 0.0)))
        visited[cuts] = entry
        update_best(cfg, m)
        entered = False
        if m.ok and entry.fps > 0:
            top.append(entry)
            top.sort(key=lambda e: -e.fps)  # stable: earlier tuples win ties
            del top[top_k:]
            entered = any(e is entry for e in top)
        if full and entered and entry.util >= threshold and not tracker.exhausted:
            local_starts.append(cuts)
            lcfg, lm = local_search(space, tracker, cfg, m)
            update_best(lcfg, lm)
        return entry

    def new_neighbour(cuts: tuple[int, ...], policy: Directions) -> tuple[int, ...] | None:
        nxt = move(cuts, policy, positions, space.feasibility)
        return nxt if nxt is not None and nxt not in visited else None

    run(tuple(initial))
    while not tracker.exhausted:
        # the frontier is Top-K; while every tuple so far failed, the failed ones (towards the GPU)
        frontier = top or list(visited.values())
        anchor = next((e for e in frontier
                       if any(new_neighbour(e.cuts, p) is not None for p in policies(e.util))), None)
        if anchor is None:
            break  # no new cut-point tuple can be selected
        for policy in policies(anchor.util):
            cur = anchor
            while not tracker.exhausted:
                nxt = new_neighbour(cur.cuts, policy)
                if nxt is None:
                    break
                entry = run(nxt)
                if entry.fps > cur.fps:
                    cur = entry  # improved: continue with the same policy
                else:
                    break
    return StrategyResult(best_cfg, best_m, tracker.study.asked_since(mark),
                          {"top_k": list(top), "local_starts": local_starts})
