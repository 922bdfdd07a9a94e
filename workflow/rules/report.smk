rule report:
    """Merged measurements, report.md (Table 3.5 / 3.4 rows) and plots."""
    input:
        "{run}/best.yaml",
    output:
        report("{run}/report.md", category="Summary"),
        measurements="{run}/measurements.parquet",
        summary="{run}/summary.json",
        fps=report("{run}/plots/fps_per_option.png", category="Plots"),
        trajectory=report("{run}/plots/trajectory.png", category="Plots"),
    shell:
        "{DSE} workflow report {wildcards.run}"
