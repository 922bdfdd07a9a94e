"""Applications: registry, image loading (files and synthetic), resize/letterbox, YOLO decode + NMS, top-k."""
from __future__ import annotations

import numpy as np
import pytest

from dse.apps import available_applications, create_application, register
from dse.apps.base import InferenceApplication
from dse.apps.images import ImageSource, letterbox, resize_bilinear
from dse.apps.yolo import cfg_anchors, nms
from dse.core.errors import DseError


def test_registry_and_unknown_names():
    assert {"yolo", "classify"} <= set(available_applications())
    with pytest.raises(DseError, match="valid choices: classify"):
        create_application("segment", {}, {"x": [1, 3, 8, 8]}, {})
    with pytest.raises(DseError, match="unknown option"):
        create_application("yolo", {"colour": 1}, {"x": [1, 3, 8, 8]}, {})


def test_adding_an_application_is_one_class():
    @register("mean-test")
    class Mean(InferenceApplication):
        def preprocess(self, frame_id):
            return {self.input_name: np.full(self.inputs[self.input_name], frame_id, np.float32)}

        def postprocess(self, frame_id, outputs):
            return float(outputs["y"].mean())

    app = create_application("mean-test", {}, {"x": [2, 1, 4, 4]}, {"y": [2]})
    assert app.preprocess(3)["x"].shape == (2, 1, 4, 4)
    assert app.postprocess(0, {"y": np.array([1.0, 3.0])}) == 2.0


def test_resize_and_letterbox():
    img = np.zeros((20, 40, 3), np.uint8)
    img[:, 20:] = 200
    out = resize_bilinear(img, 10, 10)
    assert out.shape == (10, 10, 3) and out[0, 0, 0] == 0 and out[0, -1, 0] == 200
    assert np.allclose(resize_bilinear(img, 20, 40), img)  # identity size
    lb, (scale, px, py) = letterbox(img, 40, 40)
    assert scale == 1.0 and px == 0 and py == 10
    assert np.all(lb[:10] == 127.5) and np.all(lb[30:] == 127.5) and lb[20, 30, 0] == 200


def test_image_source_files_and_synthetic(tmp_path):
    from PIL import Image

    for i, ext in enumerate(("png", "jpg")):
        Image.fromarray(np.full((12, 16, 3), 50 * (i + 1), np.uint8)).save(tmp_path / f"im{i}.{ext}")
    (tmp_path / "notes.txt").write_text("not an image")
    src = ImageSource(tmp_path)
    assert len(src) == 2 and src.get(0).shape == (12, 16, 3) and int(src.get(2)[0, 0, 0]) == 50
    assert abs(int(src.get(1)[0, 0, 0]) - 100) <= 2  # JPEG
    a, b = ImageSource(None, seed=1), ImageSource(None, seed=1)
    assert np.array_equal(a.get(3), b.get(3)) and not np.array_equal(a.get(3), ImageSource(None, seed=2).get(3))
    with pytest.raises(DseError, match="not a directory"):
        ImageSource(tmp_path / "missing")


def test_nms_suppresses_overlaps_only():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]], np.float32)
    keep = nms(boxes, np.array([0.9, 0.8, 0.7]), 0.5)
    assert keep.tolist() == [0, 2]
    assert nms(boxes, np.array([0.9, 0.8, 0.7]), 0.5, limit=1).tolist() == [0]


def _logit(p):
    return np.log(p / (1 - p))


def test_yolo_decodes_a_planted_box():
    """One strong cell in a 4x4 head with known anchors decodes to the expected box in image pixels."""
    app = create_application("yolo", {"anchors": [[[8, 8], [16, 16]]], "conf_threshold": 0.5},
                             {"images": [1, 3, 32, 32]}, {"yolo_5": [1, 2 * (5 + 3), 4, 4]})
    x = app.preprocess(0)["images"]
    assert x.shape == (1, 3, 32, 32) and 0 <= x.min() and x.max() <= 1
    head = np.full((1, 2, 8, 4, 4), 0.01, np.float32)
    # anchor 1 (16x16), cell (gy=2, gx=1): centre (1.5, 2.5) cells -> (12, 20) px; w = 16 * exp(logit(0.5)) = 16
    head[0, 1, :, 2, 1] = [0.5, 0.5, 0.5, 0.5, 0.9, 0.1, 0.95, 0.2]
    out = app.postprocess(0, {"yolo_5": head.reshape(1, 16, 4, 4)})[0]
    assert out.shape == (1, 6)
    h, w = app.images.get(0).shape[:2]
    expect = np.array([4 * w / 32, 12 * h / 32, 20 * w / 32, 28 * h / 32])
    np.testing.assert_allclose(out[0, :4], expect, rtol=1e-5)
    assert out[0, 4] == pytest.approx(0.9 * 0.95) and out[0, 5] == 1


def test_yolo_anchors_from_cfg_and_letterbox_run():
    from dse.graph.analysis import analyze
    from dse.zoo import build_network
    import onnxruntime as ort

    anchors = cfg_anchors("tiny-detector")
    assert all(len(v) == 3 for v in anchors.values())
    a = analyze(build_network("tiny-detector"))
    app = create_application("yolo", {"cfg": "tiny-detector", "preprocess": "letterbox"}, a.inputs, a.outputs)
    sess = ort.InferenceSession(a.model.SerializeToString())
    names = [o.name for o in sess.get_outputs()]
    dets = app.postprocess(0, dict(zip(names, sess.run(names, app.preprocess(0)))))[0]
    h, w = app.images.get(0).shape[:2]
    assert dets.shape[1] == 6 and len(dets) <= 100
    assert np.all(dets[:, [0, 2]] <= w) and np.all(dets[:, [1, 3]] <= h) and np.all(dets[:, :4] >= 0)


def test_reuse_inputs_feeds_each_image_once():
    fresh = create_application("classify", {}, {"x": [1, 3, 8, 8]}, {"logits": [1, 4]})
    app = create_application("classify", {"reuse_inputs": True}, {"x": [1, 3, 8, 8]}, {"logits": [1, 4]})
    calls = []
    pre = app.preprocess
    app.preprocess = lambda f: calls.append(f) or pre(f)
    n = len(app.images)
    a, b = app.frame_inputs(1), app.frame_inputs(1 + n)           # the same image
    assert calls == [1] and a["x"] is b["x"] and a is not b        # its tensors reused, the dict the frame's own
    np.testing.assert_array_equal(a["x"], fresh.frame_inputs(1)["x"])
    assert not np.array_equal(app.frame_inputs(2)["x"], a["x"]) and calls == [1, 2]
    assert fresh.frame_inputs(1)["x"] is not fresh.frame_inputs(1)["x"]   # default: pre-processed every frame
    with pytest.raises(DseError, match="keeps per-frame pre-processing state.*allow it: classify"):
        create_application("yolo", {"reuse_inputs": True}, {"x": [1, 3, 32, 32]}, {"out": [1, 255, 1, 1]})


def test_classify_top_k():
    app = create_application("classify", {"top_k": 2}, {"x": [2, 3, 8, 8]}, {"logits": [2, 4]})
    assert app.preprocess(0)["x"].shape == (2, 3, 8, 8)
    res = app.postprocess(0, {"logits": np.array([[0, 5, 1, 2], [3, 0, 0, 0]], np.float32)})
    assert [c for c, _ in res[0]] == [1, 3] and [c for c, _ in res[1]] == [0, 1]
    assert res[0][0][1] == pytest.approx(np.exp(5) / np.exp([0, 5, 1, 2]).sum())
