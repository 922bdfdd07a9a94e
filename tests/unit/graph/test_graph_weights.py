"""Weight-free models: the analysis and the digest equal the weighted model's, the weights come back only for a
backend that runs the model (once per digest in the shared cache), and a changed weights file is refused."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dse.core.errors import DseError
from dse.graph.analysis import NetworkAnalysis, analyze
from dse.graph.partition import check_partition, partition
from dse.graph.weights import WEIGHTS_KEY, content_id, has_weights, strip_weights, structure_digest, weight_names
from dse.network import analyze_source, weighted_model
from dse.workflow.plan import measurement_context
from dse.zoo import build_network, save_network
from tests.models import pytorch_style_convnet


def source(model: str, **kw) -> dict:
    return {"model": model, "weights": None, "input_size": 64, "batch": 1, "seed": 0, "input_shapes": {}, **kw}


@pytest.mark.parametrize("net", ["yolov4-tiny", "tiny-detector"])
def test_weight_free_build_is_the_weighted_graph(net):
    free, weighted = build_network(net, input_size=64, weight_free=True), build_network(net, input_size=64)
    a, b = analyze(free), analyze(weighted)
    assert not has_weights(a.model) and has_weights(b.model)
    assert a.digest == b.digest
    assert [(x.name, x.op_type, x.macs, x.param_bytes, x.output_shapes) for x in a.layers] == \
        [(x.name, x.op_type, x.macs, x.param_bytes, x.output_shapes) for x in b.layers]
    assert a.feasible_cuts == b.feasible_cuts
    assert a.model.ByteSize() * 20 < b.model.ByteSize()
    # another seed: other weights, the same graph
    other = analyze(build_network(net, input_size=64, seed=7))
    assert other.digest == b.digest and other.weights_id != b.weights_id


def test_strip_keeps_what_shapes_depend_on():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    shape = numpy_helper.from_array(np.array([1, -1], np.int64), "shape")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                               helper.make_node("Resize", ["c", "", "scales"], ["r"], name="resize"),
                               helper.make_node("Reshape", ["r", "shape"], ["y"], name="flat")],
                              "g", [x], [y], [w, scales, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert weight_names(model.graph) == {"w"}
    light = strip_weights(model, "mine")
    stored = {t.name: bool(t.raw_data) for t in light.graph.initializer}
    assert stored == {"w": False, "scales": True, "shape": True}
    assert [t.dims for t in light.graph.initializer] == [t.dims for t in model.graph.initializer]
    assert {p.key: p.value for p in light.metadata_props}[WEIGHTS_KEY] == "mine"
    assert has_weights(model) and not has_weights(light)
    assert model.graph.initializer[0].raw_data, "the input model is left as it was"
    assert structure_digest(light) == structure_digest(model)
    # the weights id names the values: other values, another id; the same graph, the same digest
    w.raw_data = np.full((2, 2, 1, 1), 3, np.float32).tobytes()
    other = helper.make_model(helper.make_graph(graph.node, "g", [x], [y], [w, scales, shape]),
                              opset_imports=[helper.make_opsetid("", 17)])
    assert content_id(other) != content_id(model) and structure_digest(other) == structure_digest(model)


def test_weight_free_analysis_refuses_to_run_without_a_source():
    a = NetworkAnalysis(analyze(build_network("tiny-chain", weight_free=True)).model)
    with pytest.raises(DseError, match="weight-free"):
        partition(a, (a.feasible_cuts[0],))


def test_zoo_source_materializes_once_in_the_shared_cache(tmp_path):
    models = tmp_path / "models"
    a = analyze_source(source("tiny-detector"), models)
    assert not has_weights(a.model) and a.weights_id == "random(seed=0)"
    assert not models.exists(), "analysis reads no weights"
    stages = partition(a, (a.feasible_cuts[len(a.feasible_cuts) // 2],))
    check_partition(a, stages)          # the materialized weights run, chained stages equal the whole model
    assert len(list(models.glob("*.onnx"))) == 1
    again = NetworkAnalysis(onnx.load_from_string(a.model.SerializeToString()),
                            lambda digest, weights: weighted_model(source("tiny-detector"), digest, weights, models))
    assert again.weighted_model().SerializeToString() == a.weighted_model().SerializeToString()
    assert len(list(models.glob("*.onnx"))) == 1, "reused, not built again"


def test_onnx_source_keeps_its_own_weights_and_refuses_a_changed_file(tmp_path):
    path = tmp_path / "net.onnx"
    onnx.save(pytorch_style_convnet(17), path)
    src = source(str(path), input_shapes={"input": [1, 3, 32, 32]})
    a = analyze_source(src, tmp_path / "models")
    assert not has_weights(a.model) and a.weights_id.startswith("sha256:")
    given = analyze(str(path), {"input": [1, 3, 32, 32]})
    assert a.digest == given.digest and a.weights_id == given.weights_id
    assert a.weighted_model().SerializeToString() == given.model.SerializeToString()
    # the file is replaced by one with other weights: a new analysis sees it, the old one refuses to run it
    model = pytorch_style_convnet(17)
    for t in model.graph.initializer:
        if t.name in weight_names(model.graph):
            t.raw_data = (numpy_helper.to_array(t) * 2).astype(np.float32).tobytes()
    onnx.save(model, path)
    stale = analyze_source(src, tmp_path / "other-models")
    stale_weights = stale.weights_id
    assert stale.digest == a.digest and stale_weights != a.weights_id
    with pytest.raises(DseError, match="changed since the analyze step"):
        weighted_model(src, a.digest, a.weights_id, tmp_path / "fresh")


CFG = """[net]
width=32
height=32
channels=3

[convolutional]
filters=4
size=3
stride=1
pad=1
activation=leaky

[convolutional]
filters=2
size=1
activation=linear
"""


def test_darknet_weights_are_named_by_content(tmp_path):
    from dse.zoo import write_darknet_weights

    cfg = tmp_path / "two.cfg"
    cfg.write_text(CFG)
    rng = np.random.default_rng(3)
    path = tmp_path / "two.weights"
    write_darknet_weights(path, [rng.standard_normal(n).astype(np.float32) for n in (4, 108, 2, 8)])
    a = analyze_source(source(str(cfg), weights=str(path), input_size=32))
    free = analyze_source(source(str(cfg), input_size=32))
    assert a.digest == free.digest and a.weights_id.startswith("sha256:") and free.weights_id == "random(seed=0)"
    assert has_weights(a.weighted_model()) and not has_weights(a.model)


def test_only_a_backend_that_runs_the_model_has_the_weights_in_its_context():
    platform, measure = {"name": "b"}, {"sample_size": 3}
    assert measurement_context(platform, measure) == measurement_context(platform, measure, weights=None)
    assert measurement_context(platform, measure, weights="random(seed=0)") != \
        measurement_context(platform, measure, weights="sha256:abc")


def test_save_network_of_a_weight_free_model_is_small(tmp_path):
    path = save_network(build_network("yolov4", weight_free=True), tmp_path / "y.onnx")
    assert path.stat().st_size < 100_000
