# Design studies (dse/workflow/study.py): one ordinary exploration per grid point under
# results/studies/<name>/s<seed>/ (the pipeline's own rules, so reruns add only the missing points), then
# study_merge -> study.parquet, study.md, plots.
# `snakemake --cores 2 study --config overrides='[study=xavier-36]'`; on a SLURM cluster add
# `--workflow-profile profiles/slurm` (README, "Studies and clusters").
wildcard_constraints:
    sdir=FAMILY_DIRS["study"],


rule study_merge:
    """study.parquet (one row per point), study.md and the plots, from every point's summary.json."""
    input:
        "{sdir}/config/study.yaml",
        planned_inputs(study_plan, "sdir", "points"),
    output:
        "{sdir}/study.parquet",
        "{sdir}/study.md",
        "{sdir}/plots/study_gain.png",
        "{sdir}/plots/study_options.png",
    localrule: True
    log:
        "{sdir}/logs/merge.log",
    conda:
        ENV
    shell:
        f"{DSE} workflow study-merge {{wildcards.sdir}} 2> >(tee {{log}} >&2)"


rule study:
    """Target: every point of the study, explored and merged."""
    input:
        family_files(study_plans),
