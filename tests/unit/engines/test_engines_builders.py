"""Engine builders: the ORT builder for real; the TensorRT settings, their Polygraphy loaders and the ONNX the
builder parses without TensorRT (Polygraphy imports TensorRT only when a loader is called)."""
from __future__ import annotations

import enum
import importlib.util
import json
import types

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from dse.engines.base import EngineBuilder, StageBuild
from dse.engines.cache import EngineCache
from dse.engines.ort import OrtEngineBuilder, load_session, ort_settings
from dse.engines.trt import TrtEngineBuilder, make_loaders, stage_io, stage_onnx
from dse.engines.trt_settings import (
    TrtPlatform,
    build_settings,
    float_to_hex,
    foreign_node_range,
    key_settings,
    loader_args,
    parse_calibration_cache,
    split_calibration_cache,
    summarize_inspector,
)
from dse.core.errors import DseError

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
    assert s["builder_flags"] == ["FP16", "GPU_FALLBACK", "INT8", "TF32"]
    assert s["network_flags"] == ["EXPLICIT_BATCH"] and s["onnx_pass"] is None
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
    assert s["builder_flags"] == ["FP16", "TF32"] and s["network_flags"] == []
    assert s["default_device_type"] == "GPU" and s["dla_core"] is None and s["calibration_cache"] is None
    assert s["memory_pools"] == {"WORKSPACE": 1 << 30}
    assert build_settings(StageBuild(0, 0, 9, "GPU", "GPU", "fp32", 1), TrtPlatform())["builder_flags"] == ["TF32"]


def test_trt_settings_errors():
    with pytest.raises(DseError, match="fp16 or int8 only"):
        build_settings(StageBuild(0, 0, 9, "DLA0", "DLA", "fp32", 1), TrtPlatform())
    with pytest.raises(DseError, match="ort"):
        build_settings(StageBuild(0, 0, 9, "CPU0", "CPU", "fp32", 1), TrtPlatform())
    with pytest.raises(DseError, match="calibration"):
        build_settings(StageBuild(0, 0, 9, "GPU", "GPU", "int8", 1), TrtPlatform())
    with pytest.raises(DseError, match="dse export trtexec"):
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
    from dse.graph.partition import partition
    from dse.zoo import build_network

    a = analyze(build_network("tiny-detector", input_size=64))
    cuts = next(c for c in a.feasible_cuts[2:] if a.check_cuts((c,)) is None)
    stages = partition(a, (cuts,))
    cache = EngineCache(tmp_path, "host")
    builder = OrtEngineBuilder()
    rng = np.random.default_rng(3)
    feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in a.inputs.items()}
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


# --- trt: settings -> Polygraphy loaders, and the ONNX the builder parses ------------------------------------

# TensorRT does not run here: these two enums stand in for the members of tensorrt.MemoryPoolType and
# tensorrt.ProfilingVerbosity that make_loaders looks up by name
TRT_ENUMS = types.SimpleNamespace(
    MemoryPoolType=enum.Enum("MemoryPoolType", ["WORKSPACE", "DLA_MANAGED_SRAM", "DLA_LOCAL_DRAM", "DLA_GLOBAL_DRAM"]),
    ProfilingVerbosity=enum.Enum("ProfilingVerbosity", ["LAYER_NAMES_ONLY", "DETAILED", "NONE"]))


def test_loader_args_of_weakly_and_strongly_typed_settings():
    lines = parse_calibration_cache(CACHE_TEXT).lines()
    dla = build_settings(StageBuild(1, 0, 3, "DLA1", "DLA", "int8", 2), TrtPlatform(trt_version="8.5.2"),
                         calibration_lines=lines, timing_cache="/tmp/t.cache")
    args = loader_args(dla)
    assert args["network"] == {"strongly_typed": False}
    assert args["config"] == {"tf32": True, "fp16": True, "int8": True, "allow_gpu_fallback": True, "use_dla": True,
                              "memory_pool_limits": {"WORKSPACE": 1 << 30}, "profiling_verbosity": "DETAILED",
                              "load_timing_cache": "/tmp/t.cache"}
    assert args["engine"] == {"save_timing_cache": "/tmp/t.cache"}
    gpu = loader_args(build_settings(StageBuild(0, 0, 3, "GPU", "GPU", "fp16", 1), TrtPlatform(trt_version="11.1.0")))
    assert gpu["network"] == {"strongly_typed": True}
    assert not any(gpu["config"][k] for k in ("tf32", "fp16", "int8", "allow_gpu_fallback", "use_dla"))
    assert gpu["config"]["load_timing_cache"] is None and gpu["engine"] == {"save_timing_cache": None}
    with pytest.raises(DseError, match="SPARSE_WEIGHTS"):
        loader_args(dict(dla, builder_flags=["FP16", "SPARSE_WEIGHTS"]))


