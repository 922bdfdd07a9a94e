"""CPU core groups as processing elements (the CPU-cluster setting of Kang et al.): the group configurations a
machine offers and the mapping options they imply.

A configuration splits the usable cores into groups of non-increasing size, e.g. 4 cores -> (4), (3,1),
(2,2), (2,1,1), (1,1,1,1). Each is a mapping option named by its groups ("4", "3-1", "2-1-1", ...): stage i
runs on group i, cores taken in order. Option ``E`` is the whole network on one group of all cores.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from dse.errors import DseError, choices_error


def usable_cores() -> list[int]:
    """The cores this process may run on (``os.sched_getaffinity``), sorted."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


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


def option_name(sizes: tuple[int, ...]) -> str:
    return "-".join(str(s) for s in sizes)


def group_name(cores) -> str:
    from dse.runtime.ort_engine import core_group_name

    return core_group_name(cores)


@dataclass(frozen=True)
class CoreGroupOption:
    """A mapping option on CPU core groups: the cores of every stage (a PND stage lists two groups)."""

    name: str
    stages: tuple[tuple[tuple[int, ...], ...], ...]

    @property
    def n_stages(self) -> int:
        return len(self.stages)

    def stage_pes(self, index: int) -> list[str]:
        return [group_name(g) for g in self.stages[index]]

    def describe(self) -> str:
        return " -> ".join("+".join(self.stage_pes(i)) for i in range(self.n_stages))


def core_group_options(cores: list[int], max_groups: int = 4) -> dict[str, CoreGroupOption]:
    """``E`` plus one option per group configuration of ``cores``."""
    if not cores:
        raise DseError("no usable CPU cores")
    options = {"E": CoreGroupOption("E", ((tuple(cores),),))}
    for sizes in group_sizes(len(cores), max(1, max_groups)):
        stages, start = [], 0
        for s in sizes:
            stages.append((tuple(cores[start:start + s]),))
            start += s
        options[option_name(sizes)] = CoreGroupOption(option_name(sizes), tuple(stages))
    return options


@dataclass(frozen=True)
class HostCpuPlatform:
    """The ``host-cpu`` platform: this machine's cores as PEs (YAML: config/platform/host-cpu.yaml)."""

    name: str
    cores: tuple[int, ...]
    options: dict
    precisions: tuple[str, ...] = ("fp32",)
    backend: str = "ort"
    board_model: str = "host"
    main_pe: str = "CPU"
    max_streams_per_stage: int = 4

    def option(self, name: str) -> CoreGroupOption:
        try:
            return self.options[name]
        except KeyError:
            raise choices_error(f"mapping option for platform {self.name}", name, self.options) from None

    @property
    def pes(self) -> list[str]:
        names = {pe for o in self.options.values() for i in range(o.n_stages) for pe in o.stage_pes(i)}
        return sorted(names)


def host_platform(d) -> HostCpuPlatform:
    """A HostCpuPlatform from the YAML content (dict or DictConfig). ``cores: auto`` takes the affinity mask."""
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(d, DictConfig):
            d = OmegaConf.to_container(d, resolve=True)
    except ImportError:  # pragma: no cover
        pass
    d = dict(d)
    available = usable_cores()
    cores = d.get("cores", "auto")
    if cores in (None, "auto"):
        cores = available
    else:
        cores = sorted(int(c) for c in cores)
        missing = sorted(set(cores) - set(available))
        if missing:
            raise DseError(f"platform {d.get('name')}: cores {missing} are not usable here; usable: {available}")
    options = core_group_options(list(cores), int(d.get("max_groups", 4)))
    extra = d.get("options") or {}
    if extra not in ("auto",) and isinstance(extra, dict):
        # explicit options: name -> list of stages, a stage = list of core groups (two groups = PND)
        for name, stages in extra.items():
            spec = []
            for st in stages:
                groups = st if st and isinstance(st[0], (list, tuple)) else [st]
                spec.append(tuple(tuple(int(c) for c in g) for g in groups))
            options[str(name)] = CoreGroupOption(str(name), tuple(spec))
    return HostCpuPlatform(name=str(d.get("name", "host-cpu")), cores=tuple(cores), options=options,
                           precisions=tuple(d.get("precisions", ("fp32",))), backend=str(d.get("backend", "ort")),
                           board_model=str(d.get("board_model", "host")),
                           max_streams_per_stage=int((d.get("limits") or {}).get("max_streams_per_stage", 4)))
