"""The README's "Your own model" commands as written: the `cp` line fetches the ONNX-zoo SqueezeNet the onnx wheel
ships, `dse inspect` and `dse measure` run on it and on the other three IR-version-3 classics standing in for
`my.onnx` (results under tmp_path), the Snakemake line plans, and the supported range it states is the loader's."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from dse.cli import main
from dse.graph.model import MAX_IR_VERSION, MAX_OPSET, MIN_IR_VERSION, MIN_OPSET
from tests.workflow.test_readme_commands import README, bash_lines, dry_run, section

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
ZOO = ("squeezenet", "resnet50", "densenet121", "inception_v1")


def own_model() -> str:
    return section(README.read_text(encoding="utf-8"), "Your own model")


def commands() -> dict[str, str]:
    """The section's lines by their first word (`cp`, `dse inspect`, `dse measure`, `snakemake`)."""
    lines = bash_lines(own_model())
    by_kind = {" ".join(shlex.split(line)[:2]) if line.startswith("dse ") else line.split()[0]: line for line in lines}
    assert sorted(by_kind) == ["cp", "dse inspect", "dse measure", "snakemake"], lines
    return by_kind


def test_the_cp_line_fetches_the_onnx_zoo_squeezenet(tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run(["bash", "-c", commands()["cp"]], cwd=tmp_path, env=env, check=True, timeout=60)
    assert (tmp_path / "my.onnx").read_bytes() == (LIGHT / "light_squeezenet.onnx").read_bytes()


def test_the_stated_range_is_the_loaders():
    text = " ".join(own_model().split())
    assert f"IR version {MIN_IR_VERSION} to {MAX_IR_VERSION} and an opset {MIN_OPSET} to {MAX_OPSET}" in text


@pytest.mark.parametrize("name", ZOO)
def test_inspect_and_measure_as_written(name, tmp_path, monkeypatch, capsys):
    shutil.copyfile(LIGHT / f"light_{name}.onnx", tmp_path / "my.onnx")
    monkeypatch.chdir(tmp_path)
    lines = commands()
    assert main(shlex.split(lines["dse inspect"])[1:]) == 0
    out = capsys.readouterr().out
    assert re.search(r"input\s+\S+\s+1x3x224x224", out) and re.search(r"layers\s+\d+", out), out
    results = tmp_path / "results"
    assert main([*shlex.split(lines["dse measure"])[1:], f"results_dir={results}"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^my on xavier-agx-sim: option E .* 224x224$", out, re.M), out
    assert re.search(r"^\d+(\.\d+)? FPS  latency p50", out, re.M), out
    assert {p.name for p in tmp_path.iterdir()} == {"my.onnx", "results"}   # nothing written beside them


def test_the_snakemake_line_plans(tmp_path):
    shutil.copyfile(LIGHT / "light_squeezenet.onnx", tmp_path / "my.onnx")
    failure = dry_run(commands()["snakemake"], tmp_path)
    assert failure is None, failure
