# The run's resolved config, written by rules (never while the Snakefile is parsed): the digest of a part's
# text is the rule's parameter, so Snakemake reruns it, and every rule that reads the part, when the text
# changes; a dry run writes nothing.
from dse.store.atomic import write_text_atomic
from dse.workflow.plan import digest


def _plan(run):
    if run not in RUNS:
        raise WorkflowError(f"{run} is not a planned run directory; planned: {', '.join(RUNS)}")
    return RUNS[run]


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
