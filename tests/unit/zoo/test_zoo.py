"""Network zoo and Darknet cfg -> ONNX converter: every zoo net builds, checks, runs; semantics vs numpy."""
from __future__ import annotations

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from dse.cli import main
from dse.core.errors import DseError
from dse.zoo import (ZOO, build_network, cfg_path, convert, count_nodes, fold_batchnorm, list_networks,
                     network_layers, write_darknet_weights)

THESIS = [name for name, entry in ZOO.items() if entry.layers is not None]
NAME = re.compile(r"^[a-z0-9]+_\d+(_[a-z0-9]+)?$")


def run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"input": x})


def image(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).random(shape, dtype=np.float32)


# -- the zoo ------------------------------------------------------------------------------------------

def test_zoo_table_lists_the_thesis_networks_and_tiny_ones():
    assert THESIS == ["yolov2", "yolov2-tiny", "yolov3", "yolov3-tiny", "yolov4", "yolov4-tiny", "yolov4-csp",
                      "cspnet", "densenet-yolo"]
    assert {"tiny-chain", "tiny-residual", "tiny-detector"} <= set(list_networks())
    assert list_networks(family="thesis") == THESIS
    assert set(list_networks(include_tiny=False)) == (set(THESIS) | set(list_networks(family="layermap"))
                                                      | set(list_networks(family="energy")))
    assert list_networks(family="energy") == ["vgg19", "alexnet", "emotion-ferplus"]
    assert ZOO["yolov4-csp"].preprocess == "letterbox"
    assert {ZOO[n].preprocess for n in THESIS if n != "yolov4-csp"} == {"resize"}
    for name in list_networks():
        assert cfg_path(name).is_file()


@pytest.mark.parametrize("name", list_networks())
def test_zoo_network_builds_checks_and_runs(name):
    size = None if name.startswith("tiny") else 64
    model = build_network(name, input_size=size)
    onnx.checker.check_model(model)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    typed = list(inferred.graph.value_info) + list(inferred.graph.output)
    assert len(typed) >= len(model.graph.node)
    for info in typed:
        dims = info.type.tensor_type.shape.dim
        assert dims and all(d.HasField("dim_value") and d.dim_value > 0 for d in dims), info.name
    assert model.opset_import[0].version == 13
    input_dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    channels = 1 if name == "emotion-ferplus" else 3       # FER+ classifies grey faces
    assert model.graph.input[0].name == "input" and input_dims == [1, channels, 64, 64]
    ops = {node.op_type for node in model.graph.node}
    assert not ops & {"BatchNormalization", "Identity", "Constant", "LeakyRelu", "Mish"}
    names = [node.name for node in model.graph.node]
    assert len(set(names)) == len(names) and all(NAME.match(n) for n in names)
    assert len(names) == network_layers(name)

    outputs = run(model, image(input_dims))
    assert all(np.isfinite(o).all() for o in outputs)
    heads = [o.name for o in model.graph.output]
    if all(h.startswith(("yolo_", "region_")) for h in heads) and not name.startswith("tiny-chain"):
        # random weights keep activations O(1): detection sigmoids are not saturated
        for out in outputs:
            assert ((out > 0.01) & (out < 0.99)).mean() > 0.3


def test_detector_heads_are_outputs_and_cfgs_are_relu_only():
    expect = {"yolov2": 1, "yolov2-tiny": 1, "yolov3": 3, "yolov3-tiny": 2, "yolov4": 3, "yolov4-tiny": 2,
              "yolov4-csp": 3, "cspnet": 3, "densenet-yolo": 1, "tiny-detector": 2}
    for name, heads in expect.items():
        text = cfg_path(name).read_text()
        assert text.count("[yolo]") + text.count("[region]") == heads
        assert "leaky" not in text and "mish" not in text  # ReLU only, as in the thesis (DLA)
    model = build_network("tiny-detector")
    outputs = [o.name for o in model.graph.output]
    assert len(outputs) == 2 and all(re.fullmatch(r"yolo_\d+", o) for o in outputs)
    assert {n.op_type for n in model.graph.node if n.name in outputs} == {"Sigmoid"}


@pytest.mark.parametrize("name", THESIS)
def test_node_counts_match_thesis_layer_counts(name):
    target = ZOO[name].layers
    count = count_nodes(cfg_path(name), 416)
    assert abs(count - target) <= 0.15 * target, (name, count, target)
    assert count_nodes(cfg_path(name), 96) == count  # counting is independent of the input size


