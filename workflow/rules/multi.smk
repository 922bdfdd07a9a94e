# Several networks on one board under deadlines with DVFS (thesis Ch. 4, dse/workflow/multi.py):
# pareto (one job per network) -> powerfit -> combine (one job per FSM x method) -> freqtable -> deploy -> report.
# `snakemake --cores 2 multi --config overrides='[multi=ch4-alpha]'` (results/multi/<case>/<platform>/).
# Each job reads only its config parts, so changing the GA sizes reruns combine and what follows, not step 1.
from dse.workflow.multi import plan_multi


def _multi_plans():
    try:
        return plan_multi(config)
    except DseError as exc:
        raise WorkflowError(f"bad multi configuration: {exc}") from None


MULTI = None


def _mplan(mdir):
    global MULTI
    if MULTI is None:
        MULTI = _multi_plans()
    if mdir not in MULTI:
        raise WorkflowError(f"{mdir} is not a planned multi case; planned: {', '.join(MULTI)}")
    return MULTI[mdir]


wildcard_constraints:
    mdir=r"(.+/)?multi/[^/]+/[^/]+",
    mpart="multi|step1|platform",
    fsm=r"[A-Za-z0-9_]+",
    mmethod=r"BS|GB|PR-GB|LC|SOTA|PR",


rule multi_configure:
    """One config part of a multi case (multi, step1, platform): what the jobs read."""
    output:
        "{mdir}/config/{mpart}.yaml",
    params:
        text=lambda wc: _mplan(wc.mdir).parts[wc.mpart],
    localrule: True
    script:
        "../scripts/write_text.py"


rule multi_resolved_config:
    output:
        "{mdir}/config.yaml",
    params:
        text=lambda wc: _mplan(wc.mdir).resolved,
    localrule: True
    script:
        "../scripts/write_text.py"


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
    shell:
        "{DSE} workflow multi-pareto {wildcards.mdir} --network {wildcards.network} 2> >(tee {log} >&2)"


rule multi_powerfit:
    """Idle and dynamic power over the DVFS tables (board measurements) -> regressions of the energy model."""
    input:
        "{mdir}/config/step1.yaml",
        "{mdir}/config/platform.yaml",
        lambda wc: [f"{wc.mdir}/pareto/{n}.parquet" for n in _mplan(wc.mdir).networks],
    output:
        "{mdir}/powerfit.json",
        "{mdir}/powerfit.parquet",
    log:
        "{mdir}/logs/powerfit.log",
    resources:
        board=1,
    shell:
        "{DSE} workflow multi-powerfit {wildcards.mdir} 2> >(tee {log} >&2)"


rule multi_global:
    """The one static mapping of GB / PR-GB (every app at once, fmax) or SOTA (per-layer GA on estimates, re-measured)."""
    input:
        "{mdir}/config/multi.yaml",
        "{mdir}/powerfit.json",
        lambda wc: [f"{wc.mdir}/{k}/{n}.parquet" for n in _mplan(wc.mdir).networks for k in ("pareto", "tasks")],
    output:
        "{mdir}/global/{gmethod}.json",
    wildcard_constraints:
        gmethod="GB|SOTA",
    log:
        "{mdir}/logs/global-{gmethod}.log",
    resources:
        board=1,
    shell:
        "{DSE} workflow multi-global {wildcards.mdir} --method {wildcards.gmethod} 2> >(tee {log} >&2)"


def _global_input(wc):
    kind = {"GB": "GB", "PR-GB": "GB", "SOTA": "SOTA"}.get(wc.mmethod)
    return [f"{wc.mdir}/global/{kind}.json"] if kind else []


rule multi_combine:
    """Step 2: one method on one FSM (maximum FPS, mapping, the energy GA at the tightest constraint)."""
    input:
        "{mdir}/config/multi.yaml",
        "{mdir}/powerfit.json",
        lambda wc: [f"{wc.mdir}/{k}/{n}.parquet" for n in _mplan(wc.mdir).networks for k in ("pareto", "tasks")],
        _global_input,
    output:
        "{mdir}/combine/{fsm}-{mmethod}.json",
    log:
        "{mdir}/logs/combine-{fsm}-{mmethod}.log",
    shell:
        "{DSE} workflow multi-combine {wildcards.mdir} --fsm {wildcards.fsm} --method {wildcards.mmethod} "
        "2> >(tee {log} >&2)"


rule multi_freqtable:
    """Step 3: frequencies per scenario and FPS constraint (Algorithm 6), estimated energy and WCRTs."""
    input:
        "{mdir}/combine/{fsm}-{mmethod}.json",
    output:
        "{mdir}/freqtable/{fsm}-{mmethod}.parquet",
    log:
        "{mdir}/logs/freqtable-{fsm}-{mmethod}.log",
    shell:
        "{DSE} workflow multi-freqtable {wildcards.mdir} --fsm {wildcards.fsm} --method {wildcards.mmethod} "
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
    shell:
        "{DSE} workflow multi-deploy {wildcards.mdir} --fsm {wildcards.fsm} --method {wildcards.mmethod} "
        "2> >(tee {log} >&2)"


rule multi_report:
    """Table 4.8-style grid, energy ratios, frequency tables, Gantt of one hyperperiod, the JEDI/nvpmodel export."""
    input:
        lambda wc: _mplan(wc.mdir).combine_files(wc.mdir) + _mplan(wc.mdir).combine_files(wc.mdir, "deploy", "parquet"),
        "{mdir}/config.yaml",
    output:
        "{mdir}/multi.md",
        "{mdir}/plots/multi_fps.png",
    log:
        "{mdir}/logs/report.log",
    shell:
        "{DSE} workflow multi-report {wildcards.mdir} 2> >(tee {log} >&2)"


rule multi:
    """Target: the multi-network case of the overrides (default ch4-alpha on the virtual Xavier)."""
    input:
        lambda wc: [f for mdir, plan in _mplan_all().items() for f in plan.files(mdir)],


def _mplan_all():
    global MULTI
    if MULTI is None:
        MULTI = _multi_plans()
    return MULTI
