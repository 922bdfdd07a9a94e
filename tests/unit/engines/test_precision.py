"""The ONNX precision passes for strongly typed TensorRT, run for real in ONNX Runtime (and onnx's reference
evaluator): explicit INT8 Q/DQ from a calibration cache, and FP16 with float32 stage I/O."""
from __future__ import annotations

import functools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from dse.engines.precision import insert_qdq, to_fp16
from dse.engines.trt_settings import float_to_hex, parse_calibration_cache
from dse.core.errors import DseError
from dse.graph.analysis import analyze
from dse.graph.partition import partition
from dse.zoo import build_network
from tests.models import paddle_style_detector, pytorch_style_convnet


@functools.lru_cache(maxsize=None)
def analysis_of(name: str):
    if name == "torch-opset17":
        return analyze(pytorch_style_convnet(17), {"input": [1, 3, 32, 32]})
    if name == "torch-opset11":
        return analyze(pytorch_style_convnet(11), {"input": [1, 3, 32, 32]})
    if name == "paddle-opset13":
        return analyze(paddle_style_detector(13), {"image": [1, 3, 32, 32]})
    return analyze(build_network(name, input_size=64))


def run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def feeds_for(a, seed: int, low: float = 0.0) -> dict:
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(low, 1.0, shape).astype(np.float32) for name, shape in a.inputs.items()}


def calibration_cache(model: onnx.ModelProto, batches: list[dict]) -> str:
    """A TensorRT-format max calibration cache (scale = amax/127 per tensor) from ORT runs of the float model."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {o.name for o in probe.graph.output}
    probe.graph.output.extend(vi for vi in model.graph.value_info
                              if vi.name not in known and vi.type.tensor_type.elem_type == TensorProto.FLOAT)
    sess = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    amax: dict[str, float] = {}
    for feeds in batches:
        for name, value in list(feeds.items()) + list(zip(names, sess.run(None, feeds))):
            amax[name] = max(amax.get(name, 0.0), float(np.abs(value).max()))
    return "\n".join(["TRT-100300-EntropyCalibration2"] + [f"{n}: {float_to_hex(v / 127)}" for n, v in amax.items()])


# --- INT8 Q/DQ ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["tiny-chain", "tiny-detector"])
def test_qdq_network_runs_in_ort_close_to_the_float_one(name):
    a = analysis_of(name)
    scales = parse_calibration_cache(calibration_cache(a.model, [feeds_for(a, s) for s in range(4)])).scales()
    q = insert_qdq(a.model, scales)
    onnx.checker.check_model(q, full_check=True)
    convs = [n for n in q.graph.node if n.op_type == "Conv"]
    producers = {o: n for n in q.graph.node for o in n.output}
    inits = {t.name: t for t in q.graph.initializer}
    for conv in convs:  # activation and weight both arrive through DequantizeLinear
        x, w = (producers[t] for t in conv.input[:2])
        assert x.op_type == w.op_type == "DequantizeLinear"
        assert not any(a.name == "axis" for a in x.attribute)  # per tensor
        assert next(a.i for a in w.attribute if a.name == "axis") == 0  # per output channel
        w_scale = numpy_helper.to_array(inits[w.input[1]])
        weights = numpy_helper.to_array(inits[producers[w.input[0]].input[0]])
        assert w_scale.shape == (weights.shape[0],)
        assert w_scale == pytest.approx(np.abs(weights).reshape(weights.shape[0], -1).max(axis=1) / 127)
        assert numpy_helper.to_array(inits[x.input[2]]).dtype == np.int8  # symmetric: zero point 0, int8
    feeds = feeds_for(a, 99)
    for ref, got in zip(run(a.model, feeds), run(q, feeds)):
        span = float(ref.max() - ref.min())
        err = np.abs(got - ref)
        # int8 rounding through every conv: a few % of the output range at worst, well under 1 % on average
        assert 0 < err.max() <= 0.05 * span and err.mean() <= 0.01 * span


def test_qdq_gemm_and_matmul_weights_are_per_output_channel():
    a = analysis_of("torch-opset17")
    cache = calibration_cache(a.model, [feeds_for(a, s, low=-1.0) for s in range(3)])
    q = insert_qdq(a.model, parse_calibration_cache(cache).scales())
    producers = {o: n for n in q.graph.node for o in n.output}
    gemm = next(n for n in q.graph.node if n.op_type == "Gemm")
    weight_dq = producers[gemm.input[1]]
    assert next(x.i for x in weight_dq.attribute if x.name == "axis") == 0  # transB=1: B is [N, K]
    feeds = feeds_for(a, 7, low=-1.0)
    for ref, got in zip(run(a.model, feeds), run(q, feeds)):
        assert np.abs(got - ref).max() <= 0.05 * max(1.0, float(np.abs(ref).max()))

    w = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              [numpy_helper.from_array(w, "w")])
    mm = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    q = insert_qdq(mm, {"x": 1.0 / 127})
    matmul = next(n for n in q.graph.node if n.op_type == "MatMul")
    weight_dq = next(n for n in q.graph.node if n.output[0] == matmul.input[1])
    assert next(x.i for x in weight_dq.attribute if x.name == "axis") == 1  # B is [K, N]
    x = np.random.default_rng(1).uniform(-1, 1, (2, 4)).astype(np.float32)
    assert np.abs(run(q, {"x": x})[0] - x @ w).max() <= 0.05


def test_qdq_refuses_a_missing_scale_and_opsets_without_per_channel_qdq():
    a = analysis_of("tiny-chain")
    scales = parse_calibration_cache(calibration_cache(a.model, [feeds_for(a, 0)])).scales()
    conv = [n for n in a.model.graph.node if n.op_type == "Conv"][2]
    with pytest.raises(DseError, match=rf"no scale for tensor '{conv.input[0]}'.*Conv '{conv.name}'"):
        insert_qdq(a.model, {k: v for k, v in scales.items() if k != conv.input[0]})
    with pytest.raises(DseError, match="scale of .* is 0"):
        insert_qdq(a.model, {k: 0.0 for k in scales})
    with pytest.raises(DseError, match="opset >= 13.*opset 11"):
        insert_qdq(analysis_of("torch-opset11").model, scales)


# --- FP16 -----------------------------------------------------------------------------------------------------

def float_tensors(model: onnx.ModelProto) -> set[str]:
    """Names of the float32 tensors of the top graph after strict, type-checked shape inference."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, check_type=True)
    graph = inferred.graph
    return ({vi.name for vi in list(graph.value_info) + list(graph.input) + list(graph.output)
             if vi.type.tensor_type.elem_type == TensorProto.FLOAT}
            | {t.name for t in graph.initializer if t.data_type == TensorProto.FLOAT})


