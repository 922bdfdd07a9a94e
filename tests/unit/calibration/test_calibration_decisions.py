"""Anchor splits, ranking anchors from option choices, the decisions table and the Markdown block of
``dse calibrate`` (pure logic, and one row decided end to end, slow; the 18 real decisions run in
bench/calibration_decisions.py)."""
import pytest

from dse.calibration.anchors import Anchor, assign_splits, format_table, split_summary
from dse.calibration.decisions import Decision, board_best_table, decisions_table, ranking_anchors, readme_table
from dse.commands.calibrate import BEGIN, END, write_markdown


def test_splits_alternate_within_each_group_and_are_summarised_apart():
    rows = [Anchor("g1", f"a{i}", 10.0, 10.0 + i, 9.0, 11.5) for i in range(3)] + [Anchor("g2", "b", 1.0, 2.0, 0, 1.5)]
    assign_splits(rows)
    g1 = [a.split for a in rows[:3]]
    assert sorted(g1) == ["fit", "fit", "held-out"] and rows[3].split == "fit"    # balanced within each group
    again = [Anchor(a.group, a.name, 1, 1, 0, 2) for a in reversed(rows)]
    assert [a.split for a in reversed(assign_splits(again))] == [a.split for a in rows]   # by name, not position
    held = next(a for a in rows if a.split == "held-out")
    lines = split_summary(rows)
    n_ok_fit = sum(a.ok for a in rows if a.split == "fit")
    assert lines[0].startswith(f"fit throughput anchors: {n_ok_fit} of 3 within tolerance")
    assert lines[1].startswith(f"held-out throughput anchors: {int(held.ok)} of 1")
    assert f"| g1 | {held.name} | held-out |" in format_table(rows)


def _d(net, prec, published, tuned, searched=None):
    return Decision(net, prec, published, searched or published, tuned)


def test_decision_best_match_and_ratio():
    d = _d("yolov4", "int8", "PND-A", {"E": 150.0, "PND-A": 210.0, "PND-B": 216.0})
    assert d.best == "PND-B" and not d.match
    assert d.ratio == 210.0 / 216.0
    [a] = [a for a in ranking_anchors([d]) if a.group == "Table 3.5 choice"]
    assert a.kind == "ranking" and a.ok          # within 3 %
    d.tuned["PND-A"] = 200.0
    assert not ranking_anchors([d])[0].ok       # 7 % behind


def test_jedi_y4t_fp16_ordering_anchor():
    ok = _d("yolov4-tiny", "fp16", "PND-B", {"E": 620.0, "PND-B": 600.0, "D": 610.0})
    bad = _d("yolov4-tiny", "fp16", "PND-B", {"E": 600.0, "PND-B": 693.0})
    assert [a.ok for a in ranking_anchors([ok]) if a.group == "JEDI choice"] == [True]
    assert [a.ok for a in ranking_anchors([bad]) if a.group == "JEDI choice"] == [False]


def test_the_best_option_is_judged_against_the_boards_best_search_in_int8_only():
    # Table 3.7: CSPNet INT8's three board searches answered 148, 147, 147 FPS; 15 % either side of 148 passes
    near = _d("cspnet", "int8", "PND-B", {"E": 150.0, "PND-B": 160.0})
    far = _d("cspnet", "int8", "PND-B", {"E": 166.0, "PND-A": 201.0, "PND-B": 194.0})
    fp16 = _d("cspnet", "fp16", "C", {"C": 300.0})
    [a] = [a for a in ranking_anchors([near]) if a.group == "Table 3.7 best"]
    assert a.kind == "throughput" and a.ok and a.published == 148 and a.simulated == 160.0
    assert [a.ok for a in ranking_anchors([far]) if a.group == "Table 3.7 best"] == [False]
    assert not [a for a in ranking_anchors([fp16]) if a.group == "Table 3.7 best"]
    assert "| cspnet | PND-A 201.0 | 148, 147, 147 | 1.36 |" in board_best_table([far, fp16])
    assert board_best_table([fp16]) == ""


def test_jedi_readme_ratio_anchor_judges_how_much_gpu_only_wins_or_loses_by():
    # README: Yolov4 INT8 GPU only 158, GPU + DLA 208 (0.76); the anchor allows 10 % either side of that ratio
    close = _d("yolov4", "int8", "PND-A", {"E": 150.0, "PND-A": 200.0, "PND-B": 190.0})      # 0.75
    far = _d("yolov4", "int8", "PND-A", {"E": 130.0, "PND-A": 200.0})                         # 0.65: DLA over-rated
    no_e = _d("yolov4", "int8", "PND-A", {"PND-A": 200.0})
    [a] = [a for a in ranking_anchors([close]) if a.group == "JEDI README choice"]
    assert a.kind == "ranking" and a.ok and a.published == 158 / 208 and a.simulated == 0.75
    assert [a.ok for a in ranking_anchors([far]) if a.group == "JEDI README choice"] == [False]
    assert not [a for a in ranking_anchors([no_e]) if a.group == "JEDI README choice"]
    text = readme_table([close, far, no_e])
    assert "| yolov4 | int8 | 150, 158 | PND-A 200, 208 | 0.75, 0.76 | 0.99 |" in text
    assert "within 10% of the README's in 1 of 2 rows; below it in 2" in text


