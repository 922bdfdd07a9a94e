"""The ``study`` config group (config/study/*.yaml): a grid of explorations (networks x precisions x input sizes x
batches x platforms x seeds), each point one ordinary exploration run. A point is a list of Hydra overrides on
top of the user's own, so a study runs exactly what ``snakemake`` runs for one network; every bad key or value is
refused here, naming it and the valid choices, before any job runs."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from dse.core.errors import DseError
from dse.core.validate import check_keys, dir_name

# grid key -> the override of one point's value ("{v}" replaced)
GRID_KEYS = {"benchmarks": "benchmark={v}", "precisions": "precision={v}", "input_sizes": "benchmark.input_size={v}",
             "batches": "batch={v}", "platforms": "platform={v}", "seeds": "seed={v}"}
KEYS = ("name", "grid", "overrides")


@dataclass(frozen=True)
class StudyPoint:
    """One exploration of the study: its grid values and the overrides that compose its config."""

    values: dict            # grid key -> value (only the keys the grid names)
    overrides: tuple[str, ...]

    @property
    def seed(self) -> int:
        return int(self.values.get("seeds", 0))


@dataclass(frozen=True)
class StudySettings:
    name: str
    grid: dict              # grid key -> tuple of values, in GRID_KEYS order
    overrides: tuple[str, ...]   # applied to every point (e.g. a smaller search)

    @classmethod
    def from_dict(cls, node) -> "StudySettings":
        from omegaconf import OmegaConf

        raw = OmegaConf.to_container(node, resolve=True) if not isinstance(node, dict) else dict(node)
        check_keys(raw, KEYS, "key of study")
        name = dir_name(raw.get("name"), "study.name")
        grid = raw.get("grid") or {}
        if not isinstance(grid, dict) or not grid:
            raise DseError(f"study {name}: the grid is empty; name at least one of {', '.join(GRID_KEYS)}")
        check_keys(grid, GRID_KEYS, f"grid key in study {name}:")
        for key, values in grid.items():
            if not isinstance(values, (list, tuple)) or not values:
                raise DseError(f"study {name}: grid key {key} must be a non-empty list, got {values!r}")
            if len(set(map(str, values))) != len(values):
                raise DseError(f"study {name}: grid key {key} repeats a value: {list(values)}")
        overrides = raw.get("overrides") or []
        if not isinstance(overrides, (list, tuple)):
            raise DseError(f"study {name}: overrides must be a list of key=value strings, got {overrides!r}")
        clashing = [o for o in overrides if str(o).split("=", 1)[0].lstrip("+~") in _grid_override_keys(grid)]
        if clashing:
            raise DseError(f"study {name}: override {clashing[0]!r} sets a key the grid varies")
        ordered = {k: tuple(grid[k]) for k in GRID_KEYS if k in grid}
        return cls(name=name, grid=ordered, overrides=tuple(map(str, overrides)))

    def points(self) -> list[StudyPoint]:
        """Every grid point, in a stable order (the grid's keys in GRID_KEYS order, values as listed)."""
        keys = list(self.grid)
        out = []
        for combo in itertools.product(*(self.grid[k] for k in keys)):
            values = dict(zip(keys, combo))
            out.append(StudyPoint(values, self.overrides + tuple(GRID_KEYS[k].format(v=v) for k, v in values.items())))
        return out

    def results_dir(self, base: str | Path, point: StudyPoint) -> str:
        """Where a point's run lives: one results tree per seed, so seeds of one network never share a run."""
        return str(Path(base) / "studies" / self.name / f"s{point.seed}")

    def study_dir(self, base: str | Path) -> str:
        return str(Path(base) / "studies" / self.name)

    def to_dict(self) -> dict:
        return {"name": self.name, "grid": {k: list(v) for k, v in self.grid.items()}, "overrides": list(self.overrides)}


def _grid_override_keys(grid: dict) -> set[str]:
    return {GRID_KEYS[k].split("=", 1)[0] for k in grid if k in GRID_KEYS}
