"""A per-layer mapping: a CPU configuration (cores split into groups), the logical PEs it yields, and one PE
id per task, stored in a ``Configuration`` so the measurement cache and the Parquet schema stay as they are.

A per-layer mapping is not a cut tuple (a PE may host several non-contiguous groups of tasks, branches may run
on different PEs at once), so it lives in ``Configuration.extra`` (spec 1.2): ``mapping=lm1``, ``cpu_config``,
``layer_map`` (one PE id per task: one base-36 character each while every id < 36, else a comma list),
``util_cap``, ``task_graph`` (the digest the ids refer to); ``option`` = ``LM:<cpu_config>[+GPU][+NPU|+DLA...]``.
PE ids follow 002 L230 / 004 L148: CPU groups first in configuration order, then the GPU, then NPU/DLA.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.taskgraph.errors import LayerMapError
from dse.taskgraph.profile import ProfileTable
from dse.taskgraph.graph import TaskGraph
from dse.platform.cpu_groups import core_group_name, group_sizes

ACCELERATORS = ("gpu", "npu", "dla")
_ACCEL_ORDER = {"gpu": 0, "npu": 1, "dla": 1}
MAPPING_TAG = "lm1"
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True)
class CpuConfig:
    """A split of the CPU cores into groups, largest first: (2, 1, 1) is ``"2-1-1"``."""

    groups: tuple[int, ...]

    @property
    def name(self) -> str:
        return "-".join(str(g) for g in self.groups)

    @property
    def n_cores(self) -> int:
        return sum(self.groups)

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def valid(n_cores: int) -> list[str]:
        return ["-".join(str(g) for g in sizes) for sizes in group_sizes(n_cores, n_cores)]

    @classmethod
    def parse(cls, text, n_cores: int | None = None) -> CpuConfig:
        """``"2-1-1"`` (or a tuple of group sizes); with ``n_cores`` it must split exactly that many cores."""
        if isinstance(text, CpuConfig):
            groups = text.groups
        else:
            try:
                groups = tuple(int(g) for g in (str(text).split("-") if isinstance(text, str) else text))
            except (TypeError, ValueError):
                groups = ()
        total = n_cores if n_cores is not None else sum(g for g in groups if g > 0)
        valid = cls.valid(total) if total and total > 0 else []
        name = "-".join(str(g) for g in groups)
        if not groups or name not in valid:
            hint = f"valid choices for {total} cores: {', '.join(valid)}" if valid else \
                "write the group sizes largest first, e.g. 4, 3-1, 2-2, 2-1-1, 1-1-1-1"
            raise LayerMapError(f"unknown CPU configuration {text!r}; {hint}")
        return cls(groups)


@dataclass(frozen=True)
class Pe:
    """One logical PE: a CPU group (kind ``cpu<k>``, its k ``core_ids``) or an accelerator (no cores)."""

    name: str
    kind: str
    core_ids: tuple[int, ...] = ()

    @property
    def cores(self) -> int:
        return len(self.core_ids)


@dataclass(frozen=True)
class PeSet:
    """The ordered logical PEs of a CPU configuration plus accelerators; PE id = position."""

    pes: tuple[Pe, ...]

    @classmethod
    def build(cls, cpu_config: CpuConfig | str, accelerators=(), cores=None) -> PeSet:
        """CPU groups take ``cores`` (default 0..N-1) in order; accelerators are ordered GPU, then NPU/DLA."""
        cfg = CpuConfig.parse(cpu_config)
        cores = list(range(cfg.n_cores)) if cores is None else [int(c) for c in cores]
        if len(cores) != cfg.n_cores:
            raise LayerMapError(f"CPU configuration {cfg.name} needs {cfg.n_cores} cores, given {cores}")
        pes, start = [], 0
        for size in cfg.groups:
            group = tuple(cores[start:start + size])
            pes.append(Pe(core_group_name(group), f"cpu{size}", group))
            start += size
        accels = [str(a).lower() for a in accelerators]
        for a in accels:
            if a not in ACCELERATORS:
                raise LayerMapError(f"unknown accelerator {a!r}; valid choices: {', '.join(ACCELERATORS)}")
        if accels != sorted(accels, key=_ACCEL_ORDER.get):
            raise LayerMapError(f"accelerators {accels}: the GPU comes before NPU/DLA (002 L230)")
        for kind in ("gpu", "npu", "dla"):
            same = [a for a in accels if a == kind]
            for i, _ in enumerate(same):
                pes.append(Pe(kind.upper() + (str(i) if len(same) > 1 or kind == "dla" else ""), kind))
        return cls(tuple(pes))

    def __len__(self) -> int:
        return len(self.pes)

    def __getitem__(self, i: int) -> Pe:
        return self.pes[i]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.pes)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(p.kind for p in self.pes)

    @property
    def cores(self) -> np.ndarray:
        """CPU cores of each PE (0 for accelerators)."""
        return np.array([p.cores for p in self.pes], dtype=float)

    def describe(self) -> str:
        return ", ".join(f"{i}={p.name}({p.kind})" for i, p in enumerate(self.pes))


@dataclass(frozen=True)
class LayerMapping:
    """One PE id per task under a CPU configuration (+ accelerators), with an optional CPU utilization cap."""

    cpu_config: CpuConfig
    pe: tuple[int, ...]
    accelerators: tuple[str, ...] = ()
    util_cap: float | None = None
    graph_digest: str = ""

    def __post_init__(self):
        object.__setattr__(self, "cpu_config", CpuConfig.parse(self.cpu_config))
        object.__setattr__(self, "pe", tuple(int(p) for p in self.pe))
        object.__setattr__(self, "accelerators", tuple(str(a).lower() for a in self.accelerators))
        if self.util_cap is not None:
            object.__setattr__(self, "util_cap", float(self.util_cap))

    def pes(self, cores=None) -> PeSet:
        return PeSet.build(self.cpu_config, self.accelerators, cores)

    @property
    def array(self) -> np.ndarray:
        return np.array(self.pe, dtype=np.int64)

    @property
    def option(self) -> str:
        return "LM:" + self.cpu_config.name + "".join("+" + a.upper() for a in self.accelerators)

    def to_configuration(self, base):
        """``base`` (a Configuration: benchmark, platform, precision ...) carrying this mapping."""
        extra = {k: v for k, v in dict(base.extra).items() if k not in ("util_cap", "task_graph")}
        extra.update({"mapping": MAPPING_TAG, "cpu_config": self.cpu_config.name, "layer_map": encode_ids(self.pe)})
        if self.util_cap is not None:
            extra["util_cap"] = repr(self.util_cap)
        if self.graph_digest:
            extra["task_graph"] = self.graph_digest
        return base.with_(option=self.option, cuts=(), streams=(1,), extra=tuple(extra.items()))

    @classmethod
    def from_configuration(cls, cfg) -> LayerMapping:
        extra = dict(cfg.extra)
        if extra.get("mapping") != MAPPING_TAG:
            raise LayerMapError(f"configuration {cfg.hash} holds no layer mapping (extra mapping="
                                f"{extra.get('mapping')!r}; valid choices: {MAPPING_TAG})")
        cpu, accels = parse_option(cfg.option)
        if extra.get("cpu_config", cpu) != cpu:
            raise LayerMapError(f"configuration {cfg.hash}: option {cfg.option!r} and extra cpu_config "
                                f"{extra['cpu_config']!r} disagree")
        if "layer_map" not in extra:
            raise LayerMapError(f"configuration {cfg.hash}: no layer_map in extra")
        cap = extra.get("util_cap")
        try:
            cap = float(cap) if cap not in (None, "", "None") else None
        except ValueError:
            raise LayerMapError(f"configuration {cfg.hash}: util_cap {cap!r} is not a number") from None
        return cls(CpuConfig.parse(cpu), decode_ids(extra["layer_map"]), accels, cap, extra.get("task_graph", ""))


def parse_option(option: str) -> tuple[str, tuple[str, ...]]:
    """``"LM:2-1-1+GPU+NPU"`` -> (``"2-1-1"``, ("gpu", "npu"))."""
    if not isinstance(option, str) or not option.startswith("LM:"):
        raise LayerMapError(f"option {option!r} is not a layer-mapping option; valid form: "
                            f"LM:<cpu_config>[+GPU][+NPU|+DLA...], e.g. LM:2-1-1+GPU")
    cpu, *accels = option[3:].split("+")
    for a in accels:
        if a.lower() not in ACCELERATORS:
            raise LayerMapError(f"option {option!r}: unknown accelerator {a!r}; valid choices: GPU, NPU, DLA")
    return CpuConfig.parse(cpu).name, tuple(a.lower() for a in accels)


def encode_ids(ids) -> str:
    ids = [int(i) for i in ids]
    if any(i < 0 for i in ids):
        raise LayerMapError(f"negative PE id in {ids}")
    if all(i < len(_DIGITS) for i in ids):
        return "".join(_DIGITS[i] for i in ids)
    return ",".join(str(i) for i in ids) + ("," if len(ids) == 1 else "")


def decode_ids(text: str) -> tuple[int, ...]:
    text = str(text).strip()
    try:
        if "," in text:
            return tuple(int(x) for x in text.split(",") if x.strip())
        return tuple(_DIGITS.index(c) for c in text.lower())
    except ValueError:
        raise LayerMapError(f"malformed layer_map {text!r}: one base-36 digit per task, or a comma list") from None


def check_pe_ids(ids: np.ndarray, graph: TaskGraph, pes: PeSet, what: str = "mapping") -> None:
    """One PE id per task, each naming a PE of ``pes`` (``what``: how the message names the ids)."""
    if ids.ndim != 1 or len(ids) != graph.n:
        raise LayerMapError(f"{what} has {ids.size} PE ids, the task graph has {graph.n} tasks")
    bad = np.flatnonzero((ids < 0) | (ids >= len(pes)))
    if len(bad):
        t = int(bad[0])
        raise LayerMapError(f"task {t} ({graph.names[t]}) on PE id {int(ids[t])}; valid choices: 0..{len(pes) - 1} "
                            f"({pes.describe()})")


def validate(mapping: LayerMapping | np.ndarray, graph: TaskGraph, profile: ProfileTable, pes: PeSet | None = None,
             ) -> None:
    """Raise naming the first problem: length, PE id range, a task on a PE that cannot run it (inf time),
    a PE kind missing from the profile, a util cap outside (0, 1], a mapping made for another task graph."""
    if isinstance(mapping, LayerMapping):
        if pes is None:
            pes = mapping.pes()
        if mapping.graph_digest and mapping.graph_digest != graph.digest:
            raise LayerMapError(f"mapping made for task graph {mapping.graph_digest}, not {graph.digest}")
        cap = mapping.util_cap
        if cap is not None and not (0.0 < cap <= 1.0):
            raise LayerMapError(f"util_cap {cap} is outside (0, 1]; valid: a fraction of the CPU cores, e.g. 0.6")
        ids = mapping.array
    else:
        if pes is None:
            raise LayerMapError("validate needs the PeSet for a bare id array")
        ids = np.asarray(mapping)
    profile.check_graph(graph)
    if not np.issubdtype(ids.dtype, np.integer):
        raise LayerMapError(f"PE ids must be integers, got {ids.dtype}")
    check_pe_ids(ids, graph, pes)
    missing = sorted(set(pes.kinds) - set(profile.kinds))
    if missing:
        raise LayerMapError(f"the profile has no times for PE kind(s) {', '.join(missing)}; it has "
                            f"{', '.join(profile.kinds)}")
    times = profile.time_us[:, [profile.kind_index(k) for k in pes.kinds]]   # [n, P]
    chosen = times[np.arange(graph.n), ids]
    bad = np.flatnonzero(~np.isfinite(chosen))
    if len(bad):
        t = int(bad[0])
        ok = [f"{p}={pes[p].name}" for p in range(len(pes)) if np.isfinite(times[t, p])]
        raise LayerMapError(f"task {t} ({graph.names[t]}) cannot run on PE {int(ids[t])} ({pes[ids[t]].name}, "
                            f"{pes[ids[t]].kind}: unsupported in the profile); valid choices: {', '.join(ok) or 'none'}")


__all__ = ["CpuConfig", "Pe", "PeSet", "LayerMapping", "check_pe_ids", "validate", "parse_option", "encode_ids",
           "decode_ids"]
