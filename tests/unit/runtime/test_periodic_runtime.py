"""Periodic multi-app runs on core groups (``dse.runtime.periodic``): the retiming and the job rule, one app
alone, fixed priorities with one segment of blocking, an overloaded app, the retimed data flow (equal to one ORT
session; late producers make consumers wait), failures and bad input. Real ONNX Runtime on the zoo's tiny
networks; timing assertions are orderings and loose bounds only (this VM drifts by several percent)."""
from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

import numpy as np
import onnxruntime as ort
import pytest

from dse.core.errors import DseError
from dse.graph.analysis import analyze
from dse.graph.partition import extract_ranges
from dse.runtime.engine import FunctionEngine
from dse.runtime.periodic import (PeriodicNet, PeriodicRunResult, PeriodicRuntime, SegmentRun, pipeline_depths,
                                  run_periodic, segment_times, stage_iteration)
from dse.runtime.taskgraph import Segment, partition_segments
from dse.zoo import build_network

CORES = sorted(os.sched_getaffinity(0))
ONE = [CORES[:1]]
TWO = [CORES[:1], CORES[-1:]]          # two single-core groups (the same core where the host has one)


@pytest.fixture(scope="module")
def residual():
    return analyze(build_network("tiny-residual"))


@pytest.fixture(scope="module")
def big_residual():
    return analyze(build_network("tiny-residual", input_size=160))  # about 3 ms a run


@pytest.fixture(scope="module")
def bigger_residual():
    return analyze(build_network("tiny-residual", input_size=224))  # about 6 ms a run


@pytest.fixture(scope="module")
def chain():
    return analyze(build_network("tiny-chain", input_size=192))     # about 0.7 ms a run


def feed_of(analysis, seed=0):
    return {n: np.random.default_rng(seed).standard_normal(s).astype(np.float32) for n, s in analysis.inputs.items()}


def ranges_on_one_pe(analysis, bounds):
    """Consecutive segments all on PE 0 (partition_segments would merge them): a stage of several segments."""
    outs = set(analysis.outputs)
    return [Segment(**vars(s), pe=0, network_outputs=[t for t in s.outputs if t in outs])
            for s in extract_ranges(analysis, bounds, label="segment")]