def test_cspnet_has_grouped_convs_and_a_long_route():
    model = build_network("cspnet", input_size=32)
    groups = [a.i for n in model.graph.node if n.op_type == "Conv" for a in n.attribute if a.name == "group"]
    assert 32 in groups
    producer = {n.output[0]: i for i, n in enumerate(model.graph.node)}
    total = len(model.graph.node)
    spans = [(producer[i], k) for k, n in enumerate(model.graph.node) for i in n.input if i in producer]
    src, dst = max(spans, key=lambda s: s[1] - s[0])
    assert src < total * 0.45 and dst > total * 0.85


def test_same_seed_same_bytes_other_seed_other_weights():
    a = build_network("yolov3-tiny", input_size=64, seed=3).SerializeToString()
    b = build_network("yolov3-tiny", input_size=64, seed=3).SerializeToString()
    c = build_network("yolov3-tiny", input_size=64, seed=4).SerializeToString()
    assert a == b and a != c and len(a) == len(c)


def test_input_size_and_batch_override_the_cfg():
    model = build_network("tiny-detector", input_size=96, batch=2)
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [2, 3, 96, 96]
    outs = run(model, image(dims))
    assert [o.shape for o in outs] == [(2, 21, 12, 12), (2, 21, 24, 24)]  # strides 8 and 4
    assert dict((p.key, p.value) for p in model.metadata_props)["input_size"] == "96x96"


def test_unknown_network_lists_the_zoo():
    with pytest.raises(DseError, match=r"unknown network 'yolov9'.*yolov4-csp"):
        build_network("yolov9")
    with pytest.raises(DseError, match="cfg file .missing/net.cfg.: no such file"):
        build_network("missing/net.cfg")


def test_input_size_incompatible_with_the_stride_is_explained():
    with pytest.raises(DseError, match="multiple of"):
        count_nodes(cfg_path("yolov3"), 100)


# -- converter semantics against numpy ----------------------------------------------------------------

NET = "[net]\nwidth={w}\nheight={h}\nchannels={c}\n"


