# Energy/frequency Pareto search of seed 001 (Tang et al., dse/systems/pareto/jobs.py): NSGA-II over per-layer mappings
# x CPU-cluster and GPU clocks on a clocked board, against TensorRT over every clock pair, both re-measured.
# `snakemake --cores 2 pareto --config overrides='[platform=tx2-sim,benchmark=vgg19]'` (results/pareto/<platform>/<net>/).
wildcard_constraints:
    pdir=FAMILY_DIRS["pareto"],


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
