"""The board agent's TensorRT engine runner, its pure parts: the name-based tensor API walk (TensorRT 8.5 to 11),
host buffer types and what a stage hands on. TensorRT does not run here: the engine below is a stand-in that offers
exactly the documented ICudaEngine tensor methods, nothing of the binding API that TensorRT 10 removed."""
from __future__ import annotations

import enum
import types

import numpy as np
import pytest

from dse.board.trt_engine import io_tensors, numpy_dtype, stage_outputs

TensorIOMode = enum.Enum("TensorIOMode", ["NONE", "INPUT", "OUTPUT"])
DataType = enum.Enum("DataType", ["FLOAT", "HALF", "INT8", "INT32", "INT64", "BOOL", "UINT8", "BF16", "FP8"])
TRT = types.SimpleNamespace(TensorIOMode=TensorIOMode)


class TensorApiEngine:
    """ICudaEngine's tensor API (num_io_tensors, get_tensor_name/mode/shape/dtype) over a fixed tensor list."""

    def __init__(self, tensors):
        self._tensors = tensors  # [(name, mode, shape, dtype)]
        self.num_io_tensors = len(tensors)

    def _find(self, name):
        return next(t for t in self._tensors if t[0] == name)

    def get_tensor_name(self, i):
        return self._tensors[i][0]

    def get_tensor_mode(self, name):
        return self._find(name)[1]

    def get_tensor_shape(self, name):
        return list(self._find(name)[2])

    def get_tensor_dtype(self, name):
        return self._find(name)[3]


def test_io_tensors_walk_the_tensor_api_in_engine_order():
    engine = TensorApiEngine([("images", TensorIOMode.INPUT, (1, 3, 416, 416), DataType.FLOAT),
                              ("conv_9", TensorIOMode.OUTPUT, (1, 255, 13, 13), DataType.HALF),
                              ("mask", TensorIOMode.OUTPUT, (1, 13), DataType.BOOL)])
    assert io_tensors(engine, TRT) == [("images", True, (1, 3, 416, 416), np.dtype(np.float32)),
                                       ("conv_9", False, (1, 255, 13, 13), np.dtype(np.float16)),
                                       ("mask", False, (1, 13), np.dtype(np.bool_))]


def test_io_tensors_refuse_dynamic_shapes_and_the_binding_api():
    dynamic = TensorApiEngine([("images", TensorIOMode.INPUT, (-1, 3, 416, 416), DataType.FLOAT)])
    with pytest.raises(RuntimeError, match=r"images has a dynamic shape \[-1, 3, 416, 416\]"):
        io_tensors(dynamic, TRT)
    bindings_only = types.SimpleNamespace(num_bindings=2)  # a TensorRT < 8.5 engine
    with pytest.raises(RuntimeError, match="TensorRT >= 8.5"):
        io_tensors(bindings_only, TRT)


def test_host_buffer_types():
    assert numpy_dtype(DataType.INT64) == np.int64 and numpy_dtype("DataType.UINT8") == np.uint8
    assert numpy_dtype("INT8") == np.int8 and numpy_dtype(DataType.INT32) == np.int32
    for unsupported in (DataType.BF16, DataType.FP8):
        with pytest.raises(RuntimeError, match=f"{unsupported.name} has no host buffer type"):
            numpy_dtype(unsupported)


def test_stage_hands_on_its_outputs_and_what_it_did_not_consume():
    frame, early = np.zeros((1, 3, 4, 4), np.float32), np.ones((1, 8), np.float32)
    out = stage_outputs({"images": frame, "yolo_9": early}, ["images"], {"yolo_16": early * 2})
    assert sorted(out) == ["yolo_16", "yolo_9"] and out["yolo_9"] is early
