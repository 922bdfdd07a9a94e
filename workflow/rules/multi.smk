# Several networks on one board under deadlines with DVFS (thesis Ch. 4, dse/systems/multi/jobs.py):
# pareto (one job per network) -> powerfit -> combine (one job per FSM x method) -> freqtable -> deploy -> report.
# `snakemake --cores 2 multi --config overrides='[multi=ch4-alpha]'` (results/multi/<case>/<platform>/).
# Each job reads only its config parts, so changing the GA sizes reruns combine and what follows, not step 1.
wildcard_constraints:
    mdir=FAMILY_DIRS["multi"],
    fsm=r"[A-Za-z0-9_]+",
    mmethod=r"BS|GB|PR-GB|LC|SOTA|PR",


rule multi_pareto:
    """Step 1: the Pareto mappings of one network and the task profile of each (board measurements)."""
    input:
        "{mdir}/config/step1.yaml",
        "{mdir}/config/platform.yaml",
    output:
        "{mdir}/pareto/{network}.parquet",
        "{mdir}/tasks/{network}.parquet",
        "{mdir}/candidates/{network}.parquet",
    log:
        "{mdir}/logs/pareto-{network}.log",
    resources:
        board=1,
    conda:
        ENV
    shell:
        f"{DSE} workflow multi-pareto {{wildcards.mdir}} --network {{wildcards.network}} 2> >(tee {{log}} >&2)"


rule multi_powerfit:
    """Idle and dynamic power over the DVFS tables (board measurements) -> regressions of the energy model."""
    input:
        "{mdir}/config/step1.yaml",
        "{mdir}/config/platform.yaml",
        planned_inputs(multi_plan, "mdir", "fronts"),
    output:
        "{mdir}/powerfit.json",
        "{mdir}/powerfit.parquet",
    log:
        "{mdir}/logs/powerfit.log",
    resources:
        board=1,
    conda:
        ENV
    shell:
        f"{DSE} workflow multi-powerfit {{wildcards.mdir}} 2> >(tee {{log}} >&2)"


rule multi_global:
    """The one static mapping of GB / PR-GB (every app at once, fmax) or SOTA (per-layer GA on estimates, re-measured)."""
    input:
        "{mdir}/config/multi.yaml",
        "{mdir}/powerfit.json",
        planned_inputs(multi_plan, "mdir", "profiles"),
    output:
        "{mdir}/global/{gmethod}.json",
    wildcard_constraints:
        gmethod="GB|SOTA",
    log:
        "{mdir}/logs/global-{gmethod}.log",
    resources:
        board=1,
    conda:
        ENV
    shell:
        f"{DSE} workflow multi-global {{wildcards.mdir}} --method {{wildcards.gmethod}} 2> >(tee {{log}} >&2)"


rule multi_combine:
    """Step 2: one method on one FSM (maximum FPS, mapping, the energy GA at the tightest constraint)."""
    input:
        "{mdir}/config/multi.yaml",
        "{mdir}/powerfit.json",
        planned_inputs(multi_plan, "mdir", "profiles"),
        multi_global_input,
    output:
        "{mdir}/combine/{fsm}-{mmethod}.json",
    log:
        "{mdir}/logs/combine-{fsm}-{mmethod}.log",
    conda:
        ENV
    shell:
        f"{DSE} workflow multi-combine {{wildcards.mdir}} --fsm {{wildcards.fsm}} --method {{wildcards.mmethod}} "
        "2> >(tee {log} >&2)"


rule multi_freqtable:
    """Step 3: frequencies per scenario and FPS constraint (Algorithm 6), estimated energy and WCRTs."""
    input:
        "{mdir}/combine/{fsm}-{mmethod}.json",
    output:
        "{mdir}/freqtable/{fsm}-{mmethod}.parquet",
    log:
        "{mdir}/logs/freqtable-{fsm}-{mmethod}.log",
    conda:
        ENV
    shell:
        f"{DSE} workflow multi-freqtable {{wildcards.mdir}} --fsm {{wildcards.fsm}} --method {{wildcards.mmethod}} "
        "2> >(tee {log} >&2)"


rule multi_deploy:
    """The mapping and frequency table deployed on the virtual board: periodic runs per scenario and constraint."""
    input:
        "{mdir}/freqtable/{fsm}-{mmethod}.parquet",
    output:
        "{mdir}/deploy/{fsm}-{mmethod}.parquet",
    log:
        "{mdir}/logs/deploy-{fsm}-{mmethod}.log",
    resources:
        board=1,
    conda:
        ENV
    shell:
        f"{DSE} workflow multi-deploy {{wildcards.mdir}} --fsm {{wildcards.fsm}} --method {{wildcards.mmethod}} "
        "2> >(tee {log} >&2)"


rule multi_report:
    """Table 4.8-style grid, energy ratios, frequency tables, Gantt of one hyperperiod, the JEDI/nvpmodel export."""
    input:
        planned_inputs(multi_plan, "mdir", "deployments"),
        "{mdir}/config.yaml",
    output:
        "{mdir}/multi.md",
        "{mdir}/plots/multi_fps.png",
    log:
        "{mdir}/logs/report.log",
    conda:
        ENV
    shell:
        f"{DSE} workflow multi-report {{wildcards.mdir}} 2> >(tee {{log}} >&2)"


rule multi:
    """Target: the multi-network case of the overrides (default ch4-alpha on the virtual Xavier)."""
    input:
        family_files(multi_plans),
