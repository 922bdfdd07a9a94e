"""Checks every backend makes before building or measuring: the same configuration is refused with the
same reason on the sim, on this host and on a board."""
from __future__ import annotations

from typing import Mapping

from dse.configuration import Configuration
from dse.errors import DseError


def check_layout(config: Configuration, options: Mapping, platform_name: str) -> str | None:
    """Schema, a known mapping option, and as many cuts and stream counts as the option has stages.

    ``options`` maps option names to objects with ``n_stages`` and ``describe()``."""
    try:
        config.validate()
    except DseError as exc:
        return str(exc)
    if config.option not in options:
        return (f"unknown mapping option {config.option!r} for {platform_name}; "
                f"valid choices: {', '.join(sorted(options))}")
    option = options[config.option]
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
