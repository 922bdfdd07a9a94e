# The run's resolved config, written by rules (never while the Snakefile is parsed): a part's text is the rule's
# parameter, so Snakemake reruns it, and every rule that reads the part, when the text changes; a dry run writes
# nothing. Every *_configure rule writes through workflow/scripts/write_text.py (a script job, not `run:`).


rule configure:
    """One part of the run's config (model, platform, measure, search, compare): what the rules read."""
    output:
        "{run}/config/{part}.yaml",
    params:
        text=lambda wc: run_plan(wc.run).parts[wc.part],
    localrule: True
    log:
        "{run}/logs/configure-{part}.log",
    conda:
        ENV
    script:
        "../scripts/write_text.py"


rule resolved_config:
    """The whole composed config of the run, for the record (versions and seed are in every Parquet row)."""
    output:
        "{run}/config.yaml",
    params:
        text=lambda wc: run_plan(wc.run).resolved,
    localrule: True
    log:
        "{run}/logs/resolved-config.log",
    conda:
        ENV
    script:
        "../scripts/write_text.py"
