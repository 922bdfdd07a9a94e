"""A hostile user's inputs at the command line: every one ends with a non-zero exit code, one line of error that
names the bad value (and the valid choices where there are some), and nothing written.

The workflow's own bad inputs (planning refuses before any job runs) are in tests/workflow/test_pipeline.py.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from dse.cli import main

TINY = ["benchmark=tiny-chain"]
A_CUT = "--cuts=4"            # feasible on tiny-chain (`dse inspect tiny-chain`)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def inputs(tmp_path):
    """Bad files a user might point the tools at (made before the case, so they do not count as written)."""
    d = tmp_path / "inputs"
    d.mkdir()
    (d / "text.onnx").write_text("this is not a model\n")
    (d / "empty.onnx").write_bytes(b"")
    from dse.zoo import build_network

    whole = build_network("tiny-chain").SerializeToString()
    (d / "truncated.onnx").write_bytes(whole[: len(whole) // 3])
    (d / "nofilters.cfg").write_text("[net]\nwidth=32\nheight=32\nchannels=3\n\n[convolutional]\nsize=3\n")
    net = "[net]\nwidth=32\nheight=32\nchannels={c}\n\n"
    conv = "[convolutional]\nfilters={f}\nsize=3\nstride=1\npad=1\nactivation=leaky\n"
    (d / "channels0.cfg").write_text(net.format(c=0) + conv.format(f=4))
    (d / "stride0.cfg").write_text(net.format(c=3) + "[maxpool]\nsize=2\nstride=0\n")
    (d / "filters2e9.cfg").write_text(net.format(c=3) + conv.format(f=2_000_000_000))
    (d / "wide.cfg").write_text(net.format(c=3) + conv.format(f=60000) + conv.format(f=60000))
    (d / "adir").mkdir()
    os.mkfifo(d / "fifo.onnx")                      # a reader would block forever
    (d / "zero.onnx").symlink_to("/dev/zero")        # a reader would read to the memory limit
    (d / "zero.cfg").symlink_to("/dev/zero")
    (d / "afile").write_text("x")
    (d / "notyaml.yaml").write_text("config: [unclosed\n")
    (d / "static.onnx").write_bytes(whole)          # its input is static: 1x3x64x64
    bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    bomb += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    (d / "bomb.yaml").write_text("\n".join(bomb) + "\n")          # 10^9 nodes once the aliases are expanded
    (d / "deep.yaml").write_text("config: " + "[" * 5000 + "]" * 5000 + "\n")
    cfg = {"benchmark": "yolov4", "platform": "xavier-agx-sim", "option": "PND-B", "cuts": [52, 134],
           "streams": [1, 4, 3], "buffers": 8, "pre_threads": 1, "post_threads": 1, "precision": "int8",
           "batch": 1, "input_size": 416}
    for name, change in {"infeasible": {}, "fp32dla": {"cuts": [64, 187], "precision": "fp32"},
                         "malformed": {"cuts": ["a", 3]}, "host": {"platform": "host-cpu", "option": "1-1", "precision": "fp32",
                                                                     "cuts": [64], "streams": [1, 1]}}.items():
        (d / f"{name}.yaml").write_text(yaml.safe_dump({"config": {**cfg, **change}}))
    return d


CASES = [
    # --- Hydra overrides (any command that composes the config) ---------------------------------------------
    (["config", "show", "benchmark=yolov9"], 2, "unknown benchmark 'yolov9'; valid choices: alexnet, cspnet"),
    (["config", "show", "platform=tx9"], 2, "unknown platform 'tx9'; valid choices:"),
    (["config", "show", "precision=fp8"], 2, "valid choices: fp16, fp32, int8"),
    (["config", "show", "foo=1"], 2, "unknown key 'foo'"),
    (["config", "show", "+foo=1"], 2, "unknown key of the top level 'foo'; valid choices: batch, benchmark"),
    (["config", "show", "+benchmark.colour=red"], 2, "unknown key of benchmark 'colour'; valid choices: application"),
    (["config", "show", "benchmark.inputsize=3"], 2, "valid keys of benchmark: application"),
    (["config", "show", "benchmark.input_size=500"], 2, "multiple of 32, got 500"),
    (["config", "show", "benchmark.input_size=0"], 2, "benchmark.input_size must be an integer in 32..8,192, got 0"),
    (["config", "show", "benchmark.preprocess=crop"], 2, "valid choices: letterbox, resize"),
    (["config", "show", "precision"], 2, "override 'precision' is not key=value"),
    (["config", "show", "batch=0"], 2, "batch must be an integer in 1..4,096, got 0"),
    (["config", "show", "batch=100000"], 2, "batch must be an integer in 1..4,096, got 100000"),
    (["config", "show", "batch=abc"], 2, "batch must be an integer in 1..4,096, got 'abc'"),
    (["config", "show", "seed=-1"], 2, "seed must be an integer in 0..4,294,967,295, got -1"),
    (["config", "show", "seed=1.5"], 2, "seed must be an integer in 0..4,294,967,295, got 1.5"),
    (["config", "show", "benchmark.warmup=-5"], 2, "benchmark.warmup must be an integer in 0..1,000,000, got -5"),
    (["config", "show", "benchmark.warmup=x"], 2, "benchmark.warmup must be an integer in 0..1,000,000, got 'x'"),
    (["config", "show", "benchmark.sample_size=0"], 2, "benchmark.sample_size must be an integer in 1..1,000,000"),
    (["config", "show", "benchmark.sample_size=100000000"], 2, "got 100000000"),
    (["config", "show", "search.options=[A"], 2, "unbalanced brackets in override 'search.options=[A'"),
    (["config", "show", "search.options=A]"], 2, "unbalanced brackets in override 'search.options=A]'"),
    (["config", "show", "[search.options=[A,B]"], 2, "unbalanced brackets"),
    (["config", "show", "platform.dla_rulez=1"], 2, "valid keys of platform: backend, board_model, contention, cost"),
    (["config", "show", "platform.limits.max_foo=1"], 2, "valid keys of platform.limits: max_batch"),
    (["config", "show", "platform=host-cpu", "platform.corez=[0]"], 2, "valid keys of platform: backend"),
    # --- dse measure: refused configurations (exit 1) and bad input (exit 2) --------------------------------
    (["measure", *TINY, "--option", "Z"], 1, "unknown mapping option 'Z' for xavier-agx-sim; valid choices: A"),
    (["measure", *TINY, "--option", "A", "--cuts", "5000", "--streams", "2,2"], 1, "cuts [5000] out of range"),
    (["measure", *TINY, "--option", "B", "--cuts", "6,4", "--streams", "1,1,1"], 1, "strictly increasing"),
    (["measure", *TINY, "--option", "A", "--cuts", "a,b"], 2, "--cuts must be comma-separated integers"),
    (["measure", *TINY, "--streams", "1,1"], 1, "streams [1, 1] has 2 entries"),
    (["measure", *TINY, "--buffers", "100000000"], 1, "buffers 100000000 exceeds the limit of 256"),
    (["measure", *TINY, "--pre", "100000"], 1, "pre_threads 100000 exceeds the limit of 32"),
    (["measure", *TINY, "--post", "0"], 1, "post_threads must be >= 1, got 0"),
    (["measure", *TINY, "--buffers", "-1"], 1, "buffers must be >= 1, got -1"),
    (["measure", *TINY, "--streams", "100"], 1, "streams of a stage 100 exceeds the limit of 16"),
    (["measure", *TINY, "precision=fp32", "--option", "A", A_CUT, "--streams", "2,2"], 1, "cannot run FP32"),
    (["measure", *TINY, "--option", "PND-A", A_CUT, "--streams", "1,1"], 1, "needs at least 2 streams, got 1"),
    (["measure", *TINY, "--option", "A", "--cuts", "0", "--streams", "2,2"], 1, "infeasible cuts [0]"),
    (["measure", *TINY, "batch=300"], 1, "batch 300 exceeds the limit of 256"),
    (["measure", "benchmark.model={in}/text.onnx", "benchmark.name=mine"], 2, "text.onnx is not an ONNX model"),
    (["measure", "benchmark.model={in}/empty.onnx", "benchmark.name=mine"], 2, "empty.onnx is not an ONNX model"),
    (["measure", "benchmark.model={in}/truncated.onnx", "benchmark.name=mine"], 2, "truncated.onnx is not an ONNX model"),
    (["measure", "benchmark.model={in}/nope.onnx", "benchmark.name=mine"], 2, "nope.onnx"),
    (["measure", "benchmark.model={in}/nofilters.cfg", "benchmark.name=mine"], 2, "missing required option 'filters'"),
    (["measure", *TINY, "--gantt", "{in}/adir"], 2, "adir is a directory: give a file path"),
    (["measure", *TINY, "platform=host-cpu", "precision=int8"], 2, "runs precision(s) fp32, not int8"),
    (["measure", *TINY, "platform=xavier-agx"], 2, "INT8 engines need the network's TensorRT calibration cache"),
    (["measure", *TINY, "benchmark.image_dir={in}/nowhere"], 2, "benchmark.image_dir"),
    (["measure", *TINY, "benchmark.calibration_cache={in}/nowhere.cache"], 2, "benchmark.calibration_cache"),
    (["measure", *TINY, "platform.transport.kind=pigeon"], 2, "unknown key 'platform.transport.kind'"),
    (["measure", *TINY, "platform=xavier-agx", "precision=fp16", "platform.transport.kind=pigeon"], 2,
     "unknown transport kind 'pigeon'; valid choices: local, ssh"),
    (["measure", *TINY, "platform=xavier-agx", "precision=fp16", "platform.transport.kind=ssh"], 2,
     "transport ssh needs a host"),
    # --- dse inspect / partition / zoo -----------------------------------------------------------------------
    (["inspect", "{in}/nope.onnx"], 2, "nope.onnx' not found"),
    (["inspect", "{in}/text.onnx"], 2, "text.onnx is not an ONNX model"),
    (["inspect", "{in}/adir"], 2, "adir is not an ONNX model: it is a directory"),
    (["inspect", "tiny-chain", "--input-shape", "x:1xax3"], 2, "x:1xax3"),
    (["partition", "tiny-chain", "--cuts", "6,4", "-o", "out"], 2, "strictly increasing"),
    (["partition", "tiny-chain", "--cuts", "10000", "-o", "out"], 2, "out of range"),
    (["partition", "tiny-chain", "--cuts", "0", "-o", "out"], 2, "splits the fused chain"),
    (["partition", "tiny-chain", A_CUT, "-o", "{in}/afile"], 2, "afile is a file: give a directory"),
    (["zoo", "build", "yolov9", "-o", "x.onnx"], 2, "unknown network 'yolov9'; valid choices:"),
    (["zoo", "build", "tiny-chain", "-o", "{in}/adir"], 2, "adir is a directory: give a file path"),
    (["zoo", "build", "{in}/nofilters.cfg", "-o", "x.onnx"], 2, "missing required option 'filters'"),
    # --- dse export -------------------------------------------------------------------------------------------
    (["export", "jedi", "{in}/missing.yaml"], 2, "missing.yaml' not found"),
    (["export", "trtexec", "{in}/infeasible.yaml"], 2, "infeasible cuts [52, 134]"),
    (["export", "trtexec", "{in}/fp32dla.yaml"], 2, "cannot run FP32"),
    (["export", "jedi", "{in}/malformed.yaml"], 2, "malformed configuration fields"),
    (["export", "jedi", "{in}/host.yaml", "--layers", "100"], 2, "need GPU/DLA pipeline stages"),
    (["export", "jedi", "{in}/notyaml.yaml"], 2, "cannot parse"),
    # --- names that become paths, checked after interpolation; a NaN where a number is bounded ----------------
    (["measure", *TINY, "benchmark.name=../../escaped"], 2, "benchmark.name must be a plain directory name"),
    (["measure", *TINY, "benchmark.name=/etc/dse-evil"], 2, "got '/etc/dse-evil'"),
    (["measure", *TINY, "benchmark.name=${oc.env:PATH}"], 2, "benchmark.name must be a plain directory name"),
    (["measure", *TINY, "benchmark.name=" + "x" * 300], 2, "at most 100 characters), got 'xxx"),
    (["measure", *TINY, "benchmark.name=.hidden"], 2, "starting with a letter or digit"),
    (["measure", *TINY, "platform.name=a/b"], 2, "platform.name must be a plain directory name (letters"),
    (["measure", *TINY, "platform.cost.cpu.Carmel.bandwidth_gbs=nan"], 2, "bandwidth_gbs must be in (0, inf), got nan"),
    (["measure", *TINY, "platform.cost.cpu.Carmel.efficiency.conv=NaN"], 2, "efficiency.conv must be in (0, 1], got nan"),
    # --- a run is named after what it measures ------------------------------------------------------------------
    (["measure", "benchmark.model={in}/text.onnx"], 2, "replaces benchmark yolov4's model: name the run after what"),
    (["measure", *TINY, "benchmark.weights={in}/afile"], 2, "benchmark.weights={in}/afile replaces benchmark tiny-"),
    # --- what config show prints, a run accepts; an output whose extension is no image format -------------------
    (["config", "show", "search.refine_within=nan"], 2, "search.refine_within must be in [0, 1), got nan"),
    (["config", "show", "search.options=[A,Z]"], 2, "unknown mapping option for platform xavier-agx-sim 'Z'"),
    (["config", "show", "search.objective=energy", "platform=host-cpu"], 2, "need a power model"),
    (["measure", *TINY, "--gantt", "{in}/schedule"], 2, "the file's extension names the image format; valid: .png"),
    # --- Darknet cfg values that would divide by zero or allocate past memory ---------------------------------
    (["measure", "benchmark.model={in}/channels0.cfg", "benchmark.name=mine"], 2, "option channels=0 is outside 1..4096"),
    (["measure", "benchmark.model={in}/stride0.cfg", "benchmark.name=mine"], 2, "option stride=0 is outside 1..64"),
    (["measure", "benchmark.model={in}/filters2e9.cfg", "benchmark.name=mine"], 2, "filters=2000000000 is outside"),
    (["measure", "benchmark.model={in}/wide.cfg", "benchmark.name=mine"], 2, "weights in one layer (at most 268,435,456)"),
    # --- files that are not regular: refused before they are opened ----------------------------------------------
    (["inspect", "{in}/fifo.onnx"], 2, "{in}/fifo.onnx' is not a regular file"),
    (["inspect", "{in}/zero.onnx"], 2, "{in}/zero.onnx' is not a regular file"),
    (["measure", "benchmark.model={in}/fifo.onnx", "benchmark.name=mine"], 2, "is not a regular file"),
    (["measure", "benchmark.model={in}/zero.cfg", "benchmark.name=mine"], 2, "is not a regular file"),
    (["measure", *TINY, "benchmark.weights={in}/fifo.onnx", "benchmark.name=mine"], 2, "weights file '{in}/fifo.onnx' is not a regular file"),
    # --- a static model's input is the run's batch and size, or the run is refused --------------------------------
    (["measure", "benchmark.model={in}/static.onnx", "benchmark.name=mine", "benchmark.input_size=128"], 2,
     "input 'input' is static [1, 3, 64, 64], but the run is set to batch 1 and input size 128: set batch=1"),
    (["measure", "benchmark.model={in}/static.onnx", "benchmark.name=mine", "benchmark.input_size=64", "batch=4"], 2,
     "the run is set to batch 4 and input size 64: set batch=1 benchmark.input_size=64"),
    # --- YAML that would hang whatever walks it -------------------------------------------------------------------
    (["export", "jedi", "{in}/bomb.yaml"], 2, "bomb.yaml': its aliases expand to more than 1,000,000 nodes"),
    (["export", "trtexec", "{in}/deep.yaml"], 2, "deep.yaml"),
    # --- a target family's settings, checked by `config show` as its target plans them ---------------------------
    (["config", "show", "dataflow=tiny", "dataflow.ga.population=99999999999"], 2,
     "bad dataflow case configuration: dataflow.ga.population must be an integer in 2..100,000, got 99999999999"),
    (["config", "show", "dataflow=tiny", "dataflow.ga.generations=-1"], 2, "dataflow.ga.generations must be an integer"),
    (["config", "show", "dataflow=tiny", "dataflow.deploy.seconds=1e12"], 2,
     "dataflow.deploy.seconds must be a number of seconds in (0, 3,600], got 1000000000000.0"),
    (["config", "show", "dataflow=tiny", "dataflow.name=/etc/x"], 2, "dataflow.name must be a plain directory name"),
    (["config", "show", "multi=tiny", "multi.ga.population=0"], 2, "multi.ga.population must be an integer in 2..100,000"),
    (["config", "show", "multi=tiny", "multi.ga.stall=1e12"], 2, "multi.ga.stall must be an integer in 0..100,000"),
    (["config", "show", "multi=tiny", "multi.pareto.runs=10000000"], 2, "multi.pareto.runs must be an integer in 2.."),
    (["config", "show", "multi=tiny", "multi.deploy.repeats=100000000"], 2, "multi.deploy.repeats must be an integer"),
    (["config", "show", "multi=tiny", "multi.deploy.seconds=0"], 2, "multi.deploy.seconds must be a number of seconds"),
    (["config", "show", "multi=tiny", "multi.name=../x"], 2, "multi.name must be a plain directory name"),
    (["config", "show", "platform=tx2-sim", "benchmark=vgg19", "pareto.population=2"], 2,
     "bad pareto run configuration: pareto.population must be an integer in 4..100,000, got 2"),
    (["config", "show", "pareto.population=8"], 2, "platform xavier-agx-sim has no clocked section"),
    (["config", "show", "study=tiny", "study.name=.."], 2, "bad study configuration: study.name must be a plain"),
    (["config", "show", "taskset.name=a/b"], 2, "bad taskset campaign configuration: taskset.name must be a plain"),
    (["config", "show", "taskset.time_limit_s=1e12"], 2, "time limit must be a number of seconds in (0, 86,400]"),
    (["config", "show", "taskset.sets=0"], 2, "sets must be an integer in 1..10,000,000, got 0"),
    (["config", "show", "platform=galaxy-s9-sim", "benchmark=mobilenet-v1", "layermap.ga.population=1"], 2,
     "layermap.ga.population must be an integer in 2..100,000, got 1"),
    (["config", "show", "platform=galaxy-s9-sim", "benchmark=mobilenet-v1", "layermap.ga.budget=1000000000"], 2,
     "layermap.ga.budget must be an integer in 1..100,000,000"),
    (["config", "show", "platform=galaxy-s9-sim", "benchmark=mobilenet-v1", "layermap.ilp.time_limit_s=1e12"], 2,
     "layermap.ilp.time_limit_s must be a number of seconds in (0, 86,400]"),
    (["config", "show", "multiapp=tiny", "multiapp.ga.population=1"], 2,
     "bad multiapp case configuration: multiapp.ga.population must be an integer in 4..100,000, got 1"),
    (["config", "show", "multiapp=tiny", "multiapp.apps=[]"], 2, "multiapp.apps must be a list of 1..8 apps"),
    (["config", "show", "multiapp=tiny", "multiapp.accelerators=[npu]"], 2,
     "unknown multiapp accelerator of platform galaxy-s9-sim 'npu'; valid choices: gpu"),
    (["config", "show", "multiapp=tiny", "multiapp.apps.1.priority=0"], 2, "every app needs its own priority"),
    (["config", "show", "multiapp=tiny", "multiapp.apps.0.period_ms=0"], 2, "period_ms must be a number in (0, 10,000]"),
    (["config", "show", "multiapp=tiny", "multiapp.apps.0.benchmark=yolov9"], 2,
     "unknown multiapp.apps[0].benchmark 'yolov9'; valid choices: alexnet"),
    (["config", "show", "multiapp=s9", "multiapp.check.hyperperiods=10000"], 2,
     "10000 hyperperiods of 6,600 ms are 66,000 s to simulate per mapping; at most 3,600 s"),
    (["config", "show", "multiapp=tiny", "multiapp.platform=xavier-agx"], 2, "target multiapp runs on a virtual board"),
    # --- other commands ---------------------------------------------------------------------------------------
    (["calibrate", "--platform", "nope"], 2, "unknown platform 'nope'; valid choices:"),
    (["workflow", "maximize", "{in}/norun-b1-64"], 2, "config/platform.yaml is missing"),
    (["workflow", "explore", "{in}/norun-b1-64"], 2, "workflow explore needs --option"),
]


@pytest.mark.parametrize("argv, code, message", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_input_is_one_line_error_and_writes_nothing(inputs, tmp_path, capsys, argv, code, message):
    argv = [a.replace("{in}", str(inputs)) for a in argv]
    before = _files(tmp_path)
    assert main(argv) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert message.replace("{in}", str(inputs)) in err[0]
    assert _files(tmp_path) == before, "a refused input wrote files"


# A config group file a user adds or edits (in a copy of config/, through DSE_CONFIG_DIR): what it holds, the
# command, the error. Checked before Hydra composes anything, so none of these is Hydra's traceback.
_PLATFORM = "config/platform/xavier-agx-sim.yaml"
CONFIG_FILES = [
    ("benchmark/alist.yaml", "- a\n- b\n", ["config", "show"], "holds a list; a config file is a mapping of keys"),
    ("benchmark/empty.yaml", "", ["config", "show"], "empty.yaml' holds nothing; a config file is a mapping"),
    ("benchmark/tab.yaml", "name: tab\n\tmodel: x\n", ["config", "show"],
     "tab.yaml' is not valid YAML: found a tab character that violates indentation (line 2, column 1)"),
    ("benchmark/pytag.yaml", "name: pytag\nx: !!python/object/apply:os.system ['true']\n", ["config", "show"],
     "could not determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system'"),
    ("benchmark/bomb.yaml", "BOMB", ["config", "show"], "bomb.yaml': its aliases expand to more than 1,000,000"),
    ("benchmark/deep.yaml", "name: deep\nx: " + "[" * 5000 + "]" * 5000 + "\n", ["config", "show"],
     "deep.yaml' is not valid YAML: exceeded maximum nesting depth"),
    ("benchmark/noname.yaml", "TINY-NONAME", ["config", "show", "benchmark=noname"],
     "noname.yaml names itself None: a benchmark file's name is its file's stem"),
    ("platform/copied.yaml", "XAVIER", ["config", "show", "platform=copied"],
     "copied.yaml names itself 'xavier-agx-sim': a platform file's name is its file's stem"),
    ("platform/strpes.yaml", "XAVIER:pes=GPU", ["measure", "benchmark=tiny-chain", "platform=strpes"],
     "platform strpes: pes must be a mapping, got 'GPU'"),
    ("platform/stropts.yaml", "XAVIER:options=A", ["measure", "benchmark=tiny-chain", "platform=stropts"],
     "platform stropts: options must be a mapping of option names or 'auto', got 'A'"),
    ("platform/listprec.yaml", "XAVIER:precisions=int8", ["measure", "benchmark=tiny-chain", "platform=listprec"],
     "platform listprec: precisions must be a list, got 'int8'"),
    ("platform/badcpu.yaml", "XAVIER:cpu=8", ["measure", "benchmark=tiny-chain", "platform=badcpu"],
     "platform badcpu: cpu must be a mapping, got 8"),
]


def _config_file(text: str, name: str) -> str:
    """The content of a CONFIG_FILES entry: literal YAML, or a shipped file changed as its tag says."""
    repo = Path(__file__).resolve().parents[2]
    if text == "BOMB":
        lines = ["name: bomb", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        return "\n".join(lines + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]) + "\n"
    if text == "TINY-NONAME":
        doc = yaml.safe_load((repo / "config/benchmark/tiny-chain.yaml").read_text())
        return yaml.safe_dump({k: v for k, v in doc.items() if k != "name"})
    if text.startswith("XAVIER"):
        doc = yaml.safe_load((repo / _PLATFORM).read_text())
        if ":" in text:
            key, value = text.split(":", 1)[1].split("=")
            doc.update({"name": Path(name).stem, key: int(value) if value.isdigit() else value})
        return yaml.safe_dump(doc)
    return text


@pytest.mark.parametrize("name, text, argv, message", CONFIG_FILES, ids=[c[0] for c in CONFIG_FILES])
def test_a_bad_config_file_is_one_line(tmp_path, monkeypatch, capsys, name, text, argv, message):
    import shutil

    config = tmp_path / "config"
    shutil.copytree(Path(__file__).resolve().parents[2] / "config", config)
    (config / name).write_text(_config_file(text, name))
    monkeypatch.setenv("DSE_CONFIG_DIR", str(config))
    monkeypatch.chdir(tmp_path)
    before = _files(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert _files(tmp_path) == before


def test_a_tiny_sample_is_timed_in_steady_state(capsys):
    """One frame (or five) without warm-up once reported several times the pipeline's steady FPS: the window
    is at least twice what the pipeline holds (``backends.base.window_frames``), so it reports the steady FPS."""
    argv = ["measure", *TINY, "--option", "A", A_CUT, "--streams", "2,3", "--buffers", "8", "--json"]
    fps = {}
    for n in (1, 5, 300):
        assert main([*argv, f"benchmark.sample_size={n}", "benchmark.warmup=0"]) == 0
        fps[n] = json.loads(capsys.readouterr().out)["fps"]
    assert fps[1] == pytest.approx(fps[300], rel=0.03) and fps[5] == pytest.approx(fps[300], rel=0.03), fps


def test_the_suite_is_big_enough():
    """The reliability issues asked for at least 60 bad inputs across the CLI and the workflow, then 60 more."""
    from tests.unit.graph.test_model_validity import BAD as BAD_MODELS
    from tests.workflow.test_pipeline import BAD_OVERRIDES

    assert len(CASES) + len(CONFIG_FILES) + len(BAD_OVERRIDES) + len(BAD_MODELS) >= 156


@pytest.mark.slow
def test_bombs_are_refused_within_a_memory_and_time_limit(inputs, tmp_path):
    """Run as a user would, under `ulimit -v 6000000` (6 GB of address space) and a 60 s limit: each bomb is one
    error line before it allocates or loops (a 10^9-node YAML, /dev/zero as the model, a 2 GB filter bank, a
    10^11 population, a 2^40 input dimension)."""
    import subprocess
    import sys

    import onnx

    from tests.unit.graph.test_model_validity import conv_model

    onnx.save(conv_model(shape=(1, 3, 2**40, 8)), str(inputs / "huge.onnx"))
    import shutil

    config, work = tmp_path / "bombed" / "config", tmp_path / "work"
    shutil.copytree(Path(__file__).resolve().parents[2] / "config", config)
    work.mkdir()
    (config / "benchmark" / "bomb.yaml").write_text("name: bomb\n" + (inputs / "bomb.yaml").read_text())
    commands = [(["config", "show"], {"DSE_CONFIG_DIR": str(config)}, "its aliases expand to more than"),
                (["inspect", f"{inputs}/zero.onnx"], {}, "is not a regular file"),
                (["measure", f"benchmark.model={inputs}/filters2e9.cfg", "benchmark.name=mine"], {}, "filters="),
                (["config", "show", "dataflow=tiny", "dataflow.ga.population=99999999999"], {}, "2..100,000"),
                (["inspect", f"{inputs}/huge.onnx"], {}, "each dimension must be 1..65,536")]
    for argv, env, message in commands:
        cmd = "ulimit -v 6000000 && exec " + " ".join([sys.executable, "-m", "dse", *argv])
        proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60, cwd=work,
                              env={**os.environ, **env})
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], (argv, proc.stderr[-2000:])


def test_argparse_errors_are_usage_plus_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["measure", *TINY, "--bogus"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("unrecognized arguments: --bogus") and err[0].startswith("usage:")


def test_an_unwritable_location_is_one_line(capsys):
    """Writing where nobody may (or a full disk: the same OSError path) is an error line, not a traceback."""
    assert main(["zoo", "build", "tiny-chain", "-o", "/proc/dse-cannot-write-here.onnx"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: cannot access")
