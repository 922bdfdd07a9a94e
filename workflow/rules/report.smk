rule report:
    """Merged measurements, report.md (Table 3.5 / 3.4 rows) and plots."""
    input:
        lambda wc: [f"{wc.run}/best.yaml", f"{wc.run}/config/energy.yaml",
                    *([f"{wc.run}/clocks.json"] if run_plan(wc.run).facts["clocks"] else [])],
    output:
        report("{run}/report.md", category="Summary"),
        measurements="{run}/measurements.parquet",
        summary="{run}/summary.json",
        fps=report("{run}/plots/fps_per_option.png", category="Plots"),
        trajectory=report("{run}/plots/trajectory.png", category="Plots"),
    log:
        "{run}/logs/report.log",
    conda:
        ENV
    shell:
        f"{DSE} workflow report {{wildcards.run}} 2> >(tee {{log}} >&2)"
