# The exploration workflow: configure -> analyze -> maximize -> search (model-guided) -> finetune -> report;
# with search.strategy=proposed (thesis Fig. 3.6): configure -> analyze -> maximize -> explore_option (one job per
# mapping option, global-only) -> select_option -> search (global + local) -> finetune -> report.
# `snakemake --cores N` runs the default (yolov4, INT8, virtual Xavier AGX).
# Overrides: --config overrides='[benchmark=yolov4,precision=fp16]'   benchmarks='[yolov4,yolov3]'
# Per-layer mapping (seeds 002/004): `snakemake --cores 2 layermap --config overrides='[platform=galaxy-s9-sim,
# benchmark=mobilenet-v1]'` (workflow/rules/layermap.smk).
# Several networks under deadlines with DVFS (thesis Ch. 4): `snakemake --cores 2 multi --config
# overrides='[multi=ch4-alpha]'` (workflow/rules/multi.smk).
# DNNs inside dataflow applications (thesis Ch. 5): `snakemake --cores 2 dataflow --config
# overrides='[dataflow=ch5-motivational]'` (workflow/rules/dataflow.smk).
# Energy/frequency Pareto search (seed 001): `snakemake --cores 2 pareto --config
# overrides='[platform=tx2-sim,benchmark=vgg19]'` (workflow/rules/pareto.smk).
# Task-set schedulability with per-accelerator variants (seed 003): `snakemake --cores 2 taskset`
# (workflow/rules/taskset.smk).
# Design studies (a grid of explorations): `snakemake --cores 2 study --config overrides='[study=xavier-36]'`
# (workflow/rules/study.smk); on a cluster add `--workflow-profile profiles/slurm`.
# Several DNNs mapped layer by layer under periods and priorities (seed 002 Sec. VI): `snakemake --cores 2 multiapp
# --config overrides='[multiapp=s9]'` (workflow/rules/multiapp.smk).
from snakemake.utils import min_version

min_version("8.0")


include: "workflow/rules/common.smk"


wildcard_constraints:
    run=r".+/[a-z0-9]+-b\d+-\d+",
    option=r"[A-Za-z0-9_-]+",


include: "workflow/rules/configure.smk"
include: "workflow/rules/analyze.smk"
include: "workflow/rules/explore.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/bench.smk"
include: "workflow/rules/compare.smk"
include: "workflow/rules/layermap.smk"
include: "workflow/rules/multi.smk"
include: "workflow/rules/dataflow.smk"
include: "workflow/rules/taskset.smk"
include: "workflow/rules/pareto.smk"
include: "workflow/rules/study.smk"
include: "workflow/rules/multiapp.smk"


rule all:
    input:
        targets("pipeline"),
    default_target: True
