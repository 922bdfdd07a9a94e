# Energy/frequency Pareto search of seed 001 (Tang et al., dse/systems/pareto/jobs.py): NSGA-II over per-layer mappings
# x CPU-cluster and GPU clocks on a clocked board, against TensorRT over every clock pair, both re-measured.
# `snakemake --cores 2 pareto --config overrides='[platform=tx2-sim,benchmark=vgg19]'` (results/pareto/<platform>/<net>/).
wildcard_constraints:
    pdir=r"(.+/)?pareto/[^/]+/[^/]+",
    ppart="pareto|platform",


rule pareto_configure:
    """One config part of a pareto run (its settings, the platform): what the search job reads."""
    output:
        "{pdir}/config/{ppart}.yaml",
    params:
        text=lambda wc: pareto_plan(wc.pdir).parts[wc.ppart],
    localrule: True
    log:
        "{pdir}/logs/configure-{ppart}.log",
    conda:
        ENV
    script:
        "../scripts/write_text.py"


rule pareto_resolved_config:
    output:
        "{pdir}/config.yaml",
    params:
        text=lambda wc: pareto_plan(wc.pdir).resolved,
    localrule: True
    log:
        "{pdir}/logs/resolved-config.log",
    conda:
        ENV
    script:
        "../scripts/write_text.py"


rule pareto_search:
    """NSGA-II + the TensorRT baseline, re-measured: pareto.parquet, pareto.md, the front plot."""
    input:
        "{pdir}/config/pareto.yaml",
        "{pdir}/config/platform.yaml",
    output:
        "{pdir}/pareto.parquet",
        "{pdir}/pareto.md",
        "{pdir}/plots/pareto_front.png",
    log:
        "{pdir}/logs/pareto.log",
    conda:
        ENV
    shell:
        f"{DSE} workflow pareto {{wildcards.pdir}} 2> >(tee {{log}} >&2)"


rule pareto:
    """Target: the energy/frequency Pareto search of the overrides' network and board."""
    input:
        family_files(pareto_plans),
