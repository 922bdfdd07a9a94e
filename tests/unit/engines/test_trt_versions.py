"""TensorRT versions: which path the settings take (weakly typed 8.5-10.x, strongly typed 11.x), what is refused
(below 8.5; DLA where the version has none), and the platform slice the builder reads. Facts: docs/tensorrt.md."""
from __future__ import annotations

import types

import pytest

from dse.engines.base import StageBuild
from dse.engines.trt_settings import TrtPlatform, build_settings, dla_refusal, key_settings, parse_version
from dse.core.errors import DseError

LINES = ["TRT-8601-EntropyCalibration2", "x: 3c010a14"]
GPU_INT8 = StageBuild(0, 0, 9, "GPU", "GPU", "int8", 1)
DLA_FP16 = StageBuild(0, 0, 9, "DLA0", "DLA", "fp16", 1)


@pytest.mark.parametrize("version, network_flags, precision_flags, onnx_pass", [
    ("8.5.2", ["EXPLICIT_BATCH"], ["FP16", "INT8", "TF32"], None),
    ("8.6.2", ["EXPLICIT_BATCH"], ["FP16", "INT8", "TF32"], None),
    ("10.3.0", [], ["FP16", "INT8", "TF32"], None),
    ("11.0.0", ["STRONGLY_TYPED"], [], "qdq"),
    ("11.4.1", ["STRONGLY_TYPED"], [], "qdq"),
])
def test_int8_gpu_stage_per_version(version, network_flags, precision_flags, onnx_pass):
    s = build_settings(GPU_INT8, TrtPlatform(trt_version=version), calibration_lines=LINES)
    assert s["network_flags"] == network_flags and s["builder_flags"] == precision_flags
    assert s["onnx_pass"] == onnx_pass
    assert s["calibration_cache"] == LINES  # the weak path calibrates from it, the strong path takes its scales


def test_strongly_typed_fp16_and_fp32_stages():
    fp16 = build_settings(StageBuild(0, 0, 9, "GPU", "GPU", "fp16", 1), TrtPlatform(trt_version="11.1"))
    fp32 = build_settings(StageBuild(0, 0, 9, "GPU", "GPU", "fp32", 1), TrtPlatform(trt_version="11.1"))
    assert fp16["onnx_pass"] == "fp16" and fp32["onnx_pass"] is None
    assert fp16["builder_flags"] == fp32["builder_flags"] == []
    # the pass is part of the engine: it is in the key, so a 10.x and an 11.x engine never share an entry
    assert "onnx_pass" in key_settings(fp16) and key_settings(fp16) != key_settings(fp32)
    with pytest.raises(DseError, match="calibration"):
        build_settings(GPU_INT8, TrtPlatform(trt_version="11.1"))


@pytest.mark.parametrize("version", ["6.0.1", "7.1.3", "8.0.1", "8.2.1", "8.4.1"])
def test_jetpack4_and_older_tensorrt_is_refused_with_the_way_out(version):
    with pytest.raises(DseError, match=r"Python 3\.6.*dse export trtexec.*8\.5 to 10\.x \(weakly typed\) and 11\.x"):
        build_settings(StageBuild(0, 0, 9, "GPU", "GPU", "fp16", 1), TrtPlatform(trt_version=version))


@pytest.mark.parametrize("version, board, refused", [
    ("8.5.2", "jetson-agx-xavier", None),
    ("10.3.0", "jetson-agx-orin", None),
    ("10.7.0", "jetson-agx-orin", None),
    ("10.8.0", "jetson-agx-orin", "10.7 was the last"),
    ("10.13.0", "jetson-agx-orin", "10.7 was the last"),
    ("11.0.0", "jetson-agx-orin", "11.0-11.3 have none"),
    ("11.3.1", "jetson-agx-orin-64gb", "11.0-11.3 have none"),
    ("11.4.0", "jetson-agx-orin", "Windows on ARM"),
    ("11.4.1", "jetson-agx-orin-64gb", None),
    ("11.4.1", "jetson-agx-xavier", "Jetson AGX Orin only"),
    ("11.5.0", "jetson-thor", "Jetson AGX Orin only"),
])
def test_dla_support_by_version_and_board(version, board, refused):
    reason = dla_refusal(parse_version(version), board)
    assert (reason is None) if refused is None else (refused in reason)
    platform = TrtPlatform(trt_version=version, board_model=board)
    if refused is None:
        s = build_settings(DLA_FP16, platform)
        assert s["default_device_type"] == "DLA" and "GPU_FALLBACK" in s["builder_flags"]
    else:
        with pytest.raises(DseError, match="stage 0 on DLA0"):
            build_settings(DLA_FP16, platform)
    # GPU stages are never refused for lack of a DLA
    assert build_settings(StageBuild(0, 0, 9, "GPU", "GPU", "fp16", 1), platform)["default_device_type"] == "GPU"


def test_platform_slice_from_a_platform_description():
    pes = {"GPU": types.SimpleNamespace(type="gpu"), "DLA0": types.SimpleNamespace(type="dla"),
           "DLA1": types.SimpleNamespace(type="dla"), "CPU0-3": types.SimpleNamespace(type="cpu")}
    board = types.SimpleNamespace(board_model="jetson-agx-orin", toolkit_version="tensorrt-11.4.1", pes=pes)
    p = TrtPlatform.from_platform(board)
    assert (p.board_model, p.trt_version, p.dla_cores) == ("jetson-agx-orin", "11.4.1", 2)
    sim = TrtPlatform.from_platform(types.SimpleNamespace(board_model="jetson-agx-xavier",
                                                          toolkit_version="tensorrt-6.0-sim", pes=pes))
    assert parse_version(sim.trt_version) == (6, 0)
    with pytest.raises(DseError, match="JetPack 4"):
        build_settings(DLA_FP16, sim)
