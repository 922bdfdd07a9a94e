"""The board agent: Python 3.8 grammar, allowed imports only, tegrastats parsing, the agent's measure path
(with numpy stage engines standing in for TensorRT, which no machine here has), and the trt backend's pure parts."""
from __future__ import annotations

import ast
import re
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dse.board import agent
from dse.board.tegrastats import parse_line
from dse.runtime.engine import FunctionEngine

ROOT = Path(__file__).resolve().parents[3]
# everything the agent imports from this repository (dse.board plus the shared runtime and applications)
AGENT_FILES = sorted(ROOT.glob("dse/board/*.py")) + [ROOT / f"dse/runtime/{n}.py" for n in
                                                     ("__init__", "pipeline", "engine", "metrics")] + \
    sorted(ROOT.glob("dse/apps/*.py")) + [ROOT / "dse/__init__.py", ROOT / "dse/core/errors.py"]


@pytest.mark.parametrize("path", AGENT_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_agent_files_parse_with_python38_grammar(path):
    ast.parse(path.read_text(), filename=str(path), feature_version=(3, 8))


def test_agent_imports_only_stdlib_numpy_tensorrt():
    """Import the agent in a fresh interpreter that refuses every third-party module but numpy/tensorrt."""
    code = r'''
import sys, importlib.abc
allowed_third = {"numpy", "tensorrt", "PIL"}
std = set(sys.stdlib_module_names)
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if top in std or top in allowed_third or top == "dse" or top.startswith("_"):
            return None
        raise ImportError("agent imported forbidden module " + name)
sys.meta_path.insert(0, Block())
import dse.board.__main__, dse.board.agent, dse.board.tegrastats, dse.board.cuda, dse.board.trt_engine
import dse.apps, dse.runtime.pipeline
print("ok")
'''
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


XAVIER = ("RAM 5000/31920MB (lfb 5x4MB) SWAP 0/15960MB CPU [12%@2265,5%@2265,off,off,off,off,3%@2265,1%@2265] "
          "EMC_FREQ 4%@2133 GR3D_FREQ 61%@1377 APE 150 MTS fg 0% bg 0% AO@38C GPU@40C "
          "POM_5V_GPU 3421/3421 POM_5V_CPU 1234/1200 POM_5V_SOC 1500/1500 POM_5V_CV 0/0 POM_5V_SYS5V 2000/2000")
XAVIER_ISSUE = "RAM 1/2MB GPU 17%@1377 POM_5V_GPU 3421/3421 POM_5V_CPU 1234/1200"
ORIN = ("04-01-2024 10:00:00 RAM 3000/62800MB (lfb 4x4MB) CPU [1%@729,2%@729] GR3D_FREQ 45%@[1300,0] "
        "cpu@45C VDD_GPU_SOC 4000mW/4000mW VDD_CPU_CV 800mW/800mW VIN_SYS_5V0 3000mW/3000mW "
        "VDDQ_VDD2_1V8AO 500mW/500mW")
NX = "RAM 1/2MB GR3D_FREQ 0% VDD_IN 5000/5100 VDD_CPU_GPU_CV 1000/1000 VDD_SOC 900/900"


def test_tegrastats_xavier_orin_and_input_rail(tmp_path):
    lines = tmp_path / "tegrastats.log"
    lines.write_text("\n".join([XAVIER, XAVIER_ISSUE, ORIN, NX]) + "\n")
    x, xi, o, nx = (parse_line(l) for l in lines.read_text().splitlines())
    assert x["rails_mw"] == {"POM_5V_GPU": 3421, "POM_5V_CPU": 1234, "POM_5V_SOC": 1500, "POM_5V_CV": 0,
                             "POM_5V_SYS5V": 2000}
    assert x["power_w"] == pytest.approx(8.155) and x["gpu_util"] == pytest.approx(0.61)
    assert xi["power_w"] == pytest.approx(4.655) and xi["gpu_util"] == pytest.approx(0.17)
    assert set(o["rails_mw"]) == {"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"}
    assert o["power_w"] == pytest.approx(8.3) and o["gpu_util"] == pytest.approx(0.45)
    assert nx["power_w"] == pytest.approx(5.0)  # the module's input rail, not the sum
    assert parse_line("no rails here")["power_w"] is None


def _numpy_engine_factory(path, pe, dla_core, zero_copy):
    """Stage 'engines' computed with numpy from a .npz 'engine' file: a fixed projection of the input."""
    spec = np.load(path)
    w = spec["w"]

    def run(inputs):
        if "in" in spec.files:
            x = inputs[str(spec["in"])]
            out = {k: v for k, v in inputs.items() if k != str(spec["in"])}
            out[str(spec["out"])] = 1 / (1 + np.exp(-np.tensordot(x.mean(axis=(2, 3)), w, axes=1)))
            return out
        raise AssertionError("bad engine file")

    class E(FunctionEngine):
        pass

    return E(lambda x: _reshape(run(x), spec), pe)


def _reshape(out, spec):
    name = str(spec["out"])
    out[name] = out[name].reshape(tuple(spec["shape"])).astype(np.float32)
    return out


def test_agent_measure_runs_the_shared_pipeline(tmp_path):
    shape = [1, 2 * (5 + 3), 4, 4]
    eng = tmp_path / "s0.npz"
    np.savez(eng, w=np.random.default_rng(0).standard_normal((3, int(np.prod(shape)))).astype(np.float32),
             **{"in": "images", "out": "yolo_5", "shape": np.array(shape)})
    cfg = {"stages": [{"streams": 2, "engines": [{"path": str(eng), "pe": "DLA0", "dla_core": 0},
                                                 {"path": str(eng), "pe": "DLA1", "dla_core": 1}]}],
           "frames": 30, "warmup": 3, "buffers": 3, "pre_threads": 2, "post_threads": 1, "batch": 1,
           "application": "yolo", "app_options": {"input_size": 32, "anchors": [[[8, 8], [16, 16]]]},
           "inputs": {"images": [1, 3, 32, 32]}, "outputs": {"yolo_5": shape},
           "tegrastats": {"enabled": False}}
    res = agent.measure(cfg, engine_factory=_numpy_engine_factory)
    assert res["status"] == "ok", res
    assert res["fps"] > 0 and res["frames"] == 30 and set(res["util"]) == {"DLA0", "DLA1"}
    json.dumps(res)  # JSON-able
    bad = dict(cfg, stages=[{"streams": 1, "engines": []}])
    assert agent.measure(bad)["status"] == "failed" and "one engine" in agent.measure(bad)["reason"]
    missing = agent.measure(dict(cfg, stages=[{"streams": 1, "engines": [{"path": str(tmp_path / "no.engine")}]}]))
    assert missing["status"] == "failed" and "loading failed" in missing["reason"]


def test_agent_cli_prints_one_json_line(tmp_path):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"stages": []}))
    out = subprocess.run([sys.executable, "-m", "dse.board", "measure", "--config", str(cfg)], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 1
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["status"] == "failed" and "lacks" in res["reason"]


def test_trt_backend_pure_parts(tmp_path):
    from dse.backends.base import MeasureSettings
    from dse.backends.trt import TrtBackend, agent_command, measurement_from_result, parse_agent_output, transport_of
    from dse.config import compose_config
    from dse.core.configuration import Configuration
    from dse.core.errors import DseError
    from dse.graph.analysis import analyze
    from dse.zoo import build_network

    t = {"kind": "ssh", "host": "xavier", "user": "nvidia", "python": "python3", "workdir": "/home/nvidia/dse",
         "port": 2222}
    cmd = agent_command(t, ".dse-agent/x.json")
    assert cmd[:5] == ["ssh", "-o", "BatchMode=yes", "-p", "2222"] and cmd[5] == "nvidia@xavier"
    assert cmd[6] == "cd /home/nvidia/dse && python3 -m dse.board measure --config .dse-agent/x.json"
    assert agent_command({"kind": "local", "python": "python3"}, "c.json") == [
        "python3", "-m", "dse.board", "measure", "--config", "c.json"]
    assert parse_agent_output('TensorRT warning\n{"status": "ok", "fps": 3}\n') == {"status": "ok", "fps": 3}
    with pytest.raises(DseError, match="no JSON"):
        parse_agent_output("Segmentation fault\n")

    cfg = compose_config(["platform=xavier-agx", "benchmark=tiny-detector"])
    a = analyze(build_network("tiny-detector"))
    from dse.engines.cache import EngineCache

    engines = EngineCache(tmp_path / "engines", "xavier-agx")
    with pytest.raises(DseError, match="benchmark.calibration_cache"):   # INT8 needs the calibration cache
        TrtBackend(cfg.platform, a, MeasureSettings(precision="int8"), engine_cache=engines)
    cache = tmp_path / "net.cache"
    cache.write_text("TRT-8501-EntropyCalibration2\ninput: 3c010a14\n")
    be = TrtBackend(cfg.platform, a, MeasureSettings(sample_size=50, model="tiny-detector",
                                                     calibration_cache=str(cache)), engine_cache=engines)
    assert be.calibration.scales()["input"] > 0 and be.workdir.parent == engines.dir
    assert transport_of(be.platform)["kind"] == "local"
    c = Configuration("tiny-detector", "xavier-agx", option="PND-A", cuts=(a.feasible_cuts[3],), streams=(4, 1),
                      precision="int8", input_size=64)
    assert be.check(c) is None
    assert "PND" in be.check(c.with_(streams=(1, 1)))
    assert "fp32" in be.check(c.with_(precision="fp32"))
    assert be.stage_pes(c) == [[("DLA0", "DLA", 0), ("DLA1", "DLA", 1)], [("GPU", "GPU", None)]]
    engines = [[{"path": "s0.engine", "pe": "DLA0", "dla_core": 0}, {"path": "s0.engine", "pe": "DLA1", "dla_core": 1}],
               [{"path": "s1.engine", "pe": "GPU", "dla_core": None}]]
    ac = be.agent_config(c, engines)
    assert agent.check_config(ac) is None and ac["stages"][0]["streams"] == 4
    assert len(ac["app_options"]["anchors"]) == 2  # anchors travel in the config: the agent has no dse.zoo
    m = measurement_from_result(c, {"status": "ok", "fps": 120.0, "util": {"GPU": 0.5}, "power_w": 20.0,
                                    "energy_j_per_frame": 0.166, "stage_ms": [3.0, 2.0]}, engine_keys=["k"])
    assert m.ok and m.fps == 120.0 and m.power_w == 20.0 and m.engine_keys == ["k"]
    refused = measurement_from_result(c, {"status": "refused", "reason": "no DLA"})
    assert refused.status == "refused" and refused.reason == "no DLA"
    assert measurement_from_result(c, {"status": "failed", "reason": "lost"}).status == "error"  # older agents
    # without TensorRT here the build fails: an error with the reason (retried next run), not a crash
    m = be.measure(c.with_(precision="fp16"))
    assert m.status == "error" and "TensorRT" in m.reason


# -- power modes and clocks on the board (dse.board.clocks, dse.platform.modes.agent_clocks) -------------------------
NVPMODEL = """#!/bin/sh
# nvpmodel's command line as the agent uses it: -q prints the mode name, then its id; -m ID switches
state="$(dirname "$0")/mode"
[ -f "$state" ] || echo 0 > "$state"
case "$1" in
  -q) echo "NV Power Mode: MODE_$(cat "$state")"; cat "$state" ;;
  -m) [ "$2" -le 6 ] || { echo "NVPM ERROR: invalid mode $2"; exit 1; }
      [ "$2" != 5 ] || { echo "NVPM WARN: Reboot required for changing to this power mode: 5"; exit 0; }
      echo "$2" > "$state" ;;
esac
"""


def _xavier_sysfs(root: Path) -> dict:
    """A Xavier's clock files under ``root`` (two CPU clusters whose CPUs link to their policy's directory)."""
    files = {"devices/17000000.gv11b/devfreq/17000000.gv11b/min_freq": "318750000",
             "devices/17000000.gv11b/devfreq/17000000.gv11b/max_freq": "1377000000",
             "kernel/nvpmodel_emc_cap/nafll_dla": "1395200000"}
    for policy in (0, 2):
        files[f"devices/system/cpu/cpufreq/policy{policy}/scaling_min_freq"] = "1190400"
        files[f"devices/system/cpu/cpufreq/policy{policy}/scaling_max_freq"] = "2265600"
    for rel, value in files.items():
        path = root / "sys" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
    for cpu in range(4):
        link = root / f"sys/devices/system/cpu/cpu{cpu}/cpufreq"
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(root / f"sys/devices/system/cpu/cpufreq/policy{cpu - cpu % 2}")
    tool = root / "nvpmodel"
    tool.write_text(NVPMODEL)
    tool.chmod(0o755)
    return {rel: (root / "sys" / rel) for rel in files}


def _spec(root: Path, extra: dict) -> dict:
    from dse.platform.modes import agent_clocks
    from dse.platform import load_platform

    spec = agent_clocks(load_platform("xavier-agx"), extra)
    spec["root"] = str(root)
    if spec["nvpmodel"]:
        spec["nvpmodel"]["command"] = str(root / "nvpmodel")
    return spec


def test_the_agent_pins_a_modes_clocks_and_puts_the_board_back(tmp_path):
    from dse.board import clocks

    files = _xavier_sysfs(tmp_path)
    before = {rel: p.read_text() for rel, p in files.items()}
    spec = _spec(tmp_path, {"power_mode": "MODE_30W_6CORE", "gpu_mhz": "675.75", "cpu_mhz": "1190.4"})
    assert spec["nvpmodel"]["id"] == 4 and [k["name"] for k in spec["knobs"]] == ["gpu", "dla", "cpu"]
    assert [k["value"] for k in spec["knobs"]] == [675750000, None, 1190400]   # DLA at the mode's ceiling
    state = clocks.apply(spec)
    gpu = "devices/17000000.gv11b/devfreq/17000000.gv11b/"
    assert files[gpu + "min_freq"].read_text() == files[gpu + "max_freq"].read_text() == "675750000"
    for policy in (0, 2):   # each cluster pinned once, through whichever CPU links to it
        pol = f"devices/system/cpu/cpufreq/policy{policy}/"
        assert files[pol + "scaling_min_freq"].read_text() == files[pol + "scaling_max_freq"].read_text() == "1190400"
    assert (tmp_path / "mode").read_text().strip() == "4"
    assert state["applied"] == {"gpu": ["675750000"], "dla": ["1395200000"], "cpu": ["1190400"]}
    # lowering: each min is written before its max, so the kernel never sees min > max
    order = [Path(p).name for p, _ in state["files"]]
    assert order[:2] == ["min_freq", "max_freq"]
    assert clocks.restore(state) == []
    assert {rel: p.read_text().strip() for rel, p in files.items()} == {k: v.strip() for k, v in before.items()}
    assert (tmp_path / "mode").read_text().strip() == "0"

    # raising above the current max: the max first
    files[gpu + "max_freq"].write_text("318750000")
    files[gpu + "min_freq"].write_text("318750000")
    state = clocks.apply(_spec(tmp_path, {"gpu_mhz": "905.25"}))
    assert [Path(p).name for p, _ in state["files"]][:2] == ["max_freq", "min_freq"]
    assert files[gpu + "min_freq"].read_text() == "905250000" and state["mode"] is None   # MAXN already
    clocks.restore(state)
    assert files[gpu + "max_freq"].read_text() == "318750000"

    # a cluster the mode took offline keeps its cpufreq files, and the agent leaves them to the mode
    for cpu in (2, 3):
        (tmp_path / f"sys/devices/system/cpu/cpu{cpu}/online").write_text("0\n")
    state = clocks.apply(_spec(tmp_path, {"power_mode": "MODE_30W_6CORE", "cpu_mhz": "1267.2"}))
    assert files["devices/system/cpu/cpufreq/policy0/scaling_max_freq"].read_text() == "1267200"
    assert files["devices/system/cpu/cpufreq/policy2/scaling_max_freq"].read_text().strip() == "2265600"
    clocks.restore(state)


def test_clocks_the_board_cannot_take_fail_and_leave_it_as_it_was(tmp_path):
    from dse.board import clocks

    files = _xavier_sysfs(tmp_path)
    spec = _spec(tmp_path, {"power_mode": "MODE_15W", "gpu_mhz": "670"})
    spec["knobs"][-1]["max"] = ["/sys/devices/system/cpu/cpu99/cpufreq/scaling_max_freq"]   # not this board
    with pytest.raises(clocks.ClockError, match="no file matches .*cpu99"):
        clocks.apply(spec)
    assert files["devices/17000000.gv11b/devfreq/17000000.gv11b/min_freq"].read_text().strip() == "318750000"   # rolled back
    assert (tmp_path / "mode").read_text().strip() == "0"
    bad_mode = _spec(tmp_path, {"gpu_mhz": "905.25"})
    bad_mode["nvpmodel"]["id"] = 9
    with pytest.raises(clocks.ClockError, match="-m 9` failed .*invalid mode 9"):
        clocks.apply(bad_mode)
    reboot = _spec(tmp_path, {"power_mode": "MODE_30W_4CORE"})   # id 5: this stand-in wants a reboot first
    with pytest.raises(clocks.ClockError, match="left the board in mode 0 .*Reboot required"):
        clocks.apply(reboot)


def test_agent_measure_runs_at_the_clocks_and_reports_them(tmp_path):
    files = _xavier_sysfs(tmp_path)
    shape = [1, 2 * (5 + 3), 4, 4]
    eng = tmp_path / "s0.npz"
    np.savez(eng, w=np.random.default_rng(0).standard_normal((3, int(np.prod(shape)))).astype(np.float32),
             **{"in": "images", "out": "yolo_5", "shape": np.array(shape)})
    cfg = {"stages": [{"streams": 1, "engines": [{"path": str(eng), "pe": "GPU"}]}], "frames": 10, "warmup": 1,
           "application": "yolo", "app_options": {"input_size": 32, "anchors": [[[8, 8], [16, 16]]]},
           "inputs": {"images": [1, 3, 32, 32]}, "outputs": {"yolo_5": shape}, "tegrastats": {"enabled": False},
           "clocks": _spec(tmp_path, {"gpu_mhz": "905.25"})}
    res = agent.measure(cfg, engine_factory=_numpy_engine_factory)
    assert res["status"] == "ok" and res["clocks"]["gpu"] == ["905250000"], res
    assert files["devices/17000000.gv11b/devfreq/17000000.gv11b/max_freq"].read_text().strip() == "1377000000"   # put back
    cfg["clocks"]["knobs"][0]["min"] = ["/sys/no/such/min_freq"]
    res = agent.measure(cfg, engine_factory=_numpy_engine_factory)
    assert res["status"] == "failed" and res["reason"].startswith("cannot set clocks: no file matches")


def test_trt_backend_sends_clocks_and_refuses_what_the_board_cannot_set(tmp_path):
    from dse.backends.base import MeasureSettings
    from dse.backends.trt import TrtBackend
    from dse.config import compose_config
    from dse.core.configuration import Configuration
    from dse.engines.cache import EngineCache
    from dse.graph.analysis import analyze
    from dse.zoo import build_network

    a = analyze(build_network("tiny-detector"))
    c = Configuration("tiny-detector", "xavier-agx", option="E", streams=(2,), precision="fp16", input_size=64)
    engines = [[{"path": "s0.engine", "pe": "GPU", "dla_core": None}]]

    def backend(*overrides):
        cfg = compose_config(["platform=xavier-agx", "benchmark=tiny-detector", *overrides])
        return TrtBackend(cfg.platform, a, MeasureSettings(precision="fp16", model="tiny-detector"),
                          engine_cache=EngineCache(tmp_path / "engines", "xavier-agx"))

    be = backend()
    assert be.agent_config(c, engines)["clocks"] is None          # no mode or clock asked: the board as it is
    clocked = c.with_(extra={"power_mode": "MODE_30W_6CORE", "cpu_mhz": "1190.4"})
    assert be.check(clocked) is None
    spec = be.agent_config(clocked, engines)["clocks"]
    assert spec["nvpmodel"] == {"command": "nvpmodel", "id": 4, "name": "MODE_30W_6CORE"}
    assert {k["name"]: k["value"] for k in spec["knobs"]} == {"gpu": None, "dla": None, "cpu": 1190400}
    assert "not a GPU level of power mode MODE_10W" in be.check(c.with_(extra={"power_mode": "MODE_10W",
                                                                              "gpu_mhz": "905.25"}))
    bare = backend("platform.clock_control=null")
    assert "has no clock_control section" in bare.check(clocked)
    assert bare.check(c) is None
    no_modes = backend("platform.clock_control.nvpmodel=null")
    assert "names no nvpmodel command" in no_modes.check(clocked)
    assert no_modes.check(c.with_(extra={"gpu_mhz": "905.25"})) is None   # clocks alone, in the current mode


@pytest.mark.parametrize("section, message", [
    ({"nvpmodel": "nvpmodel", "gpu": {"max": ["/x"]}, "emc": {"max": ["/y"]}},
     "unknown key of platform xavier-agx clock_control 'emc'; valid choices: cpu, dla, gpu, nvpmodel"),
    ({"gpu": {"min": ["/x"]}}, "clock_control.gpu needs at least one 'max' file"),
    ({"gpu": {"max": ["/x"], "units": 1}}, "unknown key of platform xavier-agx clock_control.gpu 'units'"),
    ({"cpu": {"max": ["/x"], "unit_hz": 0}}, "clock_control.cpu.unit_hz must be > 0"),
])
def test_a_broken_clock_control_section_is_refused_naming_the_valid_keys(section, message):
    from dse.platform.modes import clock_control
    from dse.core.errors import DseError
    from dse.platform import load_platform

    raw = dict(load_platform("xavier-agx").raw, clock_control=section)
    with pytest.raises(DseError, match=re.escape(message)):
        clock_control(load_platform(raw))
    assert clock_control(load_platform("host-cpu")) is None
