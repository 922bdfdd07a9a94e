"""Energy as an objective of the pipeline DSE: power modes x clocks over the best mappings the search found.

The mapping search maximizes FPS at full clocks (thesis Ch. 3). This phase takes the few best distinct mappings
it measured (option + cuts, with their tuned threads, buffers and streams) and, in every power mode asked for,
lowers the clocks with Algorithm 6 of thesis Ch. 4 (``dse.rt.dvfs.set_freq``: greedy coordinate descent from
the mode's ceilings, GPU first) while the measured FPS stays at or above a floor, measuring every step on the
board. The floor is ``min_fps``; the Pareto mode adds floors at fractions of each mapping's top FPS, so the
points measured trace the FPS vs J/frame front. The answer is ranked by ``objective`` on fresh re-runs of the
few best points (never on their luckiest sample), as is the FPS-optimal configuration it is compared with.

``fps_per_watt`` is FPS / W = 1 / (J per frame): it ranks exactly like ``energy`` and is reported as FPS/W.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from dse.core.configuration import Configuration
from dse.platform.modes import (EXTRA_KEYS, MODE_KEY, clock_extra, is_clocked, mode_levels, power_mode,
                             power_modes)
from dse.core.errors import DseError, choices_error
from dse.core.validate import bounded_int
from dse.core.measurement import Measurement
from dse.platform import Platform
from dse.rt.dvfs import set_freq
from dse.search.result import StrategyResult
from dse.search.study import Study

PHASE = "clocks"
OBJECTIVES = ("fps", "energy", "fps_per_watt")
ORDER = ("gpu", "cpu", "dla")          # Algorithm 6's order on the Xavier (thesis l. 1309)
FRONT_FLOORS = (0.9, 0.8, 0.7, 0.6, 0.5, 0.4)   # Pareto mode: floors as fractions of a mapping's top FPS
# search-group keys of this phase -> EnergySettings fields (a part of their own, so changing them reruns only it)
SEARCH_KEYS = {"objective": "objective", "min_fps": "min_fps", "power_modes": "power_modes", "pareto": "pareto",
               "energy_mappings": "mappings", "energy_repeats": "repeats"}


@dataclass(frozen=True)
class EnergySettings:
    objective: str = "fps"
    min_fps: float = 0.0              # the answer must reach this FPS (re-measured mean)
    power_modes: tuple[str, ...] = ()   # modes to search; empty = every mode of the platform
    pareto: bool = False              # also trace the FPS vs J/frame front
    mappings: int = 3                 # distinct mappings (option + cuts) carried into the clock phase
    repeats: int = 3                  # fresh re-runs that rank the best points and the FPS-optimal reference

    def __post_init__(self):
        object.__setattr__(self, "power_modes", tuple(str(m) for m in (self.power_modes or ())))
        if self.objective not in OBJECTIVES:
            raise choices_error("search.objective", self.objective, OBJECTIVES)
        if not (isinstance(self.min_fps, (int, float)) and self.min_fps >= 0):
            raise DseError(f"search.min_fps must be a number >= 0, got {self.min_fps!r}")
        bounded_int(self.mappings, "search.energy_mappings", 1, 100)
        bounded_int(self.repeats, "search.energy_repeats", 1, 100)

    @property
    def active(self) -> bool:
        """Whether the run has a clock phase (the default, FPS at full clocks, has none; objective=fps with
        power_modes is the best FPS within those modes)."""
        return self.objective != "fps" or self.pareto or self.min_fps > 0 or bool(self.power_modes)

    @classmethod
    def split(cls, search: Mapping[str, Any]) -> tuple[dict, "EnergySettings"]:
        """(the search group without this phase's keys, the settings those keys make)."""
        rest = {k: v for k, v in search.items() if k not in SEARCH_KEYS}
        return rest, cls(**{SEARCH_KEYS[k]: v for k, v in search.items() if k in SEARCH_KEYS})

    def check(self, platform: Platform, sets_clocks: bool) -> None:
        """Refuse at planning what the platform cannot do: a mode it does not define, no power model, a backend
        that cannot set clocks there (``sets_clocks``: ``dse.backends.sets_clocks``)."""
        for m in self.power_modes:
            power_mode(platform, m)
        if not self.active:
            return
        if platform.power is None:
            raise DseError(f"search.objective={self.objective} / pareto / min_fps need a power model, and platform "
                           f"{platform.name} has none")
        if not sets_clocks:
            raise DseError(f"the clock phase sets power modes and clocks: the sim backend applies them, and the trt "
                           f"backend on a platform with a clock_control section (the files the board agent writes); "
                           f"platform {platform.name} ({platform.backend} backend) has neither. Set the mode on the "
                           "board and search with objective=fps")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["power_modes"] = list(self.power_modes)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "EnergySettings":
        return cls(**d)


def objective_key(objective: str) -> Callable[[float, float], float]:
    """Lower is better, from (FPS, J/frame)."""
    if objective == "fps":
        return lambda fps, e: -fps
    return lambda fps, e: e          # energy; fps_per_watt = 1 / (J/frame) ranks the same


def mapping_candidates(best: Configuration, measured: Sequence[Measurement], n: int) -> list[Configuration]:
    """The FPS-optimal configuration, then the best-FPS configuration of each other mapping option the search ran
    at full clocks, then other cut tuples by FPS, up to ``n`` mappings: a slower mapping on other PEs may need
    less energy per frame at a throughput floor."""
    runs = sorted((m for m in measured if m.ok and not is_clocked(dict(m.config.extra))), key=lambda m: -m.fps)
    out, seen = [best], {(best.option, best.cuts)}
    options = {best.option}
    for first_per_option in (True, False):
        for m in runs:
            key = (m.config.option, m.config.cuts)
            if len(out) >= n or key in seen or (first_per_option and m.config.option in options):
                continue
            seen.add(key)
            options.add(m.config.option)
            out.append(m.config)
    return out


def point_row(m: Measurement, mode: str, mhz: Mapping[str, float]) -> dict:
    """One measured point of the clock phase: mapping, parameters, mode, clocks (MHz per kind), results."""
    c = m.config
    return {"option": c.option, "cuts": list(c.cuts), "streams": list(c.streams), "buffers": c.buffers,
            "pre_threads": c.pre_threads, "post_threads": c.post_threads, "power_mode": mode,
            "gpu_mhz": mhz.get("gpu"), "dla_mhz": mhz.get("dla"), "cpu_mhz": mhz.get("cpu"),
            "fps": float(m.fps) if m.ok else 0.0, "power_w": m.power_w, "energy_j_per_frame": m.energy_j_per_frame,
            "status": m.status, "config_hash": c.hash, "config": c.to_dict()}


def clock_phase(study: Study, platform: Platform, candidates: Sequence[Configuration],
                settings: EnergySettings, progress: Callable[[str], None] | None = None) -> StrategyResult:
    """Algorithm 6 per mapping x power mode at each FPS floor; the front; the answer ranked on fresh re-runs.

    The answer is the chosen configuration (None where no point reaches ``min_fps``); ``extra``: the
    ``settings``, one row per configuration measured (``points``, MAXN included), ``feasible`` and the ``reason``
    where not, the ``chosen`` row (config, mode, clocks, re-measured means), the FPS-optimal configuration at full
    clocks re-measured the same way (``reference``), the re-measured finalists best first (``ranked``), the
    configurations ``measured`` and the chosen's J/frame over the reference's (``energy_ratio``)."""
    modes = list(settings.power_modes or power_modes(platform))
    before = study.measured
    rows: dict[str, dict] = {}

    def at(config: Configuration, mode: str, mhz: Mapping[str, float]) -> Measurement:
        c = config.with_(extra={**_unclocked(config), **clock_extra(platform, mode, mhz)})
        m = study.measure(c, PHASE)
        if m.ok and m.energy_j_per_frame is None:
            raise DseError(f"{platform.name} measured no power for {c.hash}: the clock phase needs energy")
        if c.hash not in rows:
            rows[c.hash] = point_row(m, mode, mhz)
        return m

    full = next(iter(power_modes(platform)))
    full_mhz = {k: v[-1] for k, v in mode_levels(platform, power_mode(platform, full)).items()}
    top = {c.hash: at(c, full, full_mhz) for c in candidates}   # the reference, whatever modes are searched

    for config in candidates:
        m0 = top[config.hash]
        if not m0.ok:
            continue
        floors = sorted({settings.min_fps, *([f * m0.fps for f in FRONT_FLOORS] if settings.pareto else [])},
                        reverse=True)
        for mode in modes:
            levels = mode_levels(platform, power_mode(platform, mode))
            if progress:
                progress(f"{config.option} cuts {list(config.cuts)}: mode {mode}, floors "
                         + ", ".join(f"{f:.0f}" for f in floors) + " FPS")
            for floor in floors:
                set_freq(levels, lambda f, c=config, fl=floor, md=mode: _fps(at(c, md, f)) >= fl,
                         lambda f, c=config, md=mode: at(c, md, f).energy_j_per_frame, ORDER)
    points = _with_front(list(rows.values()))

    def answer(chosen: dict | None = None, reference: dict | None = None, ranked=(), reason: str = "") -> StrategyResult:
        config = Configuration.from_dict(chosen["config"]) if chosen else None
        ratio = chosen["energy_j_per_frame"] / reference["energy_j_per_frame"] if chosen and reference else None
        return StrategyResult(config, study.memo.get(config.hash) if config else None, study.asked_since(before), {
            "settings": settings, "feasible": not reason, "reason": reason, "chosen": chosen,
            "reference": reference, "ranked": list(ranked), "measured": study.measured - before, "points": points,
            "energy_ratio": ratio}, reruns=study.reruns)

    key = objective_key(settings.objective)
    allowed = [r for r in points if r["status"] == "ok" and r["power_mode"] in modes]
    feasible = [r for r in allowed if r["fps"] >= settings.min_fps]
    if not feasible:
        b = max(allowed, key=lambda r: r["fps"], default=None)
        return answer(reason=f"min_fps {settings.min_fps:g} is above every FPS measured: the best is {b['fps']:.1f} "
                             f"FPS ({b['option']}, cuts {b['cuts']}, {b['power_mode']})" if b else
                             "no configuration of the clock phase ran (see the reasons in cache/clocks.parquet)")
    fresh = range(1, settings.repeats + 1)
    finalists = sorted(feasible, key=lambda r: key(r["fps"], r["energy_j_per_frame"]))[:3]
    ranked = [remeasured(study, r, fresh) for r in finalists]
    if not any(r["fps"] >= settings.min_fps for r in ranked):
        return answer(ranked=ranked, reason=f"min_fps {settings.min_fps:g}: the points that reached it once fall "
                                            f"below it on {settings.repeats} fresh re-runs (best mean "
                                            f"{max(r['fps'] for r in ranked):.1f} FPS)")
    ranked = sorted(ranked, key=lambda r: (r["fps"] < settings.min_fps, key(r["fps"], r["energy_j_per_frame"])))
    reference = remeasured(study, rows[top[candidates[0].hash].config.hash], fresh)
    return answer(ranked[0], reference, ranked)


def _fps(m: Measurement) -> float:
    return float(m.fps) if m.ok else 0.0


def _unclocked(config: Configuration) -> dict:
    return {k: v for k, v in config.extra if k != MODE_KEY and k not in EXTRA_KEYS.values()}


def remeasured(study: Study, row: dict, repeats: range) -> dict:
    """``row`` with the means of FPS, power and J/frame over fresh re-runs (and the re-runs' FPS)."""
    runs = study.rerun(Configuration.from_dict(row["config"]), PHASE, repeats)
    fps = [_fps(m) for m in runs]
    energy = [m.energy_j_per_frame for m in runs if m.ok and m.energy_j_per_frame]
    power = [m.power_w for m in runs if m.ok and m.power_w]
    return {**{k: v for k, v in row.items() if k != "on_front"}, "search_fps": row["fps"],
            "fps": float(np.mean(fps)), "energy_j_per_frame": float(np.mean(energy)) if energy else None,
            "power_w": float(np.mean(power)) if power else None, "reruns": [round(x, 3) for x in fps]}


def _with_front(rows: list[dict]) -> list[dict]:
    """Rows marked ``on_front``: no other row has at least the FPS and at most the J/frame, one of them strictly."""
    from dse.search.ga_common import pareto_mask

    ok = [r for r in rows if r["status"] == "ok" and r["energy_j_per_frame"] is not None]
    mask = pareto_mask([r["fps"] for r in ok], [r["energy_j_per_frame"] for r in ok]) if ok else []
    on = {id(r) for r, keep in zip(ok, mask) if keep}
    for r in rows:
        r["on_front"] = id(r) in on
    return rows
