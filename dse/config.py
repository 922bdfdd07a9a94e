"""Hydra composition of config/ (benchmark, platform, search) with validated overrides.

Used by the CLI, the Snakefile and the library alike, so a bad override fails the same way everywhere
and before any job runs.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from dse.core.configuration import PREPROCESS
from dse.core.errors import DseError, choices_error
from dse.core.validate import bounded_int, check_keys, dir_name, load_yaml

GROUPS = ("benchmark", "platform", "search", "multi", "dataflow", "study", "multiapp")


def config_dir() -> Path:
    """config/ of the working directory (a user's checkout), else the one next to the package."""
    env = os.environ.get("DSE_CONFIG_DIR")
    candidates = [Path(env)] if env else []
    candidates += [Path.cwd() / "config", Path(__file__).resolve().parents[1] / "config"]
    for c in candidates:
        if (c / "config.yaml").is_file():
            return c.resolve()
    raise DseError(f"no config/config.yaml found (looked in {', '.join(map(str, candidates))}); set DSE_CONFIG_DIR")


def split_overrides(overrides) -> list[str]:
    """Accept a list, '[a=b,c=d]' (Snakemake --config style) or 'a=b c=d'; commas inside brackets stay."""
    if overrides is None:
        return []
    if isinstance(overrides, (list, tuple)):
        out = []
        for o in overrides:
            out += split_overrides(o) if isinstance(o, str) and ("," in o or " " in o.strip()) and "=" in o else [str(o)]
        return [o for o in out if o]
    text = str(overrides).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
            if depth < 0:
                raise DseError(f"unbalanced brackets in the overrides {str(overrides)!r}: a {ch!r} closes nothing")
        if depth == 0 and ch in ", \t\n":
            if cur.strip():
                parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if depth:
        raise DseError(f"unbalanced brackets in the overrides {str(overrides)!r}: {depth} bracket(s) not closed")
    if cur.strip():
        parts.append(cur.strip())
    return [p.strip("'\"") for p in parts]


def group_choices(group: str) -> list[str]:
    return sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))


def _check_override_syntax(overrides: list[str]) -> None:
    for o in overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        opened = sum(o.count(c) for c in "[{(") - sum(o.count(c) for c in "]})")
        if opened:
            raise DseError(f"unbalanced brackets in override {o!r}: " +
                           (f"{opened} not closed" if opened > 0 else f"{-opened} closing bracket(s) too many"))
        if "=" not in o:
            raise DseError(f"override {o!r} is not key=value (e.g. benchmark=yolov4 precision=fp16 benchmark.input_size=512)")
        if key in GROUPS:
            value = o.split("=", 1)[1]
            choices = group_choices(key)
            if value not in choices:
                raise choices_error(f"{key}", value, choices)


def compose_config(overrides=None) -> DictConfig:
    """Compose config/config.yaml with overrides; resolve and validate; raise DseError on anything bad."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    overrides = split_overrides(overrides)
    _check_override_syntax(overrides)
    _check_config_files(config_dir())
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
            cfg = compose(config_name="config", overrides=overrides, return_hydra_config=True)
    except (HydraException, OmegaConfBaseException) as exc:
        raise DseError(_explain_hydra_error(exc, overrides)) from None
    finally:
        GlobalHydra.instance().clear()
    choices = dict(cfg.hydra.runtime.choices)
    OmegaConf.set_struct(cfg, False)
    del cfg["hydra"]
    OmegaConf.resolve(cfg)
    _check_run_names(cfg, choices, overrides)
    supported = cfg.platform.get("precisions")
    explicit = any(o.split("=", 1)[0].lstrip("+~") == "precision" for o in overrides)
    if supported and not explicit and cfg.precision not in supported:
        cfg.precision = str(supported[0])  # e.g. host-cpu runs fp32 graphs: the benchmark's int8 default does not apply
    cfg.benchmark.precision = cfg.precision
    cfg.benchmark.batch = cfg.batch
    validate(cfg)
    OmegaConf.set_struct(cfg, True)
    return cfg


_CHECKED_FILES: dict[Path, tuple[int, int]] = {}


def _check_config_files(root: Path) -> None:
    """Every YAML file Hydra may load is a mapping safe to walk (``core.validate.load_yaml``: no FIFO, no alias
    bomb, no Python tag, no syntax error) before it composes any, so a broken file is one line naming it, not
    Hydra's traceback; a file is checked again only when its size or mtime changes."""
    for path in root.rglob("*.yaml"):
        try:
            st = path.stat()
        except OSError:
            continue
        if _CHECKED_FILES.get(path) != (st.st_mtime_ns, st.st_size):
            doc = load_yaml(path, "config file")
            if not isinstance(doc, dict):
                raise DseError(f"config file {str(path)!r} holds {_kind(doc)}; a config file is a mapping of keys "
                               "(`name: ...` and the group's settings)")
            _CHECKED_FILES[path] = (st.st_mtime_ns, st.st_size)


