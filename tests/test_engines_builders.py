"""Engine builders: the ORT builder for real, the TensorRT settings translation without TensorRT."""
from __future__ import annotations

import importlib.util
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from dse.engines.base import EngineBuilder, StageBuild
from dse.engines.cache import EngineCache
from dse.engines.ort import OrtEngineBuilder, load_session, ort_settings
from dse.engines.trt import TrtEngineBuilder, stage_io
from dse.engines.trt_settings import (
    TrtPlatform,
    build_settings,
    float_to_hex,
    foreign_node_range,
    key_settings,
    parse_calibration_cache,
    split_calibration_cache,
    summarize_inspector,
)
from dse.errors import DseError

HAS_TRT = importlib.util.find_spec("tensorrt") is not None


def conv_stage_model(seed: int = 0) -> onnx.ModelProto:
    """Conv -> BN -> LeakyRelu -> MaxPool: what ORT fuses at EXTENDED level."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in [
        ("W", rng.standard_normal((8, 3, 3, 3))), ("B", rng.standard_normal(8)), ("s", rng.uniform(0.5, 1.5, 8)),
        ("b", rng.standard_normal(8)), ("m", rng.standard_normal(8)), ("v", rng.uniform(0.5, 1.5, 8))]]
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1], name="conv_0"),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"], name="bn_0"),
             helper.make_node("LeakyRelu", ["bn"], ["act"], alpha=0.1, name="leaky_0"),
             helper.make_node("MaxPool", ["act"], ["y"], kernel_shape=[2, 2], strides=[2, 2], name="pool_0")]
    graph = helper.make_graph(nodes, "stage", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 8, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


# --- ort -----------------------------------------------------------------------------------------------

def test_ort_builder_caches_a_runnable_optimized_stage(tmp_path):
    model = conv_stage_model()
    stage = StageBuild(0, 0, 3, "CPU0-1", "CPU", "fp32", 2, ("x",), ("y",))
    builder = OrtEngineBuilder(board_model="host")
    assert isinstance(builder, EngineBuilder)
    cache = EngineCache(tmp_path, "host-cpu")
    art = builder.build(stage, model, cache)
    assert art.built and art.path.suffix == ".onnx"
    assert art.sidecar["settings"]["intra_op_num_threads"] == 2
    assert art.sidecar["settings"]["graph_optimization_level"] == "ORT_ENABLE_EXTENDED"
    report = art.sidecar["report"]
    assert report["nodes_after"] < report["nodes_before"]  # conv+bn+act fused
    # another core group of the same size reuses the engine; a bigger group is another engine
    again = builder.build(StageBuild(0, 0, 3, "CPU2-3", "CPU", "fp32", 2), model.SerializeToString(), cache)
    assert not again.built and again.key == art.key
    wider = builder.build(StageBuild(0, 0, 3, "CPU0-3", "CPU", "fp32", 2), model, cache)
    assert wider.built and wider.key != art.key
    assert cache.counts == {"CPU": {"built": 2, "reused": 1}}

    x = np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = load_session(art).run(None, {"x": x})[0]
    assert np.abs(got - ref).max() <= 1e-5


def test_ort_settings_refuse_what_ort_cannot_build():
    with pytest.raises(DseError, match="CPU stages only"):
        ort_settings(StageBuild(0, 0, 1, "GPU", "GPU", "fp32", 1))
    with pytest.raises(DseError, match="fp32 only"):
        ort_settings(StageBuild(0, 0, 1, "CPU0", "CPU", "int8", 1))
    with pytest.raises(DseError, match="ORT_ENABLE_BASIC"):
        ort_settings(StageBuild(0, 0, 1, "CPU0", "CPU", "fp32", 1), level="ORT_ENABLE_ALL")


# --- trt settings ------------------------------------------------------------------------------------

CACHE_TEXT = "\n".join([
    "TRT-8601-EntropyCalibration2",
    f"x: {float_to_hex(0.0078125)}",
    f"c: {float_to_hex(0.05)}",
    f"bn: {float_to_hex(0.04)}",
    f"act: {float_to_hex(0.03)}",
    f"y: {float_to_hex(0.03)}",
    f"z: {float_to_hex(0.5)}",
    "(Unnamed Layer* 7) [Constant]_output: 3c010a14",
]) + "\n"


def test_dla_int8_stage_with_gpu_fallback():
    platform = TrtPlatform(board_model="jetson-agx-xavier", trt_version="8.5.2.2", workspace_bytes=1 << 28,
                           dla_memory_pools={"DLA_MANAGED_SRAM": 1 << 20})
    stage = StageBuild(1, 10, 40, "DLA1", "DLA", "int8", 2)
    lines = parse_calibration_cache(CACHE_TEXT).lines()
    s = build_settings(stage, platform, input_shapes={"x": [2, 3, 16, 16]}, calibration_lines=lines,
                       timing_cache="/tmp/t.cache")
    assert s["default_device_type"] == "DLA" and s["dla_core"] == 1
    assert s["builder_flags"] == ["FP16", "GPU_FALLBACK", "INT8"]
    assert s["network_flags"] == ["EXPLICIT_BATCH"]
    assert s["memory_pools"] == {"WORKSPACE": 1 << 28, "DLA_MANAGED_SRAM": 1 << 20}
    assert s["calibration_cache"][0] == "TRT-8601-EntropyCalibration2"
    assert s["input_shapes"] == {"x": [2, 3, 16, 16]} and s["batch"] == 2
    json.dumps(s)  # plain data, ready for the sidecar
    # the DLA core and the timing cache file do not change the engine: same key on either core
    s0 = build_settings(StageBuild(1, 10, 40, "DLA0", "DLA", "int8", 2), platform,
                        input_shapes={"x": [2, 3, 16, 16]}, calibration_lines=lines)
    assert key_settings(s) == key_settings(s0) and s != s0
    no_fallback = build_settings(stage, TrtPlatform(gpu_fallback=False), calibration_lines=lines)
    assert "GPU_FALLBACK" not in no_fallback["builder_flags"]


def test_fp16_gpu_stage_on_tensorrt_10():
    s = build_settings(StageBuild(0, 0, 9, "GPU", "GPU", "fp16", 1), TrtPlatform(trt_version="10.3.0"))
    assert s["builder_flags"] == ["FP16"] and s["network_flags"] == []
    assert s["default_device_type"] == "GPU" and s["dla_core"] is None and s["calibration_cache"] is None
    assert s["memory_pools"] == {"WORKSPACE": 1 << 30}
    assert build_settings(StageBuild(0, 0, 9, "GPU", "GPU", "fp32", 1), TrtPlatform())["builder_flags"] == []


def test_trt_settings_errors():
    with pytest.raises(DseError, match="fp16 or int8 only"):
        build_settings(StageBuild(0, 0, 9, "DLA0", "DLA", "fp32", 1), TrtPlatform())
    with pytest.raises(DseError, match="ort"):
        build_settings(StageBuild(0, 0, 9, "CPU0", "CPU", "fp32", 1), TrtPlatform())
    with pytest.raises(DseError, match="calibration"):
        build_settings(StageBuild(0, 0, 9, "GPU", "GPU", "int8", 1), TrtPlatform())
    with pytest.raises(DseError, match="8.5 to 10.x"):
        build_settings(StageBuild(0, 0, 9, "GPU", "GPU", "fp16", 1), TrtPlatform(trt_version="7.1.3"))
    with pytest.raises(DseError, match="DLA core 2"):
        build_settings(StageBuild(0, 0, 9, "DLA2", "DLA", "fp16", 1), TrtPlatform())
    with pytest.raises(DseError, match="power of 2"):
        build_settings(StageBuild(0, 0, 9, "DLA0", "DLA", "fp16", 1),
                       TrtPlatform(dla_memory_pools={"DLA_LOCAL_DRAM": 3000}))


def test_calibration_cache_split_per_stage():
    cache = parse_calibration_cache(CACHE_TEXT)
    assert cache.scales()["x"] == pytest.approx(0.0078125)
    assert cache.scales()["c"] == pytest.approx(0.05)
    # stage 0 reads x, produces c, bn; stage 1 reads bn, produces act, y; stage 2 reads y, produces z
    parts = split_calibration_cache(CACHE_TEXT, [{"x", "c", "bn"}, {"bn", "act", "y"}, {"y", "z"}])
    assert [p.header for p in parts] == ["TRT-8601-EntropyCalibration2"] * 3
    assert [[n for n, _ in p.entries] for p in parts] == [["x", "c", "bn"], ["bn", "act", "y"], ["y", "z"]]
    assert parts[1].text().splitlines()[1] == f"bn: {float_to_hex(0.04)}"
    assert parse_calibration_cache(parts[2].text()) == parts[2]  # round trip
    with pytest.raises(DseError, match="not a TensorRT calibration cache"):
        parse_calibration_cache("x: 3c010a14\n")
    with pytest.raises(DseError, match="line 2"):
        parse_calibration_cache("TRT-8601-EntropyCalibration2\nx 3c010a14\n")


def test_stage_tensors_feed_the_split(tmp_path):
    shapes, tensors, names = stage_io(conv_stage_model())
    assert shapes == {"x": [2, 3, 16, 16]} and tensors == {"x", "c", "bn", "act", "y"}
    assert names == ["conv_0", "bn_0", "leaky_0", "pool_0"]
    builder = TrtEngineBuilder(TrtPlatform(), calibration=parse_calibration_cache(CACHE_TEXT))
    s = builder.settings_for(StageBuild(0, 0, 3, "DLA0", "DLA", "int8", 2), conv_stage_model())
    assert [ln.split(":")[0] for ln in s["calibration_cache"][1:]] == ["x", "c", "bn", "act", "y"]


def test_inspector_summary_counts_loadables_and_fallback():
    info = {"Layers": [
        {"Name": "Reformatting CopyNode for Input Tensor 0 to {ForeignNode[conv_0...leaky_0]}", "LayerType": "Reformat"},
        {"Name": "{ForeignNode[conv_0...leaky_0]}", "LayerType": "ForeignNode"},
        {"Name": "pool_0", "LayerType": "Pooling"},
        {"Name": "{ForeignNode[conv_1...conv_1]}", "LayerType": "DLA"},
        {"Name": "{ForeignNode[leaky_1...pool_1]}", "LayerType": "ForeignNode"},
        {"Name": "resize_0", "LayerType": "Resize"},
    ], "Bindings": ["x", "y"]}
    names = ["conv_0", "bn_0", "leaky_0", "pool_0", "conv_1", "leaky_1", "pool_1", "resize_0"]
    r = summarize_inspector(json.dumps(info), dla_stage=True, stage_layer_names=names)
    assert r["dla_loadables"] == 3 and r["dla_runs"] == 2
    assert r["fallback_layers"] == 2 and r["fallback_layer_names"] == ["pool_0", "resize_0"]
    assert r["reformat_layers"] == 1 and r["dla_onnx_layers"] == 3 + 1 + 2
    gpu = summarize_inspector({"Layers": ["conv_0 + leaky_0", "{ForeignNode[a...b]}"]}, dla_stage=False)
    assert gpu["dla_loadables"] == 0 and gpu["fallback_layers"] == 2
    assert foreign_node_range("{ForeignNode[a...b]}") == ("a", "b") and foreign_node_range("conv") is None


@pytest.mark.skipif(HAS_TRT, reason="TensorRT is installed: this checks the message where it is not")
def test_trt_build_without_tensorrt_says_so_and_leaves_nothing(tmp_path):
    cache = EngineCache(tmp_path, "xavier")
    builder = TrtEngineBuilder(TrtPlatform())
    with pytest.raises(DseError, match="needs TensorRT"):
        builder.build(StageBuild(0, 0, 3, "GPU", "GPU", "fp16", 2), conv_stage_model(), cache)
    assert not list((tmp_path / "xavier").glob("*.json")) and not list((tmp_path / "xavier").glob("*.engine"))


def test_ort_engines_of_partitioned_stages_reproduce_the_network(tmp_path):
    """Partition -> one ORT engine per stage (EXTENDED fusions) -> chained sessions equal the whole model."""
    from dse.graph.analysis import analyze
    from dse.graph.partition import partition, random_feeds
    from dse.zoo import build_network

    a = analyze(build_network("tiny-detector", input_size=64))
    cuts = next(c for c in a.feasible_cuts[2:] if a.check_cuts((c,)) is None)
    stages = partition(a, (cuts,))
    cache = EngineCache(tmp_path, "host")
    builder = OrtEngineBuilder()
    feeds = random_feeds(a.model, seed=3)
    available, produced = dict(feeds), {}
    for s in stages:
        spec = StageBuild(s.index, s.first_layer, s.last_layer, f"CPU{s.index}", "CPU", "fp32", 1,
                         tuple(s.inputs), tuple(s.outputs))
        art = builder.build(spec, s.model, cache)
        outs = load_session(art).run(s.outputs, {t: available[t] for t in s.inputs})
        produced.update(zip(s.outputs, outs))
        available = {**feeds, **dict(zip(s.outputs, outs))}
    names = list(a.outputs)
    whole = ort.InferenceSession(a.model.SerializeToString(), providers=["CPUExecutionProvider"]).run(names, feeds)
    for name, ref in zip(names, whole):
        assert np.abs(produced[name] - ref).max() <= 1e-4
    assert cache.counts_frame().to_dict("records") == [{"pe_type": "CPU", "built": 2, "reused": 0, "total": 2}]
