"""Layers, costs and the single-cut / tuple feasibility rules, with the reasons users read."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dse.core.errors import DseError
from dse.graph.analysis import NetworkAnalysis, analyze
from tests.models import GraphBuilder, paddle_style_detector, pytorch_style_convnet


@pytest.fixture(scope="module")
def convnet():
    return analyze(pytorch_style_convnet(17), {"input": [1, 3, 32, 32]})


@pytest.fixture(scope="module")
def detector():
    return analyze(paddle_style_detector(13), {"image": [1, 3, 32, 32]})


def _index(analysis, op_type, nth=0):
    return [layer.index for layer in analysis.layers if layer.op_type == op_type][nth]


def test_layers_costs_and_shapes(convnet):
    first = convnet.layers[0]
    assert (first.op_type, first.inputs, first.output_shapes) == ("Conv", ("input",), ((1, 8, 32, 32),))
    assert first.macs == 1 * 8 * 32 * 32 * 3 * 3 * 3
    assert first.param_bytes == (8 * 3 * 3 * 3 + 8) * 4
    assert first.activation_bytes == 8 * 32 * 32 * 4
    assert first.input_bytes == 3 * 32 * 32 * 4
    assert first.attrs["kernel_shape"] == [3, 3] and first.attrs["group"] == 1
    gemm = convnet.layers[_index(convnet, "Gemm")]
    assert gemm.macs == 16 * 10 and gemm.output_shapes == ((1, 10),)
    assert convnet.layers[_index(convnet, "Concat")].macs == 0
    if_layer = convnet.layers[_index(convnet, "If")]
    assert len(if_layer.inputs) == 3, "the If reads its condition and two outer tensors from its branches"
    assert [layer.index for layer in convnet.layers] == list(range(len(convnet.layers)))
    assert convnet.inputs == {"input": [1, 3, 32, 32]}
    assert convnet.outputs == {"logits": [1, 10], "score": [1, 16], "stride2": [1, 16, 16, 16]}
    assert convnet.macs == sum(layer.macs for layer in convnet.layers)


def test_grouped_conv_and_transpose_macs():
    b = GraphBuilder(13)
    t = b.conv("x", 8, 8, k=3, group=4)
    w = b.weight([8, 2, 2, 2])
    y = b.node("ConvTranspose", [t, w], out="y", strides=[2, 2], kernel_shape=[2, 2])
    model = b.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])],
                    [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 2, 12, 12])])
    analysis = analyze(model)
    assert analysis.layers[0].macs == 8 * 6 * 6 * (8 // 4) * 9
    assert analysis.layers[1].macs == 8 * 6 * 6 * 2 * 4


def test_fused_chains_block_positions(convnet):
    conv, bn, relu = 0, 1, 2
    assert [convnet.layers[i].op_type for i in (conv, bn, relu)] == ["Conv", "BatchNormalization", "Relu"]
    assert 0 not in convnet.feasible_cuts and 1 not in convnet.feasible_cuts and 2 in convnet.feasible_cuts
    reason = convnet.check_cuts((1,))
    assert reason.startswith("cut after layer 1 splits the fused chain Conv '/conv_0/Conv' -> "
                             "BatchNormalization '/batchnormalization_0/BatchNormalization' -> Relu '/relu_0/Relu'")
    assert reason.endswith("nearest feasible positions: none, 2")
    hardswish = _index(convnet, "HardSwish")
    assert convnet.check_cuts((hardswish - 1,)).startswith(
        f"cut after layer {hardswish - 1} splits the fused chain Conv '/conv_3/Conv' -> HardSwish")
    clip = _index(convnet, "Clip")
    assert clip - 1 not in convnet.feasible_cuts
    # Conv -> BN whose output also feeds an Add: only the Conv-BN pair is fused.
    bn_before_add = _index(convnet, "Add") - 1
    assert convnet.layers[bn_before_add].op_type == "BatchNormalization"
    assert bn_before_add in convnet.feasible_cuts and bn_before_add - 1 not in convnet.feasible_cuts


def test_fused_pair_far_apart_in_order_blocks_all_positions_between():
    b = GraphBuilder(13)
    c = b.conv("x", 2, 2, k=1)
    other = b.node("Sigmoid", ["x"])
    other = b.node("Tanh", [other])
    r = b.node("Relu", [c])
    y = b.node("Add", [r, other], out="y")
    model = b.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                    [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 2, 4, 4])])
    analysis = analyze(model)
    assert [layer.op_type for layer in analysis.layers] == ["Conv", "Sigmoid", "Tanh", "Relu", "Add"]
    assert analysis.feasible_cuts == [3]
    assert "splits the fused chain Conv" in analysis.check_cuts((2,))


def test_non_plain_tensor_crossing(convnet):
    greater = _index(convnet, "Greater")
    reason = convnet.check_cuts((greater,))
    assert f"cut after layer {greater} crosses tensor '/greater_0/Greater_output_0' (BOOL []" in reason
    assert "is not a plain activation" in reason and "If '/head/If'" in reason
    reduce_sum = _index(convnet, "ReduceSum")
    assert "(FLOAT []" in convnet.check_cuts((reduce_sum,))


def _static_model_with_shape_subgraph() -> onnx.ModelProto:
    """A static graph that keeps a Shape subgraph (as if folding were not possible): tests the rule itself."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Shape", ["r"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
        helper.make_node("Sigmoid", ["r"], ["g"], name="sigmoid"),
        helper.make_node("Unsqueeze", ["n", "zero_axes"], ["n1"], name="unsqueeze"),
        helper.make_node("Concat", ["n1", "minus_one"], ["target"], name="concat", axis=0),
        helper.make_node("Tanh", ["g"], ["h"], name="tanh"),
        helper.make_node("Reshape", ["h", "target"], ["y"], name="reshape"),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "zero_axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus_one")]
    graph = helper.make_graph(nodes, "shape_subgraph", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                           None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return onnx.shape_inference.infer_shapes(model, data_prop=True)


def test_shape_computation_tensor_crossing():
    analysis = NetworkAnalysis(_static_model_with_shape_subgraph())
    assert [layer.op_type for layer in analysis.layers][:3] == ["Relu", "Shape", "Gather"]
    assert analysis.feasible_cuts == [0]
    reason = analysis.check_cuts((3,))
    assert reason == ("cut after layer 3 crosses shape-computation tensor 'n' (produced by layer 2 Gather 'gather', "
                      "consumed by layer 4 Unsqueeze 'unsqueeze'); nearest feasible positions: 0, none")
    assert "shape-computation tensor 'target' (produced by layer 5 Concat 'concat', consumed by layer 7 " \
           "Reshape 'reshape')" in analysis.check_cuts((6,))


def test_tensor_skipping_a_stage(detector):
    first_head = _index(detector, "Sigmoid", 0)
    concat = _index(detector, "Concat")
    later = [c for c in detector.feasible_cuts if c > first_head + 1]
    cuts = (first_head, later[0])
    reason = detector.check_cuts(cuts)
    name = detector.layers[first_head].outputs[0]
    assert reason == (f"tensor '{name}' produced in stage 0 (layer {first_head} Sigmoid "
                      f"'{detector.layers[first_head].name}') is consumed in stage 2 (layer {concat} Concat "
                      f"'{detector.layers[concat].name}'): it would skip stage 1")
    three = (first_head, later[0], later[1])
    assert "it would skip stages 1-2" in detector.check_cuts(three)
    assert detector.check_cuts((first_head,)) is None


def test_stage_of_and_crossing_tensors(convnet):
    relu = 2
    add = _index(convnet, "Add")
    cuts = (relu, add + 1)
    assert convnet.check_cuts(cuts) is None
    stages = convnet.stage_of(cuts)
    assert stages[: relu + 1] == [0] * (relu + 1) and stages[relu + 1] == 1 and stages[add + 2] == 2
    assert len(stages) == len(convnet.layers)
    crossing = convnet.crossing_tensors(cuts)
    assert crossing[0] == ["/relu_0/Relu_output_0"]
    assert crossing[1] == ["/relu_2/Relu_output_0"]
    assert "input" not in sum(crossing, [])


def test_nearest_feasible(convnet):
    assert convnet.nearest_feasible(0) == (None, 2)
    assert convnet.nearest_feasible(3) == (2, 5)
    assert convnet.nearest_feasible(2) == (None, 5)
    last = convnet.feasible_cuts[-1]
    assert convnet.nearest_feasible(last + 1)[1] is None


def test_cut_errors(convnet):
    n = len(convnet.layers)
    with pytest.raises(DseError, match=rf"cut position {n - 1} out of range: valid positions are 0..{n - 2}"):
        convnet.check_cuts((2, n - 1))
    with pytest.raises(DseError, match="cut position -1 out of range"):
        convnet.stage_of((-1,))
    with pytest.raises(DseError, match="strictly increasing"):
        convnet.check_cuts((5, 2))
    with pytest.raises(DseError, match="integers"):
        convnet.check_cuts(("a",))
    with pytest.raises(DseError, match=">= 0"):
        convnet.count_tuples(-1)
    assert convnet.check_cuts(()) is None and convnet.count_tuples(0) == 1
    assert convnet.check_cuts(np.array([2, 9])) is None


def test_count_tuples_known_values(convnet):
    assert convnet.count_tuples(1) == len(convnet.feasible_cuts)
    assert convnet.count_tuples(len(convnet.layers)) == 0


def test_frame_and_summary(convnet):
    frame = convnet.to_frame()
    assert list(frame.columns) == ["index", "name", "op_type", "macs", "param_bytes", "activation_bytes",
                                   "input_bytes", "inputs", "outputs", "output_shapes", "attrs"]
    assert len(frame) == len(convnet.layers)
    assert json.loads(frame.loc[0, "output_shapes"]) == [[1, 8, 32, 32]]
    assert json.loads(frame.loc[0, "attrs"])["kernel_shape"] == [3, 3]
    summary = convnet.summary()
    json.dumps(summary)
    assert summary["layers"] == len(convnet.layers)
    assert summary["feasible_cuts"] == convnet.feasible_cuts
    assert summary["tuples"] == {str(k): convnet.count_tuples(k) for k in (1, 2, 3)}
    assert summary["op_types"]["Conv"] == 6 and list(summary["op_types"])[0] == "Conv"
    assert summary["params_bytes"] == sum(layer.param_bytes for layer in convnet.layers)
    assert convnet.layers[_index(convnet, "If")].param_bytes == 4 + 16  # its branches' own constants
    assert len(summary["digest"]) == 64 and summary["digest"] == convnet.digest


def test_digest_follows_content():
    a = analyze(pytorch_style_convnet(17), {"input": [1, 3, 32, 32]})
    b = analyze(pytorch_style_convnet(17), {"input": [1, 3, 32, 32]})
    c = analyze(pytorch_style_convnet(17), {"input": [1, 3, 64, 64]})
    assert a.digest == b.digest != c.digest


def test_float_shape_values_count_as_shape_computation():
    """Resize scales computed from Shape are float tensors, yet still metadata: no stage may hand them over."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Shape", ["r"], ["s"], name="shape"),
        helper.make_node("Cast", ["s"], ["sf"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Sigmoid", ["r"], ["g"], name="sigmoid"),
        helper.make_node("Div", ["sf", "sf"], ["ones"], name="div"),
        helper.make_node("Tanh", ["g"], ["h"], name="tanh"),
        helper.make_node("Resize", ["h", "", "ones"], ["y"], name="resize", mode="nearest"),
    ]
    graph = helper.make_graph(nodes, "float_shape", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    analysis = NetworkAnalysis(onnx.shape_inference.infer_shapes(model, data_prop=True))
    assert analysis.feasible_cuts == [0]
    assert analysis.check_cuts((3,)) == (
        "cut after layer 3 crosses shape-computation tensor 'sf' (produced by layer 2 Cast 'cast', consumed by "
        "layer 4 Div 'div'); nearest feasible positions: 0, none")
    assert "shape-computation tensor 'ones'" in analysis.check_cuts((5,))
