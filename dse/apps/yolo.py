"""The YOLO detection application: image -> resize/letterbox -> normalize; heads -> boxes -> NMS.

The network's ``yolo_<i>`` / ``region_<i>`` outputs are Sigmoid over the whole head tensor (B, A*(5+C), H, W),
so w/h come back through the inverse of the sigmoid: exp(t) = s / (1 - s). Anchors are read from the
Darknet cfg (``cfg`` option: a zoo name or a .cfg path; head ``yolo_<i>`` is cfg section i) or given as
``anchors`` (one list of [w, h] pairs in input pixels per head, in output order).
"""
from __future__ import annotations

import threading
from typing import Any, Mapping

import numpy as np

from dse.apps.base import InferenceApplication, register
from dse.apps.images import letterbox, resize_bilinear, to_chw
from dse.core.errors import DseError

HEAD_PREFIXES = ("yolo_", "region_")


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float, limit: int | None = None) -> np.ndarray:
    """Greedy non-maximum suppression; boxes (N, 4) as x1, y1, x2, y2; kept indices (at most ``limit``), best first."""
    order = np.argsort(-scores, kind="stable")
    x1, y1, x2, y2 = boxes.T
    areas = np.maximum(x2 - x1, 0) * np.maximum(y2 - y1, 0)
    keep = []
    while order.size and (limit is None or len(keep) < limit):
        i = order[0]
        keep.append(i)
        rest = order[1:]
        w = np.maximum(0.0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]))
        h = np.maximum(0.0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]))
        inter = w * h
        iou = inter / np.maximum(areas[i] + areas[rest] - inter, 1e-12)
        order = rest[iou <= iou_threshold]
    return np.asarray(keep, dtype=np.int64)


def cfg_anchors(cfg: str) -> dict[int, list[list[float]]]:
    """{section index: [[w, h], ...] of its mask} for every [yolo]/[region] section of a Darknet cfg."""
    from dse.zoo import read_cfg
    from dse.zoo.registry import resolve

    path = resolve(cfg)[0]   # a zoo name (or activation variant) or a .cfg path
    out = {}
    for sec in read_cfg(path):
        if sec.type not in ("yolo", "region"):
            continue
        values = [float(v) for v in sec.options.get("anchors", "").replace(" ", "").split(",") if v]
        pairs = [values[i:i + 2] for i in range(0, len(values) - 1, 2)]
        mask = [int(m) for m in sec.options.get("mask", "").replace(" ", "").split(",") if m]
        out[sec.index] = [pairs[m] for m in mask] if mask else pairs
    return out


