"""``dse calibrate --fit``: the loss sees only the fit half, the optimizer finds a known optimum within its bounds,
bad parameter paths and ``--set`` values are refused with the valid choices."""
import math

import pytest

from dse.calibration.anchors import Anchor
from dse.calibration.fit import anchor_loss, fit, fit_table, get_path
from dse.commands.calibrate import platform_profile
from dse.core.errors import DseError


def _anchor(name, published, simulated, split, kind="throughput", lo=None, hi=None):
    a = Anchor("g", name, published, simulated, lo if lo is not None else published * 0.8,
               hi if hi is not None else published * 1.2, kind=kind)
    a.split = split
    return a


def test_loss_uses_the_fit_half_only_and_ranking_anchors_only_outside_their_interval():
    rows = [_anchor("a", 10.0, 11.0, "fit"), _anchor("b", 10.0, 50.0, "held-out"),
            _anchor("r", 1.0, 1.4, "fit", kind="ranking", lo=1.0, hi=99.0)]
    assert anchor_loss(rows) == pytest.approx(math.log(1.1) ** 2 / 2)     # the held-out miss does not count
    rows[2].simulated = 0.5                                                 # the ranking anchor now fails
    assert anchor_loss(rows) == pytest.approx((math.log(1.1) ** 2 + math.log(2.0) ** 2) / 2)
    with pytest.raises(DseError, match="no fit-split anchors"):
        anchor_loss([_anchor("b", 10.0, 11.0, "held-out")])


def _toy(d):
    """Two anchors that want rate = 3 and overhead = 0.5 (fit half), one held-out anchor that wants rate = 9."""
    rate, over = d["cost"]["rate"], d["cost"]["overhead"]
    return [_anchor("fps", 100.0, 100.0 * rate / 3.0, "fit"), _anchor("lat", 2.0, 1.0 + 2 * over, "fit"),
            _anchor("other", 9.0, rate, "held-out")]


def test_fit_reaches_the_optimum_of_the_fit_half_within_bounds():
    profile = {"cost": {"rate": 2.0, "overhead": 1.0}, "name": "toy"}
    r = fit(profile, _toy, ["cost.rate", "cost.overhead"], max_evaluations=200)
    assert r.fitted[0] == pytest.approx(3.0, rel=0.02)           # not pulled towards the held-out anchor's 9
    assert r.fitted[1] == pytest.approx(0.5, rel=0.02)
    assert r.loss_fitted < 1e-4 < r.loss_start
    assert profile["cost"]["rate"] == 2.0                         # the caller's profile is not changed
    assert r.overrides()[0].startswith("platform.cost.rate=3")
    assert "| cost.rate | 2.0 | 3" in fit_table(r)
    bounded = fit(profile, _toy, ["cost.rate"], bounds=(0.5, 1.2), max_evaluations=60)
    assert bounded.fitted[0] == pytest.approx(2.4, rel=0.01)      # stops at the bound


def test_bad_fit_parameters_name_the_valid_keys():
    profile = {"cost": {"gpu": {"peak_gmacs": {"fp16": 5600}}, "tag": "x"}}
    assert get_path(profile, "cost.gpu.peak_gmacs.fp16") == 5600.0
    with pytest.raises(DseError, match=r"no key 'gpuu' in cost \(valid: gpu, tag\)"):
        get_path(profile, "cost.gpuu.peak_gmacs")
    with pytest.raises(DseError, match="only positive numbers"):
        get_path(profile, "cost.tag")
    with pytest.raises(DseError, match="at least 1"):
        fit(profile, lambda d: [], ["cost.gpu.peak_gmacs.fp16"], max_evaluations=0)
    with pytest.raises(DseError, match="bounds"):
        fit(profile, lambda d: [], ["cost.gpu.peak_gmacs.fp16"], bounds=(1.5, 2.0))


