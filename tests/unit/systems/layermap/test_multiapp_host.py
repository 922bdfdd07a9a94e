"""The host check's segment WCETs (``dse.systems.layermap.multiapp_host.calibrated``): the longest of the timed
one and the calibration runs' service times (runs with their dispatch delays)."""
from __future__ import annotations

import pytest

from dse.rt.schedule_based import MappedApp
from dse.runtime.periodic import PeriodicRunResult, SegmentRun
from dse.systems.layermap.multiapp_host import calibrated


def test_calibration_runs_raise_each_wcet_to_its_longest_service_time():
    app = MappedApp("a", 10_000.0, 0, (0, 1, 0), (1000.0, 500.0, 300.0), ((), (0,), (1,)))
    first = [SegmentRun("a", 0, 0, 0, 0.0, 0.0001, 0.0012),         # segment 0: 1.2 ms from release (timed 1.0)
             SegmentRun("other", 0, 0, 0, 0.0, 0.00125, 0.0050),    # another app's segment 0: not a's
             SegmentRun("a", 2, 0, 0, 0.0, 0.0051, 0.0053)]         # segment 2: 0.3 ms after other's finish
    second = [SegmentRun("a", 0, 1, 0, 0.0, 0.0, 0.0011),           # segment 0 again, 1.1 ms
              SegmentRun("a", 1, 0, 1, 0.0, 0.0001, 0.0005),        # segment 1: 0.5 ms from release (timed 0.5)
              SegmentRun("a", 2, 1, 0, 0.0011, 0.0013, 0.0015)]     # segment 2: 0.4 ms after segment 0's finish
    got = calibrated(app, [PeriodicRunResult([], {}, segment_runs=r) for r in (first, second)])
    assert got.time_us == pytest.approx((1200.0, 500.0, 400.0))
    assert (got.name, got.pe, got.preds, got.period_us) == (app.name, app.pe, app.preds, app.period_us)
    assert calibrated(app, []).time_us == app.time_us
