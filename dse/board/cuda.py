"""A minimal CUDA runtime wrapper over libcudart with ctypes (no cuda-python / pycuda needed on the board).

Only what the agent needs: streams, device and pinned host memory (mapped for zero-copy on Jetson, where the
GPU and the CPU share DRAM), async copies, synchronization. UNTESTED ON HARDWARE (see dse.board).
"""
from __future__ import annotations

import ctypes
import ctypes.util

HOST_TO_DEVICE = 1
DEVICE_TO_HOST = 2
HOST_ALLOC_MAPPED = 0x02
DEVICE_MAP_HOST = 0x08

_LIB = None  # type: Optional[ctypes.CDLL]
_CANDIDATES = ("libcudart.so", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so.10.2")


class CudaError(RuntimeError):
    pass


def lib() -> ctypes.CDLL:
    global _LIB
    if _LIB is None:
        names = list(_CANDIDATES)
        found = ctypes.util.find_library("cudart")
        if found:
            names.insert(0, found)
        last = None
        for name in names:
            try:
                _LIB = ctypes.CDLL(name)
                break
            except OSError as exc:
                last = exc
        if _LIB is None:
            raise CudaError("libcudart not found (%s); install the CUDA runtime (JetPack)" % last)
        _LIB.cudaGetErrorString.restype = ctypes.c_char_p
    return _LIB


def check(code: int, what: str) -> None:
    if code != 0:
        msg = lib().cudaGetErrorString(code)
        raise CudaError("%s failed: CUDA error %d (%s)" % (what, code, msg.decode() if msg else "?"))


def is_integrated() -> bool:
    """True on a Jetson (iGPU sharing DRAM with the CPU): zero-copy pinned buffers are the fast path."""
    value = ctypes.c_int(0)
    device = ctypes.c_int(0)
    check(lib().cudaGetDevice(ctypes.byref(device)), "cudaGetDevice")
    check(lib().cudaDeviceGetAttribute(ctypes.byref(value), 18, device), "cudaDeviceGetAttribute(integrated)")
    return bool(value.value)


class Stream(object):
    def __init__(self):
        self.handle = ctypes.c_void_p()
        check(lib().cudaStreamCreate(ctypes.byref(self.handle)), "cudaStreamCreate")

    @property
    def ptr(self) -> int:
        return int(self.handle.value or 0)

    def synchronize(self) -> None:
        check(lib().cudaStreamSynchronize(self.handle), "cudaStreamSynchronize")

    def close(self) -> None:
        if self.handle:
            lib().cudaStreamDestroy(self.handle)
            self.handle = ctypes.c_void_p()


class HostBuffer(object):
    """Pinned host memory viewed as a numpy array; ``mapped`` also gives the device address (zero-copy)."""

    def __init__(self, shape, dtype, mapped: bool):
        import numpy as np

        self.nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        self.host = ctypes.c_void_p()
        flags = HOST_ALLOC_MAPPED if mapped else 0
        check(lib().cudaHostAlloc(ctypes.byref(self.host), ctypes.c_size_t(max(self.nbytes, 1)),
                                  ctypes.c_uint(flags)), "cudaHostAlloc")
        raw = (ctypes.c_byte * max(self.nbytes, 1)).from_address(self.host.value)
        self.array = np.frombuffer(raw, dtype=dtype, count=int(np.prod(shape))).reshape(shape)
        self.device_ptr = 0
        if mapped:
            dev = ctypes.c_void_p()
            check(lib().cudaHostGetDevicePointer(ctypes.byref(dev), self.host, ctypes.c_uint(0)),
                  "cudaHostGetDevicePointer")
            self.device_ptr = int(dev.value or 0)

    def close(self) -> None:
        if self.host:
            lib().cudaFreeHost(self.host)
            self.host = ctypes.c_void_p()


class DeviceBuffer(object):
    def __init__(self, nbytes: int):
        self.nbytes = int(nbytes)
        self.handle = ctypes.c_void_p()
        check(lib().cudaMalloc(ctypes.byref(self.handle), ctypes.c_size_t(max(self.nbytes, 1))), "cudaMalloc")

    @property
    def ptr(self) -> int:
        return int(self.handle.value or 0)

    def close(self) -> None:
        if self.handle:
            lib().cudaFree(self.handle)
            self.handle = ctypes.c_void_p()


def memcpy_async(dst: int, src: int, nbytes: int, kind: int, stream: Stream) -> None:
    check(lib().cudaMemcpyAsync(ctypes.c_void_p(dst), ctypes.c_void_p(src), ctypes.c_size_t(nbytes),
                                ctypes.c_int(kind), stream.handle), "cudaMemcpyAsync")
