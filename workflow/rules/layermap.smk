# Per-layer mapping (seeds 002/004, dse/workflow/layermap.py): profile -> one solve per CPU configuration x cap x
# method -> merge (measured through the platform's backend, table, plots); a Pareto job where the board has power.
# `snakemake --cores 2 layermap --config overrides='[platform=galaxy-s9-sim,benchmark=mobilenet-v1]'`.
# Each job reads only its own config part, so changing the ILP's time limit reruns the ILP solves and the merge.


rule layermap_profile:
    """Task graph + per-PE-kind profile table (sim cost models, or real ORT runs on host-cpu)."""
    input:
        rules.analyze.output.model,
        "{run}/config/platform.yaml",
        "{run}/config/measure.yaml",
        "{run}/config/lm-profile.yaml",
    output:
        "{run}/profile.parquet",
    log:
        "{run}/logs/layermap-profile.log",
    resources:
        board=1,
    conda:
        ENV
    shell:
        f"{DSE} workflow layermap-profile {{wildcards.run}} 2> >(tee {{log}} >&2)"


rule layermap_solve:
    """One method on one CPU configuration under one CPU utilization cap (percent)."""
    input:
        "{run}/profile.parquet",
        "{run}/config/lm-profile.yaml",
        "{run}/config/lm-{method}.yaml",
    output:
        "{run}/layermap/{method}_{cpu}_{cap}.json",
    wildcard_constraints:
        method="ga|ilp",
        cpu=r"[0-9]+(-[0-9]+)*",
        cap=r"[0-9.]+",
    log:
        "{run}/logs/layermap-{method}_{cpu}_{cap}.log",
    conda:
        ENV
    shell:
        f"{DSE} workflow layermap-solve {{wildcards.run}} --method {{wildcards.method}} --cpu {{wildcards.cpu}} "
        "--cap {wildcards.cap} 2> >(tee {log} >&2)"


rule layermap_pareto:
    """SPEA2 period + energy front of one CPU configuration (002 Fig. 9)."""
    input:
        "{run}/profile.parquet",
        "{run}/config/lm-profile.yaml",
        "{run}/config/lm-ga.yaml",
        "{run}/config/lm-pareto.yaml",
    output:
        "{run}/layermap/pareto.json",
        "{run}/plots/layermap_pareto.png",
    log:
        "{run}/logs/layermap-pareto.log",
    conda:
        ENV
    shell:
        f"{DSE} workflow layermap-pareto {{wildcards.run}} 2> >(tee {{log}} >&2)"


rule layermap_merge:
    """Measure every chosen mapping, write layermap.parquet, layermap.md, the bar plot and the Gantt charts."""
    input:
        planned_inputs(run_plan, "run", "layermap_solve"),
        "{run}/config/layermap.yaml",
        "{run}/config/platform.yaml",
        "{run}/config/measure.yaml",
    output:
        "{run}/layermap.parquet",
        md="{run}/layermap.md",
        bars="{run}/plots/layermap_periods.png",
        gantt100="{run}/plots/layermap_gantt_100.png",
        gantt_cap="{run}/plots/layermap_gantt_cap.png",
    log:
        "{run}/logs/layermap-merge.log",
    resources:
        board=1,
    conda:
        ENV
    shell:
        f"{DSE} workflow layermap-merge {{wildcards.run}} 2> >(tee {{log}} >&2)"


rule layermap:
    """Target: per-layer mapping of every planned run (GA vs ILP per CPU configuration x cap)."""
    input:
        targets("layermap"),
