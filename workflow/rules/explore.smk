# Measuring rules hold the board: `resources: board=1` (one measurement at a time per board; run
# `snakemake --resources board=N --config boards='[b1,...]'` with a farm of N boards: each job leases one).
# threads/mem_mb/runtime (minutes, per backend: dse.workflow.plan.RUNTIME_MIN) are what a cluster executor asks for.

rule maximize:
    """Parameter maximizer on the main-PE-only option: upper bounds of threads, buffers, streams."""
    input:
        rules.analyze.output.cuts,
        "{run}/config/platform.yaml",
        "{run}/config/measure.yaml",
        "{run}/config/search.yaml",
    output:
        "{run}/maximize.json",
    log:
        "{run}/logs/maximize.log",
    threads: 1
    resources:
        board=1,
        mem_mb=2000,
        runtime=lambda wc: runtime_min(run_plan(wc.run)),
    conda:
        ENV
    shell:
        f"{DSE} workflow maximize {{wildcards.run}} 2> >(tee {{log}} >&2)"


rule explore_option:
    """Global-only cut-point search of one mapping option (Algorithm 2 without local search)."""
    input:
        "{run}/maximize.json",
    output:
        "{run}/options/{option}.json",
    log:
        "{run}/logs/explore-{option}.log",
    threads: 1
    resources:
        board=1,
        mem_mb=2000,
        runtime=lambda wc: runtime_min(run_plan(wc.run)),
    conda:
        ENV
    shell:
        f"{DSE} workflow explore {{wildcards.run}} --option {{wildcards.option}} 2> >(tee {{log}} >&2)"


rule select_option:
    """The mapping option with the best FPS, and the shortlist within search.refine_within of it."""
    input:
        lambda wc: expand("{run}/options/{option}.json", run=wc.run, option=run_plan(wc.run).facts["options"]),
    output:
        "{run}/selected.json",
    params:
        options=lambda wc: ",".join(run_plan(wc.run).facts["options"]),
    localrule: True
    log:
        "{run}/logs/select.log",
    conda:
        ENV
    shell:
        f"{DSE} workflow select {{wildcards.run}} --options {{params.options}} 2> >(tee {{log}} >&2)"


rule search:
    """search.strategy=guided (the default): the model-guided exploration of every option, straight after the
    maximizer (no per-option jobs). search.strategy=proposed: global + local search (Algorithms 2 and 3, T lowered
    greedily) on each shortlisted option."""
    input:
        lambda wc: f"{wc.run}/maximize.json" if run_plan(wc.run).facts["strategy"] == "guided" else f"{wc.run}/selected.json",
    output:
        "{run}/search.json",
    log:
        "{run}/logs/search.log",
    threads: 1
    resources:
        board=1,
        mem_mb=2000,
        runtime=lambda wc: runtime_min(run_plan(wc.run)),
    conda:
        ENV
    shell:
        f"{DSE} workflow search {{wildcards.run}} 2> >(tee {{log}} >&2)"


rule finetune:
    """Fine-tuner: raise, then lower threads/buffers/streams within the allowed degradation."""
    input:
        "{run}/search.json",
    output:
        "{run}/best.yaml",
    log:
        "{run}/logs/finetune.log",
    threads: 1
    resources:
        board=1,
        mem_mb=2000,
        runtime=lambda wc: runtime_min(run_plan(wc.run)),
    conda:
        ENV
    shell:
        f"{DSE} workflow finetune {{wildcards.run}} 2> >(tee {{log}} >&2)"


rule clocks:
    """search.objective=energy|fps_per_watt, search.pareto or search.min_fps: the best mappings x power modes x
    clocks (thesis Ch. 4's Algorithm 6 per mapping and mode), the answer and the FPS vs J/frame front."""
    input:
        "{run}/best.yaml",
        "{run}/config/energy.yaml",
    output:
        "{run}/clocks.json",
        report("{run}/plots/energy_front.png", category="Plots"),
    log:
        "{run}/logs/clocks.log",
    threads: 1
    resources:
        board=1,
        mem_mb=2000,
        runtime=lambda wc: runtime_min(run_plan(wc.run)),
    conda:
        ENV
    shell:
        f"{DSE} workflow clocks {{wildcards.run}} 2> >(tee {{log}} >&2)"
