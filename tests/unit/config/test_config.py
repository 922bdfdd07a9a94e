"""Hydra composition: defaults, overrides in every accepted form, errors naming the valid choices."""
import pytest

from dse.cli import main
from dse.config import compose_config, run_dir, split_overrides
from dse.core.errors import DseError


def test_defaults():
    cfg = compose_config([])
    assert cfg.benchmark.name == "yolov4"
    assert cfg.platform.name == "xavier-agx-sim"
    assert cfg.precision == "int8" and cfg.batch == 1 and cfg.benchmark.input_size == 416
    assert str(run_dir(cfg)) == "results/yolov4/xavier-agx-sim/int8-b1-416"


@pytest.mark.parametrize("text", ["[benchmark=yolov3,precision=fp16]", "benchmark=yolov3 precision=fp16",
                                  ["benchmark=yolov3", "precision=fp16"]])
def test_override_forms(text):
    cfg = compose_config(text)
    assert cfg.benchmark.name == "yolov3" and cfg.precision == "fp16" and cfg.benchmark.precision == "fp16"


def test_nested_and_batch():
    cfg = compose_config(["benchmark=yolov4-csp", "benchmark.input_size=512", "batch=4"])
    assert cfg.benchmark.preprocess == "letterbox"
    assert cfg.benchmark.input_size == 512 and cfg.batch == 4 and cfg.benchmark.batch == 4


def test_split_keeps_brackets():
    assert split_overrides("[benchmark.input_shapes={images:[1,3,4,4]},seed=2]") == [
        "benchmark.input_shapes={images:[1,3,4,4]}", "seed=2"]


@pytest.mark.parametrize("override, message", [
    ("benchmark=yolov9", "unknown benchmark 'yolov9'; valid choices: alexnet, cspnet, densenet-40, .*densenet-yolo"),
    ("platform=tx9", "unknown platform 'tx9'; valid choices:"),
    ("precision=fp8", "unknown precision 'fp8'; valid choices: fp16, fp32, int8"),
    ("foo=1", "unknown key 'foo'"),
    ("benchmark.inputsize=3", "valid keys of benchmark: application, batch"),
    ("benchmark.input_size=500", "multiple of 32"),
    ("benchmark.preprocess=crop", "valid choices: letterbox, resize"),
    ("precision", "is not key=value"),
])
def test_bad_overrides(override, message):
    with pytest.raises(DseError, match=message.replace("(", r"\(")):
        compose_config([override])


def test_config_show_cli(capsys):
    assert main(["config", "show", "benchmark=yolov2-tiny", "precision=fp16"]) == 0
    out = capsys.readouterr().out
    assert "name: yolov2-tiny" in out and "precision: fp16" in out
    assert main(["config", "show", "benchmark=nope"]) == 2
    assert "valid choices" in capsys.readouterr().err


@pytest.mark.parametrize("overrides, message", [
    # the keys of the platform the other overrides select, not of the first file of the group
    (["platform.dla_rulez=1"], "unknown key 'platform.dla_rulez'; valid keys of platform: backend, board_model"),
    (["platform=host-cpu", "platform.corez=[0]"], "valid keys of platform: backend, board_model, cores, extra_options"),
    (["platform.limits.max_foo=1"], "valid keys of platform.limits: max_batch, max_buffers, max_dla_engines_total"),
    (["search.top_kk=1"], "valid keys of search: cpu_ratio, degradation"),
])
def test_misspelled_key_lists_the_keys_of_the_selected_file(overrides, message):
    with pytest.raises(DseError, match=message.replace("(", r"\(")):
        compose_config(overrides)


def test_options_that_cannot_run_are_not_planned():
    """FP32 on the Xavier: the DLA cannot run it, so only the GPU-only option is explored (the report names
    the others and why); INT8 explores them all."""
    from dse.workflow.plan import plan_runs

    (fp32,) = plan_runs({"overrides": "[benchmark=tiny-chain,precision=fp32]"}).values()
    (int8,) = plan_runs({"overrides": "[benchmark=tiny-chain]"}).values()
    assert fp32.facts["options"] == ("E",) and set(int8.facts["options"]) == {"A", "B", "C", "D", "E", "PND-A", "PND-B"}


def test_a_search_asks_a_stage_for_no_more_streams_than_the_platform_runs():
    """search.max_streams (8, a Jetson's) is capped by the platform's limits.max_streams_per_stage in the resolved
    settings: host-cpu (4) gets 4, where a maximizer asking for 5 was only refused; the Xavier (16) keeps 8."""
    from dse.workflow.plan import config_parts

    host = config_parts(compose_config(["benchmark=tiny-chain", "platform=host-cpu", "precision=fp32"]))[0]
    xavier = config_parts(compose_config(["benchmark=tiny-chain"]))[0]
    assert host["search"]["max_streams"] == 4 and xavier["search"]["max_streams"] == 8


def test_threads_that_share_the_inference_cores_stop_at_the_cores():
    """Where the PEs are the host's cores (host-cpu), pre and post threads past one per core only time-slice with
    the inference: the resolved search.max_pre/max_post stop at the cores; the Xavier, whose CPU has cores of its
    own beside the GPU and DLAs, keeps 8."""
    from dse.platform import load_platform
    from dse.workflow.plan import config_parts

    cores = load_platform("host-cpu").shared_cores()
    host = config_parts(compose_config(["benchmark=tiny-chain", "platform=host-cpu", "precision=fp32"]))[0]
    xavier = config_parts(compose_config(["benchmark=tiny-chain"]))[0]
    assert cores >= 1 and load_platform("xavier-agx-sim").shared_cores() == 0
    assert (host["search"]["max_pre"], host["search"]["max_post"]) == (min(8, cores), min(8, cores))
    assert (xavier["search"]["max_pre"], xavier["search"]["max_post"]) == (8, 8)


def test_a_copied_group_file_that_keeps_the_others_name_is_refused(tmp_path, monkeypatch):
    """Runs are filed by the benchmark's and the platform's names: a copy of yolov4.yaml (or of a platform) that
    kept ``name: yolov4`` would write into yolov4's run directories, so a group file's name is its stem."""
    import shutil
    from pathlib import Path

    from dse.config import compose_config
    from dse.core.errors import DseError

    repo = Path(__file__).resolve().parents[3]
    shutil.copytree(repo / "config", tmp_path / "config")
    monkeypatch.setenv("DSE_CONFIG_DIR", str(tmp_path / "config"))
    shutil.copy(tmp_path / "config/benchmark/yolov4.yaml", tmp_path / "config/benchmark/mine.yaml")
    shutil.copy(tmp_path / "config/platform/xavier-agx-sim.yaml", tmp_path / "config/platform/myboard.yaml")
    with pytest.raises(DseError, match=r"config/benchmark/mine.yaml names itself 'yolov4': .* set `name: mine`"):
        compose_config(["benchmark=mine"])
    with pytest.raises(DseError, match=r"config/platform/myboard.yaml names itself 'xavier-agx-sim'"):
        compose_config(["platform=myboard"])
    assert compose_config(["benchmark=mine", "benchmark.name=mine"]).benchmark.name == "mine"   # named on purpose
    assert compose_config(["benchmark.model=yolov4"]).benchmark.name == "yolov4"     # the benchmark's own model
