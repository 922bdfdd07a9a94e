"""Platform profiles load, validate, and refuse broken profiles with a clear message."""
import copy

import pytest
import yaml

from dse.errors import DseError
from dse.platform import PLATFORM_DIR, available_platforms, load_platform, platform_from_dict

THESIS_OPTIONS = {"A": "DLA0-GPU", "B": "GPU-DLA0-GPU", "C": "DLA0-DLA1-GPU", "D": "GPU-DLA0-DLA1-GPU", "E": "GPU",
                  "PND-A": "DLA(x2)-GPU", "PND-B": "GPU-DLA(x2)-GPU"}


def raw(name="xavier-agx-sim"):
    return yaml.safe_load((PLATFORM_DIR / f"{name}.yaml").read_text())


@pytest.mark.parametrize("name", ["xavier-agx-sim", "orin-agx-sim"])
def test_profiles_load_with_thesis_options(name):
    p = load_platform(name)
    assert p.backend == "sim" and p.name == name
    assert {k: o.describe() for k, o in p.options.items()} == THESIS_OPTIONS
    assert p.stage_pes(p.options["PND-A"].stages[0]) == ["DLA0", "DLA1"]
    assert p.stage_pes(p.options["E"].stages[0]) == ["GPU"]
    for d in p.dla_pes():
        assert "fp32" not in d.precisions and {"fp16", "int8"} <= set(d.precisions)
    assert p.pes["GPU"].max_freq_mhz > 0 and p.prepost.pre_us(416, 1) > 0


def test_xavier_and_orin_differ_where_the_boards_do():
    x, o = load_platform("xavier-agx-sim"), load_platform("orin-agx-sim")
    assert (x.cpu_cores, o.cpu_cores) == (8, 12)
    assert x.limits.max_dla_engines_total == 4 and o.limits.max_dla_engines_total is None
    assert o.limits.max_dla_loadables_per_core == 16
    # DLA v2 is much faster in INT8 than FP16; Xavier's DLA only about 2x
    assert o.cost.dla.peak_gmacs["int8"] / o.cost.dla.peak_gmacs["fp16"] > 4
    assert x.cost.dla.peak_gmacs["int8"] / x.cost.dla.peak_gmacs["fp16"] < 2
    assert max(x.pes["GPU"].freq_mhz) == 1377 and 1395.2 in x.pes["DLA0"].freq_mhz


def test_available_and_unknown_platform():
    assert {"xavier-agx-sim", "orin-agx-sim"} <= set(available_platforms())
    with pytest.raises(DseError, match="valid choices.*xavier-agx-sim"):
        load_platform("no-such-board")


def test_loads_from_dictconfig():
    from omegaconf import OmegaConf

    p = load_platform(OmegaConf.create(raw()))
    assert p.option("PND-B").n_stages == 3


@pytest.mark.parametrize("mutate,match", [
    (lambda d: d["options"].pop("E"), "option E"),
    (lambda d: d["pes"]["DLA0"]["precisions"].append("fp32"), "fp32"),
    (lambda d: d["options"].__setitem__("X", [{"pe_type": "DLA", "core": 7}, {"pe_type": "GPU"}]), "DLA core"),
    (lambda d: d["options"].__setitem__("Y", [{"pe_type": "NPU"}]), "pe_type"),
    (lambda d: d.pop("cost"), "cost"),
])
def test_broken_profiles_are_refused(mutate, match):
    d = copy.deepcopy(raw())
    mutate(d)
    with pytest.raises(DseError, match=match):
        platform_from_dict(d)


def test_unknown_option_lists_choices():
    with pytest.raises(DseError, match="PND-A"):
        load_platform("xavier-agx-sim").option("Z")
