"""Behaviour pinned while the code moves: the jobs and outputs every target's documented command plans, the
resolved default configuration, and the default run's answer (the virtual boards are seeded, so they are exact)."""
from __future__ import annotations

import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from tests.golden import assert_golden
from tests.workflow.test_readme_commands import target_rows
from tests.workflow.test_pipeline import _workdir

DEFAULT = ("default", "snakemake --cores 2")


def planned(command: str, tmp_path) -> str:
    """``rule<TAB>output`` of every file the command's DAG would make, sorted (``snakemake --summary``)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    wd = _workdir(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--summary", *shlex.split(command)[1:]], cwd=wd,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{command}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    rows = [line.split("\t") for line in proc.stdout.splitlines() if "\t" in line]
    header, *rows = rows
    out, rule = header.index("output_file"), header.index("rule")
    return "".join(sorted(f"{r[rule]}\t{r[out]}\n" for r in rows))


def test_every_target_plans_the_golden_jobs(tmp_path):
    rows = [DEFAULT, *target_rows()]
    with ThreadPoolExecutor(max_workers=4) as pool:
        texts = list(pool.map(lambda row: planned(row[1], tmp_path / row[0]), rows))
    for (target, _), text in zip(rows, texts):
        assert_golden(f"dag/{target}.tsv", text)


def test_the_default_configuration_is_golden():
    proc = subprocess.run([sys.executable, "-m", "dse", "config", "show"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert_golden("config-show.yaml", proc.stdout)


def test_the_default_run_finds_the_golden_answer(tmp_path):
    wd = _workdir(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2"], cwd=wd, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (best,) = (wd / "results").rglob("best.yaml")
    assert_golden("default-best.yaml", best.read_text(encoding="utf-8"))
