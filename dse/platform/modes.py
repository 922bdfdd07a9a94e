"""Power modes (nvpmodel) and per-PE clocks of a pipeline configuration on a Jetson board.

A power mode is what ``nvpmodel -m ID`` sets: a ceiling per clock (CPU, GPU, DLA, memory controller), the CPU
cores left online and, on some modes, a share of the GPU's TPCs. Within a mode a user may lower each clock
further (``jetson_clocks`` / sysfs). A configuration names both in ``config.extra``: ``power_mode`` and
``gpu_mhz`` / ``dla_mhz`` / ``cpu_mhz``; a clock left out runs at the mode's ceiling, a mode left out is the
platform's first one (MAXN). ``clock_setting`` checks them against the platform: an unknown mode or a clock that
is not a level of the mode is refused with the valid choices.

A mode's levels are the DVFS table's levels up to its ceiling. Where a ceiling lies below the whole table (the
virtual Xavier's tables are Table 4.7's, which start at 675.75 MHz for the GPU; nvpmodel's 10 W mode caps it at
520 MHz), the ceiling itself is the mode's only level: the board runs there.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from dse.core.errors import DseError, choices_error
from dse.core.validate import check_keys
from dse.platform import Platform

KNOBS = ("gpu", "dla", "cpu")                     # the clocks a configuration sets (kind names of dse.rt.dvfs)
EXTRA_KEYS = {"gpu": "gpu_mhz", "dla": "dla_mhz", "cpu": "cpu_mhz"}
MODE_KEY = "power_mode"
CEILINGS = ("CPU", "GPU", "DLA", "EMC")
MODE_KEYS = ("id", "cpu_online", "max_mhz", "gpu_units")
FULL = "MAXN"


@dataclass(frozen=True)
class PowerMode:
    """One nvpmodel mode: clock ceilings (MHz; None = the table's top), online CPU cores, share of GPU units."""

    name: str
    id: int
    cpu_online: int
    max_mhz: tuple[tuple[str, float], ...] = ()
    gpu_units: float = 1.0           # fraction of the GPU's TPCs powered (Xavier 10 W: 2 of 4)

    def ceiling(self, knob: str) -> float | None:
        return dict(self.max_mhz).get(knob.upper())


def power_modes(platform: Platform) -> dict[str, PowerMode]:
    """The platform's ``power_modes`` section, checked; without one, a single MAXN (every clock at its top)."""
    section = (platform.raw or {}).get("power_modes")
    if not section:
        return {FULL: PowerMode(FULL, 0, platform.cpu_cores)}
    if not isinstance(section, Mapping):
        raise DseError(f"platform {platform.name}: power_modes must be a mapping of mode name -> settings")
    modes = {}
    for name, d in section.items():
        where = f"platform {platform.name} power_modes.{name}"
        d = dict(d or {})
        check_keys(d, MODE_KEYS, f"key of {where}")
        caps = {str(k).upper(): float(v) for k, v in (d.get("max_mhz") or {}).items()}
        bad = sorted(set(caps) - set(CEILINGS))
        if bad:
            raise choices_error(f"clock in {where}.max_mhz", bad[0], CEILINGS)
        if any(v <= 0 for v in caps.values()):
            raise DseError(f"{where}.max_mhz: every ceiling must be > 0 MHz, got {caps}")
        online = int(d.get("cpu_online", platform.cpu_cores))
        if not 1 <= online <= platform.cpu_cores:
            raise DseError(f"{where}.cpu_online must be in 1..{platform.cpu_cores}, got {online}")
        units = float(d.get("gpu_units", 1.0))
        if not 0 < units <= 1:
            raise DseError(f"{where}.gpu_units must be in (0, 1], got {units}")
        modes[str(name)] = PowerMode(str(name), int(d.get("id", len(modes))), online, tuple(sorted(caps.items())),
                                     units)
    return modes


def power_mode(platform: Platform, name: str | None, modes: Mapping[str, PowerMode] | None = None) -> PowerMode:
    """A mode by name (None: the platform's first, MAXN); ``modes``: the platform's, when already parsed."""
    modes = power_modes(platform) if modes is None else modes
    if name is None:
        return next(iter(modes.values()))
    if name not in modes:
        raise choices_error(f"power mode of {platform.name}", name, list(modes))
    return modes[name]


def mode_levels(platform: Platform, mode: PowerMode) -> dict[str, list[float]]:
    """Ascending levels per clock kind a configuration may set in ``mode`` (kinds without a table left out)."""
    out = {}
    for kind in KNOBS:
        table = platform.freq_table(kind)
        if not table:
            continue
        cap = mode.ceiling(kind)
        levels = [f for f in table if cap is None or f <= cap + 1e-9]
        out[kind] = levels or [float(cap)]
    return out


@dataclass(frozen=True)
class ClockSetting:
    """The clocks a configuration runs at: its mode and one MHz per kind (the mode's ceiling where not set)."""

    mode: PowerMode
    mhz: tuple[tuple[str, float], ...]
    emc_scale: float = 1.0           # memory-bound time at this mode's EMC ceiling / at the platform's top one

    def of(self, kind: str) -> float | None:
        """MHz of a clock kind; None at the top of its table (what the power and time models read as fmax)."""
        return dict(self.mhz).get(kind)

    def freqs(self) -> dict[str, float | None]:
        """``{"GPU": .., "DLA": .., "CPU": ..}`` as the power model reads them."""
        return {k.upper(): self.of(k) for k in KNOBS}


def clock_setting(platform: Platform, extra: Mapping[str, str]) -> ClockSetting:
    """The checked clocks of ``config.extra``; a DseError names the bad mode or level and the valid ones."""
    modes = power_modes(platform)
    mode = power_mode(platform, extra.get(MODE_KEY), modes)
    levels = mode_levels(platform, mode)
    mhz = {}
    for kind, key in EXTRA_KEYS.items():
        if kind not in levels:
            if key in extra:
                raise DseError(f"{key}={extra[key]}: platform {platform.name} has no {kind.upper()} DVFS table")
            continue
        if key not in extra:
            mhz[kind] = levels[kind][-1]
            continue
        try:
            f = float(extra[key])
        except ValueError:
            raise DseError(f"{key} must be a number of MHz, got {extra[key]!r}") from None
        match = [x for x in levels[kind] if abs(x - f) < 1e-6]
        if not match:
            raise DseError(f"{key}={extra[key]} is not a {kind.upper()} level of power mode {mode.name} on "
                           f"{platform.name}; levels: {', '.join(f'{x:g}' for x in levels[kind])}")
        mhz[kind] = match[0]
    mhz = {k: f for k, f in mhz.items() if f != platform.freq_table(k)[-1]}   # None = the top, as before modes
    top = {m.ceiling("EMC") for m in modes.values()} - {None}
    emc = mode.ceiling("EMC")
    scale = max(top) / emc if (emc and top) else 1.0
    return ClockSetting(mode, tuple(sorted(mhz.items())), scale)


def clock_extra(platform: Platform, mode: str, mhz: Mapping[str, float]) -> dict[str, str]:
    """``config.extra`` entries for a mode and clocks (kind -> MHz), canonical: the default mode and clocks at the
    mode's ceiling are left out, so full clocks are the plain configuration (one hash, one measurement)."""
    levels = mode_levels(platform, power_mode(platform, mode))
    out = {} if mode == next(iter(power_modes(platform))) else {MODE_KEY: mode}
    for k, v in mhz.items():
        if float(v) != levels[k][-1]:
            out[EXTRA_KEYS[k]] = format(float(v), ".10g")
    return out


def is_clocked(extra: Mapping[str, str]) -> bool:
    """Whether a configuration sets a power mode or a clock (a board backend must apply them or refuse)."""
    return MODE_KEY in extra or any(k in extra for k in EXTRA_KEYS.values())


# -- setting them on a real board (the trt backend's agent, dse.board.clocks) -----------------------------------
CONTROL_KNOB_KEYS = ("min", "max", "unit_hz")


@dataclass(frozen=True)
class KnobFiles:
    """The sysfs files that pin one clock: ``min``/``max`` file patterns, ``unit_hz`` Hz per unit written."""

    min: tuple[str, ...]
    max: tuple[str, ...]
    unit_hz: float


@dataclass(frozen=True)
class ClockControl:
    """How a board sets a configuration's clocks: the nvpmodel command (None: modes are not switched) and the
    files per clock kind."""

    nvpmodel: str | None
    knobs: tuple[tuple[str, KnobFiles], ...]

    def files(self, kind: str) -> KnobFiles | None:
        return dict(self.knobs).get(kind)


def clock_control(platform: Platform) -> ClockControl | None:
    """The platform's ``clock_control`` section, checked (None without one: the board's clocks cannot be set)."""
    section = (platform.raw or {}).get("clock_control")
    if not section:
        return None
    where = f"platform {platform.name} clock_control"
    if not isinstance(section, Mapping):
        raise DseError(f"{where} must be a mapping: nvpmodel (command) and files per clock ({', '.join(KNOBS)})")
    check_keys(section, ("nvpmodel", *KNOBS), f"key of {where}")
    knobs = []
    for kind in KNOBS:
        d = section.get(kind)
        if d is None:
            continue
        d = dict(d)
        check_keys(d, CONTROL_KNOB_KEYS, f"key of {where}.{kind}")
        files = {k: tuple(str(p) for p in (d.get(k) or ())) for k in ("min", "max")}
        if not files["max"]:
            raise DseError(f"{where}.{kind} needs at least one 'max' file (the clock's cap)")
        unit = float(d.get("unit_hz", 1))
        if unit <= 0:
            raise DseError(f"{where}.{kind}.unit_hz must be > 0, got {unit}")
        knobs.append((kind, KnobFiles(files["min"], files["max"], unit)))
    command = section.get("nvpmodel")
    return ClockControl(str(command) if command else None, tuple(knobs))


def agent_clocks(platform: Platform, extra: Mapping[str, str]) -> dict | None:
    """The board agent's ``clocks`` spec for a configuration (None when it sets no mode or clock): its mode by id
    and every clock kind the platform can set, pinned at the configuration's level (None = the mode's ceiling,
    which nvpmodel sets), in the files' units. A DseError when the platform cannot set what it asks for."""
    if not is_clocked(extra):
        return None
    control = clock_control(platform)
    if control is None:
        raise DseError(f"this configuration sets a power mode or clocks ({dict(extra)}), and platform {platform.name} "
                       "has no clock_control section: the board agent cannot set them there")
    setting = clock_setting(platform, extra)
    if control.nvpmodel is None and setting.mode.name != next(iter(power_modes(platform))):
        raise DseError(f"power mode {setting.mode.name} asked, and platform {platform.name}'s clock_control names no "
                       "nvpmodel command to switch modes")
    levels = mode_levels(platform, setting.mode)
    knobs = []
    for kind in KNOBS:
        files = control.files(kind)
        chosen = setting.of(kind) or (levels[kind][-1] if kind in levels else None)
        at_ceiling = kind not in levels or chosen == levels[kind][-1]
        if files is None:
            if not at_ceiling:
                raise DseError(f"{EXTRA_KEYS[kind]}={chosen:g}: platform {platform.name}'s clock_control has no "
                               f"files for the {kind.upper()} clock")
            continue
        knobs.append({"name": kind, "value": None if at_ceiling else round(chosen * 1e6 / files.unit_hz),
                      "min": list(files.min), "max": list(files.max)})
    mode = ({"command": control.nvpmodel, "id": setting.mode.id, "name": setting.mode.name}
            if control.nvpmodel else None)
    return {"nvpmodel": mode, "knobs": knobs}
