"""TensorRT stage engines and contexts for the shared runtime (one context + one CUDA stream per stream).

Per stage PE: the engine file is deserialized once (a DLA engine with ``runtime.DLA_core`` set to its core,
so one DLA engine file serves both cores); every configured stream gets its own execution context, CUDA
stream and I/O buffers. On an integrated GPU (Jetson) the buffers are pinned *mapped* host memory: TensorRT
reads and writes them in place (zero-copy). On a discrete GPU they are pinned host buffers plus device
buffers with async copies.

Only the name-based tensor API is used (``num_io_tensors``, ``get_tensor_name/mode/shape/dtype``,
``set_tensor_address``, ``execute_async_v3``): it exists from TensorRT 8.5, TensorRT 10 removed the binding API
(``get_binding_*``, ``execute_async_v2``) and TensorRT 11 keeps the tensor API (NVIDIA, "Migrating Python Code
from TensorRT 8.x to 10.x"; TensorRT 11.0 Python API, ``ICudaEngine``). Host buffer types come from our own
table, not ``trt.nptype``, which raises for engine types numpy lacks (BF16, FP8, INT4).

UNTESTED ON HARDWARE (see dse.board); ``io_tensors``, ``numpy_dtype`` and ``stage_outputs`` are unit-tested.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from dse.board import cuda
from dse.runtime.engine import ThreadedContext

# tensorrt.DataType member name -> numpy dtype of a host buffer
NUMPY_DTYPES = {"FLOAT": "float32", "HALF": "float16", "INT8": "int8", "INT32": "int32", "INT64": "int64",
                "BOOL": "bool", "UINT8": "uint8"}


def numpy_dtype(trt_dtype) -> np.dtype:
    """The numpy dtype of a host buffer for a ``tensorrt.DataType`` (by member name: 'FLOAT', 'DataType.HALF')."""
    name = str(getattr(trt_dtype, "name", trt_dtype)).rsplit(".", 1)[-1]
    if name not in NUMPY_DTYPES:
        raise RuntimeError("engine I/O type %s has no host buffer type here (supported: %s); build stages with "
                           "float32 I/O" % (name, ", ".join(sorted(NUMPY_DTYPES))))
    return np.dtype(NUMPY_DTYPES[name])


def io_tensors(engine, trt) -> List[Tuple[str, bool, Tuple[int, ...], np.dtype]]:
    """[(name, is_input, static shape, host dtype)] of the engine's I/O tensors, in the engine's order."""
    if not hasattr(engine, "num_io_tensors"):
        raise RuntimeError("this TensorRT has no tensor API (num_io_tensors): the board agent needs TensorRT >= 8.5")
    out = []
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        shape = tuple(int(d) for d in engine.get_tensor_shape(name))
        if any(d < 0 for d in shape):
            raise RuntimeError("engine tensor %s has a dynamic shape %s: build stages at static shapes"
                               % (name, list(shape)))
        out.append((name, engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT, shape,
                    numpy_dtype(engine.get_tensor_dtype(name))))
    return out


def stage_outputs(inputs: Dict[str, np.ndarray], input_names: List[str],
                  produced: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """What a stage hands on: the tensors it did not consume (earlier network outputs travel on) plus its outputs."""
    used = set(input_names)
    out = dict((k, v) for k, v in inputs.items() if k not in used)
    out.update(produced)
    return out


class TrtStageEngine(object):
    def __init__(self, path: str, pe: str, dla_core: Optional[int] = None, zero_copy: Optional[bool] = None):
        import tensorrt as trt

        self.trt = trt
        self.pe = pe
        self.logger = trt.Logger(trt.Logger.WARNING)
        self.runtime = trt.Runtime(self.logger)
        if dla_core is not None:
            self.runtime.DLA_core = int(dla_core)
        with open(path, "rb") as fh:
            self.engine = self.runtime.deserialize_cuda_engine(fh.read())
        if self.engine is None:
            raise RuntimeError("TensorRT could not deserialize %s (built with another TensorRT version or board?)"
                               % path)
        self.zero_copy = cuda.is_integrated() if zero_copy is None else bool(zero_copy)
        self.tensors = io_tensors(self.engine, trt)

    @property
    def input_names(self) -> List[str]:
        return [t[0] for t in self.tensors if t[1]]

    def create_context(self, index: int = 0) -> ThreadedContext:
        ctx = TrtContext(self)
        return ThreadedContext(ctx.infer, self.pe, name="%s-ctx%d" % (self.pe, index), close=ctx.close)

    def close(self) -> None:
        self.engine = None


class TrtContext(object):
    """One execution context with its stream and buffers; ``infer`` runs on the context's own thread."""

    def __init__(self, engine: TrtStageEngine):
        self.e = engine
        self.context = engine.engine.create_execution_context()
        if self.context is None:
            raise RuntimeError("could not create an execution context on %s (out of memory?)" % engine.pe)
        self.stream = cuda.Stream()
        self.host = {}  # type: Dict[str, cuda.HostBuffer]
        self.device = {}  # type: Dict[str, object]
        for name, _, shape, dtype in engine.tensors:
            hb = cuda.HostBuffer(shape, dtype, mapped=engine.zero_copy)
            self.host[name] = hb
            if engine.zero_copy:
                ptr = hb.device_ptr
            else:
                db = cuda.DeviceBuffer(hb.nbytes)
                self.device[name] = db
                ptr = db.ptr
            self.context.set_tensor_address(name, ptr)

    def infer(self, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        e = self.e
        for name, is_input, _, _ in e.tensors:
            if is_input:
                np.copyto(self.host[name].array, inputs[name], casting="same_kind")
                if not e.zero_copy:
                    cuda.memcpy_async(self.device[name].ptr, self.host[name].host.value, self.host[name].nbytes,
                                      cuda.HOST_TO_DEVICE, self.stream)
        if not self.context.execute_async_v3(self.stream.ptr):
            raise RuntimeError("TensorRT enqueue failed on %s" % e.pe)
        if not e.zero_copy:
            for name, is_input, _, _ in e.tensors:
                if not is_input:
                    cuda.memcpy_async(self.host[name].host.value, self.device[name].ptr, self.host[name].nbytes,
                                      cuda.DEVICE_TO_HOST, self.stream)
        self.stream.synchronize()
        # copies: the buffers are reused by the next frame
        produced = dict((name, self.host[name].array.copy()) for name, is_input, _, _ in e.tensors if not is_input)
        return stage_outputs(inputs, e.input_names, produced)

    def close(self) -> None:
        for b in list(self.host.values()) + list(self.device.values()):
            b.close()
        self.stream.close()
        self.context = None