def darknet_maxpool(x, size, stride):
    """Darknet's maxpool: total padding size-1, offset -(size-1)//2, out-of-range pixels ignored."""
    n, c, h, w = x.shape
    pad = size - 1
    oh, ow = (h + pad - size) // stride + 1, (w + pad - size) // stride + 1
    padded = np.full((n, c, h + pad, w + pad), -np.inf, np.float32)
    padded[:, :, pad // 2:pad // 2 + h, pad // 2:pad // 2 + w] = x
    out = np.empty((n, c, oh, ow), np.float32)
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = padded[:, :, i * stride:i * stride + size, j * stride:j * stride + size].max(axis=(2, 3))
    return out


@pytest.mark.parametrize("size,stride,hw", [(2, 1, 5), (2, 2, 8), (3, 2, 7), (5, 1, 6), (13, 1, 6)])
def test_maxpool_follows_darknet_padding(size, stride, hw):
    model = convert(NET.format(w=hw, h=hw, c=2) + f"[maxpool]\nsize={size}\nstride={stride}\n")
    x = image((1, 2, hw, hw))
    np.testing.assert_array_equal(run(model, x)[0], darknet_maxpool(x, size, stride))


def test_route_groups_slice_and_concat():
    cfg = NET.format(w=4, h=4, c=4) + ("[maxpool]\nsize=1\nstride=1\n"
                                       "[route]\nlayers=-1\ngroups=2\ngroup_id=1\n"
                                       "[route]\nlayers=-1,0\n"
                                       "[route]\nlayers=0,-1\ngroups=2\ngroup_id=0\n")
    model = convert(cfg)
    x = image((1, 4, 4, 4))
    out = run(model, x)[0]
    half = x[:, 2:]
    np.testing.assert_array_equal(out, np.concatenate([x[:, :2], np.concatenate([half, x], 1)[:, :3]], 1))
    assert [n.name for n in model.graph.node] == ["maxpool_0", "route_1", "route_2", "route_3_slice0",
                                                  "route_3_slice1", "route_3"]


def test_upsample_reorg_shortcut_shapes_and_values():
    cfg = NET.format(w=4, h=4, c=3) + ("[maxpool]\nsize=1\nstride=1\n[upsample]\nstride=2\n"
                                       "[reorg]\nstride=2\n[shortcut]\nfrom=-1\nactivation=relu\n")
    model = convert(cfg)
    assert [n.op_type for n in model.graph.node] == ["MaxPool", "Resize", "SpaceToDepth", "Add", "Relu"]
    x = image((1, 3, 4, 4))
    out = run(model, x)[0]
    assert out.shape == (1, 12, 4, 4)
    up = x.repeat(2, axis=2).repeat(2, axis=3)  # nearest upsampling
    np.testing.assert_array_equal(out[:, 0:3], 2 * up[:, :, ::2, ::2])  # SpaceToDepth block (0, 0), doubled
    np.testing.assert_array_equal(out[:, 9:12], 2 * up[:, :, 1::2, 1::2])
    with pytest.raises(DseError, match=r"layer 3.*cannot add layer shapes \(3, 4, 4\) and \(12, 4, 4\)"):
        convert(cfg.replace("from=-1", "from=-3"))


ACT = {"linear": lambda v: v, "relu": lambda v: np.maximum(v, 0), "leaky": lambda v: np.where(v > 0, v, 0.1 * v),
       "logistic": lambda v: 1 / (1 + np.exp(-v)), "tanh": np.tanh, "relu6": lambda v: np.clip(v, 0, 6),
       "mish": lambda v: v * np.tanh(np.log1p(np.exp(v))), "swish": lambda v: v / (1 + np.exp(-v))}


@pytest.mark.parametrize("activation", sorted(ACT))
def test_activations_match_numpy(activation):
    cfg = NET.format(w=8, h=8, c=3) + "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation={}\n"
    x = image((1, 3, 8, 8)) * 6 - 3
    linear = run(convert(cfg.format("linear"), seed=1), x)[0]
    model = convert(cfg.format(activation), seed=1)
    np.testing.assert_allclose(run(model, x)[0], ACT[activation](linear), rtol=1e-5, atol=1e-5)
    if activation == "mish":
        assert [n.op_type for n in model.graph.node] == ["Conv", "Softplus", "Tanh", "Mul"]
        assert [n.op_type for n in convert(cfg.format(activation), opset=18).graph.node] == ["Conv", "Mish"]


def test_connected_and_softmax():
    cfg = NET.format(w=4, h=4, c=2) + ("[connected]\noutput=5\nactivation=relu\n[dropout]\nprobability=.5\n"
                                       "[connected]\noutput=3\nactivation=linear\n[softmax]\n")
    model = convert(cfg)
    out = run(model, image((1, 2, 4, 4)))[0]
    assert out.shape == (1, 3) and np.isclose(out.sum(), 1)
    assert [n.op_type for n in model.graph.node] == ["Flatten", "Gemm", "Relu", "Gemm", "Softmax"]


# -- Darknet .weights -----------------------------------------------------------------------------------

WEIGHTS_CFG = NET.format(w=6, h=6, c=3) + ("[convolutional]\nbatch_normalize=1\nfilters=4\nsize=3\npad=1\n"
                                           "activation=linear\n"
                                           "[convolutional]\nfilters=2\nsize=1\ngroups=2\nactivation=linear\n"
                                           "[connected]\nbatch_normalize=1\noutput=3\nactivation=linear\n")


def weight_arrays(rng):
    a = dict(b1=rng.normal(size=4), s1=rng.uniform(0.5, 2, 4), m1=rng.normal(size=4), v1=rng.uniform(0.5, 2, 4),
             w1=rng.normal(size=(4, 3, 3, 3)), b2=rng.normal(size=2), w2=rng.normal(size=(2, 2, 1, 1)),
             b3=rng.normal(size=3), w3=rng.normal(size=(3, 2 * 6 * 6)), s3=rng.uniform(0.5, 2, 3),
             m3=rng.normal(size=3), v3=rng.uniform(0.5, 2, 3))
    return {k: v.astype(np.float32) for k, v in a.items()}


@pytest.mark.parametrize("version", [(0, 2, 0), (0, 1, 0)])
def test_weights_file_is_read_folded_and_used(tmp_path, version):
    a = weight_arrays(np.random.default_rng(5))
    order = ["b1", "s1", "m1", "v1", "w1", "b2", "w2", "b3", "w3", "s3", "m3", "v3"]
    path = tmp_path / "net.weights"
    write_darknet_weights(path, [a[k] for k in order], version=version, seen=12345)
    model = convert(WEIGHTS_CFG, weights=path)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    factor = a["s1"] / np.sqrt(a["v1"] + 1e-5)
    np.testing.assert_allclose(inits["conv_0.weight"], a["w1"] * factor[:, None, None, None], rtol=1e-6)
    np.testing.assert_allclose(inits["conv_0.bias"], a["b1"] - a["m1"] * factor, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(inits["conv_1.weight"], a["w2"])
    w3, b3 = fold_batchnorm(a["w3"], a["b3"], a["s3"], a["m3"], a["v3"])
    np.testing.assert_allclose(inits["connected_2.weight"], w3, rtol=1e-6)

    # forward pass against a numpy reference of the same Darknet layers
    x = image((1, 3, 6, 6))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((1, 4, 6, 6), np.float32)
    for i in range(6):
        for j in range(6):
            y[:, :, i, j] = np.einsum("ockl,nckl->no", a["w1"], xp[:, :, i:i + 3, j:j + 3])
    y = (y - a["m1"][:, None, None]) / np.sqrt(a["v1"][:, None, None] + 1e-5) * a["s1"][:, None, None] \
        + a["b1"][:, None, None]
    y = np.stack([np.einsum("c,nchw->nhw", a["w2"][g, :, 0, 0], y[:, 2 * g:2 * g + 2]) + a["b2"][g]
                  for g in range(2)], 1)  # groups=2: each output channel sees its own two inputs
    z = y.reshape(1, -1) @ a["w3"].T
    z = (z - a["m3"]) / np.sqrt(a["v3"] + 1e-5) * a["s3"] + a["b3"]
    np.testing.assert_allclose(run(model, x)[0], z, rtol=1e-4, atol=1e-4)


def test_weights_file_mismatch_is_an_error(tmp_path):
    a = weight_arrays(np.random.default_rng(0))
    flat = np.concatenate([v.ravel() for v in a.values()])
    short, long = tmp_path / "short.weights", tmp_path / "long.weights"
    write_darknet_weights(short, [flat[:-1]])
    write_darknet_weights(long, [flat, np.zeros(7, np.float32)])
    with pytest.raises(DseError, match="ends after"):
        convert(WEIGHTS_CFG, weights=short)
    with pytest.raises(DseError, match="7 floats left over"):
        convert(WEIGHTS_CFG, weights=long)
    with pytest.raises(DseError, match="none.weights.: no such file"):
        convert(WEIGHTS_CFG, weights=tmp_path / "none.weights")


# -- errors ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body,pattern", [
    ("[deconvolutional]\nfilters=4\n", r"layer 0.*unknown section 'deconvolutional'.*convolutional.*shortcut"),
    ("[convolutional]\nfilters=4\nactivation=hardswish\n", r"layer 0.*unknown activation 'hardswish'.*leaky.*relu"),
    ("[convolutional]\nfilters=4\nactivation=relu\n[route]\nlayers=3\n", r"layer 1.*points to layer 3"),
    ("[convolutional]\nfilters=4\ndilation=2\nactivation=relu\n", r"dilation=2 is not supported"),
    ("[convolutional]\nfilters=4\ngroups=3\nactivation=relu\n", r"groups must divide"),
    ("[convolutional]\nfilters=four\n", r"filters='four' is not an integer"),
    ("[shortcut]\nfrom=-1\n", r"points to layer -1"),
    ("filters=4\n", r"no layers after \[net\]"),
    ("[maxpool]\nsize 2\n", r"<cfg>:6: expected 'key=value'"),
])
def test_conversion_errors_name_the_problem(body, pattern):
    with pytest.raises(DseError, match=pattern):
        convert(NET.format(w=8, h=8, c=3) + body)


