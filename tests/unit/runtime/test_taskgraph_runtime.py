"""The ORT task-graph runtime of per-layer mappings (spec 1.7): segmenting, equality with one ORT session for
scattered mappings on branchy networks, the B-slot bound, clean failure, RunResult fields, and equivalence
with the pipelined runtime when every PE holds one contiguous range."""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import onnxruntime as ort
import pytest

from dse.core.errors import DseError
from dse.graph.analysis import analyze
from dse.graph.partition import extract_ranges, partition
from dse.platform import load_platform
from dse.platform.cpu_groups import core_group_name
from dse.runtime.engine import FunctionEngine
from dse.runtime.ort_engine import OrtStageEngine
from dse.runtime.pipeline import Pipeline, StagePlan
from dse.runtime.taskgraph import TaskGraphRuntime, option_groups, partition_segments
from dse.zoo import build_network
from tests.models import pytorch_style_convnet, random_dag_model

CORES = sorted(os.sched_getaffinity(0))
GROUPS = [CORES[:1], CORES[-1:]]  # two single-core PEs (the same core where the host has one)


@pytest.fixture(scope="module")
def residual():
    return analyze(build_network("tiny-residual"))


@pytest.fixture(scope="module")
def detector():
    return analyze(build_network("tiny-detector"))


def _inputs(analysis, frame):
    return {name: np.random.default_rng(frame).standard_normal(shape).astype(np.float32)
            for name, shape in analysis.inputs.items()}


