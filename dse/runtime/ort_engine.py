"""ONNX Runtime stage engines on CPU core groups (the executor of the ``ort`` backend).

One InferenceSession per (stage, core group) with as many intra-op threads as the group has cores. The
session is created on a thread pinned to the group, so ORT's intra-op pool threads inherit that affinity
(Linux threads inherit their creator's mask); every context thread pins itself too. Spinning is off: the
pool threads of one stage must not burn cycles that pre/post threads or a neighbour stage could use.
Contexts (streams) share the session: ``InferenceSession.run`` is thread-safe, like TensorRT contexts
sharing one engine.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from dse.platform.cpu_groups import core_group_name
from dse.runtime.engine import ThreadedContext, run_pinned


def make_session_options(threads: int, spinning: bool = False):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = max(1, int(threads))
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    so.log_severity_level = 3
    return so


class OrtStageEngine:
    """A stage model loaded in ONNX Runtime on one CPU core group."""

    def __init__(self, model, cores: Sequence[int], pe: str | None = None, spinning: bool = False):
        """``model``: ModelProto, serialized bytes or a path (e.g. a cached optimized stage from dse.engines.ort)."""
        self.cores = tuple(sorted(int(c) for c in cores))
        self.pe = pe or core_group_name(self.cores)
        data = model
        if hasattr(model, "SerializeToString"):
            data = model.SerializeToString()
        elif isinstance(model, Path):
            data = str(model)

        def create():
            import onnxruntime as ort

            return ort.InferenceSession(data, make_session_options(len(self.cores), spinning),
                                        providers=["CPUExecutionProvider"])

        self.session = run_pinned(self.cores, create, f"ort-init-{self.pe}")
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]

    def infer(self, inputs: dict) -> dict:
        feed = {n: inputs[n] for n in self.input_names}
        values = self.session.run(self.output_names, feed)
        # network outputs of earlier stages travel on to post-processing; this stage's inputs are used up
        out = {k: v for k, v in inputs.items() if k not in feed}
        out.update(zip(self.output_names, values))
        return out

    def create_context(self, index: int = 0) -> ThreadedContext:
        return ThreadedContext(self.infer, self.pe, self.cores, name=f"{self.pe}-ctx{index}")

    def close(self) -> None:
        self.session = None
