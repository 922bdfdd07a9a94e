"""TensorRT stage engines and contexts for the shared runtime (one context + one CUDA stream per stream).

Per stage PE: the engine file is deserialized once (a DLA engine with ``runtime.DLA_core`` set to its core,
so one DLA engine file serves both cores); every configured stream gets its own execution context, CUDA
stream and I/O buffers. On an integrated GPU (Jetson) the buffers are pinned *mapped* host memory: TensorRT
reads and writes them in place (zero-copy). On a discrete GPU they are pinned host buffers plus device
buffers with async copies. ``execute_async_v3`` (TensorRT >= 8.5, tensor addresses) where available, else
``execute_async_v2`` with a bindings list.

UNTESTED ON HARDWARE (see dse.board).
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from dse.board import cuda
from dse.runtime.engine import ThreadedContext


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
        self.v3 = hasattr(self.engine, "num_io_tensors")
        self.tensors = self._io()  # [(name, is_input, shape, dtype)] in binding order

    def _io(self) -> List[tuple]:
        trt, e = self.trt, self.engine
        out = []
        if self.v3:
            for i in range(e.num_io_tensors):
                name = e.get_tensor_name(i)
                is_input = e.get_tensor_mode(name) == trt.TensorIOMode.INPUT
                out.append((name, is_input, tuple(e.get_tensor_shape(name)), trt.nptype(e.get_tensor_dtype(name))))
        else:
            for i in range(e.num_bindings):
                name = e.get_binding_name(i)
                out.append((name, e.binding_is_input(i), tuple(e.get_binding_shape(i)),
                            trt.nptype(e.get_binding_dtype(i))))
        for name, _, shape, _ in out:
            if any(d < 0 for d in shape):
                raise RuntimeError("engine tensor %s has a dynamic shape %s: build stages at static shapes"
                                   % (name, list(shape)))
        return out

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
        bindings = []
        for name, _, shape, dtype in engine.tensors:
            hb = cuda.HostBuffer(shape, dtype, mapped=engine.zero_copy)
            self.host[name] = hb
            if engine.zero_copy:
                ptr = hb.device_ptr
            else:
                db = cuda.DeviceBuffer(hb.nbytes)
                self.device[name] = db
                ptr = db.ptr
            bindings.append(ptr)
            if engine.v3:
                self.context.set_tensor_address(name, ptr)
        self.bindings = bindings

    def infer(self, inputs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        e = self.e
        for name, is_input, _, _ in e.tensors:
            if is_input:
                np.copyto(self.host[name].array, inputs[name], casting="same_kind")
                if not e.zero_copy:
                    cuda.memcpy_async(self.device[name].ptr, self.host[name].host.value, self.host[name].nbytes,
                                      cuda.HOST_TO_DEVICE, self.stream)
        if e.v3:
            ok = self.context.execute_async_v3(self.stream.ptr)
        else:
            ok = self.context.execute_async_v2(self.bindings, self.stream.ptr)
        if not ok:
            raise RuntimeError("TensorRT enqueue failed on %s" % e.pe)
        if not e.zero_copy:
            for name, is_input, _, _ in e.tensors:
                if not is_input:
                    cuda.memcpy_async(self.host[name].host.value, self.device[name].ptr, self.host[name].nbytes,
                                      cuda.DEVICE_TO_HOST, self.stream)
        self.stream.synchronize()
        used = set(e.input_names)
        out = dict((k, v) for k, v in inputs.items() if k not in used)  # earlier network outputs travel on
        for name, is_input, _, _ in e.tensors:
            if not is_input:
                out[name] = self.host[name].array.copy()  # the buffer is reused by the next frame
        return out

    def close(self) -> None:
        for b in list(self.host.values()) + list(self.device.values()):
            b.close()
        self.stream.close()
        self.context = None