def _whole(analysis, frames):
    sess = ort.InferenceSession(analysis.model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return {f: dict(zip(names, sess.run(names, _inputs(analysis, f)))) for f in range(frames)}


def _runtime(analysis, layer_pe, groups=GROUPS, frames=10, warmup=2, **kw):
    segs = partition_segments(analysis, layer_pe)
    return TaskGraphRuntime(segs, groups, lambda f, slot: _inputs(analysis, f), lambda f, out: f, frames=frames,
                            warmup=warmup, keep_outputs=True, stall_s=20, **kw)


def _no_workers_left():
    deadline = time.time() + 2
    while time.time() < deadline and any(t.name.startswith(("pe-", "pre-", "post-")) for t in threading.enumerate()):
        time.sleep(0.02)
    return not any(t.name.startswith(("pe-", "pre-", "post-")) for t in threading.enumerate())


# --- segmenting ----------------------------------------------------------------------------------------------
def test_segments_are_maximal_runs_reading_any_earlier_segment(residual):
    n = len(residual.layers)
    layer_pe = [0, 0, 1, 1, 1, 0] + [(i // 2) % 2 for i in range(n - 6)]
    segs = partition_segments(residual, layer_pe)
    runs = [(s.first_layer, s.last_layer, s.pe) for s in segs]
    assert runs[:4] == [(0, 1, 0), (2, 4, 1), (5, 7, 0), (8, 9, 1)]  # layers 6-7 continue the run of layer 5
    assert [s.index for s in segs] == list(range(len(segs)))
    assert [p for s in segs for p in [s.pe] * s.n_layers] == layer_pe  # runs cover every layer, in order
    assert all(a.pe != b.pe for a, b in zip(segs, segs[1:]))  # maximal
    producer = {t: s.index for s in segs for t in s.outputs}
    later_reads = {t for s in segs for t in s.inputs}
    skips = []
    for s in segs:
        for t in s.inputs:
            assert t in residual.inputs or producer[t] < s.index
            if t in producer and producer[t] < s.index - 1:
                skips.append(t)
        assert set(s.outputs) == {t for i in range(s.first_layer, s.last_layer + 1)
                                  for t in residual.layers[i].outputs if t in later_reads or t in residual.outputs}
        assert s.network_outputs == [t for t in s.outputs if t in residual.outputs]
        assert len(s.model.graph.node) == s.n_layers
    assert skips, "the residual shortcuts make some segment read a segment before the previous one"
    assert [t for s in segs for t in s.network_outputs] == list(residual.outputs)


def test_contiguous_mapping_gives_the_stages_of_its_cuts(detector):
    cuts = (detector.feasible_cuts[2], detector.feasible_cuts[-3])
    segs = partition_segments(detector, detector.stage_of(cuts))
    stages = partition(detector, cuts)
    assert [(s.first_layer, s.last_layer, s.inputs, s.outputs) for s in segs] == \
        [(s.first_layer, s.last_layer, s.inputs, s.outputs) for s in stages]
    assert [s.pe for s in segs] == [0, 1, 2]
    assert len(partition_segments(detector, [5] * len(detector.layers))) == 1


def test_bad_mappings_name_the_value_and_the_choices(residual):
    n = len(residual.layers)
    with pytest.raises(DseError, match=f"layer_pe has {n - 1} entries; the network has {n} layers"):
        partition_segments(residual, [0] * (n - 1))
    with pytest.raises(DseError, match="layer_pe holds -1"):
        partition_segments(residual, [0] * (n - 1) + [-1])
    with pytest.raises(DseError, match="layer_pe holds 'a'"):
        partition_segments(residual, [0] * (n - 1) + ["a"])
    segs = partition_segments(residual, [0] * 10 + [2] * (n - 10))
    with pytest.raises(DseError, match=r"segment 1 \(layers 10-27\) is mapped to PE 2, which has no core group; "
                                       r"valid PE ids: 0 \(CPU\d+\), 1 \(CPU\d+\)"):
        TaskGraphRuntime(segs, GROUPS, lambda f, s: {}, lambda f, o: f, frames=1)
    with pytest.raises(DseError, match="whole list of segments"):
        TaskGraphRuntime(segs[1:], GROUPS, lambda f, s: {}, lambda f, o: f, frames=1)
    with pytest.raises(DseError, match=r"layer ranges \[\(0, 3\), \(5, 27\)\] do not cover layers 0..27"):
        extract_ranges(residual, [(0, 3), (5, 27)])
    with pytest.raises(DseError, match=r"option E of platform xavier-agx-sim: stage 0 \(GPU\) is not one CPU core"):
        option_groups(load_platform("xavier-agx-sim"), "E")
    with pytest.raises(DseError, match="valid choices"):
        option_groups(load_platform("host-cpu"), "9-9")


# --- outputs of scattered mappings ---------------------------------------------------------------------------
def _check_outputs(analysis, res, frames):
    assert res.ok, res.error
    ref = _whole(analysis, frames)
    assert sorted(res.outputs) == list(range(frames)) and res.results == {f: f for f in range(frames)}
    for f in range(frames):
        assert set(res.outputs[f]) == set(ref[f])
        for name, value in ref[f].items():
            np.testing.assert_allclose(res.outputs[f][name], value, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pattern", ["alternate", "blocks", "random"])
def test_scattered_mapping_outputs_equal_one_session(residual, pattern):
    n = len(residual.layers)
    layer_pe = {"alternate": [i % 2 for i in range(n)], "blocks": [(i // 3) % 2 for i in range(n)],
                "random": np.random.default_rng(4).integers(0, 2, n)}[pattern]  # numpy ids are fine too
    rt = _runtime(residual, layer_pe)
    res = rt.run()
    rt.close()
    _check_outputs(residual, res, 12)


def test_scattered_mapping_with_early_outputs_and_control_flow():
    """Two detector heads (one output leaves early), and an exporter-style model whose If reads an outer tensor,
    with bool/scalar tensors crossing PEs; a random DAG whose consumed tensors are also network outputs."""
    nets = [analyze(build_network("tiny-detector")), analyze(pytorch_style_convnet(), {"input": [1, 3, 16, 16]}),
            analyze(random_dag_model(3))]
    for analysis in nets:
        n = len(analysis.layers)
        for layer_pe in ([i % 2 for i in range(n)], [int(p) for p in np.random.default_rng(n).integers(0, 2, n)]):
            rt = _runtime(analysis, layer_pe, frames=4, warmup=1)
            _check_outputs(analysis, rt.run(), 5)


# --- scheduling ----------------------------------------------------------------------------------------------
class _Logged:
    """An engine that logs the calls of its segment (frames run in order, so call k is frame k)."""

    def __init__(self, engine, seg, log, lock, delay=0.0):
        self.engine, self.seg, self.log, self.lock, self.delay = engine, seg, log, lock, delay
        self.calls = 0

    def infer(self, feed):
        with self.lock:
            self.log.append(("start", self.seg, self.calls))
        time.sleep(self.delay)
        out = self.engine.infer(feed)
        with self.lock:
            self.log.append(("end", self.seg, self.calls))
            self.calls += 1
        return out

    def close(self):
        self.engine.close()


@pytest.mark.parametrize("slots", [1, 2, 3])
def test_cross_pe_tensor_has_at_most_b_frames_in_flight(detector, slots):
    """A producer runs frame k only once its cross-PE consumer finished frame k - B: with a slow consumer the
    producer is exactly B - 1 frames ahead at each start."""
    cut = detector.feasible_cuts[len(detector.feasible_cuts) // 2]
    segs = partition_segments(detector, detector.stage_of((cut,)))
    log, lock = [], threading.Lock()
    engines = [_Logged(OrtStageEngine(s.model, GROUPS[s.pe]), s.index, log, lock, delay=0.01 * s.index)
               for s in segs]
    frames = 12
    rt = TaskGraphRuntime(segs, GROUPS, lambda f, slot: _inputs(detector, f), lambda f, out: f, frames=frames,
                          slots=slots, buffers=frames, engines=engines, keep_outputs=True)
    res = rt.run()
    _check_outputs(detector, res, frames)
    ahead, consumed = [], 0
    for event, seg, k in log:
        if event == "end" and seg == 1:
            consumed = k + 1
        elif event == "start" and seg == 0:
            ahead.append(k - consumed)
    assert max(ahead) == slots - 1, ahead


def test_ready_queue_prefers_older_frames(residual):
    """PE 0 holds segments 0 and 2 around a slow segment 1 on PE 1: each time segment 1 finishes frame k, both
    segment 2 of frame k and segment 0 of frame k + B become runnable on PE 0, and frame k goes first."""
    n = len(residual.layers)
    segs = partition_segments(residual, [0] * 5 + [1] * 5 + [0] * (n - 10))
    assert [s.pe for s in segs] == [0, 1, 0]
    log, lock = [], threading.Lock()
    engines = [_Logged(OrtStageEngine(s.model, GROUPS[s.pe]), s.index, log, lock, delay=0.02 * (s.index == 1))
               for s in segs]
    rt = TaskGraphRuntime(segs, GROUPS, lambda f, slot: _inputs(residual, f), lambda f, out: f, frames=8,
                          buffers=8, engines=engines, keep_outputs=True)
    _check_outputs(residual, rt.run(), 8)
    on_pe0 = [(seg, k) for event, seg, k in log if event == "start" and seg != 1]
    assert all(on_pe0.index((2, k)) < on_pe0.index((0, k + 2)) for k in range(6)), on_pe0


# --- failures ------------------------------------------------------------------------------------------------
def test_onnx_runtime_failure_in_a_worker_stops_the_run(residual):
    n = len(residual.layers)

    def pre(f, slot):
        x = _inputs(residual, f)
        if f == 5:
            x["input"] = x["input"][:, :2]  # a wrong shape: ORT rejects it in the first segment
        return x

    segs = partition_segments(residual, [i % 2 for i in range(n)])
    rt = TaskGraphRuntime(segs, GROUPS, pre, lambda f, o: f, frames=40, stall_s=10)
    t0 = time.perf_counter()
    res = rt.run()
    assert time.perf_counter() - t0 < 8
    assert not res.ok and res.fps == 0
    assert f"PE 0 ({core_group_name(GROUPS[0])})" in res.error
    assert "segment 0 (layers 0-0) failed on frame 5" in res.error and "input" in res.error
    assert _no_workers_left()


def test_failure_on_another_pe_and_bad_inputs_are_reported(residual):
    n = len(residual.layers)
    segs = partition_segments(residual, [0] * 8 + [1] * 8 + [0] * (n - 16))
    engines = [OrtStageEngine(s.model, GROUPS[s.pe]) for s in segs]
    calls = []

    def failing(feed):
        calls.append(1)
        if len(calls) == 4:
            raise ValueError("boom in segment 1")
        return engines[1].infer(feed)

    rt = TaskGraphRuntime(segs, GROUPS, lambda f, s: _inputs(residual, f), lambda f, o: f, frames=30,
                          engines=[engines[0], FunctionEngine(failing), engines[2]], stall_s=10)
    res = rt.run()
    assert not res.ok and "PE 1" in res.error and "boom in segment 1" in res.error and "frame 3" in res.error
    res = TaskGraphRuntime(segs, GROUPS, lambda f, s: {"image": 0}, lambda f, o: f, frames=3, engines=engines).run()
    assert not res.ok and "pre-processing" in res.error and "not network input(s) ['input']" in res.error
    assert _no_workers_left()


# --- RunResult and the contiguous case -----------------------------------------------------------------------
def test_run_result_fields(residual):
    n = len(residual.layers)
    rt = _runtime(residual, [(i // 4) % 2 for i in range(n)], frames=20, warmup=3)
    res = rt.run()
    assert res.ok, res.error
    assert res.frames == 20 and res.images == 20 and res.fps > 0 and res.window_s > 0
    assert res.latency_ms_p99 >= res.latency_ms_p50 > 0
    assert set(res.util) == {core_group_name(g) for g in GROUPS} and all(0 < u <= 1 for u in res.util.values())
    assert len(res.stage_ms) == len(res.stage_util) == len(rt.segments)
    assert all(t > 0 for t in res.stage_ms) and all(0 < u <= 1 for u in res.stage_util)
    assert 0 < res.cpu_util <= 1
    assert sorted(res.results) == list(range(23))


def _contiguous_pair(analysis, option, cuts, frames, warmup):
    """(Pipeline, TaskGraphRuntime) for the same host-cpu option and cuts, buffers as the task graph's default."""
    platform = load_platform({"name": "host-cpu", "backend": "ort", "cores": CORES, "options": "auto"})
    groups = option_groups(platform, option)
    pre, post = (lambda f, slot: _inputs(analysis, f)), (lambda f, out: f)
    tg = TaskGraphRuntime(partition_segments(analysis, analysis.stage_of(cuts)), groups, pre, post, frames=frames,
                          warmup=warmup, keep_outputs=True)
    plans = [StagePlan([OrtStageEngine(st.model, groups[i])], 1) for i, st in enumerate(partition(analysis, cuts))]
    pipe = Pipeline(plans, pre, post, frames=frames, warmup=warmup, buffers=tg.buffers, keep_outputs=True)
    return pipe, tg


@pytest.mark.parametrize("option", ["E", "1-1"])
def test_contiguous_mapping_is_the_pipeline_of_its_option_and_cuts(detector, option):
    if len(CORES) != 2:
        pytest.skip("the options of a two-core host")
    cuts = () if option == "E" else (detector.feasible_cuts[len(detector.feasible_cuts) // 2],)
    pipe, tg = _contiguous_pair(detector, option, cuts, frames=10, warmup=2)
    engines = [st.engines[0] for st in pipe.stages]
    assert len(tg.engines) == len(engines) == len(cuts) + 1  # one session per stage
    for a, b in zip(tg.engines, engines):
        assert a.cores == b.cores and a.pe == b.pe
        oa, ob = a.session.get_session_options(), b.session.get_session_options()
        assert oa.intra_op_num_threads == ob.intra_op_num_threads == len(a.cores)
        assert (a.input_names, a.output_names) == (b.input_names, b.output_names)
    r1, r2 = pipe.run(), tg.run()
    _check_outputs(detector, r1, 12)
    _check_outputs(detector, r2, 12)
    for f in range(12):
        for name in r1.outputs[f]:
            np.testing.assert_array_equal(r1.outputs[f][name], r2.outputs[f][name])
    assert set(r1.util) == set(r2.util) and len(r1.stage_ms) == len(r2.stage_ms)


@pytest.mark.slow
@pytest.mark.parametrize("net", ["tiny-detector", "yolov3-tiny"])
def test_contiguous_mapping_runs_as_fast_as_the_pipeline(net):
    """FPS of the task graph and of the pipeline on the same option and cut, five interleaved rounds: the median
    ratio within a generous band (the host is shared with other work, single runs vary by 2x)."""
    if len(CORES) < 2:
        pytest.skip("needs two cores")
    analysis = analyze(build_network(net, input_size=128))
    cut = analysis.feasible_cuts[len(analysis.feasible_cuts) // 2]
    fps = {"pipe": [], "tg": []}
    for _ in range(5):
        pipe, tg = _contiguous_pair(analysis, "1-1", (cut,), frames=150, warmup=15)
        for key, runner in (("pipe", pipe), ("tg", tg)):
            res = runner.run()
            assert res.ok, res.error
            fps[key].append(res.fps)
    ratio = float(np.median(np.array(fps["tg"]) / np.array(fps["pipe"])))  # a load burst spoils one round, not five
    assert 0.6 < ratio < 1.6, fps