def _kind(doc) -> str:
    return "nothing" if doc is None else f"a {type(doc).__name__}" if not isinstance(doc, (str, int, float)) \
        else f"the scalar {doc!r}"


def _check_run_names(cfg: DictConfig, choices: dict, overrides: list[str]) -> None:
    """A run is filed and titled by its benchmark's and platform's names, so a name must say what is measured:
    a group file names itself after its file (a copy that kept the other's ``name:`` would write into that one's
    run directory), and a model or weights that replace the benchmark's own need a name of their own
    (``benchmark.model=my.onnx`` alone would be filed and titled as the default benchmark)."""
    given = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    for group in ("benchmark", "platform"):
        choice, name = choices.get(group), cfg[group].get("name")
        if choice and f"{group}.name" not in given and str(name) != str(choice):
            raise DseError(f"config/{group}/{choice}.yaml names itself {name!r}: a {group} file's name is its file's "
                           f"stem (runs are filed by it); set `name: {choice}` in it, or override {group}.name")
    replaced = [k for k in ("benchmark.model", "benchmark.weights") if k in given]
    if replaced and "benchmark.name" not in given:
        shipped = OmegaConf.load(config_dir() / "benchmark" / f"{choices.get('benchmark')}.yaml")
        for key in replaced:
            field = key.split(".", 1)[1]
            if cfg.benchmark.get(field) != shipped.get(field):
                raise DseError(f"{key}={cfg.benchmark.get(field)} replaces benchmark {cfg.benchmark.name}'s "
                               f"{field}: name the run after what it measures with benchmark.name=<name> (it would "
                               f"be filed and titled as {cfg.benchmark.name})")


def _explain_hydra_error(exc: Exception, overrides: list[str]) -> str:
    msg = str(exc).strip()
    if "not in struct" in msg or "Could not override" in msg:
        for o in overrides:
            key = o.split("=", 1)[0].lstrip("+~")
            if o.startswith("+"):
                continue
            reason = _unknown_key(key, [x for x in overrides if x != o])
            if reason:
                return f"{reason} (in override {o!r})"
    return f"bad configuration override: {msg}"


def _unknown_key(key: str, other_overrides: list[str]) -> str | None:
    """Why ``key`` names nothing in the config the other overrides compose (the groups they select, so a
    misspelled platform key lists that platform's keys), or None when it does name something."""
    try:
        cfg = compose_config(other_overrides)
    except DseError:
        return None
    node, path = cfg, []
    for part in key.split("."):
        if not isinstance(node, DictConfig) or part not in node:
            where = ".".join(path) or "the top level"
            valid = sorted(node.keys()) if isinstance(node, DictConfig) else []
            return f"unknown key {key!r}; valid keys of {where}: {', '.join(map(str, valid))}"
        node, path = node[part], path + [part]
    return None