def test_cfg_must_start_with_net():
    with pytest.raises(DseError, match=r"must start with a \[net\]"):
        convert("[convolutional]\nfilters=4\n")


# -- CLI ----------------------------------------------------------------------------------------------------

def test_cli_list(capsys):
    assert main(["zoo", "list"]) == 0
    out = capsys.readouterr().out
    assert "densenet-yolo" in out and "508" in out and "letterbox" in out


def test_cli_build_zoo_name_and_cfg_path(tmp_path, capsys):
    target = tmp_path / "out" / "td.onnx"
    assert main(["zoo", "build", "tiny-detector", "--input-size", "96", "--seed", "2", "-o", str(target)]) == 0
    model = onnx.load(target)
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [1, 3, 96, 96]
    assert model.SerializeToString() == build_network("tiny-detector", 96, seed=2).SerializeToString()
    assert sorted(p.name for p in target.parent.iterdir()) == ["td.onnx"]  # no temp file left behind
    assert "23 nodes" in capsys.readouterr().out

    cfg = tmp_path / "mine.cfg"
    cfg.write_text(cfg_path("tiny-chain").read_text())
    assert main(["zoo", "build", str(cfg), "--batch", "2", "-o", str(tmp_path / "mine.onnx")]) == 0
    assert onnx.load(tmp_path / "mine.onnx").graph.input[0].type.tensor_type.shape.dim[0].dim_value == 2


def test_cli_errors_are_messages(tmp_path, capsys):
    assert main(["zoo", "build", "yolov9", "-o", str(tmp_path / "x.onnx")]) == 2
    assert "unknown network 'yolov9'" in capsys.readouterr().err
    bad = tmp_path / "bad.cfg"
    bad.write_text(NET.format(w=8, h=8, c=3) + "[convolutional]\nfilters=4\nactivation=elu\n")
    assert main(["zoo", "build", str(bad), "-o", str(tmp_path / "bad.onnx")]) == 2
    assert "unknown activation 'elu'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [bad]
