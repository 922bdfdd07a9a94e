# Task-set schedulability with per-accelerator variants (seed 003, dse/systems/taskset/jobs.py): one campaign job per
# scenario (independent), then the report (Tables 5-7 and Figs. 10-12 analogs).
# `snakemake --cores 2 taskset` (results/taskset/<table>/<units>/); e.g. --config overrides='[taskset.sets=200]';
# variants measured by the evaluator first: --config overrides='[taskset=zoo-xavier]'.
wildcard_constraints:
    tdir=FAMILY_DIRS["taskset"],
    scenario=r"[A-Za-z0-9_-]+",


rule taskset_variants:
    """A measured table (``measure`` instead of ``variants``): every network x option by the evaluator."""
    input:
        "{tdir}/config/taskset.yaml",
    output:
        "{tdir}/variants.yaml",
        "{tdir}/variants.parquet",
    log:
        "{tdir}/logs/variants.log",
    conda:
        ENV
    shell:
        f"{DSE} taskset variants {{wildcards.tdir}} 2> >(tee {{log}} >&2)"


rule taskset_campaign:
    """One scenario: N sets per threshold, each decided under every configuration (bound, greedy, HiGHS)."""
    input:
        planned_inputs(taskset_plan, "tdir", "campaign_inputs"),
    output:
        "{tdir}/campaign/{scenario}.parquet",
        "{tdir}/campaign/{scenario}.json",
    log:
        "{tdir}/logs/campaign-{scenario}.log",
    conda:
        ENV
    shell:
        f"{DSE} taskset campaign {{wildcards.tdir}} --scenario {{wildcards.scenario}} 2> >(tee {{log}} >&2)"


rule taskset_report:
    """Success ratio and mean instances per threshold x configuration (taskset.parquet, taskset.md, plots)."""
    input:
        planned_inputs(taskset_plan, "tdir", "campaigns"),
        "{tdir}/config.yaml",
    output:
        "{tdir}/taskset.md",
        "{tdir}/taskset.parquet",
    log:
        "{tdir}/logs/report.log",
    conda:
        ENV
    shell:
        f"{DSE} taskset report {{wildcards.tdir}} > /dev/null 2> >(tee {{log}} >&2)"


rule taskset:
    """Target: every scenario of the taskset config (default apollo-xavier: nvdla, gpu-tc, gpu-rc)."""
    input:
        family_files(taskset_plans),
