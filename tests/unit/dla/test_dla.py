"""DLA rules per TensorRT release, the fallback explainer, and where their answers surface (measurements, report,
export, `dse inspect --dla`)."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from dse.backends.sim import SimBackend
from dse.cli import main
from dse.core.configuration import Configuration
from dse.report.dla_fallback import explain, trtexec_notes
from dse.dla.features import broadcast_kind, layer_features
from dse.dla.rules import known_rulesets, parse_ruleset, ruleset_for
from dse.core.errors import DseError
from dse.graph.analysis import analyze
from dse.platform import load_platform
from dse.zoo import build_network

# every op the rule sets must judge (a rule set that forgets one would call it "unknown" by accident)
COVERED = ("Conv ConvTranspose Gemm MatMul BatchNormalization Relu LeakyRelu PRelu Sigmoid Tanh Clip Elu Selu Softplus "
           "Mish HardSigmoid HardSwish MaxPool AveragePool GlobalAveragePool GlobalMaxPool LRN Add Sub Mul Div Max Min "
           "Pow Equal Greater Less Concat Resize Upsample Slice Softmax Reshape Transpose Flatten ReduceMax ReduceMean "
           "Abs Neg Sqrt Exp Sin Cos Pad Split LayerNormalization Gather Squeeze Unsqueeze").split()


def test_every_shipped_rule_set_is_complete_and_sourced():
    sets = known_rulesets()
    assert list(sets) == ["tensorrt-6", "tensorrt-7", "tensorrt-8.5", "tensorrt-10.3", "tensorrt-11.4"]
    versions = [rs.version for rs in sets.values()]
    assert versions == sorted(versions)
    for rs in sets.values():
        assert set(COVERED) <= set(rs.ops), (rs.name, sorted(set(COVERED) - set(rs.ops)))
        assert rs.source.startswith("https://")
        for rule in rs.ops.values():
            assert rule.unsupported or rule.layer, (rs.name, rule.op)   # a supported op names its TensorRT layer
        assert rs.precisions == ("fp16", "int8")


@pytest.mark.parametrize("text,name", [("tensorrt-6.0-sim", "tensorrt-6"), ("tensorrt-7.1.3", "tensorrt-7"),
                                       ("tensorrt-8.5.2", "tensorrt-8.5"), ("tensorrt-8.6.2", "tensorrt-8.5"),
                                       ("10.3", "tensorrt-10.3"), ("tensorrt-10.7.0", "tensorrt-10.3"),
                                       ("tensorrt-11.4-sim", "tensorrt-11.4"), ("tensorrt-8.5", "tensorrt-8.5")])
def test_toolkit_version_picks_the_newest_set_at_or_below_it(text, name):
    assert ruleset_for(text).name == name


@pytest.mark.parametrize("text", ["tensorrt-5.1.6", "tensorrt-12.0", "acl-sim", "onnxruntime"])
def test_a_version_without_rules_is_a_clear_error_naming_the_known_ones(text):
    with pytest.raises(DseError, match=r"no DLA rule set .*known: tensorrt-6 \(6\.0\+\), tensorrt-7"):
        ruleset_for(text)


def test_a_rule_file_with_a_typo_is_refused_naming_the_key():
    base = {"name": "x", "version": "9.0", "source": "https://example", "limits": {"max_batch": 1}, "ops": {}}
    with pytest.raises(DseError, match="unknown key of .* ops.Conv 'limit'; valid choices: "):
        parse_ruleset({**base, "ops": {"Conv": {"layer": "Convolution", "limit": {}}}}, "t")
    with pytest.raises(DseError, match=r"ops.Conv.limits.kernel must be \[min, max\]"):
        parse_ruleset({**base, "ops": {"Conv": {"layer": "Convolution", "limits": {"kernel": 3}}}}, "t")
    with pytest.raises(DseError, match="unknown limits key 'max_batchs'"):
        parse_ruleset({**base, "limits": {"max_batchs": 1}}, "t")


def test_verdicts_follow_the_release():
    six, eight = ruleset_for("tensorrt-6"), ruleset_for("tensorrt-8.5")
    assert not six.check("LeakyRelu", {"rank": 4}).on_dla          # the thesis' reason for ReLU (L748)
    assert eight.check("LeakyRelu", {"rank": 4}).on_dla
    v = six.check("MaxPool", {"kernel": 13, "stride": 1, "pad": 6, "spatial_dims": 2})   # an SPP pool
    assert (v.on_dla, v.check) == (False, "MaxPool/kernel") and "13 outside [1, 8]" in v.reason
    assert six.check("MaxPool", {"kernel": 5, "stride": 1, "pad": 2, "spatial_dims": 2}).on_dla
    unknown = eight.check("Einsum", {})
    assert (unknown.on_dla, unknown.check) == (False, "Einsum/unknown") and "assumed GPU" in unknown.reason
    assert not six.check("Resize", {"mode": "nearest", "scale": 2.0}).on_dla
    assert eight.check("Resize", {"mode": "nearest", "scale": 2.0, "integer_scale": True, "rank": 4}).on_dla
    plugin = eight.check("Sigmoid", {}, gpu_only="detection head")
    assert (plugin.on_dla, plugin.check) == (False, "Sigmoid/plugin")
    assert "runs as FP16" in eight.check("Sigmoid", {"rank": 4}).note       # no INT8 sigmoid on the DLA


def test_features_from_shapes_and_attributes():
    f = layer_features("Conv", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "group": 32},
                       [1, 64, 52, 52], [[1, 32, 104, 104]], 1)
    assert f == {"rank": 4, "max_dim": 64, "kernel": 3, "spatial_dims": 2, "stride": 2, "pad": 1, "dilation": 1,
                 "groups": 32, "out_channels": 64, "in_channels": 32}
    r = layer_features("Resize", {"mode": "nearest"}, [1, 128, 26, 26], [[1, 128, 13, 13]], 1)
    assert (r["scale"], r["integer_scale"], r["mode"]) == (2.0, True, "nearest")
    assert layer_features("Concat", {"axis": -3}, [1, 64, 8, 8], [None, None], 2)["axis"] == 1
    assert layer_features("GlobalAveragePool", {}, [1, 64, 1, 1], [[1, 64, 7, 7]], 1)["kernel"] == 7
    assert broadcast_kind([1, 8, 4, 4], [[1, 8, 4, 4], [1, 8, 4, 4]], 2, None) == "none"
    assert broadcast_kind([1, 8, 4, 4], [[1, 8, 4, 4]], 1, 8) == "channel"      # x + per-channel constant
    assert broadcast_kind([1, 8, 4, 4], [[1, 8, 4, 4]], 1, 1) == "scalar"       # x * 3
    assert broadcast_kind([1, 8, 4, 4], [[1, 8, 4, 4]], 1, 4) == "other"


def test_leaky_zoo_variant_falls_back_on_tensorrt_6_and_stays_on_the_dla_on_8_5():
    analysis = analyze(build_network("yolov4-tiny-leaky", input_size=128), {})
    assert any(layer.op_type == "LeakyRelu" for layer in analysis.layers)
    old = explain(SimBackend(load_platform("xavier-agx-sim"), analysis))
    new = explain(SimBackend(load_platform("xavier-agx-jp5-sim"), analysis))
    assert old.ruleset == "tensorrt-6" and new.ruleset == "tensorrt-8.5"
    assert old.reason_counts["LeakyRelu/unsupported"] == sum(op.op_type == "LeakyRelu" for op in analysis.layers)
    assert "LeakyRelu/unsupported" not in new.reason_counts and "Resize/unsupported" not in new.reason_counts
    assert new.stages[0].loadables < old.stages[0].loadables
    assert old.stages[0].fallback_ms > new.stages[0].fallback_ms
    assert any(r.startswith("LeakyRelu:") for r in old.rewrites)


def _third_party_model() -> onnx.ModelProto:
    """Ops a Darknet model never has: SiLU (Sigmoid * x), HardSwish, a per-channel constant Mul, an op no rule set
    names (Erf), a global pool, a channel softmax."""
    def conv(name, x, out, cin, cout):
        w = helper.make_tensor(f"{name}.w", TensorProto.FLOAT, [cout, cin, 3, 3], np.zeros(cout * cin * 9).tolist())
        return [w], helper.make_node("Conv", [x, f"{name}.w"], [out], name=name, kernel_shape=[3, 3], pads=[1] * 4)

    inits, nodes = [], []
    for name, x, out, cin, cout in (("c0", "x", "a", 3, 8), ("c1", "silu", "b", 8, 8)):
        w, n = conv(name, x, out, cin, cout)
        inits += w
        nodes.append(n)
        if name == "c0":
            nodes += [helper.make_node("Sigmoid", ["a"], ["s"], name="sig"),
                      helper.make_node("Mul", ["a", "s"], ["silu"], name="silu_mul")]
    inits.append(helper.make_tensor("scale", TensorProto.FLOAT, [1, 8, 1, 1], [0.5] * 8))
    nodes += [helper.make_node("HardSwish", ["b"], ["h"], name="hswish"),
              helper.make_node("Mul", ["h", "scale"], ["m"], name="chan_mul"),
              helper.make_node("Erf", ["m"], ["e"], name="erf"),
              helper.make_node("GlobalAveragePool", ["e"], ["g"], name="gap"),
              helper.make_node("Softmax", ["g"], ["y"], name="softmax", axis=1)]
    graph = helper.make_graph(nodes, "third_party", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 1, 1])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("platform", ["xavier-agx-sim", "xavier-agx-jp5-sim", "orin-agx-jp6-sim", "orin-agx-jp7-sim"])
def test_an_unseen_model_gets_a_verdict_with_a_reason_for_every_layer(platform):
    analysis = analyze(_third_party_model(), {})
    ex = explain(SimBackend(load_platform(platform), analysis))
    by_name = {v.name: v for v in ex.layers}
    assert all(v.on_dla or (v.check and v.reason) for v in ex.layers)
    assert by_name["erf"].check == "Erf/unknown" and "unknown to the" in by_name["erf"].reason
    assert not by_name["hswish"].on_dla
    assert by_name["chan_mul"].check == "Mul/broadcast"                    # NC11 constant: not equal shapes
    assert by_name["sig"].on_dla and by_name["silu_mul"].on_dla            # SiLU's two layers run on the DLA
    assert sum(ex.reason_counts.values()) == ex.stages[0].fallback_layers


@pytest.mark.parametrize("net,platform", [("tiny-detector", "xavier-agx-sim"), ("yolov3-tiny-leaky", "xavier-agx-sim"),
                                          ("yolov3-tiny-leaky", "xavier-agx-jp5-sim"), ("third-party", "orin-agx-jp6-sim")])
def test_stage_loadables_equal_what_the_sim_backend_charges(net, platform):
    model = _third_party_model() if net == "third-party" else build_network(net, input_size=128)
    backend = SimBackend(load_platform(platform), analyze(model, {}))
    n = backend.table.n
    feasible = [c for c in backend.analysis.feasible_cuts if 0 < c < n - 2]
    checked = 0
    for option, cuts in (("A", (feasible[len(feasible) // 2],)), ("C", (feasible[1], feasible[-2])),
                         ("PND-B", (feasible[0], feasible[-1]))):
        streams = tuple(2 if s.pnd else 1 for s in backend.platform.options[option].stages)
        config = Configuration(benchmark=net, platform=platform, option=option, cuts=cuts, streams=streams,
                               precision="fp16", input_size=backend.input_size)
        m = backend.measure(config)
        ex = explain(backend, config=config)
        pes = {s.stage: s.pes.count("|") + 1 for s in ex.stages}
        assert m.dla_loadables == sum(s.loadables * pes[s.stage] for s in ex.stages), (option, cuts)
        assert m.fallback_layers == sum(s.fallback_layers for s in ex.stages)
        assert m.fallback_reasons == ex.reason_counts
        assert sum(ex.loadables_per_core.values()) == m.dla_loadables
        checked += 1
    assert checked == 3


def test_fallback_reasons_round_trip_through_parquet(tmp_path):
    from dse.store.parquet import append, read
    from dse.store.schema import measurement_row, row_to_measurement

    backend = SimBackend(load_platform("xavier-agx-sim"), analyze(build_network("yolov3-tiny-leaky", input_size=128), {}))
    cut = backend.analysis.feasible_cuts[len(backend.analysis.feasible_cuts) // 2]
    m = backend.measure(Configuration(benchmark="y", platform="xavier-agx-sim", option="A", cuts=(cut,),
                                      streams=(1, 1), precision="fp16", input_size=128))
    assert m.fallback_reasons and sum(m.fallback_reasons.values()) == m.fallback_layers
    path = tmp_path / "m.parquet"
    append(path, [measurement_row(m, phase="t", strategy="t")])
    back = row_to_measurement(read(path).iloc[0].to_dict())
    assert back.fallback_reasons == m.fallback_reasons


def test_trtexec_notes_name_the_fallback_layers_of_each_dla_stage():
    backend = SimBackend(load_platform("xavier-agx-sim"), analyze(build_network("yolov3-tiny-leaky", input_size=128), {}))
    cut = backend.analysis.feasible_cuts[len(backend.analysis.feasible_cuts) // 2]
    config = Configuration(benchmark="y", platform="xavier-agx-sim", option="A", cuts=(cut,), streams=(1, 1),
                           precision="int8", input_size=128)
    notes = trtexec_notes(explain(backend, config=config))
    assert list(notes) == [0]
    assert "GPU fallback: leaky_0 (LeakyRelu/unsupported)" in notes[0][1]
    assert "TensorRT 6.0" in notes[0][0]


def test_inspect_dla_cli(capsys):
    assert main(["inspect", "tiny-detector", "--dla", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["ruleset"] == "tensorrt-6" and len(d["layers"]) > 0 and d["stages"][0]["stage"] == 1
    assert main(["inspect", "tiny-detector", "--dla", "--tensorrt", "8.5", "--option", "A", "--cuts", "4"]) == 0
    out = capsys.readouterr().out
    assert "TensorRT 8.5" in out and "DLA stages" in out
    assert main(["inspect", "tiny-detector", "--dla", "--tensorrt", "5.0"]) == 2
    assert "known: tensorrt-6" in capsys.readouterr().err
    assert main(["inspect", "tiny-detector", "--dla", "--option", "Z"]) == 2
    assert "valid choices" in capsys.readouterr().err
    assert main(["inspect", "tiny-detector", "--dla", "--cuts", "3"]) == 2
    assert "--cuts needs --option" in capsys.readouterr().err
    assert main(["inspect", "tiny-detector", "--dla", "--platform", "host-cpu"]) == 2
    assert "no DLA" in capsys.readouterr().err
