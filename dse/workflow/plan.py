"""Plan the runs of a Snakemake invocation: one resolved config per benchmark, split into the parts
each rule depends on, so that changing an override reruns only the rules that read it.

Files are rewritten only when their content changes (mtimes drive Snakemake's rerun decisions).
"""
from __future__ import annotations

import hashlib
import json
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


def _measure_part(cfg: DictConfig) -> dict:
    b = cfg.benchmark
    return {"benchmark": b.name, "precision": cfg.precision, "batch": int(cfg.batch),
            "input_size": int(b.input_size), "preprocess": b.preprocess, "application": b.application,
            "sample_size": int(b.sample_size), "warmup": int(b.warmup), "seed": int(cfg.seed)}


def config_parts(cfg: DictConfig) -> dict[str, dict]:
    return {
        "model": model_source(cfg),
        "platform": OmegaConf.to_container(cfg.platform, resolve=True),
        "measure": _measure_part(cfg),
        "search": OmegaConf.to_container(cfg.search, resolve=True),
    }


def measurement_context(cfg: DictConfig) -> str:
    """Digest of the platform and measure parts: what a measurement depends on besides its configuration
    (whose hash covers the model, option, cuts and parameters). Cached rows of another context are stale."""
    text = json.dumps({"platform": OmegaConf.to_container(cfg.platform, resolve=True), "measure": _measure_part(cfg)},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def option_names(cfg: DictConfig) -> list[str]:
    """The mapping options a run explores: search.options, else every option of the platform."""
    if str(cfg.platform.backend) == "ort":
        from dse.runtime.cpu_groups import host_platform

        valid = list(host_platform(cfg.platform).options)
    else:
        from dse.platform import load_platform

        valid = list(load_platform(cfg.platform).options)
    wanted = [str(o) for o in (cfg.search.get("options") or [])]
    for o in wanted:
        if o not in valid:
            raise DseError(f"search.options names unknown mapping option {o!r}; valid choices: {', '.join(valid)}")
    return wanted or valid


def plan_runs(snakemake_config: dict) -> dict[str, list[str]]:
    """Compose one config per benchmark (`benchmarks=[a,b]` or the `benchmark=` override), write its parts.

    Returns run directory -> the mapping options it explores (one explore_option job each)."""
    overrides = split_overrides(snakemake_config.get("overrides"))
    benchmarks = snakemake_config.get("benchmarks")
    if isinstance(benchmarks, str):
        benchmarks = split_overrides(benchmarks)
    runs: dict[str, list[str]] = {}
    for bench in benchmarks or [None]:
        extra = [] if bench is None else [f"benchmark={bench}"]
        cfg = compose_config(overrides + extra)
        rd = run_dir(cfg)
        for part, content in config_parts(cfg).items():
            write_if_changed(rd / "config" / f"{part}.yaml", OmegaConf.to_yaml(OmegaConf.create(content)))
        write_if_changed(rd / "config.yaml", OmegaConf.to_yaml(cfg))
        if str(rd) in runs:
            raise DseError(f"two planned runs share the directory {rd}")
        runs[str(rd)] = option_names(cfg)
    return runs


def load_run_config(run: str | Path) -> DictConfig:
    """The resolved config a planned run directory was written with."""
    path = Path(run) / "config.yaml"
    if not path.exists():
        raise DseError(f"{path} is missing: plan the run first (snakemake does it)")
    return OmegaConf.load(path)