def thirds(analysis):
    n = len(analysis.layers)
    return ranges_on_one_pe(analysis, [(0, n // 3 - 1), (n // 3, 2 * n // 3 - 1), (2 * n // 3, n - 1)])


def seg(index, pe, inputs, outputs):
    return SimpleNamespace(index=index, pe=pe, inputs=inputs, outputs=outputs)


def no_workers_left():
    deadline = time.time() + 2
    while time.time() < deadline and any(t.name.startswith("periodic-") for t in threading.enumerate()):
        time.sleep(0.01)
    return not any(t.name.startswith("periodic-") for t in threading.enumerate())


# --- the pure rules ------------------------------------------------------------------------------------------
def test_pipeline_depths_and_the_job_rule():
    assert pipeline_depths([seg(0, 0, ["x"], ["a"]), seg(1, 0, ["a"], ["b"]), seg(2, 0, ["b", "x"], ["y"])]) \
        == [0, 0, 0]
    assert pipeline_depths([seg(0, 0, ["x"], ["a"]), seg(1, 1, ["a"], ["b"]), seg(2, 0, ["b"], ["c"])]) == [0, 1, 2]
    # a branch: 1 and 2 read 0; 3 joins them on 1's PE, where 2's cross-PE edge decides
    branch = [seg(0, 0, ["x"], ["a"]), seg(1, 1, ["a"], ["b"]), seg(2, 0, ["a"], ["c"]), seg(3, 1, ["b", "c"], ["y"])]
    assert pipeline_depths(branch) == [0, 1, 0, 1]
    # a same-PE read of a deeper segment inherits its depth; a segment reading only network inputs has none
    skip = [seg(0, 0, ["x"], ["a"]), seg(1, 1, ["a"], ["b"]), seg(2, 0, ["a", "b"], ["c"]), seg(3, 0, ["c"], ["d"]),
            seg(4, 1, ["x"], ["e"])]
    assert pipeline_depths(skip) == [0, 1, 2, 2, 0]
    assert [stage_iteration(k, 2, 3) for k in range(6)] == [None, None, 0, 1, 2, None]
    assert [stage_iteration(k, 0, 2) for k in range(3)] == [0, 1, None]



def test_service_times_start_when_a_segment_could_start():
    """Service time: finish minus the later of the job's release and the PE's previous finish."""
    runs = [SegmentRun("a", 0, 0, 0, 0.0, 0.0002, 0.003),    # the PE was idle: from its release, 3 ms
            SegmentRun("b", 0, 0, 0, 0.001, 0.0031, 0.004),  # released during a's run: from a's finish, 1 ms
            SegmentRun("a", 1, 0, 1, 0.003, 0.0035, 0.005),  # PE 1: from its release, 2 ms
            SegmentRun("a", 0, 1, 0, 0.010, 0.0101, 0.012)]  # from its release, 2 ms
    res = PeriodicRunResult([], {}, segment_runs=runs)
    assert res.service_times_s("a", 2) == [pytest.approx([0.003, 0.002]), pytest.approx([0.002])]
    assert res.service_times_s("b", 1) == [pytest.approx([0.001])]


# --- timing: one app, priorities, overload -------------------------------------------------------------------
def test_one_app_alone_meets_its_period(big_residual):
    segs = thirds(big_residual)
    feed = feed_of(big_residual)
    times = segment_times(segs, ONE, feed, repeats=10, warmup=2)
    assert [len(t) for t in times] == [10, 10, 10] and all(x > 0 for t in times for x in t)
    c_med, c_max = sum(float(np.median(t)) for t in times), sum(max(t) for t in times)
    period = max(5 * c_max, 0.02)
    res = run_periodic([PeriodicNet("res", segs, period, 3, feed)], ONE, iterations=10)
    app = res.apps["res"]
    assert app.misses == 0 and app.jobs == 10 == len(app.response_s)
    assert 0.5 * c_med < app.worst_response_s < min(period, 2 * c_max + 0.003)  # about the segment sum
    assert [(j.pe, j.k, j.segments_run) for j in res.jobs] == [(0, k, 3) for k in range(10)]
    assert all(j.release_s == pytest.approx(k * period) for k, j in enumerate(res.jobs))
    assert all(j.release_s <= j.start_s < j.finish_s and not j.waited_for_data for j in res.jobs)
    assert app.latency_s == app.response_s        # one stage, depth 0: an iteration is a job
    assert res.worst_response_s("res") == app.worst_response_s and res.misses("res") == 0
    frame = res.to_frame()
    assert len(frame) == 10 and {"app", "pe", "k", "release_s", "start_s", "finish_s", "waited_for_data",
                                 "response_s"} <= set(frame.columns)
    # every segment run timed once per iteration, inside its job
    assert sorted((r.segment, r.iteration) for r in res.segment_runs) == [(i, k) for i in range(3) for k in range(10)]
    job = {j.k: j for j in res.jobs}
    assert all(job[r.iteration].start_s <= r.start_s < r.finish_s <= job[r.iteration].finish_s
               for r in res.segment_runs)
    service = res.service_times_s("res", 3)
    assert [len(t) for t in service] == [10, 10, 10]
    runs = sum(r.finish_s - r.start_s for r in res.segment_runs)
    assert runs <= sum(map(sum, service)) <= sum(j.finish_s - j.release_s for j in res.jobs) + 1e-9


def test_a_runtime_runs_again_from_scratch():
    """The multiapp host check calibrates and checks on one runtime (the same sessions): a second run() starts
    over, with its own releases, jobs and segment runs."""
    segs = [seg(0, 0, ["x"], ["y"])]
    engine = FunctionEngine(lambda f: {"y": f["x"] + 1})
    with PeriodicRuntime([PeriodicNet("a", segs, 0.005, 0, {"x": np.zeros(1, np.float32)})], ONE, 3,
                         engines=[[engine]], warmup=0) as runtime:
        first, second = runtime.run(), runtime.run()
    for res in (first, second):
        assert [(j.k, j.segments_run) for j in res.jobs] == [(0, 1), (1, 1), (2, 1)]
        assert [r.iteration for r in res.segment_runs] == [0, 1, 2]
        assert res.jobs[0].release_s == 0.0


def test_segment_times_idle_before_each_timed_run():
    """``idle_s``: every timed run follows a sleep that long (a periodic run's segments start after idling)."""
    calls = []
    engine = FunctionEngine(lambda f: calls.append(time.perf_counter()) or {"y": f["x"]})
    times = segment_times([seg(0, 0, ["x"], ["y"])], ONE, {"x": np.zeros(1, np.float32)}, repeats=4, warmup=1,
                          idle_s=0.01, engines=[engine])
    assert len(times[0]) == 4
    timed = calls[-4:]                   # the feed pass and the warm-up run come first, back to back
    assert all(b - a >= 0.01 for a, b in zip(timed, timed[1:]))


def test_high_priority_waits_for_at_most_one_low_priority_segment(bigger_residual, chain):
    """lo (three segments) is released first; hi comes in halfway through lo's first segment, waits for it
    (non-preemptive) and then runs before lo's other two. lo runs about ten times as long as hi, so a burst of
    VM noise in one hi job does not reverse the order."""
    lo_segs, hi_segs = thirds(bigger_residual), partition_segments(chain, [0] * len(chain.layers))
    lo_feed, hi_feed = feed_of(bigger_residual), feed_of(chain)
    lo_t = segment_times(lo_segs, ONE, lo_feed, repeats=10)
    hi_t = segment_times(PeriodicNet("hi", hi_segs, 1.0, 0, hi_feed), ONE, repeats=10)
    c_lo, c_hi = sum(max(t) for t in lo_t), sum(max(t) for t in hi_t)
    period = 4 * (c_lo + c_hi) + 0.004
    lo = PeriodicNet("lo", lo_segs, period, 5, lo_feed)
    hi = PeriodicNet("hi", hi_segs, period, 1, hi_feed, phase_s=0.5 * float(np.median(lo_t[0])))
    res = run_periodic([lo, hi], ONE, iterations=15)
    assert res.apps["hi"].jobs == res.apps["lo"].jobs == 15
    assert res.misses("hi") == res.misses("lo") == 0
    # at most one lo segment runs between a hi release and hi's start (read from the run's segment runs, not from
    # times: timed back to back, segments run slower in a periodic run, more so beside other tests)
    lo_runs = [r for r in res.segment_runs if r.app == "lo"]
    for j in (j for j in res.jobs if j.app == "hi"):
        assert sum(j.release_s < r.finish_s and r.start_s < j.start_s for r in lo_runs) <= 1
    assert res.worst_response_s("lo") > res.worst_response_s("hi")
    assert np.median(res.responses_s("lo")) > np.median(res.responses_s("hi"))
    assert all(j.release_s == pytest.approx(hi.phase_s + j.k * period) for j in res.jobs if j.app == "hi")


def test_an_overloaded_app_misses_every_deadline(chain):
    segs = partition_segments(chain, [0] * len(chain.layers))
    feed = feed_of(chain)
    c = float(np.median(segment_times(segs, ONE, feed, repeats=5)[0]))
    res = run_periodic([PeriodicNet("late", segs, c / 3, 0, feed)], ONE, iterations=6)
    app = res.apps["late"]
    assert app.jobs == 6 and app.misses > 0
    assert app.response_s[-1] > app.response_s[0]   # the backlog grows by about 2/3 of a run per period


# --- data flow -----------------------------------------------------------------------------------------------
def test_ping_pong_on_two_groups_computes_what_one_session_does(residual):
    n = len(residual.layers)
    segs = partition_segments(residual, [(i // 3) % 2 for i in range(n)])
    assert {s.pe for s in segs} == {0, 1} and len(segs) > 3
    feed = feed_of(residual, seed=3)
    period, iterations = 0.02, 4
    depths = pipeline_depths(segs)
    res = run_periodic([PeriodicNet("res", segs, period, 0, feed)], TWO, iterations=iterations, keep_outputs=True)
    sess = ort.InferenceSession(residual.model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))
    outputs = res.outputs["res"]
    assert len(outputs) == iterations
    for got in outputs:
        assert set(got) == set(want)
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-5)
    jobs = iterations + max(depths)
    assert sorted((j.pe, j.k) for j in res.jobs) == [(pe, k) for pe in (0, 1) for k in range(jobs)]
    assert sum(j.segments_run for j in res.jobs) == iterations * len(segs)
    for j in res.jobs:
        ran = [s for s in segs if s.pe == j.pe and stage_iteration(j.k, depths[s.index], iterations) is not None]
        assert j.segments_run == len(ran)
        assert (j.release_s <= j.start_s <= j.finish_s) if ran else np.isnan(j.start_s)
    # the deepest segment of iteration n runs in job n + max depth: released max depth periods later
    assert all(lat >= max(depths) * period for lat in res.latency_s["res"])


def test_a_late_producer_makes_its_consumer_wait():
    """Segment 0 (PE 0) takes two periods, so segment 1 (PE 1) finds its input missing at each release and waits;
    it still computes every iteration, from the right one."""
    period = 0.02
    segs = [seg(0, 0, ["x"], ["a"]), seg(1, 1, ["a"], ["y"])]
    slow = FunctionEngine(lambda f: (time.sleep(2 * period), {"a": f["x"] + 1})[1])
    seen = []
    fast = FunctionEngine(lambda f: seen.append(float(f["a"][0])) or {"y": f["a"] * 2})
    counter = {"n": 0}

    def source(f):  # a different value each iteration: iteration n reads x = n
        counter["n"] += 1
        return slow.infer({"x": f["x"] + counter["n"] - 1})

    res = run_periodic([PeriodicNet("a", segs, period, 0, {"x": np.zeros(1, np.float32)})], TWO, iterations=4,
                       engines=[[FunctionEngine(source), fast]], warmup=0)
    assert seen == [1.0, 2.0, 3.0, 4.0]
    pe0 = {j.k: j for j in res.jobs if j.pe == 0}
    pe1 = {j.k: j for j in res.jobs if j.pe == 1}
    assert sorted(pe0) == sorted(pe1) == list(range(5))
    assert not any(j.waited_for_data for j in pe0.values())
    assert all(pe1[k].waited_for_data and pe1[k].start_s >= pe0[k - 1].finish_s for k in range(1, 5))
    assert res.apps["a"].misses > 0   # PE 0's backlog


# --- failures and bad input ----------------------------------------------------------------------------------
def test_a_failing_segment_stops_the_run_and_names_app_segment_and_iteration():
    calls = {"n": 0}

    def third_fails(f):
        calls["n"] += 1
        if calls["n"] == 3:
            raise ValueError("boom")
        return {"y": f["a"]}

    segs = [seg(0, 0, ["x"], ["a"]), seg(1, 0, ["a"], ["y"])]
    engines = [[FunctionEngine(lambda f: {"a": f["x"]}), FunctionEngine(third_fails)]]
    with pytest.raises(DseError, match=r"app a segment 1 on PE 0 failed on iteration 2 \(job 2\): ValueError: boom"):
        run_periodic([PeriodicNet("a", segs, 0.005, 0, {"x": np.zeros(1)})], ONE, 20, engines=engines, warmup=0)
    assert no_workers_left()
    gate = threading.Event()
    hung = [[FunctionEngine(lambda f: gate.wait(5) and {"a": f["x"]}), FunctionEngine(lambda f: {"y": f["a"]})]]
    try:
        with pytest.raises(DseError, match=r"did not end within timeout_s = 0.2 s; unfinished: a on PE 0 at job 0"):
            run_periodic([PeriodicNet("a", segs, 0.01, 0, {"x": np.zeros(1)})], ONE, 2, engines=hung, warmup=0,
                         timeout_s=0.2)
    finally:
        gate.set()
    assert no_workers_left()


def test_bad_input_is_refused(residual):
    segs = partition_segments(residual, [0] * len(residual.layers))
    feed = feed_of(residual)
    engines = [[FunctionEngine(lambda f: f)]] * 2

    def build(*nets, groups=ONE, iterations=2):
        PeriodicRuntime(list(nets), groups, iterations, engines=engines[:len(nets)], warmup=0)

    with pytest.raises(DseError, match="app priorities must be distinct: a and b both have priority 3"):
        build(PeriodicNet("a", segs, 0.1, 3, feed), PeriodicNet("b", segs, 0.1, 3, feed))
    for period in (0, -0.5, float("nan")):
        with pytest.raises(DseError, match=rf"app a: period_s must be a number > 0, got {period}"):
            build(PeriodicNet("a", segs, period, 0, feed))
    for iterations in (0, -1, 1.5, [2, 0]):
        with pytest.raises(DseError, match=r"iterations must be an integer >= 1 \(or one per app\)"):
            build(PeriodicNet("a", segs, 0.1, 0, feed), PeriodicNet("b", segs, 0.1, 1, feed), iterations=iterations)
    with pytest.raises(DseError, match=r"got 0 for app b"):
        build(PeriodicNet("a", segs, 0.1, 0, feed), PeriodicNet("b", segs, 0.1, 1, feed), iterations=[2, 0])
    two_pe = partition_segments(residual, [0] * 10 + [1] * (len(residual.layers) - 10))
    with pytest.raises(DseError, match=r"app a: segment 1 \(layers 10-27\) is mapped to PE 1, which has no core "
                                       r"group; valid PE ids: 0 \(CPU\d+\)"):
        PeriodicRuntime([PeriodicNet("a", two_pe, 0.1, 0, feed)], ONE, 2, warmup=0)
    with pytest.raises(DseError, match="valid PE ids: none"):
        build(PeriodicNet("a", segs, 0.1, 0, feed), groups=[()])
    with pytest.raises(DseError, match=r"lacks network input\(s\) \['input'\]"):
        build(PeriodicNet("a", segs, 0.1, 0, {}))
    with pytest.raises(DseError, match="priority must be an integer"):
        build(PeriodicNet("a", segs, 0.1, "high", feed))
    with pytest.raises(DseError, match="phase_s must be a number >= 0, got -1"):
        build(PeriodicNet("a", segs, 0.1, 0, feed, phase_s=-1))
    with pytest.raises(DseError, match="whole list of segments"):
        build(PeriodicNet("a", two_pe[1:], 0.1, 0, feed))
    with pytest.raises(DseError, match="repeats must be an integer >= 1, got 0"):
        segment_times(segs, ONE, feed, repeats=0)
    with pytest.raises(DseError, match="idle_s must be a number >= 0, got -0.1"):
        segment_times(segs, ONE, feed, idle_s=-0.1)
