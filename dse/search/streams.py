"""The stream tuple used while searching cuts (thesis Sec. 3.5.1).

Two streams for a single-DLA stage, four for a PND stage (two per DLA), the maximizer's GPU streams
for a GPU stage, halved (rounded up) when two stages share the GPU. Other stage types get one.
"""
from __future__ import annotations

import math
from typing import Sequence

from dse.search.space import stage_width


def stream_tuple(stage_types: Sequence[str], main_streams: int, *, dla_streams: int = 2,
                 main_pe: str = "GPU") -> tuple[int, ...]:
    n_main = sum(1 for t in stage_types if t == main_pe)
    share = max(1, math.ceil(main_streams / n_main)) if n_main else 0
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
