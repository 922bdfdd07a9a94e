"""Platform profiles load, validate, and refuse broken profiles with a clear message."""
import copy

import pytest
import yaml

from dse.core.errors import DseError
from dse.config import config_dir, group_choices
from dse.platform import load_platform, platform_from_dict

THESIS_OPTIONS = {"A": "DLA0-GPU", "B": "GPU-DLA0-GPU", "C": "DLA0-DLA1-GPU", "D": "GPU-DLA0-DLA1-GPU", "E": "GPU",
                  "PND-A": "DLA(x2)-GPU", "PND-B": "GPU-DLA(x2)-GPU"}


def raw(name="xavier-agx-sim"):
    return yaml.safe_load((config_dir() / "platform" / f"{name}.yaml").read_text())


@pytest.mark.parametrize("name", ["xavier-agx-sim", "orin-agx-sim"])
def test_profiles_load_with_thesis_options(name):
    p = load_platform(name)
    assert p.backend == "sim" and p.name == name
    assert {k: o.describe() for k, o in p.options.items()} == THESIS_OPTIONS
    assert p.options["PND-A"].stages[0].pes == ("DLA0", "DLA1") and p.options["PND-A"].kinds() == ["PND", "GPU"]
    assert p.options["E"].stages[0].pes == ("GPU",) and p.main_kind == "GPU"
    for d in p.dla_pes():
        assert "fp32" not in d.precisions and {"fp16", "int8"} <= set(d.precisions)
    assert p.pes["GPU"].max_freq_mhz > 0 and p.prepost.pre_us(416, 1) > 0


def test_xavier_and_orin_differ_where_the_boards_do():
    x, o = load_platform("xavier-agx-sim"), load_platform("orin-agx-sim")
    assert (x.cpu_cores, o.cpu_cores) == (8, 12)
    assert x.limits.max_dla_engines_total == 4 and o.limits.max_dla_engines_total is None
    assert o.limits.max_dla_loadables_per_core == 16
    # NVIDIA: 105 sparse INT8 TOPS for both Orin DLAs at MAXN = 26.25 dense TOPS = 13,125 GMAC/s per core
    assert o.cost.dla.peak_gmacs["int8"] == pytest.approx(105e3 / 2 / 2 / 2)
    # DLA v2 is much faster in INT8 than FP16; Xavier's DLA only about 2x
    assert o.cost.dla.peak_gmacs["int8"] / o.cost.dla.peak_gmacs["fp16"] > 4
    assert x.cost.dla.peak_gmacs["int8"] / x.cost.dla.peak_gmacs["fp16"] < 2
    assert max(x.pes["GPU"].freq_mhz) == 1377 and 1395.2 in x.pes["DLA0"].freq_mhz


def test_xavier_post_processing_passes_through_its_two_board_figures():
    """Fig. 3.12: Yolov4's post-processing (10,647 candidate boxes) takes 2,207 us on one thread. Tables 3.5/3.7:
    Yolov4-tiny INT8 (2,535 boxes) ran 810 FPS with one post thread beside six pre threads, so a frame's
    post-processing, slowed by the other busy threads, fits in 1/810 s. Fewer boxes than that cost no less."""
    p = load_platform("xavier-agx-sim")
    assert p.prepost.post_us(10647, 1) == pytest.approx(2207, rel=0.01)
    busy = 1 + p.cpu_contention * 6                 # the des slow-down of one task among 7 busy CPU tasks
    assert p.prepost.post_us(2535, 1) * busy <= 1e6 / 810
    assert p.prepost.post_us(845, 1) == p.prepost.post_us(2535, 1)


