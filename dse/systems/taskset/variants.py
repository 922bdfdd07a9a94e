"""Variant tables (seed 003, spec 5.3): per task type and CE/TLP option a WCET range [U_min, U_max], and the
scenarios that compare sets of enabled options against a reference option.

A table comes from a YAML file or config (``config/taskset/apollo-xavier.yaml`` holds the paper's Table 4) or
from the project's own evaluator (``dse.systems.taskset.measured``: a ``measure`` node instead of ``variants``). Times are
kept in ms; a NaN cell means the type has no variant for that option (Table 4's "x" and "-")."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dse.core.validate import positive_float, dir_name
from dse.systems.taskset.errors import TasksetError

# 2/4/6 CPU cores, CUDA ("regular") cores on 4/8 SMs, Tensor cores on 4/8 SMs, one NVDLA, both NVDLAs as a block
OPTIONS = ("cpu2", "cpu4", "cpu6", "rc4", "rc8", "tc4", "tc8", "dla1", "dla2")
TIME_UNITS = {"ms": 1.0, "us": 1e-3}


@dataclass(frozen=True)
class Scenario:
    name: str
    label: str
    reference: str                               # the option whose times define the utilization threshold
    configurations: dict[str, tuple[str, ...]]   # name -> enabled options, in the table's column order


@dataclass(frozen=True)
class VariantTable:
    name: str
    frame_ms: float
    types: tuple[str, ...]
    lo: np.ndarray       # (types, OPTIONS) ms, NaN = no variant
    hi: np.ndarray
    scenarios: dict[str, Scenario]

    def option_index(self, option: str) -> int:
        if option not in OPTIONS:
            raise TasksetError(f"unknown option {option!r}; valid choices: {', '.join(OPTIONS)}")
        return OPTIONS.index(option)

    def scenario(self, name: str) -> Scenario:
        if name not in self.scenarios:
            raise TasksetError(f"unknown scenario {name!r} in table {self.name}; valid choices: "
                               f"{', '.join(self.scenarios) or '(none defined)'}")
        return self.scenarios[name]

    def to_dict(self) -> dict:
        """The YAML form (``from_dict`` reads it back), in ms."""
        variants = {t: {o: [float(self.lo[i, j]), float(self.hi[i, j])] for j, o in enumerate(OPTIONS)
                        if np.isfinite(self.lo[i, j])} for i, t in enumerate(self.types)}
        scenarios = {s.name: {"label": s.label, "reference": s.reference,
                              "configurations": {c: list(o) for c, o in s.configurations.items()}}
                     for s in self.scenarios.values()}
        return {"name": self.name, "unit": "ms", "frame": self.frame_ms, "variants": variants, "scenarios": scenarios}

    @classmethod
    def from_dict(cls, d: dict, measured_later: bool = False) -> VariantTable:
        """``measured_later``: the times come from a job (``dse.systems.taskset.measured``); check the rest, hold none."""
        name = dir_name(d.get("name", "variants"), "taskset.name", TasksetError)
        unit = d.get("unit")
        if unit not in TIME_UNITS:
            raise TasksetError(f"variant table {name}: time unit {unit!r} missing or unknown; valid choices: "
                               f"{', '.join(TIME_UNITS)}")
        scale = TIME_UNITS[unit]
        frame = positive_float(d.get("frame"), f"variant table {name}: frame", TasksetError) * scale
        variants = d.get("variants") or {}
        if measured_later and not variants:
            scenarios = {str(k): _scenario(str(k), v or {}) for k, v in (d.get("scenarios") or {}).items()}
            return cls(name, frame, (), np.empty((0, len(OPTIONS))), np.empty((0, len(OPTIONS))), scenarios)
        if not isinstance(variants, dict) or not variants:
            raise TasksetError(f"variant table {name}: 'variants' must map task types to {{option: [U_min, U_max]}}")
        types = tuple(str(t) for t in variants)
        lo = np.full((len(types), len(OPTIONS)), np.nan)
        hi = lo.copy()
        for i, t in enumerate(types):
            cells = variants[t] or {}
            if not isinstance(cells, dict):
                raise TasksetError(f"task {t}: expected {{option: [U_min, U_max]}}, got {cells!r}")
            for option, cell in cells.items():
                if option not in OPTIONS:
                    raise TasksetError(f"task {t}: unknown option {option!r}; valid choices: {', '.join(OPTIONS)}")
                u_min, u_max = _range(cell, f"task {t} option {option}")
                if u_min > u_max:
                    raise TasksetError(f"task {t} option {option}: U_min {u_min} > U_max {u_max}")
                j = OPTIONS.index(option)
                lo[i, j], hi[i, j] = u_min * scale, u_max * scale
            if not np.isfinite(lo[i]).any():
                raise TasksetError(f"task {t} has no runnable variant; give at least one of {', '.join(OPTIONS)}")
        scenarios = {str(k): _scenario(str(k), v or {}) for k, v in (d.get("scenarios") or {}).items()}
        return cls(name, frame, types, lo, hi, scenarios)


def _range(cell, what: str) -> tuple[float, float]:
    """[U_min, U_max], or one number for an exact time."""
    if isinstance(cell, (int, float)):
        v = positive_float(cell, what, TasksetError)
        return v, v
    if isinstance(cell, (list, tuple)) and len(cell) == 2:
        return (positive_float(cell[0], f"{what} U_min", TasksetError),
                positive_float(cell[1], f"{what} U_max", TasksetError))
    raise TasksetError(f"{what}: expected [U_min, U_max] or one number, got {cell!r}")


def _scenario(name: str, d: dict) -> Scenario:
    reference = d.get("reference")
    if reference not in OPTIONS:
        raise TasksetError(f"scenario {name}: reference {reference!r} is not an option; valid choices: "
                           f"{', '.join(OPTIONS)}")
    configs = d.get("configurations") or {}
    if not configs:
        raise TasksetError(f"scenario {name}: no configurations (name: [options])")
    out = {}
    for c, options in configs.items():
        bad = [o for o in options or () if o not in OPTIONS]
        if bad or not options:
            raise TasksetError(f"scenario {name} configuration {c}: options {bad or options!r} not valid; valid "
                               f"choices: {', '.join(OPTIONS)}")
        out[str(c)] = tuple(o for o in OPTIONS if o in options)
    return Scenario(name, str(d.get("label", name)), reference, out)


def load_table(source) -> VariantTable:
    """A table from a dict, a YAML path, or a shipped name under ``config/taskset/``."""
    if isinstance(source, VariantTable):
        return source
    if isinstance(source, dict):
        return VariantTable.from_dict(source)
    from omegaconf import OmegaConf

    from dse.config import config_dir

    path = Path(source)
    if not path.suffix:
        path = config_dir() / "taskset" / f"{source}.yaml"
        if not path.exists():
            shipped = sorted(p.stem for p in (config_dir() / "taskset").glob("*.yaml"))
            raise TasksetError(f"unknown variant table {source!r}; valid choices: {', '.join(shipped)} (or a path)")
    from dse.core.errors import DseError
    from dse.core.validate import yaml_text

    try:
        text = yaml_text(path, "variant table")
    except DseError as exc:
        raise TasksetError(str(exc)) from None
    return VariantTable.from_dict(OmegaConf.to_container(OmegaConf.create(text), resolve=True))
