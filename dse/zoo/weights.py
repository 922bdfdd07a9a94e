"""Where conv/connected parameters come from: seeded random (cost studies) or a Darknet `.weights` file.

Both sources hand the converter *folded* parameters (batch norm merged into weight and bias), so the
ONNX graph has no BatchNormalization node, as after TensorRT's Conv+BN fusion.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dse.core.validate import MAX_MODEL_BYTES, regular_file
from dse.core.errors import DseError

# AlexeyAB's darknet normalizes with sqrt(var + 1e-5); the original pjreddie code used sqrt(var) + 1e-6.
BN_EPS = 1e-5


def fold_batchnorm(weight, bias, scales, mean, var, eps: float = BN_EPS):
    """y = scales * (conv(x) - mean) / sqrt(var + eps) + bias, as one conv: returns (weight', bias')."""
    factor = (scales / np.sqrt(var + eps)).astype(np.float32)
    shape = (-1,) + (1,) * (weight.ndim - 1)
    return (weight * factor.reshape(shape)).astype(np.float32), (bias - mean * factor).astype(np.float32)


class RandomWeights:
    """Seeded Gaussian weights with a caller-chosen std (the converter picks it to keep activations O(1))."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def conv(self, shape: tuple[int, ...], batch_normalize: bool, std: float):
        weight = self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)
        bias = self.rng.standard_normal(shape[0], dtype=np.float32) * np.float32(0.01)
        return weight, bias

    connected = conv

    def finish(self) -> None:
        """Nothing to check for random weights."""


class DarknetWeights:
    """Sequential reader of a Darknet `.weights` file, in the order the converter visits layers.

    Layout: int32 major, minor, revision; `seen` as int64 when major*10+minor >= 2 else int32; then per
    [convolutional]: biases, [scales, rolling_mean, rolling_var if BN], weights; per [connected]:
    biases, weights, [scales, rolling_mean, rolling_var if BN] (Darknet's own order for that layer).
    """

    def __init__(self, path: str | Path):
        self.path = regular_file(path, "weights file", 2 * MAX_MODEL_BYTES)
        data = self.path.read_bytes()
        if len(data) < 16:
            raise DseError(f"{self.path}: too short for a Darknet weights header ({len(data)} bytes)")
        self.major, self.minor, self.revision = (int(v) for v in np.frombuffer(data, "<i4", 3))
        wide_seen = self.major * 10 + self.minor >= 2 and self.major < 1000 and self.minor < 1000
        header = 20 if wide_seen else 16
        self.seen = int(np.frombuffer(data, "<i8" if wide_seen else "<i4", 1, 12)[0])
        self.transpose = self.major > 1000 or self.minor > 1000
        self.floats = np.frombuffer(data, "<f4", (len(data) - header) // 4, header)
        self.pos = 0

    def _take(self, count: int) -> np.ndarray:
        if self.pos + count > self.floats.size:
            raise DseError(f"{self.path}: weights file ends after {self.floats.size} floats but the cfg needs "
                           f"more (wanted {count} at offset {self.pos}); does it belong to this cfg?")
        out = self.floats[self.pos:self.pos + count]
        self.pos += count
        return out

    def _bn(self, n: int):
        return self._take(n), self._take(n), self._take(n)

    def conv(self, shape: tuple[int, ...], batch_normalize: bool, std: float):
        n = shape[0]
        bias = self._take(n)
        bn = self._bn(n) if batch_normalize else None
        weight = self._take(int(np.prod(shape))).reshape(shape)
        return fold_batchnorm(weight, bias, *bn) if bn else (weight.copy(), bias.copy())

    def connected(self, shape: tuple[int, int], batch_normalize: bool, std: float):
        n_out, n_in = shape
        bias = self._take(n_out)
        weight = self._take(n_out * n_in)
        weight = weight.reshape(n_in, n_out).T if self.transpose else weight.reshape(n_out, n_in)
        if batch_normalize:
            return fold_batchnorm(weight, bias, *self._bn(n_out))
        return np.ascontiguousarray(weight), bias.copy()

    def finish(self) -> None:
        """Every float must have been used: leftovers mean the file was trained for another cfg."""
        left = self.floats.size - self.pos
        if left:
            raise DseError(f"{self.path}: {left} floats left over after the last layer; "
                           "the weights file does not match this cfg")


def write_darknet_weights(path: str | Path, arrays: list[np.ndarray], version=(0, 2, 0), seen: int = 0) -> None:
    """Write a `.weights` file from float arrays already in file order (tests, and exporting random nets)."""
    major, minor = version[0], version[1]
    wide_seen = major * 10 + minor >= 2 and major < 1000 and minor < 1000
    with open(path, "wb") as handle:
        handle.write(np.array(version, "<i4").tobytes())
        handle.write(np.array([seen], "<i8" if wide_seen else "<i4").tobytes())
        for array in arrays:
            handle.write(np.asarray(array, "<f4").tobytes())
