"""The stage executor interface shared by every engine (ONNX Runtime here, TensorRT on the board).

A *stage engine* is what one PE loads for a stage (an ORT session, a deserialized TensorRT engine); a
*context* is one execution context of it (a TensorRT context + CUDA stream; for ORT a caller thread on the
shared session). The stage worker calls ``context.submit(inputs, done)``; the context runs the inference on
its own helper thread and calls ``done(outputs, error, t_start, t_end)`` from there. Keeping contexts
asynchronous is what lets one worker thread keep S of them busy at once, like JEDI's subnetwork threads.

Standard library + numpy only, Python 3.8 grammar (shared with the board agent).
"""
from __future__ import annotations

import os
import queue
import threading
import time
from typing import Any, Callable, Dict, Optional, Sequence

Outputs = Dict[str, Any]
DoneCallback = Callable[[Optional[Outputs], Optional[BaseException], float, float], None]


def pin_current_thread(cores: Optional[Sequence[int]]) -> bool:
    """Pin the calling thread to ``cores`` (Linux: pid 0 is the calling thread); False where unsupported."""
    if not cores or not hasattr(os, "sched_setaffinity"):
        return False
    try:
        os.sched_setaffinity(0, set(int(c) for c in cores))
        return True
    except OSError:
        return False


def run_pinned(cores: Optional[Sequence[int]], job, name: str = "pinned"):
    """``job()`` on a new thread pinned to ``cores`` (threads it creates, e.g. ONNX Runtime's intra-op pool,
    inherit the mask); returns its result or re-raises its exception on the caller's thread."""
    import threading

    box: dict = {}

    def target():
        try:
            pin_current_thread(cores)
            box["result"] = job()
        except BaseException as exc:  # re-raised on the caller's thread
            box["error"] = exc

    t = threading.Thread(target=target, name=name, daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


class ThreadedContext:
    """A context that runs a blocking ``run(inputs) -> outputs`` on its own (optionally pinned) thread.

    ``run`` may be an ORT session call or a whole TensorRT copy-in/enqueue/synchronize/copy-out sequence:
    either way the stage worker never blocks on it.
    """

    def __init__(self, run: Callable[[Outputs], Outputs], pe: str, cores: Optional[Sequence[int]] = None,
                 name: str = "ctx", close: Optional[Callable[[], None]] = None):
        self.pe = pe
        self.cores = tuple(cores or ())
        self._run = run
        self._close = close
        self._inbox = queue.Queue()  # type: queue.Queue
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, inputs: Outputs, done: DoneCallback) -> None:
        self._inbox.put((inputs, done))

    def _loop(self) -> None:
        pin_current_thread(self.cores)
        while True:
            item = self._inbox.get()
            if item is None:
                break
            inputs, done = item
            t0 = time.perf_counter()
            try:
                out = self._run(inputs)
            except BaseException as exc:  # reported to the stage worker, which stops the run
                done(None, exc, t0, time.perf_counter())
                continue
            done(out, None, t0, time.perf_counter())
        if self._close is not None:
            self._close()

    def close(self, timeout: float = 5.0) -> None:
        self._inbox.put(None)
        self._thread.join(timeout)


class FunctionEngine:
    """A stage computed by a Python callable (numpy): CPU reference stages, and failure injection in tests."""

    def __init__(self, fn: Callable[[Outputs], Outputs], pe: str = "CPU", cores: Optional[Sequence[int]] = None):
        self.fn = fn
        self.pe = pe
        self.cores = tuple(cores or ())

    def infer(self, inputs: Outputs) -> Outputs:
        return self.fn(inputs)

    def create_context(self, index: int = 0) -> ThreadedContext:
        return ThreadedContext(self.fn, self.pe, self.cores, name="%s-ctx%d" % (self.pe, index))

    def close(self) -> None:
        pass
