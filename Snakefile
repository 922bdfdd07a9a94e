# The exploration workflow: `snakemake --cores N` runs the default (yolov4 on the virtual Xavier).
# Overrides: --config overrides='[benchmark=yolov4,precision=fp16]'   benchmarks='[yolov4,yolov3]'
import sys

from dse.errors import DseError
from dse.workflow.plan import plan_runs

DSE = f"{sys.executable} -m dse"
try:
    RUNS = plan_runs(config)  # composes + validates every config before any job runs
except DseError as exc:
    raise WorkflowError(f"bad configuration: {exc}") from None

wildcard_constraints:
    run=r".+/[a-z0-9]+-b\d+-\d+",


include: "workflow/rules/analyze.smk"


rule all:
    input:
        expand("{run}/cuts.json", run=RUNS),
    default_target: True
