# Design studies (dse/workflow/study.py): one ordinary exploration per grid point under
# results/studies/<name>/s<seed>/ (the pipeline's own rules, so reruns add only the missing points), then
# study_merge -> study.parquet, study.md, plots.
# `snakemake --cores 2 study --config overrides='[study=xavier-36]'`; on a SLURM cluster add
# `--workflow-profile profiles/slurm` (README, "Studies and clusters").
from dse.workflow.study import plan_study, plan_study_point

STUDY = None


def _study():
    """The study's plans, composed on first use only (a plain `snakemake` never plans the study)."""
    global STUDY
    if STUDY is None:
        try:
            STUDY = plan_study(config)
        except DseError as exc:
            raise WorkflowError(f"bad study configuration: {exc}") from None
    return STUDY


POINTS = {}


def _study_point(run):
    """A study point's plan: from the whole study where this process planned it (the submitting one), else that
    point alone (a job inside a cluster job needs only its own run); None if ``run`` is no point of the study."""
    if STUDY is not None:
        return next((plan.runs[run] for plan in STUDY.values() if run in plan.runs), None)
    if run not in POINTS:
        try:
            POINTS[run] = plan_study_point(config, run)
        except DseError as exc:
            raise WorkflowError(f"bad study configuration: {exc}") from None
    return POINTS[run]


def _splan(sdir):
    if sdir not in _study():
        raise WorkflowError(f"{sdir} is not a planned study; planned: {', '.join(_study())}")
    return _study()[sdir]


wildcard_constraints:
    sdir=r"(.+/)?studies/[^/]+",


rule study_configure:
    """The study's settings and the run directory of each point: what the merge reads."""
    output:
        "{sdir}/config/study.yaml",
    params:
        text=lambda wc: _splan(wc.sdir).part,
    localrule: True
    script:
        "../scripts/write_text.py"


rule study_merge:
    """study.parquet (one row per point), study.md and the plots, from every point's summary.json."""
    input:
        "{sdir}/config/study.yaml",
        lambda wc: _splan(wc.sdir).point_files(),
    output:
        "{sdir}/study.parquet",
        "{sdir}/study.md",
        "{sdir}/plots/study_gain.png",
        "{sdir}/plots/study_options.png",
    localrule: True
    shell:
        "{DSE} workflow study-merge {wildcards.sdir}"


rule study:
    """Target: every point of the study, explored and merged."""
    input:
        lambda wc: [f for sdir, plan in _study().items() for f in plan.files(sdir)],
