"""Report tables count only the proposed method's measurements, whatever else the run's files hold."""
import pandas as pd

from dse.platform import BoardCosts, load_platform
from dse.report.tables import cost_row, proposed_rows, unique_tuples


def _frame():
    rows = [  # phase, strategy, option, cuts, engine keys (a stage's engine per key, in stage order)
        ("baseline", "Base(G)", "E", [], ["g-all"]),
        ("option-search", "proposed", "A", [10], ["d-10", "g-10"]),
        ("option-search", "proposed", "A", [12], ["d-12", "g-12"]),
        ("full-search", "proposed", "A", [12], ["d-12", "g-12"]),
        ("finetune", "proposed", "A", [12], ["d-12", "g-12"]),
        ("random/random", "Random", "A", [20], ["d-20", "g-20"]),
        ("exhaustive/exhaustive", "Exhaustive", "B", [5, 9], ["g-5", "d-5", "g-9"]),
    ]
    return pd.DataFrame([{"phase": p, "strategy": s, "option": o, "cuts": c, "fps": 100.0, "backend": "sim",
                          "status": "ok", "measure_s": 0.01, "build_s": 0.0, "engine_keys": k}
                         for p, s, o, c, k in rows])


def test_comparison_rows_do_not_count_for_the_proposed_method():
    frame = proposed_rows(_frame())
    xavier = load_platform("xavier-agx-sim")
    assert len(frame) == 5 and set(frame["strategy"]) == {"Base(G)", "proposed"}
    assert unique_tuples(frame) == 2
    row = cost_row(frame, xavier, frames=5200, costs=BoardCosts())
    assert row["Measurements"] == 5 and row["Param. points"] == 1
    # distinct engines, whichever job built them first: GPU g-all, g-10, g-12; DLA d-10, d-12
    assert (row["Engines built GPU"], row["Engines built DLA"]) == (3, 2)
    # board time: 5 x (10 s + 5200 frames / 100 FPS) + 3 GPU builds x 135 s + 2 DLA builds x 45 s
    assert row["Board hours (est.)"] == round((5 * 62.0 + 3 * 135.0 + 2 * 45.0) / 3600, 2)


def test_engines_are_counted_by_their_stage_pe_type():
    """A CPU core-group stage builds a CPU engine (5 s on a board), not a GPU one (135 s); an interleaved stage
    builds a GPU and one DLA engine."""
    from dse.report.tables import engine_types
    from dse.workflow.compare import with_baseline_options

    xavier = with_baseline_options(load_platform("xavier-agx-sim"))
    assert engine_types("PND-B", 3, xavier) == ["GPU", "DLA", "GPU"]
    assert engine_types("IL", 2, xavier) == ["GPU", "DLA"]
    host = load_platform("host-cpu")
    assert set(engine_types("E", 1, host)) == {"CPU"}
