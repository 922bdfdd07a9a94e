"""The pipelined runtime with real ONNX Runtime stages: equality with a sequential run, no loss or reordering
with streams/buffers/threads/PND, clean failure, and the ort backend on host-cpu."""
from __future__ import annotations

import threading

import numpy as np
import onnxruntime as ort
import pytest

from dse.backends.base import MeasureSettings, warmup_frames, window_frames
from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.graph.analysis import analyze
from dse.graph.partition import partition
from dse.runtime.engine import FunctionEngine
from dse.runtime.metrics import busy_time, percentile, period_ms
from dse.platform.cpu_groups import core_group_name
from dse.runtime.ort_engine import OrtStageEngine
from dse.runtime.pipeline import Pipeline, StagePlan
from dse.zoo import build_network

CORES = sorted(__import__("os").sched_getaffinity(0))


@pytest.fixture(scope="module")
def detector():
    return analyze(build_network("tiny-detector"))


def _inputs(analysis, frame):
    name, shape = next(iter(analysis.inputs.items()))
    return {name: np.random.default_rng(frame).standard_normal(shape).astype(np.float32)}


def _sequential(analysis, frames):
    sess = ort.InferenceSession(analysis.model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return {f: dict(zip(names, sess.run(names, _inputs(analysis, f)))) for f in range(frames)}


def _run(analysis, cuts, streams, groups, frames=40, warmup=4, **kw):
    stages = partition(analysis, cuts)
    plans = [StagePlan([OrtStageEngine(st.model, g) for g in grp], s)
             for st, s, grp in zip(stages, streams, groups)]
    pipe = Pipeline(plans, lambda f, slot: _inputs(analysis, f), lambda f, out: f, frames=frames, warmup=warmup,
                    keep_outputs=True, **kw)
    return pipe.run()


@pytest.mark.parametrize("streams,groups,kw", [
    ((1, 1), ([CORES[:1]], [CORES[-1:]]), dict(buffers=1)),
    ((3, 2), ([CORES[:1]], [CORES[-1:]]), dict(buffers=5, pre_threads=3, post_threads=2)),
    ((4, 1), ([CORES[:1], CORES[-1:]], [CORES]), dict(buffers=6, pre_threads=2, post_threads=3)),  # PND stage 0
])
def test_pipelined_outputs_equal_sequential(detector, streams, groups, kw):
    cut = detector.feasible_cuts[len(detector.feasible_cuts) // 2]
    res = _run(detector, (cut,), streams, groups, **kw)
    assert res.ok, res.error
    ref = _sequential(detector, 44)
    assert sorted(res.outputs) == list(range(44))  # nothing lost, ids intact
    assert sorted(res.results) == list(range(44)) and all(res.results[f] == f for f in res.results)
    for f, out in res.outputs.items():
        assert set(out) == set(ref[f])
        for name in ref[f]:
            np.testing.assert_allclose(out[name], ref[f][name], rtol=1e-4, atol=1e-5)
    assert res.frames == 40 and res.fps > 0
    assert res.latency_ms_p99 >= res.latency_ms_p50 > 0
    assert 0 < res.period_ms_p10 <= res.period_ms_p50
    assert len(res.stage_ms) == 2 and all(t > 0 for t in res.stage_ms)
    assert all(0 < u <= 1 for u in res.util.values())
    if len(groups[0]) == 2:  # PND: both PEs of stage 0 did work
        assert {core_group_name(CORES[:1]), core_group_name(CORES[-1:])} <= set(res.util)


def test_three_stages_keep_network_outputs_of_early_stages(detector):
    cuts = (detector.feasible_cuts[2], detector.feasible_cuts[-2])
    res = _run(detector, cuts, (2, 1, 2), ([CORES[:1]], [CORES[-1:]], [CORES[:1]]), frames=20, warmup=0, buffers=3)
    assert res.ok, res.error
    ref = _sequential(detector, 20)
    for f in range(20):
        for name in ref[f]:
            np.testing.assert_allclose(res.outputs[f][name], ref[f][name], rtol=1e-4, atol=1e-5)


def test_order_through_stages_is_submission_order():
    """Contexts finishing out of order (sleeps) still hand frames on in the order they came."""
    import time

    seen = []
    lock = threading.Lock()

    def slow_odd(x):
        time.sleep(0.004 if x["id"] % 2 else 0.0)
        return x

    def record(x):
        with lock:
            seen.append(int(x["id"]))
        return x

    plans = [StagePlan([FunctionEngine(slow_odd)], 4), StagePlan([FunctionEngine(record)], 1)]
    res = Pipeline(plans, lambda f, s: {"id": f}, lambda f, out: int(out["id"]), frames=30, buffers=8).run()
    assert res.ok, res.error
    assert seen == list(range(30))
    assert res.results == {f: f for f in range(30)}


@pytest.mark.parametrize("where", ["stage", "pre", "post"])
def test_failure_stops_run_with_error(where):
    def stage(x):
        if where == "stage" and x["id"] == 7:
            raise ValueError("boom in stage")
        return x

    def pre(f, slot):
        if where == "pre" and f == 5:
            raise KeyError("boom in pre")
        return {"id": f}

    def post(f, out):
        if where == "post" and f == 3:
            raise RuntimeError("boom in post")
        return f

    plans = [StagePlan([FunctionEngine(stage)], 2), StagePlan([FunctionEngine(lambda x: x)], 2)]
    res = Pipeline(plans, pre, post, frames=50, buffers=4, pre_threads=2, post_threads=2, stall_s=10).run()
    assert not res.ok
    assert "boom" in res.error
    assert {"stage": "stage 0", "pre": "pre-processing", "post": "post-processing"}[where] in res.error
    assert res.fps == 0


def test_watchdog_ends_a_stalled_run():
    gate = threading.Event()

    def stuck(x):
        gate.wait(1.0)
        return x

    res = Pipeline([StagePlan([FunctionEngine(stuck)], 1)], lambda f, s: {"id": f}, lambda f, o: f,
                   frames=3, stall_s=0.3).run()
    gate.set()
    assert not res.ok and "no frame completed" in res.error


def test_thread_exhaustion_is_a_failed_run_not_a_crash(monkeypatch):
    """When the OS refuses a thread (too many threads on the host), the run ends with the reason and every
    thread it did start is stopped."""
    real_start, started = threading.Thread.start, []

    def start(self):
        if len(started) >= 2:
            raise RuntimeError("can't start new thread")
        started.append(self)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    res = Pipeline([StagePlan([FunctionEngine(lambda x: x)], 1)], lambda f, s: {"id": f}, lambda f, o: f,
                   frames=3, pre_threads=2, post_threads=2).run()
    monkeypatch.undo()
    assert not res.ok and "can't start new thread" in res.error
    assert not any(t.is_alive() for t in started)


def test_metrics_helpers():
    assert busy_time([(0, 2), (1, 3), (5, 6)], 0, 10) == 4
    assert busy_time([(0, 2), (1, 3), (5, 6)], 2.5, 5.5) == pytest.approx(1.0)
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([], 99) == 0.0
    # one slow episode (frames 5-7 take 30 ms, the rest 10 ms) moves the mean, not the windowed median
    done = np.cumsum([0.01] * 5 + [0.03] * 3 + [0.01] * 32)
    assert period_ms(done, 50, window=4) == pytest.approx(10.0)
    assert period_ms(done, 10, window=4) == pytest.approx(10.0) and period_ms(done, 100, window=4) == pytest.approx(25.0)
    assert period_ms(done, 50, images_per_job=2, window=4) == pytest.approx(5.0)
    assert period_ms(done[:1], 50) == 0.0 and period_ms(done[:3], 50) == pytest.approx(10.0)  # window shrinks


def test_ort_backend_measures_and_refuses(detector):
    from dse.backends.ort import OrtBackend

    be = OrtBackend("host-cpu", detector, MeasureSettings(precision="fp32", sample_size=30, warmup=3, model="tiny-detector"),
                    keep_outputs=True)
    assert "E" in be.platform.options and str(len(CORES)) not in be.platform.options   # all cores: E alone
    base = Configuration("tiny-detector", "host-cpu", precision="fp32", input_size=64, buffers=2)
    m = be.measure(base)
    assert m.ok, m.reason
    assert m.fps > 0 and m.backend == "ort" and len(m.stage_ms) == 1
    assert sorted(be.last_run.results) == list(range(window_frames(30, base) + warmup_frames(3, base)))
    assert all(r[0].shape[1] == 6 for r in be.last_run.results.values())  # yolo boxes per image

    bad = [base.with_(option="Z"), base.with_(precision="int8"),
           base.with_(option="E", cuts=(3,), streams=(1, 1))]
    for c in bad:
        m = be.measure(c)
        assert m.status == "refused" and m.reason
    assert "valid choices" in be.measure(bad[0]).reason
    two = [n for n, o in be.platform.options.items() if o.n_stages == 2]
    if two:
        infeasible = [c for c in range(len(detector.layers) - 1) if c not in detector.feasible_cuts][0]
        m = be.measure(base.with_(option=two[0], cuts=(infeasible,), streams=(1, 1)))
        assert m.status == "refused" and "infeasible" in m.reason


def test_image_dir_reaches_the_ort_backend(detector, tmp_path):
    """The benchmark's image_dir is a measurement setting every backend receives (the ort backend once
    dropped it and pre-processed synthetic frames instead)."""
    from PIL import Image

    from dse.backends import backend_from_config
    from dse.config import compose_config

    images = tmp_path / "images"
    images.mkdir()
    for i in range(3):
        Image.new("RGB", (80, 60), (40 * i, 90, 200)).save(images / f"frame{i}.png")
    cfg = compose_config(["benchmark=tiny-detector", "platform=host-cpu", f"benchmark.image_dir={images}",
                          f"results_dir={tmp_path / 'results'}"])
    be = backend_from_config(cfg, detector)
    assert be.settings.image_dir == str(images)
    app = be.application_for(Configuration("tiny-detector", "host-cpu", precision="fp32", input_size=64))
    assert [p.name for p in app.images.files] == ["frame0.png", "frame1.png", "frame2.png"]
    with pytest.raises(DseError, match="image_dir"):
        MeasureSettings.from_config(compose_config(["benchmark=tiny-detector",
                                                    f"benchmark.image_dir={tmp_path / 'nope'}"]))


def test_ort_backend_uses_engine_cache(detector, tmp_path):
    from dse.backends.ort import OrtBackend
    from dse.engines.cache import EngineCache

    if len(CORES) < 2:
        pytest.skip("needs two cores")
    cache = EngineCache(tmp_path, "host-cpu")
    platform = {"name": "host-cpu", "backend": "ort", "cores": CORES[:2], "options": "auto"}
    be = OrtBackend(platform, detector, MeasureSettings(precision="fp32", sample_size=20, warmup=2, model="tiny-detector"),
                    engine_cache=cache)
    cut = detector.feasible_cuts[3]
    c = Configuration("tiny-detector", "host-cpu", option="1-1", cuts=(cut,), streams=(1, 2), buffers=3,
                      precision="fp32", input_size=64)
    m1, m2 = be.measure(c), be.measure(c)
    assert m1.ok and m2.ok, (m1.reason, m2.reason)
    assert len(m1.engine_keys) == 2 and m1.engine_keys == m2.engine_keys
    assert cache.counts["CPU"] == {"built": 2, "reused": 2}
    assert set(m1.util) == {core_group_name(CORES[:1]), core_group_name(CORES[1:2])}
