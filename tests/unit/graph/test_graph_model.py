"""Loading and sanitizing ONNX models: static shapes, folding, no-op removal, errors users see."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dse.core.errors import DseError
from dse.graph.model import load_model, parse_input_shapes
from dse.graph.tensors import static_shape
from tests.models import (OPSETS, GraphBuilder, chain_model, model_inputs, paddle_style_detector,
                          pytorch_style_convnet, random_dag_model, run_ort)

FOLDABLE = {"Identity", "Constant", "Shape", "Size", "Gather", "Unsqueeze", "Slice", "Cast", "Dropout",
            "ConstantOfShape", "ReduceProd"}
CASES = ([(f"torch{o}", lambda o=o: pytorch_style_convnet(o), {"input": [2, 3, 24, 32]}) for o in OPSETS]
         + [(f"paddle{o}", lambda o=o: paddle_style_detector(o), {"image": [1, 3, 32, 40]}) for o in OPSETS]
         + [("chain", lambda: chain_model(30), {"x": [2, 4, 8, 8]}),
            ("dag", lambda: random_dag_model(3, 20), None)])


def _all_static(model: onnx.ModelProto) -> list[str]:
    infos = {vi.name: vi for vi in list(model.graph.value_info) + list(model.graph.output)}
    return [o for n in model.graph.node for o in n.output if o and (o not in infos or static_shape(infos[o]) is None)]


@pytest.mark.parametrize("label,build,shapes", CASES, ids=[c[0] for c in CASES])
def test_sanitized_model_is_static_folded_and_equivalent(label, build, shapes):
    original = build()
    sanitized = load_model(original, shapes)
    onnx.checker.check_model(sanitized)
    ops = {n.op_type for n in sanitized.graph.node}
    assert not ops & FOLDABLE, f"left unfolded: {ops & FOLDABLE}"
    assert _all_static(sanitized) == []
    assert [o.name for o in sanitized.graph.output] == [o.name for o in original.graph.output]
    for vi in sanitized.graph.input:
        assert static_shape(vi) is not None
    used = {i for n in sanitized.graph.node for i in n.input}
    assert all(t.name in used for t in sanitized.graph.initializer)
    fixed = shapes or {"x": [1, 2, 4, 4]}
    feeds = model_inputs(original, fixed, seed=1)
    expected, got = run_ort(original, feeds), run_ort(sanitized, feeds)
    assert set(got) == set(expected)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_sanitizing_is_deterministic_and_idempotent():
    first = load_model(pytorch_style_convnet(13), {"input": [1, 3, 32, 32]})
    second = load_model(pytorch_style_convnet(13), {"input": [1, 3, 32, 32]})
    assert first.SerializeToString() == second.SerializeToString()
    again = load_model(first)
    assert [n.name for n in again.graph.node] == [n.name for n in first.graph.node]
    assert [n.op_type for n in again.graph.node] == [n.op_type for n in first.graph.node]


def test_original_model_is_not_modified():
    model = pytorch_style_convnet(17)
    before = model.SerializeToString()
    load_model(model, {"input": [1, 3, 16, 16]})
    assert model.SerializeToString() == before


def test_identity_and_dropout_are_removed_and_output_names_kept():
    sanitized = load_model(pytorch_style_convnet(17), {"input": [1, 3, 16, 16]})
    producers = {o: n.op_type for n in sanitized.graph.node for o in n.output}
    assert producers["logits"] == "Gemm"
    assert producers["stride2"] == "HardSwish"
    first = sanitized.graph.node[0]
    assert first.op_type == "Conv" and first.input[0] == "input"


def test_if_branch_reading_outer_tensors_survives_folding():
    sanitized = load_model(pytorch_style_convnet(21), {"input": [1, 3, 16, 16]})
    (if_node,) = [n for n in sanitized.graph.node if n.op_type == "If"]
    produced = {o for n in sanitized.graph.node for o in n.output}
    branch_reads = {i for a in if_node.attribute for n in a.g.node for i in n.input}
    assert branch_reads & produced, "the branches should read tensors computed in the main graph"


def test_external_data_is_loaded(tmp_path):
    model = pytorch_style_convnet(13)
    path = tmp_path / "net.onnx"
    onnx.save_model(pytorch_style_convnet(13), str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="net.weights", size_threshold=0)
    assert (tmp_path / "net.weights").stat().st_size > 1000
    sanitized = load_model(path, {"input": [1, 3, 16, 16]})
    feeds = model_inputs(model, {"input": [1, 3, 16, 16]})
    np.testing.assert_allclose(run_ort(sanitized, feeds)["logits"], run_ort(model, feeds)["logits"], rtol=1e-5)
    (tmp_path / "net.weights").unlink()
    with pytest.raises(DseError, match="external data"):
        load_model(path, {"input": [1, 3, 16, 16]})


def test_weights_listed_as_inputs_are_constants():
    b = GraphBuilder(11)
    y = b.node("Relu", [b.conv("x", 2, 4)], out="y")
    model = b.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
                    [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 4, 8, 8])])
    model.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                             for t in model.graph.initializer)
    sanitized = load_model(model)
    assert [vi.name for vi in sanitized.graph.input] == ["x"]


# -- errors ---------------------------------------------------------------------------------------------------

def test_parse_input_shapes():
    assert parse_input_shapes(["input:1x3x416x416", "im_shape:1x2"]) == {"input": [1, 3, 416, 416],
                                                                         "im_shape": [1, 2]}
    assert parse_input_shapes(["ns:input:1x3"]) == {"ns:input": [1, 3]}
    assert parse_input_shapes(None) == {}
    for bad, msg in (("input", "NAME:DIMS"), ("input:1xax3", "positive integers"), ("input:1x0x3", "positive"),
                     (":1x3", "NAME:DIMS")):
        with pytest.raises(DseError, match=msg):
            parse_input_shapes([bad])
    with pytest.raises(DseError, match="twice"):
        parse_input_shapes(["a:1", "a:2"])


def test_not_an_onnx_file(tmp_path):
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a protobuf at all\n" * 10)
    with pytest.raises(DseError, match=r"notes.onnx is not an ONNX model: "):
        load_model(text)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(DseError, match=r"empty.onnx is not an ONNX model: .*no graph nodes"):
        load_model(empty)
    with pytest.raises(DseError, match="not found"):
        load_model(tmp_path / "missing.onnx")


def test_dynamic_dim_without_shape_names_input_shape_and_flag():
    with pytest.raises(DseError) as info:
        load_model(pytorch_style_convnet(17))
    message = str(info.value)
    assert "'input'" in message and "[?,3,?,?]" in message and "--input-shape input:1x3x416x416" in message


def test_unknown_input_name_lists_real_inputs():
    with pytest.raises(DseError, match=r"unknown input 'images'.*input \[\?,3,\?,\?\]"):
        load_model(pytorch_style_convnet(17), {"images": [1, 3, 32, 32]})


def test_wrong_rank_or_conflicting_static_dim():
    with pytest.raises(DseError, match="rank 4"):
        load_model(pytorch_style_convnet(17), {"input": [1, 3, 32]})
    with pytest.raises(DseError, match="static size 3 on axis 1"):
        load_model(pytorch_style_convnet(17), {"input": [1, 4, 32, 32]})


def test_data_dependent_shapes_are_reported():
    nonzero = helper.make_node("NonZero", ["x"], ["idx"], name="nz")
    transpose = helper.make_node("Transpose", ["idx"], ["y"], name="tr")
    graph = helper.make_graph([nonzero, transpose], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    with pytest.raises(DseError, match=r"no static shape.*'idx' \[4,\?\] from NonZero 'nz'"):
        load_model(model)


def test_constant_read_only_by_subgraphs_is_folded_away():
    two = helper.make_node("Constant", [], ["two"], name="c", value=numpy_helper.from_array(np.float32(2.0)))
    cond = helper.make_node("Constant", [], ["cond"], name="k", value=numpy_helper.from_array(np.array(True)))
    relu = helper.make_node("Relu", ["x"], ["r"], name="relu")
    greater = helper.make_node("Greater", ["x", "x"], ["g"], name="gt")
    reduce = helper.make_node("ReduceMax", ["g_f"], ["m"], name="rm", keepdims=0)
    cast = helper.make_node("Cast", ["g"], ["g_f"], name="cast", to=TensorProto.FLOAT)
    tobool = helper.make_node("Cast", ["m"], ["mb"], name="tobool", to=TensorProto.BOOL)
    branch = lambda op, n: helper.make_graph([helper.make_node(op, ["r", "two"], [n], name=n)], n, [],  # noqa: E731
                                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)])
    if_node = helper.make_node("If", ["mb"], ["y"], name="if", then_branch=branch("Mul", "t"),
                               else_branch=branch("Add", "e"))
    graph = helper.make_graph([two, cond, relu, greater, cast, reduce, tobool, if_node], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    sanitized = load_model(model)
    assert "Constant" not in {n.op_type for n in sanitized.graph.node}
    assert "cond" not in {t.name for t in sanitized.graph.initializer}
    feeds = {"x": np.array([1.0, -2.0, 3.0], np.float32).reshape(1, 1, 1, 3)}
    np.testing.assert_allclose(run_ort(sanitized, feeds)["y"], run_ort(model, feeds)["y"])


def test_local_functions_are_inlined():
    """Newer exporters wrap blocks in model-local functions: the layers are the ops inside them."""
    silu = helper.make_function(
        "custom", "SiLU", ["a"], ["b"],
        [helper.make_node("Sigmoid", ["a"], ["s"]), helper.make_node("Mul", ["a", "s"], ["b"])],
        opset_imports=[helper.make_opsetid("", 17)])
    b = GraphBuilder(17)
    t = b.node("SiLU", [b.conv("x", 2, 4)], domain="custom")
    y = b.node("SiLU", [b.conv(t, 4, 4)], domain="custom", out="y")
    graph = helper.make_graph(b.nodes, "f", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2, 8, 8])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, ["n", 4, 8, 8])],
                              b.initializers)
    model = helper.make_model(graph, functions=[silu], opset_imports=[helper.make_opsetid("", 17),
                                                                       helper.make_opsetid("custom", 1)])
    model.ir_version = 8
    sanitized = load_model(model, {"x": [1, 2, 8, 8]})
    assert [n.op_type for n in sanitized.graph.node] == ["Conv", "Sigmoid", "Mul", "Conv", "Sigmoid", "Mul"]
    feeds = model_inputs(model, {"x": [1, 2, 8, 8]})
    np.testing.assert_allclose(run_ort(sanitized, feeds)["y"], run_ort(model, feeds)["y"], rtol=1e-5)


def test_two_thousand_node_chain():
    """Speed check model (timing is recorded in the report, not asserted here)."""
    model = chain_model(400)
    sanitized = load_model(model, {"x": [1, 4, 8, 8]})
    assert len(model.graph.node) == 2160
    assert len(sanitized.graph.node) == 400 * 5 + 16 * 2
    assert _all_static(sanitized) == []


def test_if_with_shape_derived_condition_is_flattened():
    """`if x.dim() == 4:` exports as an If on a Shape-derived condition: folding keeps the taken branch."""
    branch = lambda op, out: helper.make_graph(  # noqa: E731
        [helper.make_node(op, ["r"], [out], name=f"{out}_{op}")], out, [],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Shape", ["r"], ["s"], name="shape"),
             helper.make_node("Size", ["s"], ["rank"], name="size"),
             helper.make_node("Equal", ["rank", "four"], ["is4"], name="eq"),
             helper.make_node("If", ["is4"], ["y"], name="if", then_branch=branch("Sigmoid", "t"),
                              else_branch=branch("Tanh", "e"))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(4, np.int64), "four")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    sanitized = load_model(model, {"x": [2, 3, 4, 4]})
    assert [(n.op_type, list(n.output)) for n in sanitized.graph.node] == [("Relu", ["r"]), ("Sigmoid", ["y"])]
    feeds = model_inputs(model, {"x": [2, 3, 4, 4]})
    np.testing.assert_allclose(run_ort(sanitized, feeds)["y"], run_ort(model, feeds)["y"])


def test_shape_with_start_end_folds_to_the_right_value():
    """opset >= 15 Shape(start, end), as torch.export writes for interpolate(size=y.shape[-2:]): the folded
    Resize sizes must be the sliced shape (onnx-graphsurgeon alone folds the whole shape)."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from dse.graph.model import load_model

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("MaxPool", ["x"], ["small"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Shape", ["small"], ["nc"], start=0, end=2),
        helper.make_node("Shape", ["x"], ["hw"], start=2, end=4),
        helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
        helper.make_node("Resize", ["small", "", "", "sizes"], ["y"], mode="nearest"),
    ]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9  # what exporters write (onnxruntime reads IR <= 13)
    sanitized = load_model(model, {"x": [1, 4, 8, 6]})
    assert [n.op_type for n in sanitized.graph.node] == ["MaxPool", "Resize"]
    out = [o for o in sanitized.graph.output if o.name == "y"][0]
    assert [d.dim_value for d in out.type.tensor_type.shape.dim] == [1, 4, 8, 6]
    feed = {"x": np.random.default_rng(0).standard_normal((1, 4, 8, 6)).astype(np.float32)}
    got = ort.InferenceSession(sanitized.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    np.testing.assert_array_equal(got, want)
