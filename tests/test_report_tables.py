"""Report tables count only the proposed method's measurements, whatever else the run's files hold."""
import json

import pandas as pd

from dse.platform import BoardCosts
from dse.report.tables import cost_row, engines_built, proposed_rows, unique_tuples


def _frame():
    rows = [
        ("baseline", "Base(G)", "E", "", {"GPU": 1}),
        ("option-search", "proposed", "A", "10", {"GPU": 1, "DLA": 1}),
        ("option-search", "proposed", "A", "12", {"DLA": 1}),
        ("full-search", "proposed", "A", "12", {}),
        ("finetune", "proposed", "A", "12", {}),
        ("random/random", "Random", "A", "20", {"GPU": 1, "DLA": 1}),
        ("exhaustive/exhaustive", "Exhaustive", "B", "5,9", {"GPU": 2, "DLA": 1}),
    ]
    return pd.DataFrame([{"phase": p, "strategy": s, "option": o, "cuts": c, "fps": 100.0, "backend": "sim",
                          "status": "ok", "measure_s": 0.01, "build_s": 45.0 * sum(e.values()),
                          "engines_built_json": json.dumps(e)} for p, s, o, c, e in rows])


def test_comparison_rows_do_not_count_for_the_proposed_method():
    frame = proposed_rows(_frame())
    assert len(frame) == 5 and set(frame["strategy"]) == {"Base(G)", "proposed"}
    assert unique_tuples(frame) == 2
    assert engines_built(frame) == {"GPU": 2, "DLA": 2}
    row = cost_row(frame, frames=5200, costs=BoardCosts())
    assert row["Measurements"] == 5 and row["Param. points"] == 1 and row["Engines built DLA"] == 2
    # board time: 5 x (10 s + 5200 frames / 100 FPS) + the build seconds the sim charged (4 engines x 45 s)
    assert row["Board hours (est.)"] == round((5 * 62.0 + 4 * 45.0) / 3600, 2)


def test_engines_are_counted_by_their_stage_pe_type():
    """A CPU core-group stage builds a CPU engine (5 s on a board), not a GPU one (135 s); an interleaved stage
    builds a GPU and one DLA engine."""
    from dse.platform import load_platform
    from dse.report.compare import engine_types
    from dse.workflow.compare import with_baseline_options

    xavier = with_baseline_options(load_platform("xavier-agx-sim"))
    assert engine_types("PND-B", 3, xavier) == ["GPU", "DLA", "GPU"]
    assert engine_types("IL", 2, xavier) == ["GPU", "DLA"]
    host = load_platform("host-cpu")
    assert set(engine_types("E", 1, host)) == {"CPU"}