TOP_LEVEL_KEYS = ("benchmark", "platform", "search", "layermap", "pareto", "multi", "dataflow", "taskset", "study",
                  "multiapp", "compare", "precision", "batch", "seed", "results_dir", "reuse_from")
BENCHMARK_KEYS = ("name", "model", "weights", "input_size", "input_shapes", "preprocess", "application", "image_dir",
                  "calibration_cache", "sample_size", "warmup", "batch", "precision")
MAX_SAMPLE_SIZE = 1_000_000
MAX_BATCH = 4096


def validate(cfg: DictConfig) -> None:
    """What can be checked on the composed config alone (platform-dependent bounds are checked when a run is
    planned, ``dse.workflow.plan``): known keys (a ``+key=value`` override cannot smuggle in a typo), types and
    ranges of every count."""
    from dse.core.configuration import PRECISIONS

    for where, node, keys in (("the top level", cfg, TOP_LEVEL_KEYS), ("benchmark", cfg.benchmark, BENCHMARK_KEYS)):
        check_keys(node, keys, f"key of {where}")
    if cfg.precision not in PRECISIONS:
        raise choices_error("precision", cfg.precision, PRECISIONS)
    b = cfg.benchmark
    dir_name(b.name, "benchmark.name")
    dir_name(cfg.platform.get("name"), "platform.name")
    bounded_int(cfg.batch, "batch", 1, MAX_BATCH)
    bounded_int(cfg.seed, "seed", 0, 2**32 - 1)
    if bounded_int(b.input_size, "benchmark.input_size", 32, 8192) % 32:
        raise DseError(f"benchmark.input_size must be a positive multiple of 32, got {b.input_size!r}")
    if b.preprocess not in PREPROCESS:
        raise choices_error("benchmark.preprocess", b.preprocess, PREPROCESS)
    bounded_int(b.sample_size, "benchmark.sample_size", 1, MAX_SAMPLE_SIZE)
    if b.warmup is not None:
        bounded_int(b.warmup, "benchmark.warmup", 0, MAX_SAMPLE_SIZE)


@dataclass(frozen=True)
class Plan:
    """What planning one directory of any target family yields before a job runs: the text of each config part that
    rule ``configure`` writes there (``parts``), the whole resolved config that rule ``resolved_config`` writes, the
    family target's files (``outputs``), the named lists of files its other rules wait for (``inputs``: one per
    fan-in, e.g. a multi case's per-network fronts) and what its rules branch on (``facts``: a run's options,
    strategy, backend; a study's point plans). Paths are relative to the directory."""

    parts: dict[str, str]        # config/<part>.yaml -> its YAML text
    resolved: str                # config.yaml
    outputs: tuple[str, ...] = ()
    inputs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)

    def files(self, directory: str, name: str | None = None) -> list[str]:
        """``outputs`` (``name`` None) or the input list ``name``, under ``directory``."""
        if name is not None and name not in self.inputs:
            raise DseError(f"no input list {name!r} in the plan of {directory}; planned: {', '.join(self.inputs)}")
        return [f"{directory}/{f}" for f in (self.outputs if name is None else self.inputs[name])]


def read_part(directory: str | Path, part: str, rule: str = "configure") -> dict:
    """A config part of a planned directory (``<directory>/config/<part>.yaml``), as its ``rule`` wrote it: the one
    reader of every target's parts, so a missing part is named the same way everywhere."""
    path = Path(directory) / "config" / f"{part}.yaml"
    if not path.exists():
        raise DseError(f"{path} is missing: plan it first (snakemake writes it, rule {rule})")
    return OmegaConf.to_container(OmegaConf.load(path), resolve=True)


def to_yaml(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg)


def run_dir(cfg: DictConfig) -> Path:
    """results/<benchmark>/<platform>/<precision>-b<batch>-<size>/ (DESIGN.md section 5)."""
    return (Path(cfg.results_dir) / cfg.benchmark.name / cfg.platform.name
            / f"{cfg.precision}-b{cfg.batch}-{cfg.benchmark.input_size}")
