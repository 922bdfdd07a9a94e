"""Report tables count only the run's own search's measurements, whatever else the run's files hold."""
import json

import pandas as pd

from dse.platform import BoardCosts, load_platform
from dse.report.tables import cost_row, unique_tuples

ROWS = [  # file, phase, strategy, option, cuts, re-run index, engine keys (a stage's engine per key, in stage order)
    ("maximize", "baseline", "Base(G)", "E", [], 0, ["g-all"]),
    ("explore-A", "option-search", "proposed", "A", [10], 0, ["d-10", "g-10"]),
    ("explore-A", "option-search", "proposed", "A", [12], 0, ["d-12", "g-12"]),
    ("search", "full-search", "proposed", "A", [12], 0, ["d-12", "g-12"]),
    ("finetune", "finetune", "proposed", "A", [12], 0, ["d-12", "g-12"]),   # other parameters: its own hash
    # another strategy re-ran the baseline's configuration; comparison methods measured their own
    ("guided", "guided", "guided", "E", [], 1, ["g-all"]),
    ("compare-random", "random/random", "Random", "A", [20], 0, ["d-20", "g-20"]),
    ("compare-exhaustive", "exhaustive/exhaustive", "Exhaustive", "B", [5, 9], 0, ["g-5", "d-5", "g-9"]),
]


def _hash(file, option, cuts):
    """Option and cuts (the full search asks for explore's A/12 again); the fine-tuner changes parameters."""
    return f"{option}{cuts}" + ("-tuned" if file == "finetune" else "")


def _run(tmp_path):
    """A run directory whose cache holds the proposed search's files beside other strategies' and methods'."""
    from dse.store import append

    for i, (file, phase, strategy, option, cuts, repeat, keys) in enumerate(ROWS):
        append(tmp_path / "cache" / f"{file}.parquet", [{
            "config_hash": _hash(file, option, cuts), "phase": phase, "strategy": strategy, "option": option,
            "cuts": cuts, "fps": 100.0, "backend": "sim", "status": "ok", "measure_s": 0.01, "build_s": 0.0,
            "repeat": repeat, "engine_keys": keys, "timestamp": pd.Timestamp(2026, 1, 1, 0, 0, i, tz="UTC")}])
    for file in ("maximize", "explore-A", "search", "finetune"):
        hashes = sorted({_hash(f, o, c) for f, _, _, o, c, _, _ in ROWS if f == file})
        (tmp_path / "cache" / f"{file}.asked.json").write_text(json.dumps(hashes))
    return tmp_path


def test_other_strategies_and_comparison_rows_do_not_count_for_the_search(tmp_path):
    from dse.workflow.phases import own_rows

    frame = own_rows(_run(tmp_path), "proposed")
    xavier = load_platform("xavier-agx-sim")
    assert set(frame["strategy"]) == {"Base(G)", "proposed"} and set(frame["repeat"]) == {0}
    assert unique_tuples(frame) == 2
    row = cost_row(frame, xavier, frames=5200, costs=BoardCosts())
    # the first row of each (configuration, re-run): A/12 once, though two phases asked for it
    assert row["Measurements"] == 4 and row["Param. points"] == 1
    # distinct engines, whichever job built them first: GPU g-all, g-10, g-12; DLA d-10, d-12
    assert (row["Engines built GPU"], row["Engines built DLA"]) == (3, 2)
    # board time: 4 x (10 s + 5200 frames / 100 FPS) + 3 GPU builds x 135 s + 2 DLA builds x 45 s
    assert row["Board hours (est.)"] == round((4 * 62.0 + 3 * 135.0 + 2 * 45.0) / 3600, 2)


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


def test_markdown_table_columns_alignment_formats_and_missing_cells():
    """Every report renders through one helper: chosen columns and order, right-aligned numbers, a format per
    column, one mark for a cell without a value, and the compact separator some pages print."""
    from dse.report.tables import markdown_table

    rows = [{"b": 1.234, "a": "x", "c": None}, {"a": "y", "b": float("nan")}]
    assert markdown_table(rows) == "| b | a | c |\n| --- | --- | --- |\n| 1.234 | x | None |\n| nan | y |  |\n"
    text = markdown_table(rows, ["a", "b", "c"], right=["b"], formats={"b": "{:.1f}"}, missing="-")
    assert text == "| a | b | c |\n| --- | ---: | --- |\n| x | 1.2 | - |\n| y | - | - |\n"
    assert markdown_table(rows, ["a"], compact=True) == "| a |\n|---|\n| x |\n| y |\n"
    assert markdown_table([]) == "(none)\n"
    assert markdown_table([], ["a", "b"], right=["b"]) == "| a | b |\n| --- | ---: |\n"    # a header without rows
