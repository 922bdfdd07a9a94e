# DNNs inside dataflow applications under group deadlines (thesis Ch. 5, dse/systems/dataflow/jobs.py):
# pareto (one job per network, the multi target's step 1) -> comap (one job per deadline x method x seed) ->
# deploy (the periodic simulation of each co-mapping) -> report.
# `snakemake --cores 2 dataflow --config overrides='[dataflow=ch5-motivational]'` (results/dataflow/<case>/<platform>/).
wildcard_constraints:
    ddir=FAMILY_DIRS["dataflow"],
    djob=r"[0-9.]+-[a-z-]+-s[0-9]+",


rule dataflow_pareto:
    """Step 1 with the Ch. 5 objectives (latency, GPU and DLA time): one network's Pareto candidates and tasks."""
    input:
        "{ddir}/config/step1.yaml",
        "{ddir}/config/platform.yaml",
    output:
        "{ddir}/pareto/{network}.parquet",
        "{ddir}/tasks/{network}.parquet",
        "{ddir}/candidates/{network}.parquet",
    log:
        "{ddir}/logs/pareto-{network}.log",
    resources:
        board=1,
    conda:
        ENV
    shell:
        f"{DSE} workflow multi-pareto {{wildcards.ddir}} --network {{wildcards.network}} 2> >(tee {{log}} >&2)"


rule dataflow_comap:
    """One co-mapping method at one deadline with one GA seed (analysis only: no board)."""
    input:
        "{ddir}/config/dataflow.yaml",
        "{ddir}/config/platform.yaml",
        planned_inputs(dataflow_plan, "ddir", "profiles"),
    output:
        "{ddir}/comap/{djob}.json",
    log:
        "{ddir}/logs/comap-{djob}.log",
    conda:
        ENV
    shell:
        f"{DSE} workflow dataflow-comap {{wildcards.ddir}} --job {{wildcards.djob}} 2> >(tee {{log}} >&2)"


rule dataflow_deploy:
    """The co-mapping on the virtual board: periodic groups, synchronous and random-phase releases."""
    input:
        "{ddir}/comap/{djob}.json",
    output:
        "{ddir}/deploy/{djob}.parquet",
    log:
        "{ddir}/logs/deploy-{djob}.log",
    resources:
        board=1,
    conda:
        ENV
    shell:
        f"{DSE} workflow dataflow-deploy {{wildcards.ddir}} --job {{wildcards.djob}} 2> >(tee {{log}} >&2)"


rule dataflow_report:
    """Relative fitness and search time per deadline (Figs. 5.6-5.9), deployment check, dataflow.parquet."""
    input:
        planned_inputs(dataflow_plan, "ddir", "comappings"),
        "{ddir}/config.yaml",
    output:
        "{ddir}/dataflow.md",
        "{ddir}/dataflow.parquet",
    log:
        "{ddir}/logs/report.log",
    conda:
        ENV
    shell:
        f"{DSE} workflow dataflow-report {{wildcards.ddir}} 2> >(tee {{log}} >&2)"


rule dataflow:
    """Target: the dataflow case of the overrides (default ch5-motivational on the virtual Xavier)."""
    input:
        family_files(dataflow_plans),
