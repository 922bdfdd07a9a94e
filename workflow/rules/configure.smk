# The run's resolved config, written by rules (never while the Snakefile is parsed): a part's text is the rule's
# parameter, so Snakemake reruns it, and every rule that reads the part, when the text changes; a dry run writes
# nothing. Every *_configure rule writes through workflow/scripts/write_text.py (a script job, not `run:`).


def _plan(run):
    """The plan of a run of this invocation, or of a study's point (studies are planned on first use)."""
    if run in RUNS:
        return RUNS[run]
    plan = _study_point(run) if "studies/" in run else None
    if plan is not None:
        return plan
    raise WorkflowError(f"{run} is not a planned run directory; planned: {', '.join(RUNS)}")


rule configure:
    """One part of the run's config (model, platform, measure, search, compare): what the rules read."""
    output:
        "{run}/config/{part}.yaml",
    params:
        text=lambda wc: _plan(wc.run).parts[wc.part],
    localrule: True
    script:
        "../scripts/write_text.py"


rule resolved_config:
    """The whole composed config of the run, for the record (versions and seed are in every Parquet row)."""
    output:
        "{run}/config.yaml",
    params:
        text=lambda wc: _plan(wc.run).resolved,
    localrule: True
    script:
        "../scripts/write_text.py"