def test_available_and_unknown_platform():
    assert {"xavier-agx-sim", "orin-agx-sim"} <= set(group_choices("platform"))
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
    (lambda d: d["cost"].pop("dla"), "cost.dla"),
    (lambda d: d.__setitem__("cpus", 4), "key of platform xavier-agx-sim 'cpus'.*valid choices.*cpu"),
    (lambda d: d["limits"].__setitem__("max_dla_enginez", 3), "max_dla_engines_total"),
    (lambda d: d["cost"]["dla"].__setitem__("buffer_kb", -1), r"cost.dla.buffer_kb must be in \[0, inf\), got -1"),
    (lambda d: d["cost"]["dla"].__setitem__("bufer_kb", 512), "key of platform xavier-agx-sim cost.dla 'bufer_kb'.*buffer_kb"),
    (lambda d: d["cost"].__setitem__("gpu", 3), "cost.gpu must be a mapping"),
    (lambda d: d["cost"]["gpu"].__setitem__("channel_atom_by_precision", {"fp61": 256}),
     "precision in platform xavier-agx-sim cost.gpu.channel_atom_by_precision 'fp61'.*fp16"),
    (lambda d: d["cost"]["gpu"].__setitem__("channel_atom_by_precision", {"fp16": -8}),
     r"channel_atom_by_precision.fp16 must be in \[0, inf\), got -8"),
])
def test_broken_profiles_are_refused(mutate, match):
    d = copy.deepcopy(raw())
    mutate(d)
    with pytest.raises(DseError, match=match):
        platform_from_dict(d)


def test_unknown_option_lists_choices():
    with pytest.raises(DseError, match="PND-A"):
        load_platform("xavier-agx-sim").option("Z")


@pytest.mark.parametrize("version,engines,per_core", [
    ("tensorrt-6.0-sim", 4, None), ("tensorrt-7.1.3", None, 16), ("tensorrt-8.5.2", None, 16),
    ("tensorrt-10.3", None, 16)])
def test_dla_limits_follow_the_toolkit_version(version, engines, per_core):
    """TensorRT 6: at most 4 DLA engines (thesis Sec. 2.2); 7.1+: 16 loadables per core (the DLA rule sets). The
    real Xavier profile (TensorRT 8.5) inherits its sim twin's PEs but not its TensorRT 6 limits."""
    d = copy.deepcopy(raw())
    d["toolkit_version"] = version
    limits = platform_from_dict(d).limits
    assert (limits.max_dla_engines_total, limits.max_dla_loadables_per_core) == (engines, per_core)
    d["limits"]["max_dla_engines_total"] = 2        # an explicit value in the profile wins
    assert platform_from_dict(d).limits.max_dla_engines_total == 2
    d["toolkit_version"] = "onnxruntime"            # DLA cores but no TensorRT: no rule set, named as such
    with pytest.raises(DseError, match="no DLA rule set for toolkit version 'onnxruntime'.*tensorrt-6"):
        platform_from_dict(d)
    real = load_platform("xavier-agx")
    assert real.backend == "trt" and real.limits.max_dla_loadables_per_core == 16
    assert real.limits.max_dla_engines_total is None and real.options.keys() == load_platform("xavier-agx-sim").options.keys()


def test_host_cpu_is_the_same_platform_model():
    """host-cpu: one PE per CPU core group, options generated from the cores, the same Platform class the
    Jetson profiles load into (no backend-specific platform type)."""
    from dse.platform.cpu_groups import core_group_name, usable_cores

    p = load_platform("host-cpu")
    cores = usable_cores()
    assert p.backend == "ort" and p.main_kind == "CPU" and p.main_pe == core_group_name(cores)
    assert p.options["E"].stages[0].pes == (core_group_name(cores),) and p.cpu_cores == len(cores)
    assert all(pe.type == "cpu" and pe.cores for pe in p.pes.values())
    assert str(len(cores)) not in p.options      # the one group of all cores is E, under no second name
    if len(cores) >= 2:
        one_one = p.option("1-1")
        assert [p.pes[s.pes[0]].cores for s in one_one.stages] == [(cores[0],), (cores[1],)]
        assert one_one.kinds() == ["CPU", "CPU"]
        d = {"name": "host-cpu", "backend": "ort", "options": "auto", "cores": cores[:2],
             "extra_options": {"PND-1-1": [{"pe_type": "CPU", "cores": [[cores[0]], [cores[1]]]}]}}
        pnd = platform_from_dict(d).option("PND-1-1")
        assert pnd.kinds() == ["PND"] and pnd.stages[0].pnd
    with pytest.raises(DseError, match="not usable"):
        platform_from_dict({"name": "host-cpu", "backend": "ort", "options": "auto", "cores": [10_000]})
    with pytest.raises(DseError, match="no cost, prepost, power"):
        p.require_model("sim")


