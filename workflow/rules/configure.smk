# The run's resolved config, written by rules (never while the Snakefile is parsed): the digest of a part's
# text is the rule's parameter, so Snakemake reruns it, and every rule that reads the part, when the text
# changes; a dry run writes nothing.
from dse.store.atomic import write_text_atomic
from dse.workflow.plan import digest


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
        digest=lambda wc: digest(_plan(wc.run).parts[wc.part]),
    localrule: True
    run:
        write_text_atomic(output[0], _plan(wildcards.run).parts[wildcards.part])


rule resolved_config:
    """The whole composed config of the run, for the record (versions and seed are in every Parquet row)."""
    output:
        "{run}/config.yaml",
    params:
        digest=lambda wc: digest(_plan(wc.run).resolved),
    localrule: True
    run:
        write_text_atomic(output[0], _plan(wildcards.run).resolved)