def test_set_changes_the_composed_profile_and_refuses_unknown_paths():
    d = platform_profile("xavier-agx-sim", ["cost.gpu.peak_gmacs.fp16=6000", "cost.handover_us=100"])
    assert d["cost"]["gpu"]["peak_gmacs"]["fp16"] == 6000 and d["cost"]["handover_us"] == 100
    with pytest.raises(DseError, match="peak_gmacs"):
        platform_profile("xavier-agx-sim", ["cost.gpu.peak_gmac.fp16=1"])
    with pytest.raises(DseError, match="expected PATH=VALUE"):
        platform_profile("xavier-agx-sim", ["cost.handover_us"])
    with pytest.raises(DseError, match="xavier-agx-sim"):
        platform_profile("xavier", [])
    # a leading + adds a key the profile lacks (without it Hydra refuses the unknown key)
    d = platform_profile("xavier-agx-sim", ["+cost.dla.channel_atom_by_precision.int8=32",
                                            "platform.cost.handover_us=90"])
    assert d["cost"]["dla"]["channel_atom_by_precision"] == {"int8": 32} and d["cost"]["handover_us"] == 90
    with pytest.raises(DseError, match="channel_atom_by_precision"):
        platform_profile("xavier-agx-sim", ["cost.dla.channel_atom_by_precision.int8=32"])


def test_tied_paths_move_by_one_multiplier_and_each_keeps_its_own_value():
    profile = {"cost": {"rate": 2.0, "copy": 4.0, "overhead": 1.0}}
    r = fit(profile, _toy, ["cost.rate+cost.copy", "cost.overhead"], max_evaluations=200)
    assert r.fitted[0] == pytest.approx(3.0, rel=0.02)                  # the first path is the parameter's value
    values = dict(r.values())
    assert values["cost.copy"] == pytest.approx(2 * values["cost.rate"])  # the tied path keeps its ratio
    assert [o.split("=")[0] for o in r.overrides()] == ["platform.cost.rate", "platform.cost.copy",
                                                         "platform.cost.overhead"]
    applied = {"cost": dict(profile["cost"])}
    r.apply(applied)
    assert applied["cost"]["copy"] == pytest.approx(6.0, rel=0.02) and profile["cost"]["copy"] == 4.0
    assert "| cost.rate (+ 1 tied: cost.copy) |" in fit_table(r)
    with pytest.raises(DseError, match="no key 'nope'"):
        fit(profile, _toy, ["cost.rate+cost.nope"])


@pytest.mark.slow
def test_tx2_is_calibrated_against_table_2_and_other_boards_are_refused(capsys):
    from dse.calibration.anchor_sets import anchor_set
    from dse.cli import main
    from dse.calibration.tx2 import compare, table2_anchors
    from dse.platform import load_platform

    platform = load_platform("tx2-sim")
    rows, anchors = compare(platform), table2_anchors(platform)
    assert len(anchors) == 2 * len(rows) == 54
    assert sum(a.ok for a in anchors) == sum(int(r["fps_ok"]) + int(r["energy_ok"]) for r in rows)
    for group in {a.group for a in anchors}:                 # each network x quantity has both halves
        assert {a.split for a in anchors if a.group == group} == {"fit", "held-out"}
    assert anchor_set("tx2-sim", platform_profile("tx2-sim", [])).board_model == "jetson-tx2"
    with pytest.raises(DseError, match=r"orin-agx-sim \(board_model jetson-agx-orin-64gb\) has no published "
                                       r"anchors.*platforms with anchors: .*tx2-sim.*xavier-agx-sim"):
        anchor_set("orin-agx-sim", platform_profile("orin-agx-sim", []))

    assert main(["calibrate", "--platform", "tx2-sim", "--fit", "clocked.host.frame_us", "--fit-evaluations",
                 "4"]) == 0
    out = capsys.readouterr().out
    assert "seed 001 Table 2" in out and "held-out throughput anchors" in out
    assert "platform.clocked.host.frame_us=" in out
    assert main(["calibrate", "--platform", "tx2-sim", "--decisions"]) == 2
    assert "Table 3.5 option choices are Xavier AGX figures" in capsys.readouterr().err
