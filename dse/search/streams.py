"""The stream tuple used while searching cuts (thesis Sec. 3.5.1).

Two streams for a single-DLA stage, four for a PND stage (two per DLA), the maximizer's GPU streams
for a GPU stage, halved (rounded up) when two stages share the GPU. Other stage types get one.
The guided search keeps the whole count on each GPU stage (``share_main=False``): see ``stream_tuple``.
"""
from __future__ import annotations

import math
from typing import Sequence

from dse.search.space import stage_width


def stream_tuple(stage_types: Sequence[str], main_streams: int, *, dla_streams: int = 2,
                 main_pe: str = "GPU", share_main: bool = True) -> tuple[int, ...]:
    """``share_main=False``: every main-PE stage gets ``main_streams``, not a share. Halving leaves PND-B at
    (1, 4, 1) where the fine-tuner takes it to (2, 4, 2) or more, so a cut search at halved streams ranks PND-B
    below PND-A by what tuning gives back (yolov4 INT8: PND-B (53, 180) samples 213 FPS at (1, 4, 1) and 226 at
    (1, 4, 3))."""
    n_main = sum(1 for t in stage_types if t == main_pe)
    share = (max(1, math.ceil(main_streams / n_main)) if share_main else main_streams) if n_main else 0
    out = []
    for t in stage_types:
        if t == main_pe:
            out.append(share)
        elif t in ("DLA", "PND"):
            out.append(dla_streams * stage_width(t))
        else:
            out.append(1)
    return tuple(out)


def resplit_first_main(streams: Sequence[int], stage_types: Sequence[str], main_pe: str = "GPU") -> tuple[int, ...] | None:
    """Algorithm 3 lines 2-7: the first (main-PE) stage keeps one stream, the last main-PE stage takes
    the rest; None when it does not apply (first stage not on the main PE, no second main-PE stage, or
    the first stage already has one stream)."""
    mains = [i for i, t in enumerate(stage_types) if t == main_pe]
    if len(mains) < 2 or mains[0] != 0 or streams[0] <= 1:
        return None
    out = list(streams)
    out[mains[-1]] += out[0] - 1
    out[0] = 1
    return tuple(out)