def test_decisions_table_counts():
    rows = [_d("yolov4", "int8", "PND-A", {"PND-A": 213.0, "PND-B": 210.0}),
            _d("yolov2", "fp16", "PND-A", {"PND-A": 270.0, "PND-B": 296.0}, searched="PND-B"),
            _d("yolov4-tiny", "int8", "E", {"E": 822.0, "B": 803.0}, searched="B")]
    text = decisions_table(rows)
    assert "| yolov2 | fp16 | PND-B | PND-A | -8.8 % | PND-B |" in text
    assert "Same option as Table 3.5 in 2 of 3 runs" in text
    assert "within 3% of the virtual board's best in 2 of 3" in text
    assert "the search's own pick equals Table 3.5's in 1 of 3" in text
    assert "By true FPS" not in text and text.count("| - |") == 3          # no true FPS recorded
    rows[0].true = {"PND-A": 211.0, "PND-B": 212.0}     # the re-runs chose PND-A, the truth PND-B by 0.5 %
    rows[1].true = {"PND-A": 290.0, "PND-B": 280.0}
    text = decisions_table(rows)
    assert "| 213.0 | PND-B, -0.5 % |" in text and "| 296.0 | PND-A, same |" in text
    assert "By true FPS (2 rows): the same option in 1, within 3% in 2." in text


def test_true_fps_of_stored_polished_configurations(tmp_path):
    """A row decided before true FPS was recorded gets them from its stored configurations: the noise-free board's
    mean over the jitter draws, the same that ``decide`` records (``with_true`` changes nothing that has them)."""
    from dse.calibration.decisions import with_true
    from dse.calibration.truth import true_fps
    from dse.workflow.phases import search_setup

    quiet, base = search_setup("tiny-detector", "int8", tmp_path, "xavier-agx-sim", ("platform.noise.sigma=0",))[2::3]
    configs = {"E": base.with_(streams=(3,), buffers=12, pre_threads=3), "E2": base.with_(streams=(1,), buffers=2)}
    d = Decision("tiny-detector", "int8", "E", "E", {"E": 1.0, "E2": 2.0},
                 {o: c.to_dict() for o, c in configs.items()})
    got = with_true(d, overrides=("platform.noise.sigma=0.03",))
    truth = true_fps(quiet)
    assert got.true == {o: truth(c) for o, c in configs.items()} and got.true["E"] > got.true["E2"]
    assert got.best_true == "E" and got.best == "E2"          # the truth and the re-runs disagree here
    assert with_true(got) is got


def test_markdown_block_replaces_only_between_markers(tmp_path):
    page = tmp_path / "CAL.md"
    page.write_text(f"# Title\nprose\n{BEGIN}\nold table\n{END}\nmore prose\n")
    write_markdown(page, "new table")
    assert page.read_text() == f"# Title\nprose\n{BEGIN}\nnew table\n{END}\nmore prose\n"
    fresh = tmp_path / "new.md"
    write_markdown(fresh, "only")
    assert fresh.read_text() == "only\n"


def test_polish_finds_every_parameters_best_past_a_dip_and_keeps_buffers_above_the_others():
    from dse.calibration.decisions import polish
    from dse.core.configuration import Configuration

    def fps(c: Configuration) -> float:
        # a ridge the fine-tuner's +1 steps stop at: buffers 9 measures lower than 8, the peak is at 14
        b = {8: 100.0, 9: 99.0}.get(c.buffers, 100.0 + c.buffers - 8 if c.buffers <= 14 else 100.0)
        return b - abs(c.pre_threads - 3) - abs(c.post_threads - 2) - abs(c.streams[0] - 4) - abs(c.streams[1] - 1)

    start = Configuration(benchmark="n", platform="p", option="A", cuts=(5,), streams=(2, 2), buffers=8,
                          pre_threads=1, post_threads=1)
    caps = {"pre": 8, "post": 8, "buffers": 32, "s0": 8, "s1": 8}
    best = polish(fps, start, caps)
    assert (best.pre_threads, best.post_threads, best.streams, best.buffers) == (3, 2, (4, 1), 14)
    low = polish(fps, start, {**caps, "buffers": 8})
    assert low.buffers == 8 and max(low.pre_threads, low.post_threads, *low.streams) <= 8