@pytest.mark.parametrize("name", ["tiny-detector", "torch-opset17", "torch-opset11", "paddle-opset13"])
def test_fp16_model_passes_the_checker_and_runs_in_ort(name):
    """ORT's CPU provider runs the float16 model; where it lacks a float16 kernel it inserts Casts and computes that
    node in float32 (its InsertCastTransformer), so this bounds the float16 storage error, not float16 arithmetic:
    the reference evaluator test below computes in float16 throughout."""
    a = analysis_of(name)
    half = to_fp16(a.model)
    onnx.checker.check_model(half, full_check=True)
    fp32 = float_tensors(half)  # also the strict, type-checked inference
    io = [(vi.name, vi.type.tensor_type.elem_type) for vi in list(a.model.graph.input) + list(a.model.graph.output)]
    assert [(vi.name, vi.type.tensor_type.elem_type) for vi in list(half.graph.input) + list(half.graph.output)] == io
    kept = fp32 - {n for n, _ in io}
    # float32 survives only where the schema has no float16 and as the input casts' sources: e.g. Resize scales
    consumers = {i: n for n in half.graph.node for i in n.input}
    assert all(consumers[t].op_type in ("Resize", "Cast") for t in kept if t in consumers), kept
    if name == "tiny-detector":
        resize = next(n for n in half.graph.node if n.op_type == "Resize")
        scales = next(t for t in half.graph.initializer if t.name == resize.input[2])
        assert scales.data_type == TensorProto.FLOAT and resize.input[2] in kept
    assert {t.data_type for t in half.graph.initializer if t.name not in kept} <= {TensorProto.FLOAT16,
                                                                                   TensorProto.INT64}
    feeds = feeds_for(a, 3, low=-1.0)
    for ref, got in zip(run(a.model, feeds), run(half, feeds)):
        assert got.dtype == np.float32 and got.shape == ref.shape
        assert np.abs(got - ref).max() <= 1e-2 * max(1.0, float(np.abs(ref).max()))


def test_fp16_model_in_float16_arithmetic_stays_close():
    a = analysis_of("tiny-detector")
    feeds = feeds_for(a, 5)
    got = ReferenceEvaluator(to_fp16(a.model)).run(None, feeds)
    for ref, out in zip(run(a.model, feeds), got):
        assert out.dtype == np.float32 and np.abs(out - ref).max() <= 1e-2


def test_fp16_stages_chain_like_the_float_network():
    """Each stage converted on its own keeps float32 boundaries, so the stages still plug into each other."""
    a = analysis_of("tiny-detector")
    cuts = next(c for c in a.feasible_cuts if len(a.crossing_tensors((c,))[0]) == 1 and c > 3)
    stages = partition(a, (cuts,))
    feeds = feeds_for(a, 11)
    available = dict(feeds)
    for s in stages:
        half = to_fp16(s.model)
        assert [vi.type.tensor_type.elem_type for vi in half.graph.output] == [TensorProto.FLOAT] * len(s.outputs)
        available.update(zip(s.outputs, run(half, {t: available[t] for t in s.inputs})))
    for name, ref in zip(a.outputs, run(a.model, feeds)):
        assert np.abs(available[name] - ref).max() <= 1e-2
