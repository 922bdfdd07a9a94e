"""Checks every backend makes before building or measuring: the same configuration is refused with the
same reason on the sim, on this host and on a board."""
from __future__ import annotations

from dse.configuration import Configuration
from dse.errors import DseError
from dse.platform import Platform


def check_layout(config: Configuration, platform: Platform) -> str | None:
    """Schema, a known mapping option, and as many cuts and stream counts as the option has stages."""
    try:
        config.validate()
    except DseError as exc:
        return str(exc)
    if config.option not in platform.options:
        return (f"unknown mapping option {config.option!r} for {platform.name}; "
                f"valid choices: {', '.join(sorted(platform.options))}")
    option = platform.options[config.option]
    if len(config.cuts) != option.n_stages - 1:
        return (f"option {config.option} ({option.describe()}) has {option.n_stages} stage(s) and needs "
                f"{option.n_stages - 1} cut(s), got {list(config.cuts)}")
    if len(config.streams) != option.n_stages:
        return (f"option {config.option} has {option.n_stages} stage(s) but streams {list(config.streams)} "
                f"has {len(config.streams)} entries")
    return None


def check_cuts(config: Configuration, analysis) -> str | None:
    """The cut tuple is feasible on the analysed network (None without cuts or without an analysis)."""
    if not config.cuts or analysis is None:
        return None
    try:
        reason = analysis.check_cuts(list(config.cuts))
    except DseError as exc:
        reason = str(exc)
    return f"infeasible cuts {list(config.cuts)}: {reason}" if reason else None


def check_stages(config: Configuration, platform: Platform) -> str | None:
    """What the SDK refuses per stage on a Jetson (a ``dse.platform.Platform``): a precision a stage's PEs
    cannot run, a batch above the DLA's, a PND stage with fewer streams than cores, too many streams."""
    option = platform.options[config.option]
    dla_precisions = platform.precisions_of("dla")
    for k, (spec, s) in enumerate(zip(option.stages, config.streams), start=1):
        if spec.pe_type == "dla":
            if config.precision not in dla_precisions:
                return (f"stage {k} is on a DLA, which cannot run {config.precision.upper()} "
                        f"(precision={config.precision}; it supports {', '.join(sorted(dla_precisions))})")
            if platform.dla_rules and config.batch > platform.dla_rules.max_batch:
                return f"batch {config.batch} exceeds the DLA maximum batch {platform.dla_rules.max_batch}"
            if spec.pnd and s < len(spec.pes):
                return (f"stage {k} is PND ({len(spec.pes)} DLA cores) and needs at least {len(spec.pes)} "
                        f"streams, got {s}")
        elif config.precision not in platform.precisions_of("gpu"):
            return f"the GPU of {platform.name} cannot run {config.precision}"
        elif spec.interleaved and config.precision not in dla_precisions:
            return f"stage {k} interleaves frames over the GPU and the DLAs, which cannot run {config.precision}"
        if s > platform.limits.max_streams_per_stage:
            return f"stage {k} has {s} streams, more than the limit {platform.limits.max_streams_per_stage}"
    return None