def test_polish_with_the_space_moves_each_cut_and_follows_a_ridge_single_moves_cannot_climb():
    from dse.calibration.decisions import polish
    from dse.core.configuration import Configuration
    from dse.search.space import SearchSpace

    # layer 12 cannot be cut; the best tuple is (20, 30), along a ridge c2 - c1 = 10 that a move of one cut leaves
    space = SearchSpace(n_layers=40, feasible_cuts=list(range(39)),
                        check_cuts=lambda cuts: "layer 12" if 12 in cuts else None,
                        stage_pe_types={"PND-B": ["GPU", "DLA", "GPU"]})

    def fps(c: Configuration) -> float:
        c1, c2 = c.cuts
        return 100.0 - 2.0 * abs(c2 - c1 - 10) - 0.5 * abs(c1 - 20) - abs(c.pre_threads - 3)

    start = Configuration(benchmark="n", platform="p", option="PND-B", cuts=(5, 15), streams=(1, 1, 1), buffers=4,
                          pre_threads=1, post_threads=1)
    caps = {"pre": 4, "post": 1, "buffers": 4, "s0": 1, "s1": 1, "s2": 1}
    assert polish(fps, start, caps).cuts == (5, 15)          # without the space, the cuts stay
    best = polish(fps, start, caps, space)
    assert (best.cuts, best.pre_threads) == ((20, 30), 3)
    # one cut alone: every feasible position between its neighbours, the infeasible one skipped
    single = Configuration(benchmark="n", platform="p", option="A", cuts=(30,), streams=(1, 1), buffers=4,
                           pre_threads=3, post_threads=1)
    assert polish(lambda c: 50 - abs(c.cuts[0] - 12) - 0.1 * c.cuts[0], single, caps, space).cuts == (11,)


def test_bench_parts_merge_in_table_order_and_refuse_mixed_overrides(tmp_path):
    import json

    from bench.calibration_decisions import main
    from dse.core.errors import DseError

    def part(name, rows, overrides=()):
        path = tmp_path / name
        path.write_text(json.dumps({"platform": "xavier-agx-sim", "overrides": list(overrides), "seconds": 10.0,
                                    "rows": [d.to_dict() for d in rows]}))
        return path

    int8 = _d("yolov4-tiny", "int8", "E", {"E": 800.0, "D": 790.0})
    fp16 = _d("yolov4-tiny", "fp16", "PND-B", {"E": 600.0, "PND-B": 700.0})
    a, b = part("a.json", [int8]), part("b.json", [fp16])
    out = tmp_path / "all.json"
    assert main(["--networks", "yolov4-tiny", "--merge", str(a), str(b), "--output", str(out)]) == 0
    merged = json.loads(out.read_text())
    order = [(r["network"], r["precision"]) for r in merged["rows"]]
    assert order == [("yolov4-tiny", "fp16"), ("yolov4-tiny", "int8")]
    assert merged["seconds"] == 20.0 and merged["targets"]["same_option"]["value"] == 2
    with pytest.raises(DseError, match="different platforms or overrides"):
        other = part("c.json", [fp16], ["x=1"])
        main(["--networks", "yolov4-tiny", "--merge", str(a), str(other), "--output", str(out)])
    with pytest.raises(DseError, match="no part has the rows yolov4-tiny/fp16"):
        main(["--networks", "yolov4-tiny", "--merge", str(a), "--output", str(out)])


def test_grid_best_starts_a_second_climb_on_the_hill_the_first_one_cannot_reach():
    from dse.calibration.decisions import grid_best, polish
    from dse.core.configuration import Configuration
    from dse.search.space import SearchSpace

    space = SearchSpace(n_layers=40, feasible_cuts=list(range(39)),
                        check_cuts=lambda cuts: "layer 12" if 12 in cuts else None,
                        stage_pe_types={"PND-B": ["GPU", "DLA", "GPU"]})

    def fps(c: Configuration) -> float:     # a broad low hill at (5, 15), a narrow high one at (31, 37)
        near = 90.0 - abs(c.cuts[0] - 5) - abs(c.cuts[1] - 15)
        far = 100.0 - 5 * (abs(c.cuts[0] - 31) + abs(c.cuts[1] - 37))
        return max(near, far, 60.0)

    start = Configuration(benchmark="n", platform="p", option="PND-B", cuts=(6, 14), streams=(1, 2, 1), buffers=4,
                          pre_threads=2, post_threads=1)
    caps = {"pre": 2, "post": 1, "buffers": 4, "s0": 1, "s1": 2, "s2": 1}
    assert polish(fps, start, caps, space).cuts == (5, 15)       # the climb stays on its hill
    asked = []
    found = grid_best(lambda c: asked.append(c.cuts) or fps(c), start, space, limit=60)
    assert found.cuts == (31, 37) and (found.streams, found.pre_threads) == (start.streams, start.pre_threads)
    assert all(12 not in c and c[0] < c[1] for c in asked)     # only feasible tuples are measured
    assert len(asked) < 120 < 39 * 38 // 2                      # coarse to fine, not every tuple


@pytest.mark.slow
def test_decide_records_each_options_polished_configuration_and_its_true_fps():
    """One Table 3.5 row end to end on the virtual board (two options, ~40 s): every option decided gets a polished
    configuration, its re-measured mean and its true FPS, the one ``with_true`` gives its stored configuration."""
    import dataclasses

    from dse.calibration.decisions import decide, with_true

    d = decide("yolov2-tiny", "int8", options=["E", "PND-B"], repeats=2)
    assert set(d.tuned) == set(d.true) == set(d.configs) == {"E", "PND-B"}
    assert d.best in d.tuned and d.best_true in d.true and d.published == "E"
    again = with_true(dataclasses.replace(d, true={}))
    assert again.true == pytest.approx(d.true)
