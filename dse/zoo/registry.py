"""The network zoo: the thesis' nine detectors (Table 3.3) plus tiny networks for fast tests."""
from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import onnx

from dse.errors import DseError, choices_error
from dse.store.atomic import write_bytes_atomic
from dse.zoo.darknet import convert, count_nodes


@dataclass(frozen=True)
class ZooEntry:
    """One zoo network: `layers` is the thesis' layer count (None for the tiny test networks)."""

    name: str
    label: str
    description: str
    input_size: int
    preprocess: str  # "resize" or "letterbox" (how images are brought to input_size)
    layers: int | None


ZOO: dict[str, ZooEntry] = {e.name: e for e in (
    ZooEntry("yolov2", "Y2", "YOLOv2: Darknet-19, passthrough reorg, region head", 416, "resize", 54),
    ZooEntry("yolov2-tiny", "Y2t", "YOLOv2-tiny: 9 convs, region head", 416, "resize", 24),
    ZooEntry("yolov3", "Y3", "YOLOv3: Darknet-53 + FPN, 3 yolo heads", 416, "resize", 179),
    ZooEntry("yolov3-tiny", "Y3t", "YOLOv3-tiny: 2 yolo heads", 416, "resize", 35),
    ZooEntry("yolov4", "Y4", "YOLOv4: CSPDarknet-53 + SPP + PANet, 3 yolo heads", 416, "resize", 269),
    ZooEntry("yolov4-tiny", "Y4t", "YOLOv4-tiny: CSP-tiny channel-split routes, 2 yolo heads", 416, "resize", 57),
    ZooEntry("yolov4-csp", "Y4c", "Scaled-YOLOv4 CSP: CSPDarknet-53 + SPPCSP + CSP-PANet", 416, "letterbox", 290),
    ZooEntry("cspnet", "CN", "CSPResNeXt-50 (grouped convs) + SPP + FPN, long stride-8 route", 416, "resize", 228),
    ZooEntry("densenet-yolo", "DY", "DenseNet-201 backbone + YOLO region head", 416, "resize", 508),
    ZooEntry("tiny-chain", "Tc", "test net: conv+relu+maxpool chain", 64, "resize", None),
    ZooEntry("tiny-residual", "Tr", "test net: shortcuts + a long skip route", 64, "resize", None),
    ZooEntry("tiny-detector", "Td", "test net: 2 yolo outputs, upsample + concat", 64, "resize", None),
)}


def list_networks(include_tiny: bool = True) -> list[str]:
    """Zoo names in table order (thesis networks first)."""
    return [n for n, e in ZOO.items() if include_tiny or e.layers is not None]


def cfg_path(name: str) -> Path:
    """The packaged Darknet cfg of a zoo network."""
    if name not in ZOO:
        raise choices_error("network", name, ZOO)
    return Path(str(resources.files("dse.zoo") / "cfg" / f"{name}.cfg"))


def resolve(name_or_cfg: str | Path) -> tuple[Path, int | None]:
    """A zoo name -> (its cfg, its default input size); a path to a .cfg -> (the path, None = cfg's own)."""
    text = str(name_or_cfg)
    if text in ZOO:
        return cfg_path(text), ZOO[text].input_size
    if isinstance(name_or_cfg, Path) or text.endswith(".cfg") or os.sep in text:
        path = Path(text)
        if not path.is_file():
            raise DseError(f"cfg file not found: {path}")
        return path, None
    raise choices_error("network", text, ZOO)


def build_network(name_or_cfg: str | Path, input_size: int | None = None, batch: int = 1, seed: int = 0,
                  weights: str | Path | None = None) -> onnx.ModelProto:
    """ONNX model of a zoo network or a user .cfg.

    input_size=None uses the zoo default (416 for the thesis networks, 64 for the tiny ones) or, for a
    user cfg, its [net] width/height. Random weights are seeded: the same arguments give identical bytes.
    """
    path, default = resolve(name_or_cfg)
    return convert(path, input_size or default, batch, seed, weights)


def network_layers(name_or_cfg: str | Path) -> int:
    """ONNX node count of a network (independent of input size), computed without weights."""
    path, default = resolve(name_or_cfg)
    return count_nodes(path, default)


def save_network(model: onnx.ModelProto, path: str | Path) -> Path:
    """Write atomically (temp file in the same folder, fsync, rename): no half-written model is left."""
    return write_bytes_atomic(path, model.SerializeToString())
