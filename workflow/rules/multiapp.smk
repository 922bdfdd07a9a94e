# Several DNNs mapped layer by layer under periods and fixed priorities (seed 002 Sec. VI,
# dse/systems/layermap/multiapp_jobs.py): a profile per app -> SPEA2 over the joint mapping with the schedule-based
# analysis -> the chosen mappings in the periodic simulation, the report and the plots of Figs. 11 and 12.
# `snakemake --cores 2 multiapp --config overrides='[multiapp=s9]'` (results/multiapp/<name>/<platform>/).
wildcard_constraints:
    adir=FAMILY_DIRS["multiapp"],


rule multiapp_profile:
    """One app's per-task profile on every PE kind of the case."""
    input:
        "{adir}/config/multiapp-apps.yaml",
        "{adir}/config/platform.yaml",
    output:
        "{adir}/profiles/{app}.parquet",
    log:
        "{adir}/logs/profile-{app}.log",
    resources:
        board=1,  # host-cpu: real per-task runs need the cores to themselves
    conda:
        ENV
    shell:
        f"{DSE} workflow multiapp-profile {{wildcards.adir}} --network {{wildcards.app}} 2> >(tee {{log}} >&2)"


rule multiapp_search:
    """Each app's minimum response time alone, then SPEA2 over every app's per-layer map: the Pareto set."""
    input:
        planned_inputs(multiapp_plan, "adir", "profiles"),
        "{adir}/config/multiapp.yaml",
        "{adir}/config/multiapp-apps.yaml",
        "{adir}/config/platform.yaml",
    output:
        "{adir}/multiapp.parquet",
        "{adir}/search.json",
    log:
        "{adir}/logs/search.log",
    conda:
        ENV
    shell:
        f"{DSE} workflow multiapp-search {{wildcards.adir}} 2> >(tee {{log}} >&2)"


rule multiapp_report:
    """The chosen mappings in the periodic simulation, or for real on host-cpu (misses, worst response vs bound),
    report and plots."""
    input:
        "{adir}/multiapp.parquet",
        "{adir}/search.json",
        "{adir}/config/multiapp.yaml",
        "{adir}/config/multiapp-apps.yaml",
        "{adir}/config/platform.yaml",
    output:
        "{adir}/check.parquet",
        "{adir}/multiapp.md",
        "{adir}/plots/relative_response.png",
        "{adir}/plots/energy_pairs.png",
    log:
        "{adir}/logs/report.log",
    resources:
        board=1,  # host-cpu: the check runs the mappings on the cores
    conda:
        ENV
    shell:
        f"{DSE} workflow multiapp-report {{wildcards.adir}} 2> >(tee {{log}} >&2)"


rule multiapp:
    """Target: the multi-application case of the overrides (`multiapp=s9`)."""
    input:
        family_files(multiapp_plans),
