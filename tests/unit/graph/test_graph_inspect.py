"""`dse inspect`: the JSON users script against, the rich summary, and the errors they see."""
from __future__ import annotations

import json

import onnx
import pytest

from dse.cli import main
from dse.graph.analysis import analyze
from tests.models import paddle_style_detector, pytorch_style_convnet


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("inspect") / "convnet.onnx"
    onnx.save(pytorch_style_convnet(13), str(path))
    return path


def test_inspect_json(model_path, capsys):
    assert main(["inspect", str(model_path), "--input-shape", "input:1x3x32x32", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    expected = analyze(pytorch_style_convnet(13), {"input": [1, 3, 32, 32]})
    assert summary["layers"] == len(expected.layers) == 32
    assert summary["feasible_cuts"] == expected.feasible_cuts
    assert summary["inputs"] == {"input": [1, 3, 32, 32]}
    assert summary["outputs"] == {"logits": [1, 10], "score": [1, 16], "stride2": [1, 16, 16, 16]}
    assert summary["macs"] == expected.macs > 0
    assert summary["params_bytes"] == expected.params_bytes > 0
    assert summary["op_types"]["Conv"] == 6 and sum(summary["op_types"].values()) == 32
    assert summary["tuples"] == {"1": expected.count_tuples(1), "2": expected.count_tuples(2),
                                 "3": expected.count_tuples(3)}
    assert summary["tuples"]["1"] == len(expected.feasible_cuts)
    assert summary["digest"] == expected.digest


def test_inspect_json_with_layer_table(tmp_path, capsys):
    path = tmp_path / "det.onnx"
    onnx.save(paddle_style_detector(11), str(path))
    assert main(["inspect", str(path), "--input-shape", "image:1x3x32x32", "--json", "--layers"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert len(summary["layer_table"]) == summary["layers"]
    assert summary["layer_table"][0]["op_type"] == "Conv"


def test_inspect_rich_summary(model_path, capsys):
    assert main(["inspect", str(model_path), "--input-shape", "input:1x3x32x32", "--layers"]) == 0
    out = capsys.readouterr().out
    for text in ("input  1x3x32x32", "layers", "MACs", "params", "feasible cut positions", "feasible 3-cut tuples",
                 "HardSigmoid", "/head/If"):
        assert text in out, text


@pytest.mark.parametrize("argv,message", [
    ([], "has dynamic shape [?,3,?,?]; give it with --input-shape input:1x3x416x416"),
    (["--input-shape", "img:1x3x32x32"], "unknown input 'img'"),
    (["--input-shape", "input:1x3xbig"], "bad input shape 'input:1x3xbig'"),
])
def test_inspect_errors(model_path, capsys, argv, message):
    assert main(["inspect", str(model_path), *argv]) == 2
    assert message in capsys.readouterr().err


def test_inspect_not_onnx_and_missing(tmp_path, capsys):
    bad = tmp_path / "weights.onnx"
    bad.write_bytes(b"\x00\x01garbage" * 50)
    assert main(["inspect", str(bad)]) == 2
    assert "is not an ONNX model" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path / "none.onnx")]) == 2
    assert "not found" in capsys.readouterr().err
