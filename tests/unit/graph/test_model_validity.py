"""The one model-validity check (dse.graph.model.check_model) every path that loads a model passes through, and the
ONNX-zoo classics (IR version 3, weights listed as graph inputs) that the onnx wheel ships."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from dse.cli import main
from dse.core.errors import DseError
from dse.graph.analysis import analyze
from dse.graph.model import MAX_IR_VERSION, MAX_OPSET, MIN_IR_VERSION, MIN_OPSET, load_model, read_model

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
ZOO = ("squeezenet", "resnet50", "densenet121", "inception_v1")


def conv_model(shape=(1, 3, 8, 8), elem=TensorProto.FLOAT, opset=13, ir=8, extra_inputs=(), twice=False):
    """x -> Conv(1x1, 4 channels) -> Relu -> y; ``twice``: two nodes write tensor 'c'."""
    channels = shape[1] if len(shape) == 4 and isinstance(shape[1], int) and shape[1] > 0 else 3
    w = numpy_helper.from_array(np.ones((4, channels, 1, 1), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    if twice:
        nodes.insert(1, helper.make_node("Sigmoid", ["x"], ["c"], name="sig"))
    inputs = [helper.make_tensor_value_info("x", elem, list(shape))]
    inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 3, 8, 8]) for n in extra_inputs]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir
    return model


BAD = {
    "two-inputs": (dict(extra_inputs=["z"]),
                   "2 inputs (x [1,3,8,8], z [1,3,8,8]); dse runs models with exactly one input, the image (float32 "
                   "NCHW): make the others constants (initializers) or cut them off the model"),
    "uint8": (dict(elem=TensorProto.UINT8),
              "input 'x' [1,3,8,8] is UINT8; the input must be FLOAT (float32), the image every backend feeds: export "
              "the model with a float32 input"),
    "opset99": (dict(opset=99),
                f"opset 99 (ai.onnx) is not supported; supported opsets: {MIN_OPSET}..{MAX_OPSET} "
                "(onnx.version_converter.convert_version converts a model)"),
    "ir99": (dict(ir=99), f"IR version 99 is not supported; supported IR versions: {MIN_IR_VERSION}..{MAX_IR_VERSION}"),
    "written-twice": (dict(twice=True),
                      "tensor 'c' is written twice, by Conv 'conv' and by Sigmoid 'sig'; every tensor must have one "
                      "writer (rename one of them)"),
    "zero-dim": (dict(shape=(1, 3, 0, 8)),
                 "input 'x' [1,3,0,8] has size 0 on axis 2; each dimension must be 1..65,536 (name a dynamic one, "
                 "dim_param, and give its size with benchmark.input_shapes or --input-shape)"),
    "huge-dim": (dict(shape=(1, 3, 2**40, 8)),
                 "input 'x' [1,3,1099511627776,8] has size 1,099,511,627,776 on axis 2; each dimension must be "
                 "1..65,536"),
    "too-many-elements": (dict(shape=(64, 3, 65536, 65536)),
                          "input 'x' [64,3,65536,65536] has 824,633,720,832 elements; at most 1,073,741,824 (4 GiB of "
                          "float32) per input"),
    "rank-2": (dict(shape=(1, 16)),
               "input 'x' [1,16] has rank 2; the input must be an image tensor of rank 4, NCHW (batch, channels, "
               "height, width)"),
}


@pytest.fixture
def bad_file(tmp_path):
    def make(case: str) -> Path:
        path = tmp_path / f"{case}.onnx"
        onnx.save(conv_model(**BAD[case][0]), str(path))
        return path
    return make


@pytest.mark.parametrize("case", BAD)
def test_a_model_no_backend_runs_is_refused_in_one_line(case, bad_file):
    path = bad_file(case)
    for load in (read_model, load_model, analyze):   # what the backends' models, inspect and partition load with
        with pytest.raises(DseError) as info:
            load(path)
        assert str(info.value) == f"{path}: {BAD[case][1]}"
    with pytest.raises(DseError) as info:          # a ModelProto (a converted or built model) is checked the same
        load_model(conv_model(**BAD[case][0]))
    assert str(info.value) == f"model 'g': {BAD[case][1]}"


@pytest.mark.parametrize("command", [["inspect", "{m}"], ["partition", "{m}", "--cuts", "0", "-o", "{d}", "--check"],
                                     ["measure", "benchmark.model={m}", "benchmark.name=bad", "results_dir={d}"],
                                     ["measure", "benchmark.model={m}", "benchmark.name=bad", "results_dir={d}",
                                      "platform=host-cpu", "precision=fp32"]],
                         ids=["inspect", "partition-check", "measure-sim", "measure-host-cpu"])
@pytest.mark.parametrize("case", ["written-twice", "huge-dim", "rank-2"])
def test_every_command_refuses_before_any_analysis(case, command, bad_file, tmp_path, capsys):
    path = bad_file(case)
    out = tmp_path / "out"
    assert main([a.format(m=path, d=out) for a in command]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {path}: {BAD[case][1]}\n"
    assert not out.exists()


def test_given_input_shapes_are_bounded_too():
    model = conv_model(shape=("n", 3, "h", "w"))
    with pytest.raises(DseError, match=r"input 'x' \[1,3,1048576,8\] has size 1,048,576 on axis 2; each dimension "
                                       r"must be 1\.\.65,536$"):
        load_model(model, {"x": [1, 3, 2**20, 8]})
    assert [d.dim_value for d in load_model(model, {"x": [1, 3, 8, 8]}).graph.input[0].type.tensor_type.shape.dim] \
        == [1, 3, 8, 8]


@pytest.mark.parametrize("opset, ir", [(MIN_OPSET, MIN_IR_VERSION), (MAX_OPSET, MAX_IR_VERSION)])
def test_the_ends_of_the_supported_range_load_and_run_in_onnxruntime(opset, ir):
    """The range check_model names is what onnxruntime in this environment runs (its two ends load and run)."""
    model = conv_model(opset=opset, ir=ir)
    if ir < 4:   # IR version 3: initializers must be graph inputs too
        model.graph.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3, 1, 1]))
    sanitized = load_model(model)
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    for m in (model, sanitized):
        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(session.run(None, {"x": x})[0], np.maximum(x.sum(axis=1, keepdims=True), 0)
                                   .repeat(4, axis=1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ZOO)
def test_onnx_zoo_ir3_models_load_and_analyse(name):
    """IR version 3 lists every initializer as a graph input: the loader treats them as weights and stamps the model
    IR version 4, so shape inference sees them as constants (it gave every tensor an unknown shape before)."""
    path = LIGHT / f"light_{name}.onnx"
    original = onnx.load(str(path))
    assert original.ir_version == 3 and len(original.graph.input) > 1
    analysis = analyze(path)                      # what `dse inspect` runs
    summary = analysis.summary()
    assert list(summary["inputs"].values()) == [[1, 3, 224, 224]]
    assert summary["layers"] > 50 and summary["macs"] > 3e8 and summary["feasible_count"] > 10
    sanitized = analysis.model
    assert sanitized.ir_version == 4 and len(sanitized.graph.input) == 1
    x = np.random.default_rng(1).uniform(0, 1, (1, 3, 224, 224)).astype(np.float32)
    feed = {next(iter(summary["inputs"])): x}
    want = ort.InferenceSession(original.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)
    got = ort.InferenceSession(sanitized.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