def test_polygraphy_loaders_carry_the_settings():
    """The real Polygraphy loader objects, constructed without TensorRT (they import it when called)."""
    from polygraphy.backend.trt import CreateConfig, EngineBytesFromNetwork, NetworkFromOnnxBytes, PostprocessConfig

    lines = parse_calibration_cache(CACHE_TEXT).lines()
    platform = TrtPlatform(trt_version="8.6.1", dla_memory_pools={"DLA_MANAGED_SRAM": 1 << 20})
    s = build_settings(StageBuild(1, 0, 3, "DLA1", "DLA", "int8", 2), platform, calibration_lines=lines,
                       timing_cache="/tmp/t.cache")
    calibrator = object()  # whatever the caller built; passed through untouched
    loader = make_loaders(b"onnx", s, TRT_ENUMS, calibrator)
    assert isinstance(loader, EngineBytesFromNetwork) and loader.timing_cache_path == "/tmp/t.cache"
    network = loader._network
    assert isinstance(network, NetworkFromOnnxBytes) and network._model_bytes == b"onnx" and not network.strongly_typed
    assert isinstance(loader._config, PostprocessConfig)  # sets DLA core 1: Polygraphy builds on core 0
    config = loader._config._config
    assert isinstance(config, CreateConfig)
    assert (config.fp16, config.int8, config.tf32, config.use_dla, config.allow_gpu_fallback) == (True,) * 5
    assert config.calibrator is calibrator and config.timing_cache_path == "/tmp/t.cache"
    assert config.memory_pool_limits == {TRT_ENUMS.MemoryPoolType.WORKSPACE: 1 << 30,
                                         TRT_ENUMS.MemoryPoolType.DLA_MANAGED_SRAM: 1 << 20}
    assert config.profiling_verbosity is TRT_ENUMS.ProfilingVerbosity.DETAILED

    strong_settings = build_settings(StageBuild(0, 0, 3, "GPU", "GPU", "int8", 1), TrtPlatform(trt_version="11.4.1"),
                                     calibration_lines=lines)
    strong = make_loaders(b"onnx", strong_settings, TRT_ENUMS)
    assert strong._network.strongly_typed and isinstance(strong._config, CreateConfig)
    assert not (strong._config.fp16 or strong._config.int8 or strong._config.use_dla)
    assert strong._config.calibrator is None and strong.timing_cache_path is None


def test_calibrator_class_follows_the_cache_header():
    """TensorRT ignores a cache written by another algorithm, so the calibrator class must match the header."""
    assert parse_calibration_cache(CACHE_TEXT).calibrator_class == "IInt8EntropyCalibrator2"
    assert parse_calibration_cache("TRT-100300-MinMaxCalibration\nx: 3c010a14\n").calibrator_class == \
        "IInt8MinMaxCalibrator"
    assert parse_calibration_cache("TRT-7000-EntropyCalibration\n").calibrator_class == "IInt8EntropyCalibrator"
    with pytest.raises(DseError, match="PercentileCalibration"):
        parse_calibration_cache("TRT-8601-PercentileCalibration\n").calibrator_class


def test_stage_onnx_writes_the_precision_in_only_for_strongly_typed_tensorrt():
    model = conv_stage_model()
    data = model.SerializeToString()
    lines = parse_calibration_cache(CACHE_TEXT).lines()
    weak = build_settings(StageBuild(0, 0, 3, "GPU", "GPU", "int8", 2), TrtPlatform(trt_version="10.3.0"),
                          input_shapes={"x": [2, 3, 16, 16]}, calibration_lines=lines)
    assert stage_onnx(data, weak) == data
    strong = build_settings(StageBuild(0, 0, 3, "GPU", "GPU", "int8", 2), TrtPlatform(trt_version="11.0"),
                            input_shapes={"x": [2, 3, 16, 16]}, calibration_lines=lines)
    qdq = onnx.load_from_string(stage_onnx(data, strong))
    ops = [n.op_type for n in qdq.graph.node]
    assert ops[:5] == ["QuantizeLinear", "DequantizeLinear", "QuantizeLinear", "DequantizeLinear", "Conv"]
    x_scale = next(t for t in qdq.graph.initializer if t.name == "x_qdq_scale")
    assert numpy_helper.to_array(x_scale) == pytest.approx(0.0078125)  # the cache's hex, decoded
    fp16 = build_settings(StageBuild(0, 0, 3, "GPU", "GPU", "fp16", 2), TrtPlatform(trt_version="11.0"),
                          input_shapes={"x": [2, 3, 16, 16]})
    half = onnx.load_from_string(stage_onnx(data, fp16))
    assert {t.data_type for t in half.graph.initializer} == {TensorProto.FLOAT16}
    assert [vi.type.tensor_type.elem_type for vi in list(half.graph.input) + list(half.graph.output)] == \
        [TensorProto.FLOAT, TensorProto.FLOAT]
    x = np.random.default_rng(0).uniform(-1, 1, (2, 3, 16, 16)).astype(np.float32)  # |x| <= the cache's amax 1.0
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for converted in (qdq, half):
        session = ort.InferenceSession(converted.SerializeToString(), providers=["CPUExecutionProvider"])
        got = session.run(None, {"x": x})[0]
        assert np.abs(got - ref).max() <= 0.05 * (ref.max() - ref.min())
    with pytest.raises(DseError, match="dynamic"):
        stage_onnx(data, dict(fp16, input_shapes={"x": [-1, 3, 16, 16]}))
