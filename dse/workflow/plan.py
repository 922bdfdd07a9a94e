"""Plan the runs of a Snakemake invocation: one resolved config per benchmark, split into the parts
each rule depends on, so that changing an override reruns only the rules that read it.

Files are rewritten only when their content changes (mtimes drive Snakemake's rerun decisions).
"""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from dse.config import compose_config, run_dir, split_overrides
from dse.errors import DseError
from dse.network import model_source

# run_dir/config/<part>.yaml: the rules' inputs
PARTS = ("model", "platform", "measure", "search")


def write_if_changed(path: Path, text: str) -> bool:
    from dse.store.atomic import write_text_atomic

    path = Path(path)
    if path.exists() and path.read_text() == text:
        return False
    write_text_atomic(path, text)
    return True


def config_parts(cfg: DictConfig) -> dict[str, dict]:
    b = cfg.benchmark
    return {
        "model": model_source(cfg),
        "platform": OmegaConf.to_container(cfg.platform, resolve=True),
        "measure": {"benchmark": b.name, "precision": cfg.precision, "batch": int(cfg.batch),
                    "input_size": int(b.input_size), "preprocess": b.preprocess, "application": b.application,
                    "sample_size": int(b.sample_size), "warmup": int(b.warmup), "seed": int(cfg.seed)},
        "search": OmegaConf.to_container(cfg.search, resolve=True),
    }


def plan_runs(snakemake_config: dict) -> list[str]:
    """Compose one config per benchmark (`benchmarks=[a,b]` or the `benchmark=` override), write its parts."""
    overrides = split_overrides(snakemake_config.get("overrides"))
    benchmarks = snakemake_config.get("benchmarks")
    if isinstance(benchmarks, str):
        benchmarks = split_overrides(benchmarks)
    runs = []
    for bench in benchmarks or [None]:
        extra = [] if bench is None else [f"benchmark={bench}"]
        cfg = compose_config(overrides + extra)
        rd = run_dir(cfg)
        for part, content in config_parts(cfg).items():
            write_if_changed(rd / "config" / f"{part}.yaml", OmegaConf.to_yaml(OmegaConf.create(content)))
        write_if_changed(rd / "config.yaml", OmegaConf.to_yaml(cfg))
        runs.append(str(rd))
    if len(set(runs)) != len(runs):
        raise DseError(f"two planned runs share a directory: {runs}")
    return runs


def load_run_config(run: str | Path) -> DictConfig:
    """The resolved config a planned run directory was written with."""
    path = Path(run) / "config.yaml"
    if not path.exists():
        raise DseError(f"{path} is missing: plan the run first (snakemake does it)")
    return OmegaConf.load(path)
