# Shared by the workflow's files: how a job calls dse, the planned runs of this invocation, and the lazy planners of
# the other target families. Planning imports only what it needs: each family's planner module is imported the
# first time one of its targets is asked for, so a plain `snakemake` never pays for the others.
import os
import re
import sys
from pathlib import Path

from snakemake.settings.types import DeploymentMethod

from dse.core.errors import DseError
from dse.farm.lease import BOARDS_ENV, parse_farm
from dse.workflow.plan import (FAMILY_PLANNERS, PARTS, named_families, plan_family, plan_runs, run_targets,
                               runtime_min)

# Jobs run dse with this process's interpreter (the environment snakemake was installed in); with
# `--sdm conda` they run in the environment of workflow/envs/dse.yaml instead.
IN_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
PYTHON = "python" if IN_CONDA else sys.executable
DSE = f"{PYTHON} -m dse"
ENV = "../envs/dse.yaml"
REPO = Path(workflow.main_snakefile).resolve().parent  # the repository, where the bench package lives

try:
    RUNS = plan_runs(config)  # composes + validates every config before any job runs; writes nothing
    if config.get("boards"):  # a farm: each measuring job leases one of these boards (dse/farm/lease.py)
        os.environ[BOARDS_ENV] = ",".join(parse_farm(config["boards"]))
except DseError as exc:
    raise WorkflowError(f"bad configuration: {exc}") from None


def targets(family):
    """Input function of a target: every planned run's outputs of ``family`` ("pipeline", "layermap"); evaluated
    only when the target is asked for, so a board that cannot run the other family is refused by name."""
    def inputs(wildcards):
        try:
            return [f for run, plan in RUNS.items() for f in run_targets(plan, family, run)]
        except DseError as exc:
            raise WorkflowError(str(exc)) from None
    return inputs


def comparisons(wildcards):
    """The comparison of every planned run that the pipeline explores."""
    return [str(Path(f).with_name("comparison.md")) for f in targets("pipeline")(wildcards)
            if Path(f).name == "report.md"]


def run_plan(run):
    """The plan of a run of this invocation, or of a study's point (studies are planned on first use)."""
    if run in RUNS:
        return RUNS[run]
    plan = study_point(run) if "studies/" in run else None
    if plan is not None:
        return plan
    raise WorkflowError(f"{run} is not a planned run directory; planned: {', '.join(RUNS)}")


def lazy_plans(family):
    """(all plans, the plan of one directory) of a target family (``FAMILY_PLANNERS``), planned on first use; a bad
    value is a WorkflowError naming it."""
    plans = {}

    def all_plans():
        if "" not in plans:
            try:
                plans[""] = plan_family(family, config)
            except DseError as exc:
                raise WorkflowError(str(exc)) from None
        return plans[""]

    def plan_of(directory):
        if directory not in all_plans():
            raise WorkflowError(f"{directory} is not a planned {FAMILY_PLANNERS[family][0]}; planned: "
                                f"{', '.join(all_plans())}")
        return all_plans()[directory]

    all_plans.planned = lambda: "" in plans
    return all_plans, plan_of


def planned_inputs(plan_of, wildcard, name):
    """A rule's input function: the file list ``name`` of the plan of the directory in ``wildcard``."""
    return lambda wildcards: plan_of(wildcards[wildcard]).files(wildcards[wildcard], name)


def family_files(all_plans):
    """Input function of a family's target: the outputs of every one of its planned directories."""
    return lambda wildcards: [f for directory, plan in all_plans().items() for f in plan.files(directory)]


