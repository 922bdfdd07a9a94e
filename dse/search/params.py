"""Turning a strategy's choices into a Configuration, with the thesis' buffer rule applied.

Buffers are the frames in flight: a stage with more streams than buffers could never fill them, so
every configuration the search proposes has buffers >= each stage's streams (the fine-tuner also
keeps buffers >= pre/post threads).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.search.streams import stream_tuple

BOUND_KEYS = ("pre", "post", "buffers", "streams")


def check_bounds(bounds: Mapping[str, int]) -> dict[str, int]:
    missing = [k for k in BOUND_KEYS if k not in bounds]
    if missing:
        raise DseError(f"parameter bounds lack {missing}; expected keys {list(BOUND_KEYS)}")
    out = {k: int(bounds[k]) for k in BOUND_KEYS}
    if any(v < 1 for v in out.values()):
        raise DseError(f"parameter bounds must all be >= 1, got {out}")
    return out


def make_config(base: Configuration, option: str, cuts: Sequence[int], streams: Sequence[int], *,
                pre: int, post: int, buffers: int) -> Configuration:
    streams = tuple(int(s) for s in streams)
    return base.with_(option=option, cuts=tuple(int(c) for c in cuts), streams=streams,
                      pre_threads=int(pre), post_threads=int(post), buffers=max(int(buffers), max(streams)))


def search_config(base: Configuration, option: str, cuts: Sequence[int], streams: Sequence[int],
                  bounds: Mapping[str, int], pipeline_buffers: bool = True) -> Configuration:
    """The configuration cut search measures: threads at the maximizer's bounds, and buffers at its bound,
    raised for a multi-stage pipeline to one per busy thread and execution context (pre + post + all
    streams): the bound was found on a one-stage pipeline, and a deeper one with fewer frames in flight
    starves its stages (``pipeline_buffers=False``: the thesis' rule, the bound everywhere; either way the
    fine-tuner removes what is not needed)."""
    streams = tuple(int(s) for s in streams)
    buffers = int(bounds["buffers"])
    if pipeline_buffers and len(streams) > 1:
        buffers = max(buffers, int(bounds["pre"]) + int(bounds["post"]) + sum(streams))
    return make_config(base, option, cuts, streams, pre=bounds["pre"], post=bounds["post"], buffers=buffers)


def full_stream_config(space, base: Configuration, option: str, cuts: Sequence[int], bounds: Mapping[str, int],
                       settings) -> Configuration:
    """``search_config`` with every main-PE stage at the maximizer's whole stream count (``share_main=False``),
    scaled by the stage's share of the resources the maximizer ran on: what the guided search explores, the
    exhaustive reference sweeps and the decisions' cut grid measures. A Jetson's GPU stages all run on the whole
    GPU (no change); a host-cpu stage on one of two cores gets half the streams the maximizer found on both
    (yolov4-tiny@160 on a 2-core host, eight round-robin re-runs each: 1-1 (25) at streams (2, 2) 107.5 FPS, at
    (1, 1) 112.6)."""
    streams = stream_tuple(space.stages(option), bounds["streams"], dla_streams=settings.dla_streams,
                           main_pe=space.main_pe, share_main=False)
    return search_config(base, option, cuts, _scaled_to_resources(space, option, streams), bounds,
                         settings.pipeline_buffers)


def _scaled_to_resources(space, option: str, streams: Sequence[int]) -> tuple[int, ...]:
    """``streams`` with each main-PE stage's count times its share of the resources of the maximizer's stage (the
    main-PE-only option's), rounded up, at least 1; unchanged where the space does not know the stages' resources."""
    roles = space.stage_roles or {}
    try:
        whole = len(roles[space.main_only_option()][0].resources)
        own = [len(r.resources) for r in roles[option]]
    except (KeyError, DseError):
        return tuple(streams)
    return tuple(max(1, -(-s * n // whole)) if t == space.main_pe and n < whole else s
                 for s, n, t in zip(streams, own, space.stages(option)))
