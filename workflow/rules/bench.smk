# Benchmarks (bench/, results in BENCHMARKS.md): `snakemake --cores 2 bench`. Not part of `all`.
# Each writes bench/results/<name>.json in the working directory; an existing file is up to date, so
# re-measure with `snakemake --cores 2 bench --forcerun bench_module`. A benchmark takes every core (more
# threads than any machine has: Snakemake scales a job's threads down to --cores), so they run one at a time and
# do not disturb each other's timings. (Not `workflow.cores`: that is undefined for `--unlock` and `--report`.)
ALL_CORES = 1 << 16
BENCHES = ["sim_speed", "analysis_speed", "executor_efficiency", "end_to_end", "search_quality", "initial_solution",
           "compare_methods", "layermap_calibration", "layermap_fig14", "layermap_solvers", "dla_fallback",
           "dla_third_party", "multi_ch4", "taskset_003", "taskset_measured", "tx2_calibration", "pareto_tang",
           "energy_modes", "calibration_decisions", "job_startup"]


rule bench_module:
    """One benchmark module: python -m bench.<name> --output bench/results/<name>.json."""
    output:
        "bench/results/{name}.json",
    wildcard_constraints:
        name="|".join(BENCHES),
    threads: ALL_CORES
    log:
        "bench/logs/{name}.log",
    conda:
        ENV
    shell:
        f"PYTHONPATH={REPO}${{{{PYTHONPATH:+:$PYTHONPATH}}}} {PYTHON} -m bench.{{wildcards.name}} "
        "--output {output} > {log} 2>&1"


rule bench:
    """Every benchmark of bench/."""
    input:
        expand("bench/results/{name}.json", name=BENCHES),
