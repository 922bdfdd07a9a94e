rule analyze:
    """Build/load the network, sanitize it, write the layer table and the feasible cuts."""
    input:
        "{run}/config/model.yaml",
    output:
        model="{run}/model.onnx",
        layers="{run}/layers.parquet",
        cuts="{run}/cuts.json",
    log:
        "{run}/logs/analyze.log",
    conda:
        ENV
    shell:
        f"{DSE} workflow analyze {{wildcards.run}} > {{log}} 2>&1"