def test_core_group_options_of_a_four_core_host():
    """Four cores: E on all of them (under no second name, "4") and one option per split into two to
    ``max_groups`` groups, cores taken in order."""
    from dse.platform.cpu_groups import core_group_layouts

    layouts = core_group_layouts([0, 1, 2, 3])
    assert list(layouts) == ["E", "3-1", "2-2", "2-1-1", "1-1-1-1"]
    assert layouts["E"] == [[(0, 1, 2, 3)]] and layouts["3-1"] == [[(0, 1, 2)], [(3,)]]
    assert list(core_group_layouts([4, 5, 6, 7], max_groups=2)) == ["E", "3-1", "2-2"]
    assert list(core_group_layouts([0])) == ["E"]


def test_bad_buffer_scope_names_the_choices():
    from dse.config import compose_config
    from dse.core.errors import DseError
    from dse.platform import platform_from_dict
    from omegaconf import OmegaConf

    d = OmegaConf.to_container(compose_config(["platform=xavier-agx-sim"]).platform, resolve=True)
    d["sim"]["buffer_scope"] = "frames"
    with pytest.raises(DseError, match="buffer_scope.*'frames'; valid choices: interface, pipeline"):
        platform_from_dict(d)


def test_sim_full_window_is_a_flag():
    """``sim.full_window`` is on in the shipped Jetson profiles and off in a profile without the key; anything
    but true or false is refused, naming the value."""
    from dse.config import compose_config
    from dse.core.errors import DseError
    from dse.platform import platform_from_dict
    from omegaconf import OmegaConf

    d = OmegaConf.to_container(compose_config(["platform=xavier-agx-sim"]).platform, resolve=True)
    assert platform_from_dict(d).full_window is True
    del d["sim"]["full_window"]
    assert platform_from_dict(d).full_window is False
    d["sim"]["full_window"] = "yes"
    with pytest.raises(DseError, match="sim.full_window must be true or false, got 'yes'"):
        platform_from_dict(d)


def test_stage_thread_cpu_outside_one_core_is_refused():
    from dse.config import compose_config
    from dse.core.errors import DseError
    from dse.platform import platform_from_dict
    from omegaconf import OmegaConf

    d = OmegaConf.to_container(compose_config(["platform=xavier-agx-sim"]).platform, resolve=True)
    assert platform_from_dict(d).stage_thread_cpu == 0.1    # xavier-agx-sim: JEDI's polling stage threads
    d["cpu"]["stage_thread_cpu"] = -0.1
    with pytest.raises(DseError, match=r"cpu.stage_thread_cpu must be in \[0, 1\], got -0.1"):
        platform_from_dict(d)


def test_stage_thread_work_names_its_parts():
    from dse.config import compose_config
    from dse.core.errors import DseError
    from dse.platform import platform_from_dict
    from omegaconf import OmegaConf

    d = OmegaConf.to_container(compose_config(["platform=xavier-agx-sim"]).platform, resolve=True)
    work = platform_from_dict(d).stage_thread_us
    assert work.us(kernels=10, loadables=2) == work.execution + 10 * work.kernel + 2 * work.loadable > 0
    d["cpu"]["stage_thread_us"] = {"execution": 30, "kernels": 5}
    with pytest.raises(DseError, match="kernels.*execution, kernel, loadable"):
        platform_from_dict(d)
    d["cpu"]["stage_thread_us"] = {"loadable": -1}
    with pytest.raises(DseError, match=r"cpu.stage_thread_us.loadable must be in \[0, inf\), got -1"):
        platform_from_dict(d)
    del d["cpu"]["stage_thread_us"]
    assert platform_from_dict(d).stage_thread_us.us(kernels=10, loadables=2) == 0.0   # other boards: none
