# The config parts and the resolved config of every planned directory of every target family, written by rules
# (never while the Snakefile is parsed): a part's text is the rule's parameter, so Snakemake reruns it, and every
# rule that reads the part, when the text changes; a dry run writes nothing. Both write through
# workflow/scripts/write_text.py (a script job, not `run:`).


rule configure:
    """One part of a planned directory's config (a run's model, platform, measure, search, ...; a multi case's
    multi, step1, platform; ...): what that directory's jobs read."""
    input:
        lambda wc: forced_if_changed(f"{wc.planned}/config/{wc.config_part}.yaml",
                                     plan_of(wc.planned).parts[wc.config_part]),
    output:
        "{planned}/config/{config_part}.yaml",
    params:
        text=lambda wc: plan_of(wc.planned).parts[wc.config_part],
    wildcard_constraints:
        config_part="|".join(CONFIG_PARTS),
    localrule: True
    log:
        "{planned}/logs/configure-{config_part}.log",
    conda:
        ENV
    script:
        "../scripts/write_text.py"


rule resolved_config:
    """The whole composed config of a planned directory, for the record (versions and seed are in every Parquet
    row)."""
    input:
        lambda wc: forced_if_changed(f"{wc.planned}/config.yaml", plan_of(wc.planned).resolved),
    output:
        "{planned}/config.yaml",
    params:
        text=lambda wc: plan_of(wc.planned).resolved,
    localrule: True
    log:
        "{planned}/logs/resolved-config.log",
    conda:
        ENV
    script:
        "../scripts/write_text.py"
