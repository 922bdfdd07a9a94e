"""The shared discrete-event core (dse.des): event order and tie-breaks, the FIFO and fixed-priority servers
(preemptive or not), the trace record and the Gantt data drawn from a trace."""
import pytest

from dse.des import EventQueue, FifoServer, GanttData, PriorityServer, Span, gantt_data


class Opaque:
    """A payload that refuses comparison: ties must never reach the payloads."""

    def __lt__(self, other):
        raise AssertionError("payloads compared")

    __gt__ = __le__ = __ge__ = __lt__


def test_events_come_by_time_then_in_push_order():
    q = EventQueue()
    for t, name in ((5.0, "late"), (1.0, "a"), (3.0, "mid"), (1.0, "b"), (1.0, "c")):
        q.push(t, name, Opaque())
    assert len(q) == 5
    assert [q.pop()[2] for _ in range(5)] == ["a", "b", "c", "mid", "late"]
    assert not q


def test_pop_due_takes_one_instant_and_a_ticket_ties_as_if_pushed():
    q = EventQueue()
    q.push(2.0, "x")
    q.push(1.0, "y")
    q.push(2.0, "z")
    assert [e[2] for e in q.pop_due()] == ["y"]
    assert [e[2] for e in q.pop_due()] == ["x", "z"]
    q.push(4.0, "before")
    ticket = q.ticket()
    q.push(4.0, "after")
    head = q.heap[0]
    assert head[1] < ticket < q.pop_due()[1][1]
    assert [q.ticket(), q.ticket()] == [ticket + 2, ticket + 3]      # one counter for pushes and tickets


def test_fifo_server_runs_one_job_at_a_time_in_arrival_order():
    s = FifoServer()
    assert s.submit("a") and s.current == "a"
    assert not s.submit("b") and not s.submit("c")
    assert s.current == "a"                                           # never preempted
    assert s.finish() == "b" and s.finish() == "c"
    assert s.finish() is None and s.current is None
    assert s.submit("d")                                              # an idle server takes the next arrival


def test_priority_server_serves_the_smallest_key_without_preempting():
    s = PriorityServer()
    assert s.submit("lo", (2, 0))
    assert not s.submit("hi", (0, 1))                                 # waits although it outranks the running job
    assert not s.submit("mid", (1, 2))
    assert s.current == "lo"
    assert [s.finish(), s.finish(), s.finish()] == ["hi", "mid", None]


def test_wait_then_start_next_lets_the_smallest_key_of_an_instant_win():
    s = PriorityServer()
    s.wait((3, 0), (3, 0))                                            # an idle server is not taken by wait ...
    s.wait((1, 4), (1, 4))
    assert s.current is None
    assert s.start_next() == (1, 4)                                   # ... start_next picks among all of them
    assert s.start_next() is None                                     # busy
    s.release()
    assert s.current is None and s.start_next() == (3, 0)
    s.release()
    assert s.start_next() is None                                     # nothing waits


def test_preemptive_server_preempts_only_a_larger_key_and_resumes_it_first():
    s = PriorityServer(preemptive=True)
    assert s.submit("lo", (1, 0))
    assert s.submit("hi", (0, 1)) and s.current == "hi"              # preempts
    assert not s.submit("lo2", (1, 2))                                # same priority as the preempted: FIFO behind it
    assert not s.submit("hi2", (0, 3))                                # equal priority never preempts
    assert [s.finish(), s.finish(), s.finish(), s.finish()] == ["hi2", "lo", "lo2", None]
    assert s.key is None


def test_span_is_a_tuple_with_an_optional_task():
    s = Span("GPU stage1 ctx0", 3, 1.0, 2.5, "stage1")
    assert s.task is None and s[0] == "GPU stage1 ctx0" and s[2:4] == (1.0, 2.5)
    assert s._replace(frame=0).frame == 0 and Span("CPU0", 1, 0.0, 1.0, "app", 4).task == 4


def test_gantt_data_groups_lanes_orders_rows_and_spreads_overlaps():
    trace = [
        Span("GPU stage2 ctx0", 0, 10.0, 20.0, "stage2"),
        Span("GPU stage2 ctx1", 1, 15.0, 25.0, "stage2"),           # overlaps ctx0: a second row of the group
        Span("CPU post", 0, 20.0, 22.0, "post"),
        Span("DLA0 stage1 ctx0", 0, 2.0, 10.0, "stage1"),
        Span("CPU pre", 0, 0.0, 2.0, "pre"),
        Span("CPU pre", 1, 1.0, 3.0, "pre"),                         # two pre threads at once
        Span("CPU pre", 2, 3.0, 4.0, "pre"),                         # fits after frame 0 on the first row
        Span("CPU pre", 9, 50.0, 51.0, "pre"),                       # outside the frames shown
    ]
    data = gantt_data(trace, first_frame=0, n_frames=3)
    assert isinstance(data, GanttData)
    assert [label for label, _ in data.rows] == ["CPU pre #0", "CPU pre #1", "DLA0 stage1", "GPU stage2 #0",
                                                  "GPU stage2 #1", "CPU post"]
    rows = dict(data.rows)
    assert [s.frame for s in rows["CPU pre #0"]] == [0, 2] and [s.frame for s in rows["CPU pre #1"]] == [1]
    assert [s.lane for s in rows["GPU stage2 #1"]] == ["GPU stage2 ctx1"]
    assert (data.start, data.end) == (0.0, 25.0)
    middle = gantt_data(trace, n_frames=1)                           # default: the middle of frames 0, 1, 2, 9
    assert {s.frame for _, lane in middle.rows for s in lane} == {2}
    with pytest.raises(ValueError, match="empty schedule trace"):
        gantt_data([])


def test_the_simulators_trace_spans(tmp_path):
    """All three simulators record Spans that draw_gantt takes."""
    import numpy as np

    from dse.backends.sim.des import SimInput, StageRuntime, simulate
    from dse.report.gantt import draw_gantt

    stages = [StageRuntime(phases=[("dla", 500.0, 1.0)], stream_cores=[0, 1]),
              StageRuntime(phases=[("gpu", 300.0, 0.6), ("host", 20.0, 0.0)], stream_cores=[None, None])]
    run = simulate(SimInput(pre_us=200.0, post_us=100.0, pre_threads=2, post_threads=1, buffers=4, cpu_cores=4,
                            cpu_contention=0.0, stages=stages, n_dla=2, frames=20, warmup=4, trace=True))
    assert run.trace and all(isinstance(s, Span) for s in run.trace)
    assert {s.lane for s in run.trace} >= {"CPU pre", "CPU post", "DLA0 stage1 ctx0", "GPU stage2 ctx0"}
    assert draw_gantt(run.trace, tmp_path / "pipeline.png").stat().st_size > 1000
    assert np.all(run.latencies_us > 0)
