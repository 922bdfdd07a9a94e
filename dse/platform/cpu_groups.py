"""CPU core groups as processing elements (the CPU-cluster setting of Kang et al.): the group configurations a
machine offers. ``dse.platform`` turns them into the PEs and mapping options of ``host-cpu``.

A configuration splits the usable cores into groups of non-increasing size, e.g. 4 cores -> (4), (3,1),
(2,2), (2,1,1), (1,1,1,1). Each is a mapping option named by its groups ("3-1", "2-1-1", ...): stage i runs on
group i, cores taken in order. The one group of all cores is option ``E``, the whole network on it; it has no
second name ("4"), which a search would measure and tune as a mapping of its own (with one, a guided search on a
2-core host spent 6 of its 52 measurements on "2").
"""
from __future__ import annotations

import os
from typing import Sequence

from dse.core.errors import DseError


def usable_cores() -> list[int]:
    """The cores this process may run on (``os.sched_getaffinity``), sorted."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def core_group_name(cores: Sequence[int]) -> str:
    """PE name of a core group: (0,) -> 'CPU0', (0,1,2) -> 'CPU0-2', (0,2) -> 'CPU0,2'."""
    cores = sorted(int(c) for c in cores)
    if len(cores) == 1:
        return f"CPU{cores[0]}"
    if cores == list(range(cores[0], cores[-1] + 1)):
        return f"CPU{cores[0]}-{cores[-1]}"
    return "CPU" + ",".join(str(c) for c in cores)


def group_sizes(n_cores: int, max_groups: int) -> list[tuple[int, ...]]:
    """Partitions of ``n_cores`` into at most ``max_groups`` parts, largest part first, in reverse lexicographic order."""
    out: list[tuple[int, ...]] = []

    def rec(left: int, cap: int, acc: tuple[int, ...]) -> None:
        if left == 0:
            out.append(acc)
            return
        if len(acc) == max_groups:
            return
        for size in range(min(left, cap), 0, -1):
            rec(left - size, size, acc + (size,))

    rec(n_cores, n_cores, ())
    return out


def core_group_layouts(cores: list[int], max_groups: int = 4) -> dict[str, list[list[tuple[int, ...]]]]:
    """Option name -> per stage, the core groups it runs on (one group each): ``E`` (all cores) plus one option per
    configuration of two or more groups of ``cores``."""
    if not cores:
        raise DseError("no usable CPU cores")
    layouts = {"E": [[tuple(cores)]]}
    for sizes in group_sizes(len(cores), max(1, max_groups))[1:]:      # the first, (all cores,), is E
        stages, start = [], 0
        for s in sizes:
            stages.append([tuple(cores[start:start + s])])
            start += s
        layouts["-".join(str(s) for s in sizes)] = stages
    return layouts
