rule comparison:
    """All exploration methods on this run's backend and measurement cache (thesis Sec. 3.6.4)."""
    input:
        "{run}/best.yaml",
        "{run}/report.md",
        "{run}/config/compare.yaml",
    output:
        "{run}/comparison.parquet",
        md="{run}/comparison.md",
        fps="{run}/plots/compare_fps.png",
        anytime="{run}/plots/compare_anytime.png",
    log:
        "{run}/logs/compare.log",
    threads: 1
    resources:
        board=1,
        mem_mb=2000,
        runtime=lambda wc: 4 * runtime_min(run_plan(wc.run)),
    conda:
        ENV
    shell:
        f"{DSE} workflow compare {{wildcards.run}} 2> >(tee {{log}} >&2)"


rule compare:
    """Target: `snakemake --cores N compare` compares every method on every planned run."""
    input:
        comparisons,
