"""Exports of a found configuration: JEDI libconfig (Fig. 3.5 fields) and per-stage trtexec commands."""
from __future__ import annotations

import json
import re

import pytest
import yaml

from dse.cli import main
from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.report.export import jedi_config, load_result, trtexec_commands

FIG35 = Configuration("yolov4", "xavier-agx-sim", option="PND-B", cuts=(52, 134), streams=(1, 4, 3), buffers=8,
                      pre_threads=1, post_threads=1, precision="int8", batch=1, input_size=416)


@pytest.fixture(scope="module")
def xavier():
    from dse.config import compose_config
    from dse.platform import load_platform

    return load_platform(compose_config(["platform=xavier-agx-sim"]).platform)


def _libconfig_fields(text: str) -> dict:
    return dict(re.findall(r'^\s*(\w+) = "([^"]*)";', text, flags=re.M))


def test_jedi_matches_figure_3_5(xavier):
    text = jedi_config(FIG35, xavier, n_layers=269, onnx_path="yolo4.onnx")
    f = _libconfig_fields(text)
    assert f["cut_points"] == "52,134,268" and f["streams"] == "1,4,3"
    assert f["devices"] == "GPU,DLA,GPU" and f["dla_cores"] == "0,2,0"  # 2 = PND on a 2-DLA board
    assert (f["device_num"], f["buffer_num"], f["data_type"], f["batch"]) == ("3", "8", "INT8", "1")
    assert f["pre_thread_num"] == "1" and f["post_thread_num"] == "1" and f["onnx_file_path"] == "yolo4.onnx"
    assert f["app_type"] == "YoloApplication" and f["model_type"] == "ONNXApplication"
    assert text.count("{") == text.count("}") and "instances = ( {" in text
    single = _libconfig_fields(jedi_config(FIG35.with_(option="A", cuts=(30,), streams=(2, 1)), xavier, n_layers=269))
    assert single["devices"] == "DLA,GPU" and single["dla_cores"] == "0,0" and single["cut_points"] == "30,268"
    with pytest.raises(DseError, match="out of range"):
        jedi_config(FIG35, xavier, n_layers=100)


def test_trtexec_commands(xavier):
    cmds = trtexec_commands(FIG35, xavier)
    assert len(cmds) == 4  # GPU, DLA0 + DLA1 (PND), GPU
    gpu0, dla0, dla1, gpu2 = cmds
    assert "--onnx=stages/stage_0.onnx" in gpu0 and not any(a.startswith("--useDLACore") for a in gpu0)
    assert {"--useDLACore=0", "--allowGPUFallback", "--streams=2", "--int8"} <= set(dla0)
    assert "--useDLACore=1" in dla1 and "--streams=2" in dla1 and "--onnx=stages/stage_1.onnx" in dla1
    assert "--saveEngine=engines/stage_2.engine" in gpu2 and "--streams=3" in gpu2
    assert "--calib=calib/stage_2.cache" in gpu2
    fp16 = trtexec_commands(FIG35.with_(precision="fp16", option="E", cuts=(), streams=(2,)), xavier)
    assert fp16 == [["trtexec", "--onnx=stages/stage_0.onnx", "--saveEngine=engines/stage_0.engine", "--fp16",
                     "--streams=2"]]


def test_load_result_and_cli(tmp_path, capsys):
    best = tmp_path / "best.yaml"
    found = FIG35.with_(cuts=(64, 187))      # feasible on our yolov4 (Fig. 3.5's cuts count the thesis' layers)
    best.write_text(yaml.safe_dump({"config": found.to_dict(), "fps": 231.5, "n_layers": 269}))
    cfg, doc = load_result(best)
    assert cfg == found and doc["fps"] == 231.5
    plain = tmp_path / "c.json"
    plain.write_text(json.dumps(FIG35.to_dict()))
    assert load_result(plain)[0] == FIG35
    (tmp_path / "bad.json").write_text(json.dumps({"fps": 1}))
    with pytest.raises(DseError, match="no configuration"):
        load_result(tmp_path / "bad.json")

    assert main(["export", "jedi", str(best), "-o", str(tmp_path / "jedi.cfg")]) == 0
    assert _libconfig_fields((tmp_path / "jedi.cfg").read_text())["cut_points"] == "64,187,268"
    capsys.readouterr()
    plain.write_text(json.dumps(found.to_dict()))
    assert main(["export", "trtexec", str(plain), "--layers", "269"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("#!/bin/sh") and out.count("trtexec --onnx=") == 4
    host = tmp_path / "host.json"
    host.write_text(json.dumps(FIG35.with_(platform="host-cpu", option="1-1", cuts=(52,), streams=(1, 1)).to_dict()))
    assert main(["export", "jedi", str(host), "--layers", "269"]) == 2  # not a GPU/DLA platform: clear error


@pytest.mark.parametrize("config, message", [
    (FIG35, "infeasible cuts [52, 134]"),                                  # the same checks as a measurement
    (FIG35.with_(cuts=(64, 187), precision="fp32"), "cannot run FP32"),
    (FIG35.with_(cuts=(64, 187), streams=(1, 1, 1)), "PND"),
    (FIG35.with_(cuts=(64, 187), option="Z"), "unknown mapping option 'Z'"),
])
def test_export_refuses_what_could_not_run(tmp_path, capsys, config, message):
    path = tmp_path / "best.yaml"
    path.write_text(yaml.safe_dump({"config": config.to_dict()}))
    assert main(["export", "trtexec", str(path), "-o", str(tmp_path / "x.sh")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "x.sh").exists()


def test_export_names_a_malformed_field(tmp_path, capsys):
    doc = {"config": {**FIG35.to_dict(), "cuts": ["a", 3]}}
    (tmp_path / "best.yaml").write_text(yaml.safe_dump(doc))
    assert main(["export", "jedi", str(tmp_path / "best.yaml")]) == 2
    assert "malformed configuration fields" in capsys.readouterr().err
