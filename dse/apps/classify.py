"""The classification application: resize + normalize; output -> softmax (when not already probabilities) ->
top-k (class, probability) per image."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from dse.apps.base import InferenceApplication, register
from dse.apps.images import resize_bilinear, to_chw
from dse.core.errors import DseError


@register("classify")
class ClassifyApplication(InferenceApplication):
    defaults = {"top_k": 5, "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0], "output": None}

    def initialize_postprocessing(self) -> None:
        name = self.options["output"] or (next(iter(self.outputs)) if self.outputs else None)
        if name not in self.outputs:
            raise DseError(f"classify: output {name!r} is not a network output; outputs: {sorted(self.outputs)}")
        self.output_name = name
        c = self.channels
        self.mean = np.asarray(self.options["mean"], np.float32)[:c].reshape(-1, 1, 1)
        self.std = np.asarray(self.options["std"], np.float32)[:c].reshape(-1, 1, 1)

    def preprocess(self, frame_id: int) -> dict[str, np.ndarray]:
        out = np.empty((self.batch, self.channels, self.height, self.width), dtype=np.float32)
        for b, image_id in enumerate(self.image_ids(frame_id)):
            img = resize_bilinear(self.images.get(image_id), self.height, self.width)
            out[b] = (to_chw(img, self.channels) - self.mean) / self.std
        return {self.input_name: out}

    def postprocess(self, frame_id: int, outputs: Mapping[str, np.ndarray]) -> list[list[tuple[int, float]]]:
        logits = np.asarray(outputs[self.output_name], np.float64).reshape(self.batch, -1)
        result = []
        for row in logits:
            if row.min() < 0 or abs(row.sum() - 1.0) > 1e-3:
                e = np.exp(row - row.max())
                row = e / e.sum()
            k = min(int(self.options["top_k"]), row.size)
            idx = np.argsort(-row, kind="stable")[:k]
            result.append([(int(i), float(row[i])) for i in idx])
        return result
