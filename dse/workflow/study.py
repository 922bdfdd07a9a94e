"""Target `study`: one ordinary exploration per grid point of a ``study`` config, merged into
``results/studies/<name>/study.parquet`` + ``study.md`` + plots.

Each point is planned exactly like ``snakemake`` plans one benchmark (``dse.workflow.plan.plan_run``) under
``results/studies/<name>/s<seed>/``, so its jobs are the pipeline's own rules: Snakemake runs only the points
whose outputs are missing, on local cores or through an executor plugin (``profiles/``). The merge job reads only
the points' ``summary.json`` (written by rule ``report``) and the study's config part.
"""
from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
from omegaconf import OmegaConf

from dse.config import Plan, read_part
from dse.core.errors import DseError
from dse.store.atomic import write_text_atomic
from dse.store.parquet import write_atomic

STUDY_FILES = ("study.parquet", "study.md", "plots/study_gain.png", "plots/study_options.png")


def plan_study(snakemake_config: dict) -> dict[str, Plan]:
    """Compose the study (``overrides``, e.g. ``[study=xavier-36]``) and plan every point; every bad value is
    refused before any job runs. Writes nothing."""
    from dse.config import compose_config, split_overrides
    from dse.systems.study.settings import StudySettings
    from dse.workflow.plan import plan_run

    overrides = split_overrides(snakemake_config.get("overrides"))
    cfg = compose_config(overrides)
    settings = StudySettings.from_dict(cfg.study)
    runs: dict[str, Plan] = {}
    points = []
    for point in settings.points():
        where = f"results_dir={settings.results_dir(cfg.results_dir, point)}"
        try:
            run, plan = plan_run(compose_config(overrides + list(point.overrides) + [where]))
        except DseError as exc:
            raise DseError(f"study {settings.name}, point {point.values}: {exc}") from None
        if plan.facts["refused"].get("pipeline"):
            raise DseError(f"study {settings.name}, point {point.values}: {plan.facts['refused']['pipeline']}")
        if run in runs:
            raise DseError(f"study {settings.name}: two points share the run directory {run} "
                           f"(a grid value that does not change the run, e.g. a batch the benchmark overrides?)")
        runs[run] = plan
        points.append({"run": run, **{k: v for k, v in point.values.items()}})
    part = OmegaConf.to_yaml(OmegaConf.create({**settings.to_dict(), "points": points}))
    sdir = settings.study_dir(cfg.results_dir)
    points = tuple(f"{os.path.relpath(run, sdir)}/{f}" for run in runs for f in ("summary.json", "config.yaml"))
    return {sdir: Plan({"study": part}, OmegaConf.to_yaml(cfg), STUDY_FILES, {"points": points},
                       {"runs": runs})}   # run directory -> its plan, in grid order


def plan_study_point(snakemake_config: dict, run: str) -> Plan | None:
    """The plan of the one point of the study whose run directory is ``run`` (None if none is): what a job running
    inside a cluster job needs, without planning the whole study (~0.25 s per point, minutes for 1,000 points).
    Points whose grid values appear in ``run``'s path are tried first; each is verified by planning it."""
    from dse.config import compose_config, split_overrides
    from dse.systems.study.settings import StudySettings
    from dse.workflow.plan import plan_run

    overrides = split_overrides(snakemake_config.get("overrides"))
    cfg = compose_config(overrides)
    settings = StudySettings.from_dict(cfg.study)
    words = set(Path(run).parts) | set(Path(run).name.split("-"))
    candidates = [p for p in settings.points() if run.startswith(settings.results_dir(cfg.results_dir, p) + "/")]
    candidates.sort(key=lambda p: -sum(str(v) in words for v in p.values.values()))
    for point in candidates:
        where = f"results_dir={settings.results_dir(cfg.results_dir, point)}"
        planned, plan = plan_run(compose_config(overrides + list(point.overrides) + [where]))
        if planned == run:
            return plan
    return None


def merge_study(sdir: str | Path) -> Path:
    """Rule ``study_merge``: study.parquet (one row per point), study.md and the plots."""
    from dse.systems.study.summary import study_frame, study_markdown, study_plots

    sdir = Path(sdir)
    part = read_part(sdir, "study")
    frame = study_frame(part)
    write_atomic(pa.Table.from_pandas(frame, preserve_index=False), sdir / "study.parquet")
    study_plots(frame, sdir / "plots")
    return write_text_atomic(sdir / "study.md", study_markdown(part, frame))