@register("yolo")
class YoloApplication(InferenceApplication):
    defaults = {"preprocess": "resize", "cfg": None, "anchors": None, "conf_threshold": 0.25,
                "nms_iou": 0.45, "max_candidates": 1000, "max_detections": 100}
    frame_state = True      # postprocess maps boxes back through the frame's resize/letterbox

    def initialize_postprocessing(self) -> None:
        if self.options["preprocess"] not in ("resize", "letterbox"):
            raise DseError(f"yolo: preprocess must be resize or letterbox, got {self.options['preprocess']!r}")
        self.heads = [n for n in self.outputs if n.startswith(HEAD_PREFIXES)]
        self.heads.sort(key=lambda n: int(n.rsplit("_", 1)[1]) if n.rsplit("_", 1)[1].isdigit() else 0)
        given = self.options["anchors"]
        from_cfg = cfg_anchors(str(self.options["cfg"])) if self.options["cfg"] and not given else {}
        self.anchors: dict[str, np.ndarray] = {}
        for k, name in enumerate(self.heads):
            if given:
                if len(given) != len(self.heads):
                    raise DseError(f"yolo: {len(given)} anchor lists for {len(self.heads)} heads {self.heads}")
                pairs = given[k]
            else:
                idx = int(name.rsplit("_", 1)[1])
                pairs = from_cfg.get(idx)
                if pairs is None:  # no cfg: three square-ish anchors growing with the head's stride
                    stride = self.width / self.outputs[name][-1]
                    pairs = [[stride * f, stride * f] for f in (1.5, 3.0, 6.0)]
            self.anchors[name] = np.asarray(pairs, dtype=np.float32).reshape(-1, 2)
            channels = self.outputs[name][1]
            if channels % len(self.anchors[name]) or channels // len(self.anchors[name]) < 6:
                raise DseError(f"yolo head {name}: {channels} channels do not split into "
                               f"{len(self.anchors[name])} anchors x (5 + classes)")
        self._meta: dict[int, Any] = {}
        self._lock = threading.Lock()

    def preprocess(self, frame_id: int) -> dict[str, np.ndarray]:
        out = np.empty((self.batch, self.channels, self.height, self.width), dtype=np.float32)
        metas = []
        for b, image_id in enumerate(self.image_ids(frame_id)):
            img = self.images.get(image_id)
            if self.options["preprocess"] == "letterbox":
                sized, meta = letterbox(img, self.height, self.width)
            else:
                sized, meta = resize_bilinear(img, self.height, self.width), (None, 0, 0)
            metas.append((img.shape[0], img.shape[1]) + tuple(meta))
            out[b] = to_chw(sized, self.channels)
        with self._lock:
            self._meta[frame_id] = metas
        return {self.input_name: out}

    def postprocess(self, frame_id: int, outputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Per image: (N, 6) float32 rows x1, y1, x2, y2 (pixels of the original image), score, class."""
        with self._lock:
            metas = self._meta.pop(frame_id, None)
        return [self.decode_image({n: outputs[n][b] for n in self.heads}, metas[b] if metas else None)
                for b in range(self.batch)]

    def decode_image(self, heads: Mapping[str, np.ndarray], meta) -> np.ndarray:
        boxes, scores, classes = [], [], []
        for name, t in heads.items():
            anchors = self.anchors[name]
            na = len(anchors)
            c, gh, gw = t.shape
            t = t.reshape(na, c // na, gh, gw)
            obj = t[:, 4]
            cls = t[:, 5:]
            conf = obj[:, None] * cls  # (na, nc, gh, gw)
            best = conf.argmax(axis=1)
            score = np.take_along_axis(conf, best[:, None], axis=1)[:, 0]
            a, gy, gx = np.nonzero(score > self.options["conf_threshold"])
            if a.size == 0:
                continue
            s = np.clip(t[a, :4, gy, gx], 1e-6, 1 - 1e-6)
            region = name.startswith("region_")
            cx = (s[:, 0] + gx) / gw * self.width
            cy = (s[:, 1] + gy) / gh * self.height
            ratio = s[:, 2:4] / (1 - s[:, 2:4])  # exp(t) through the sigmoid
            scale = np.array([self.width / gw, self.height / gh], np.float32) if region else 1.0
            wh = anchors[a] * scale * ratio
            boxes.append(np.stack([cx - wh[:, 0] / 2, cy - wh[:, 1] / 2, cx + wh[:, 0] / 2, cy + wh[:, 1] / 2], 1))
            scores.append(score[a, gy, gx])
            classes.append(best[a, gy, gx])
        if not boxes:
            return np.zeros((0, 6), np.float32)
        b, s, k = np.concatenate(boxes), np.concatenate(scores), np.concatenate(classes)
        top = np.argsort(-s, kind="stable")[: int(self.options["max_candidates"])]
        b, s, k = b[top], s[top], k[top]
        offset = k[:, None].astype(np.float32) * (4.0 * max(self.width, self.height))  # per-class NMS in one go
        keep = nms(b + offset, s, float(self.options["nms_iou"]), int(self.options["max_detections"]))
        b, s, k = b[keep], s[keep], k[keep]
        if meta is not None:
            b = self._to_image(b, meta)
        return np.concatenate([b, s[:, None], k[:, None].astype(np.float32)], axis=1).astype(np.float32)

    def _to_image(self, b: np.ndarray, meta) -> np.ndarray:
        h, w, scale, px, py = meta
        if scale is None:  # plain resize: independent x/y scale
            b = b * np.array([w / self.width, h / self.height] * 2, np.float32)
        else:
            b = (b - np.array([px, py, px, py], np.float32)) / scale
        return np.clip(b, 0, np.array([w, h, w, h], np.float32))
