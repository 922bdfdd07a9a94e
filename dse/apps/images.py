"""Images for pre-processing: files from a directory (JPEG/PNG via Pillow) or seeded synthetic frames, and the
two ways to bring them to the network size (resize, letterbox) with bilinear sampling in numpy."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from dse.core.errors import DseError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
SYNTHETIC_SIZE = (480, 640)  # (height, width) of generated frames, a camera-like aspect ratio
SYNTHETIC_POOL = 8


def _synthetic(seed: int, index: int) -> np.ndarray:
    """A smooth seeded test picture (gradients + rectangles), uint8 HxWx3."""
    rng = np.random.default_rng([seed, index])
    h, w = SYNTHETIC_SIZE
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([xx / w, yy / h, (xx + yy) / (w + h)], axis=-1) * 160 + rng.uniform(0, 60, 3)
    for _ in range(6):
        y0, x0 = rng.integers(0, h - 40), rng.integers(0, w - 40)
        img[y0:y0 + rng.integers(20, 160), x0:x0 + rng.integers(20, 200)] = rng.uniform(0, 255, 3)
    return np.clip(img, 0, 255).astype(np.uint8)


def load_image(path: str | Path) -> np.ndarray:
    """RGB uint8 HxWx3 from a JPEG or PNG file."""
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - Pillow comes with matplotlib
        raise DseError("reading image files needs Pillow (pip install pillow)") from exc
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


class ImageSource:
    """Frame i -> image i modulo the number of images (files sorted by name, or the synthetic pool)."""

    def __init__(self, image_dir: str | Path | None = None, seed: int = 0):
        self.files: list[Path] = []
        if image_dir:
            d = Path(image_dir)
            if not d.is_dir():
                raise DseError(f"image_dir {str(d)!r} is not a directory")
            self.files = sorted(p for p in d.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
            if not self.files:
                raise DseError(f"image_dir {str(d)!r} has no {'/'.join(IMAGE_SUFFIXES)} files")
            self.pool: list[np.ndarray] = []
        else:
            self.pool = [_synthetic(seed, i) for i in range(SYNTHETIC_POOL)]

    def __len__(self) -> int:
        return len(self.files) or len(self.pool)

    def get(self, index: int) -> np.ndarray:
        if self.files:
            return load_image(self.files[index % len(self.files)])
        return self.pool[index % len(self.pool)]


def resize_bilinear(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """HxWxC uint8/float -> height x width x C float32 (pixel-centre aligned bilinear)."""
    h, w = img.shape[:2]
    ys = np.clip((np.arange(height, dtype=np.float32) + 0.5) * (h / height) - 0.5, 0, h - 1)
    xs = np.clip((np.arange(width, dtype=np.float32) + 0.5) * (w / width) - 0.5, 0, w - 1)
    y0 = ys.astype(np.int64)
    x0 = xs.astype(np.int64)
    y1 = np.minimum(y0 + 1, h - 1)
    x1 = np.minimum(x0 + 1, w - 1)
    wy = (ys - y0)[:, None, None]
    wx = (xs - x0)[None, :, None]
    r0, r1 = img[y0], img[y1]  # gather the needed rows first (cheap on uint8), then convert
    top = r0[:, x0].astype(np.float32) * (1 - wx) + r0[:, x1].astype(np.float32) * wx
    bot = r1[:, x0].astype(np.float32) * (1 - wx) + r1[:, x1].astype(np.float32) * wx
    return top * (1 - wy) + bot * wy


def letterbox(img: np.ndarray, height: int, width: int, fill: float = 127.5) -> tuple[np.ndarray, tuple]:
    """Resize keeping the aspect ratio, pad to height x width; returns (image, (scale, pad_x, pad_y))."""
    h, w = img.shape[:2]
    scale = min(height / h, width / w)
    nh, nw = max(1, round(h * scale)), max(1, round(w * scale))
    out = np.full((height, width, img.shape[2]), fill, dtype=np.float32)
    py, px = (height - nh) // 2, (width - nw) // 2
    out[py:py + nh, px:px + nw] = resize_bilinear(img, nh, nw)
    return out, (scale, px, py)


def to_chw(img: np.ndarray, channels: int) -> np.ndarray:
    """HxWx3 float [0, 255] -> CxHxW float32 [0, 1] (grey = channel mean when the network takes 1 channel)."""
    if channels == 1:
        img = img.mean(axis=2, keepdims=True)
    elif channels != img.shape[2]:
        raise DseError(f"network input has {channels} channels; images have {img.shape[2]}")
    return np.ascontiguousarray(img.transpose(2, 0, 1), dtype=np.float32) * np.float32(1 / 255)
