"""Target `taskset`: the schedulability campaign of seed 003, one job per scenario, then a report.

Files under ``results/taskset/<table>/<units>/``: ``config/taskset.yaml`` (what the jobs read: the variant table,
the campaign settings, the seed), ``campaign/<scenario>.parquet`` (one row per threshold x set x configuration)
with ``campaign/<scenario>.json`` (settings, seed, versions, wall time, how each answer was reached), then
``taskset.parquet`` (success ratio and mean instances per scenario x configuration x threshold), ``taskset.md``
and ``plots/<scenario>.png``. A table with ``measure`` instead of ``variants`` (``config/taskset/zoo-xavier.yaml``)
is measured first, by a job of its own: ``variants.yaml`` (what the campaigns read) and ``variants.parquet`` (every
network x option, with how it was obtained and whether it is kept), built from the measurements the evaluator
keeps in ``cache/variants.parquet`` (the store's schema). ``dse taskset run`` runs one scenario into the same
files."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd

from dse.config import Plan, read_part
from dse.core.errors import DseError
from dse.store.atomic import write_bytes_atomic, write_json_atomic, write_text_atomic


CLI_FAMILY = "taskset-cli"   # where `dse taskset run` writes: never the target's own directory, whose files a later
                             # `snakemake taskset` would take as its own (one scenario of three, at another size)


def compose(overrides, family: str = "taskset") -> tuple[str, dict, str]:
    """(directory, the taskset node + seed, resolved config YAML) for Hydra overrides; validated, writes nothing.
    ``family``: the directory under ``results_dir`` (the target's, or ``CLI_FAMILY``)."""
    from omegaconf import OmegaConf

    from dse.config import compose_config, split_overrides
    from dse.systems.taskset.campaign import from_config

    cfg = compose_config(split_overrides(overrides))
    node = OmegaConf.to_container(cfg.taskset, resolve=True)
    table, settings = from_config(node, None, int(cfg.seed))
    for s in node.get("run_scenarios") or []:
        table.scenario(s)
    node = {**node, "seed": int(cfg.seed)}
    tdir = str(Path(cfg.results_dir) / family / table.name / settings.units)
    return tdir, node, OmegaConf.to_yaml(cfg)


def prepare(overrides, family: str = "taskset") -> tuple[str, dict, bool]:
    """``compose`` and write the campaign directory's config (the part only when it changed, so finished
    campaigns of the same config stay valid): what ``dse taskset run`` and the bench do instead of Snakemake's
    configure rules. Returns (directory, the taskset node + seed, whether the part changed)."""
    from omegaconf import OmegaConf

    tdir, node, resolved = compose(overrides, family)
    part, text = Path(tdir) / "config" / "taskset.yaml", OmegaConf.to_yaml(OmegaConf.create(node))
    changed = not part.exists() or part.read_text() != text
    if changed:
        write_text_atomic(part, text)
    write_text_atomic(Path(tdir) / "config.yaml", resolved)
    return tdir, node, changed


def plan_taskset(snakemake_config: dict) -> dict[str, Plan]:
    from omegaconf import OmegaConf

    tdir, node, resolved = compose(snakemake_config.get("overrides"))
    scenarios = tuple(node.get("run_scenarios") or [node["scenario"]])
    measured = node.get("measure") is not None     # the times come from the variants job
    inputs = {"campaigns": tuple(f"campaign/{s}.parquet" for s in scenarios),
              "campaign_inputs": ("config/taskset.yaml", *(["variants.yaml"] if measured else []))}
    return {tdir: Plan({"taskset": OmegaConf.to_yaml(OmegaConf.create(node))}, resolved,
                       ("taskset.md", "taskset.parquet", "config.yaml"), inputs, {"scenarios": scenarios})}


def _measured(tdir: str, node: dict) -> dict | None:
    """The measured times (``variants.yaml``) of a ``measure`` table, None for a table with its own."""
    if node.get("measure") is None:
        return None
    import yaml

    path = Path(tdir) / "variants.yaml"
    if not path.exists():
        raise DseError(f"{path} is missing: measure the variants first (`dse taskset variants {tdir}`)")
    return yaml.safe_load(path.read_text())


def _load(tdir: str, scenario: str):
    from dse.systems.taskset.campaign import from_config

    node = read_part(tdir, "taskset")
    seed = int(node.pop("seed", 0))
    return from_config(node, scenario, seed, _measured(tdir, node))


def measure(tdir: str, progress=None) -> pd.DataFrame:
    """The variants of a ``measure`` table -> ``variants.yaml`` (unit, frame, variants) + ``variants.parquet``; every
    variant a row of ``cache/variants.parquet``, which answers a rerun of the same measurements."""
    import yaml

    from dse.store.schema import versions
    from dse.systems.taskset.measured import MeasureSpec, measure_variants
    from dse.systems.taskset.variants import VariantTable

    node = read_part(tdir, "taskset")
    if node.get("measure") is None:
        raise DseError(f"the taskset table under {tdir} has its own variants; nothing to measure")
    spec = MeasureSpec.from_dict(node["measure"])
    frame_ms = VariantTable.from_dict(node, measured_later=True).frame_ms
    t0 = time.perf_counter()
    variants, rows = measure_variants(spec, frame_ms, progress, store=Path(tdir) / "cache" / "variants.parquet")
    doc = {"unit": "ms", "frame": frame_ms, "variants": variants}
    head = (f"# Measured by dse.systems.taskset.measured in {time.perf_counter() - t0:.1f} s: {json.dumps(spec.to_dict())}\n"
            f"# versions: {json.dumps(versions())}\n")
    write_bytes_atomic(Path(tdir) / "variants.parquet", rows.to_parquet(index=False))
    write_text_atomic(Path(tdir) / "variants.yaml", head + yaml.safe_dump(doc, sort_keys=False))
    return rows


def run_scenario(tdir: str, scenario: str, progress=None) -> dict:
    """One scenario's campaign -> ``campaign/<scenario>.parquet`` + ``.json``."""
    from dse.store.schema import versions
    from dse.systems.taskset.campaign import timed_campaign

    table, settings = _load(tdir, scenario)
    if progress is None:
        step = max(1, len(settings.thresholds) * settings.sets // 20)

        def progress(done, total):
            if done % step == 0 or done == total:
                print(f"[taskset {scenario}] {done}/{total} sets", file=sys.stderr, flush=True)

    frame, facts = timed_campaign(table, settings, progress)
    out = Path(tdir) / "campaign"
    sc = table.scenario(scenario)
    meta = {**facts, "settings": settings.to_dict(), "table": table.name, "scenario_label": sc.label,
            "reference": sc.reference, "versions": versions()}
    write_bytes_atomic(out / f"{scenario}.parquet", frame.to_parquet(index=False))
    write_json_atomic(out / f"{scenario}.json", meta)
    print(f"[taskset {scenario}] {facts['rows']} answers in {facts['wall_s']:.1f} s ({facts['decided_by']}; "
          f"{facts['undecided']} undecided)", file=sys.stderr, flush=True)
    return meta


def measure_if_stale(tdir: str, node: dict, changed: bool, progress=None) -> bool:
    """After ``prepare``: measure a ``measure`` table when its config changed or it was never measured (what
    Snakemake's ``taskset_variants`` rule decides for the target). True when it measured."""
    if node.get("measure") is None or not (changed or not (Path(tdir) / "variants.yaml").exists()):
        return False
    measure(tdir, progress)
    return True


def report(tdir: str) -> str:
    """Every finished scenario's summary -> ``taskset.parquet``, ``taskset.md``, ``plots/<scenario>.png``."""
    from dse.systems.taskset.campaign import summarize
    from dse.systems.taskset.report import plot_success, tables_markdown, variants_markdown

    files = (Path(tdir) / "campaign").glob("*.parquet")
    order = read_part(tdir, "taskset").get("run_scenarios") or []           # the config's order, then the rest by name
    files = sorted(files, key=lambda f: (order.index(f.stem) if f.stem in order else len(order), f.stem))
    if not files:
        raise DseError(f"no campaign results under {tdir}/campaign: run `snakemake --cores 2 taskset` first")
    summary = pd.concat([summarize(pd.read_parquet(f)) for f in files], ignore_index=True)
    parts = [f"# Task-set schedulability ({Path(tdir).parent.name}, {Path(tdir).name} unit model)", ""]
    if (Path(tdir) / "variants.parquet").exists() and read_part(tdir, "taskset").get("measure") is not None:
        parts.append(variants_markdown(pd.read_parquet(Path(tdir) / "variants.parquet")))
    for f in files:
        scenario = f.stem
        meta = json.loads(f.with_suffix(".json").read_text())
        s = meta["settings"]
        label = f"{meta['scenario_label']}, reference {meta['reference']}"
        plot_success(summary, scenario, Path(tdir) / "plots" / f"{scenario}.png", label)
        parts += [tables_markdown(summary, scenario, label), f"![{scenario}](plots/{scenario}.png)", "",
                  f"{s['sets']} sets per threshold, seed {s['seed']}, margin {s['margin']}, {meta['wall_s']:.0f} s; "
                  f"answers by {meta['decided_by']}.", ""]
    text = "\n".join(parts) + "\n"
    write_bytes_atomic(Path(tdir) / "taskset.parquet", summary.to_parquet(index=False))
    write_text_atomic(Path(tdir) / "taskset.md", text)
    return text
