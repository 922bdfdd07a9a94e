"""Checks every backend makes before building or measuring: the same configuration is refused with the
same reason on the sim, on this host and on a board."""
from __future__ import annotations

from dse.core.configuration import Configuration
from dse.core.errors import DseError
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
    return check_bounds(config, platform)


def check_bounds(config: Configuration, platform: Platform) -> str | None:
    """Every count of the configuration within the platform's limits (``Limits``), naming the limit."""
    return over_limit(platform, [("buffers", config.buffers, "max_buffers"),
                                 ("pre_threads", config.pre_threads, "max_threads"),
                                 ("post_threads", config.post_threads, "max_threads"),
                                 ("batch", config.batch, "max_batch"),
                                 ("streams of a stage", max(config.streams), "max_streams_per_stage")])


def over_limit(platform: Platform, counts) -> str | None:
    """The first of ``counts`` ((what, value, limit key)) above the platform's limit, as a message naming the
    limit; None when all are within."""
    for what, value, key in counts:
        limit = platform.limits.threads(platform.cpu_cores) if key == "max_threads" else getattr(platform.limits, key)
        if value > limit:
            return f"{what} {value} exceeds the limit of {limit} on {platform.name} (platform.limits.{key})"
    return None


def dla_limit_reason(platform: Platform, engines: int, loadables_per_core: dict[int, int],
                     fallback_layers: int) -> str | None:
    """The SDK's DLA limits: engines deserialized on the DLAs at once (4 on Xavier with TensorRT 6, thesis Sec. 2:
    so at most 4 DLA-mapped stages) and loadables per core (GPU fallback splits an engine); None within them."""
    lim = platform.limits
    if lim.max_dla_engines_total is not None and engines > lim.max_dla_engines_total:
        return f"{engines} engines on the DLAs exceed the platform limit of {lim.max_dla_engines_total}"
    if lim.max_dla_loadables_per_core is not None:
        for core, count in sorted(loadables_per_core.items()):
            if count > lim.max_dla_loadables_per_core:
                return (f"{count} loadables on DLA{core} (GPU fallback of {fallback_layers} layer(s) splits the DLA "
                        f"engines) exceed the limit of {lim.max_dla_loadables_per_core} per core")
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
    """What the SDK refuses per stage: a precision a stage's PEs cannot run, a batch above the DLA's, a PND
    stage with fewer streams than PEs."""
    option = platform.options[config.option]
    for k, (spec, s) in enumerate(zip(option.stages, config.streams), start=1):
        lacking = [pe for pe in platform.stage_pes(spec) if config.precision not in pe.precisions]
        if lacking:
            return (f"stage {k} runs on {lacking[0].name}, which cannot run {config.precision.upper()} "
                    f"(precision={config.precision}; it runs {', '.join(lacking[0].precisions)})")
        if spec.pe_type == "dla" and platform.dla_rules and config.batch > platform.dla_rules.max_batch:
            return f"batch {config.batch} exceeds the DLA maximum batch {platform.dla_rules.max_batch}"
        if spec.pnd and s < len(spec.pes):
            return f"stage {k} is PND ({len(spec.pes)} PEs) and needs at least {len(spec.pes)} streams, got {s}"
    return None


def unrunnable_options(platform: Platform, precision: str, batch: int) -> dict[str, str]:
    """Option -> why none of its configurations can run at this precision and batch (``check_stages`` of its
    most permissive configuration): such options are not explored, and the report says why."""
    out = {}
    for name, option in platform.options.items():
        widest = tuple(max(2, len(s.pes)) for s in option.stages)   # enough streams for any stage
        probe = Configuration(benchmark="", platform=platform.name, option=name,
                              cuts=tuple(range(option.n_stages - 1)), streams=widest, precision=precision, batch=batch)
        reason = check_stages(probe, platform)
        if reason:
            out[name] = reason
    return out
