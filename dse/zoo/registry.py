"""The network zoo: the thesis' nine detectors (Table 3.3), the classifiers of the per-layer-mapping seeds
(002 Kang et al., 004 Ha et al.) and of the energy/DVFS seed (001 Tang et al.), plus tiny networks for fast tests."""
from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import onnx

from dse.core.validate import MAX_TEXT_BYTES, regular_file
from dse.core.errors import choices_error
from dse.store.atomic import write_bytes_atomic
from dse.zoo.darknet import convert, count_nodes


FAMILIES = ("thesis", "layermap", "energy", "test")


@dataclass(frozen=True)
class ZooEntry:
    """One zoo network: `layers` is the thesis' layer count (None outside the thesis); `family` says where it
    comes from: the thesis (Table 3.3), the per-layer-mapping seeds 002/004 (L245), or the tiny test networks."""

    name: str
    label: str
    description: str
    input_size: int
    preprocess: str  # "resize" or "letterbox" (how images are brought to input_size)
    layers: int | None
    family: str = "thesis"


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
    # the benchmarks of Kang et al. 2020 (002 L245) and Ha et al. 2018 (004 L420-428), 1000-class ImageNet at 224
    ZooEntry("mobilenet-v1", "MN1", "MobileNet v1: 13 depthwise-separable blocks, ReLU", 224, "resize", None,
             "layermap"),
    ZooEntry("mobilenet-v2", "MN2", "MobileNet v2: 17 inverted-residual bottlenecks, ReLU6", 224, "resize", None,
             "layermap"),
    ZooEntry("squeezenet", "SQ", "SqueezeNet v1.1: 8 fire modules (squeeze, expand 1x1 | 3x3, concat)", 224,
             "resize", None, "layermap"),
    ZooEntry("densenet-40", "DN", "DenseNet-40 (CIFAR, k=32 as in 002 L245): 3 dense blocks of 12 layers", 32,
             "resize", None, "layermap"),
    ZooEntry("densenet-40-k12", "DN12", "DenseNet-40 (CIFAR, k=12 as in the DenseNet paper)", 32, "resize", None,
             "layermap"),
    # the benchmarks of Tang et al. (seed 001 L166), ImageNet classifiers and the FER+ emotion classifier
    ZooEntry("vgg19", "VGG", "VGG-19: 16 3x3 convs in 5 blocks + 3 FC layers", 224, "resize", None, "energy"),
    ZooEntry("alexnet", "AN", "AlexNet (BVLC Caffe): 5 convs (3 grouped) + 3 FC layers, no LRN", 224, "resize", None,
             "energy"),
    ZooEntry("emotion-ferplus", "FER", "FER+ emotion classifier at 64x64 grey: 8 convs + 2 FC layers", 64, "resize",
             None, "energy"),
    ZooEntry("tiny-chain", "Tc", "test net: conv+relu+maxpool chain", 64, "resize", None, "test"),
    ZooEntry("tiny-residual", "Tr", "test net: shortcuts + a long skip route", 64, "resize", None, "test"),
    ZooEntry("tiny-detector", "Td", "test net: 2 yolo outputs, upsample + concat", 64, "resize", None, "test"),
)}


def list_networks(include_tiny: bool = True, family: str | None = None) -> list[str]:
    """Zoo names in table order (thesis networks first), optionally of one family (thesis, layermap, test)."""
    if family is not None and family not in FAMILIES:
        raise choices_error("zoo family", family, FAMILIES)
    return [n for n, e in ZOO.items() if (include_tiny or e.family != "test") and family in (None, e.family)]


def cfg_path(name: str) -> Path:
    """The packaged Darknet cfg of a zoo network."""
    if name not in ZOO:
        raise choices_error("network", name, ZOO)
    return Path(str(resources.files("dse.zoo") / "cfg" / f"{name}.cfg"))


# `NAME-<activation>`: a zoo network with its ReLUs swapped, e.g. the thesis networks with the original Darknet
# leaky ReLU (`yolov4-leaky`), to see what the DLA rules of each TensorRT release make of them
VARIANT_ACTIVATIONS = ("leaky", "mish", "swish")


def activation_variant(name: str) -> tuple[str, str | None]:
    """'yolov4-leaky' -> ('yolov4', 'leaky'); a plain zoo name or a path -> (name, None)."""
    base, _, act = str(name).rpartition("-")
    if act in VARIANT_ACTIVATIONS and base in ZOO:
        return base, act
    return str(name), None


def resolve(name_or_cfg: str | Path) -> tuple[Path, int | None]:
    """A zoo name (or `NAME-<activation>` variant) -> (its cfg, its default input size); a path to a .cfg ->
    (the path, None = cfg's own)."""
    text, _ = activation_variant(str(name_or_cfg))
    if text in ZOO:
        return cfg_path(text), ZOO[text].input_size
    if isinstance(name_or_cfg, Path) or text.endswith(".cfg") or os.sep in text:
        return regular_file(text, "cfg file", MAX_TEXT_BYTES), None
    raise choices_error("network", text, [*ZOO, *(f"NAME-{a}" for a in VARIANT_ACTIVATIONS)])


def _sections(name_or_cfg: str | Path):
    """What the converter reads: the cfg path, or for an activation variant its sections with every ReLU swapped."""
    path, default = resolve(name_or_cfg)
    base, act = activation_variant(str(name_or_cfg))
    if act is None:
        return path, default
    from dse.zoo.cfgparse import parse_cfg

    text = path.read_text(encoding="utf-8")
    swapped = "\n".join(f"activation={act}" if line.strip().replace(" ", "") == "activation=relu" else line
                         for line in text.splitlines())
    return parse_cfg(swapped, source=f"{base}-{act}.cfg"), default


def build_network(name_or_cfg: str | Path, input_size: int | None = None, batch: int = 1, seed: int = 0,
                  weights: str | Path | None = None, weight_free: bool = False) -> onnx.ModelProto:
    """ONNX model of a zoo network or a user .cfg.

    input_size=None uses the zoo default (416 for the thesis networks, 64 for the tiny ones) or, for a
    user cfg, its [net] width/height. Random weights are seeded: the same arguments give identical bytes.
    weight_free=True declares the weights without storing them (all that analysis and the virtual boards read).
    """
    cfg, default = _sections(name_or_cfg)
    return convert(cfg, input_size or default, batch, seed, weights, weight_free=weight_free)


def network_layers(name_or_cfg: str | Path) -> int:
    """ONNX node count of a network (independent of input size), computed without weights."""
    cfg, default = _sections(name_or_cfg)
    return count_nodes(cfg, default)


def save_network(model: onnx.ModelProto, path: str | Path) -> Path:
    """Write atomically (temp file in the same folder, fsync, rename): no half-written model is left."""
    return write_bytes_atomic(path, model.SerializeToString())
