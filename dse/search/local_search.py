"""Local search heuristic (thesis Algorithm 3).

From a tuple the global search hands over: first, on options whose first stage and another stage run
on the GPU (B, D, PND-B), try giving the first stage one stream and the rest to the last GPU stage;
keep it if FPS beats the global FPS. Then, while FPS improves, move each cut left and right by one
layer over ALL feasible positions (not the sampled ones), keep a move that improves and try the same
direction again, else roll back. Only the best configuration is reported (Top-K is not touched).
"""
from __future__ import annotations

from dse.core.configuration import Configuration
from dse.core.measurement import Measurement
from dse.search.moves import move, single
from dse.search.study import StudyView, score
from dse.search.space import SearchSpace
from dse.search.streams import resplit_first_main


def local_search(space: SearchSpace, tracker: StudyView, config: Configuration,
                 measurement: Measurement) -> tuple[Configuration, Measurement]:
    """Returns the best (configuration, measurement) found, starting from ``config``."""
    best_cfg, best_m = config, measurement
    cur, fps_cur = config, score(measurement)
    types = space.stages(config.option)

    def run(cfg: Configuration, kind: str) -> float:
        nonlocal best_cfg, best_m
        m = tracker.measure(cfg, kind)
        if score(m) > score(best_m):
            best_cfg, best_m = cfg, m
        return score(m)

    resplit = resplit_first_main(cur.streams, types, space.main_pe)
    if resplit is not None and not tracker.exhausted:
        trial = cur.with_(streams=resplit, buffers=max(cur.buffers, max(resplit)))
        fps = run(trial, "local-streams")
        if fps > fps_cur:  # else roll back to the global streams
            cur, fps_cur = trial, fps

    n = len(cur.cuts)
    improved = True
    while improved and not tracker.exhausted:
        improved = False
        for i in range(n):
            for direction in (-1, +1):
                while not tracker.exhausted:
                    nxt = move(cur.cuts, single(n, i, direction), space.feasible_cuts, space.feasibility)
                    if nxt is None:
                        break
                    trial = cur.with_(cuts=nxt)
                    fps = run(trial, "local")
                    if fps > fps_cur:
                        cur, fps_cur, improved = trial, fps, True
                    else:
                        break  # roll back: cur is unchanged
    return best_cfg, best_m