multi_plans, multi_plan = lazy_plans("multi")
dataflow_plans, dataflow_plan = lazy_plans("dataflow")
taskset_plans, taskset_plan = lazy_plans("taskset")
pareto_plans, pareto_plan = lazy_plans("pareto")
study_plans, study_plan = lazy_plans("study")
multiapp_plans, multiapp_plan = lazy_plans("multiapp")
STUDY_POINTS = {}
# A family asked for (its target named on the command line, or its config group in an override) is planned now, so
# a bad value is one `bad ... configuration` line before any job instead of an input function's traceback; the
# others wait for their target. Snakemake gives the Snakefile no targets, hence the look at the command line.
ASKED = set(sys.argv[1:])
for _family in sorted(ASKED & set(FAMILY_PLANNERS) | set(named_families(config.get("overrides")))):
    {"multi": multi_plans, "dataflow": dataflow_plans, "taskset": taskset_plans, "pareto": pareto_plans,
     "study": study_plans, "multiapp": multiapp_plans}[_family]()
for _family in ("pipeline", "layermap"):
    if _family in ASKED or (_family == "pipeline" and "all" in ASKED):
        targets(_family)(None)
# where each family's planned directories are (the wildcard constraints of its rules): how `plan_of` tells them apart
FAMILY_DIRS = {"multi": r"(.+/)?multi/[^/]+/[^/]+", "dataflow": r"(.+/)?dataflow/[^/]+/[^/]+",
               "taskset": r"(.+/)?taskset/[^/]+/[^/]+", "pareto": r"(.+/)?pareto/[^/]+/[^/]+",
               "study": r"(.+/)?studies/[^/]+", "multiapp": r"(.+/)?multiapp/[^/]+/[^/]+"}
# every config part name a family's plan writes (a run's, then the other families')
CONFIG_PARTS = (*PARTS, "multi", "step1", "dataflow", "pareto", "taskset", "study", "multiapp", "multiapp-apps")
FAMILY_PLAN = {"multi": multi_plan, "dataflow": dataflow_plan, "taskset": taskset_plan, "pareto": pareto_plan,
               "study": study_plan, "multiapp": multiapp_plan}


def plan_of(directory):
    """The plan of a planned directory of any target family (a pipeline run or a study's point by default): the
    config parts and the resolved config that rules ``configure`` and ``resolved_config`` write there."""
    for family, pattern in FAMILY_DIRS.items():
        if re.fullmatch(pattern, directory):
            return FAMILY_PLAN[family](directory)
    return run_plan(directory)


def study_point(run):
    """A study point's plan: from the whole study where this process planned it (the submitting one), else that
    point alone (a job inside a cluster job needs only its own run); None if ``run`` is no point of the study."""
    if study_plans.planned():
        return next((plan.facts["runs"][run] for plan in study_plans().values() if run in plan.facts["runs"]), None)
    if run not in STUDY_POINTS:
        from dse.workflow.study import plan_study_point

        try:
            STUDY_POINTS[run] = plan_study_point(config, run)
        except DseError as exc:
            raise WorkflowError(f"bad study configuration: {exc}") from None
    return STUDY_POINTS[run]


def multi_global_input(wildcards):
    """The static mapping a multi method starts from (GB and PR-GB: GB's; SOTA: its own), or nothing."""
    kind = {"GB": "GB", "PR-GB": "GB", "SOTA": "SOTA"}.get(wildcards.mmethod)
    return [f"{wildcards.mdir}/global/{kind}.json"] if kind else []


# The params trigger needs Snakemake's metadata, which `rm -rf .snakemake` deletes and a copied results folder lacks,
# and a missing intermediate file is not remade while what reads it is present; so a part's file whose text differs
# from the plan forces its rule (and so everything that reads it), whatever the metadata says.


def forced_if_changed(path, text):
    """No input: forces the rule writing ``path`` when the file exists with text other than ``text``."""
    try:
        same = not os.path.exists(path) or Path(path).read_text(encoding="utf-8") == text
    except (OSError, UnicodeDecodeError):
        same = False
    if not same:
        dag = workflow.dag
        if dag is None or not hasattr(dag, "forcefiles"):
            raise WorkflowError(f"{path} differs from this configuration's plan; rerun with --forcerun configure "
                                "resolved_config")
        dag.forcefiles.add(path)  # read by the needrun pass, which runs after every input function
    return []
