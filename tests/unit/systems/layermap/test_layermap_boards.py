"""Per-layer-mapping boards (seeds 002/004): platform extensions, CPU/NPU/transfer costs, the four zoo classifiers,
and galaxy-s9-sim's calibration to 004 Fig. 13."""
from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
import yaml
from onnx import numpy_helper

from bench import layermap_calibration as cal
from dse.backends.sim.cpu_cost import KERNELS, cpu_kind, cpu_layer_us, layer_times_us, npu_us, transfer_us
from dse.config import config_dir
from dse.core.errors import DseError
from dse.graph.analysis import Layer, analyze
from dse.platform import load_platform, platform_from_dict
from dse.zoo import ZOO, build_network, convert, list_networks

NETWORKS = ("mobilenet-v1", "mobilenet-v2", "squeezenet", "densenet-40")


def raw(name):
    return yaml.safe_load((config_dir() / "platform" / f"{name}.yaml").read_text())


@pytest.fixture(scope="module")
def s9():
    return load_platform("galaxy-s9-sim")


@pytest.fixture(scope="module")
def hikey():
    return load_platform("hikey970-sim")


def conv_layer(cin=64, cout=64, hw=56, k=3, group=1) -> Layer:
    out = (1, cout, hw, hw)
    return Layer(index=0, name="conv_0", op_type="Conv", inputs=("x",), outputs=("y",), output_shapes=(out,),
                 macs=cout * hw * hw * cin // group * k * k, param_bytes=4 * cout * cin // group * k * k,
                 activation_bytes=4 * cout * hw * hw, input_bytes=4 * cin * hw * hw,
                 attrs={"kernel_shape": [k, k], "group": group})


# -- profiles --------------------------------------------------------------------------------------------------

def test_boards_load_with_their_seed_facts(s9, hikey):
    assert s9.purpose == hikey.purpose == "layer-mapping"
    assert [c.core_type for c in s9.cpu_clusters] == ["A55", "M3"] and s9.big_cluster.core_type == "M3"
    assert s9.cpu_freq_by_active_cores == {1: 2700, 2: 2310, 3: 2310, 4: 1790}          # 002 L140, 004 L185
    assert [s9.cpu_freq_mhz_at(k) for k in (1, 2, 3, 4)] == [2700, 2310, 2310, 1790]
    assert [hikey.cpu_freq_mhz_at(k) for k in (1, 4)] == [2360, 2360]                   # no DVFS (002 L97)
    configs = [(4,), (3, 1), (2, 2), (2, 1, 1), (1, 1, 1, 1)]                             # 002 Fig. 1
    assert s9.cpu_configs() == hikey.cpu_configs() == configs
    assert s9.pe_kinds() == ["cpu1", "cpu2", "cpu3", "cpu4", "gpu"]
    assert hikey.pe_kinds() == ["cpu1", "cpu2", "cpu3", "cpu4", "gpu", "npu"]
    # 002 L180: CPU 3.5 W (quad core), GPU 4 W, NPU 2 W; a k-core group draws k/4 of the CPU's
    assert hikey.pe_power_w("cpu4") == (3.5, 0.0) and s9.pe_power_w("cpu2") == (1.75, 0.0)
    assert hikey.pe_power_w("gpu") == (4.0, 0.0) and hikey.pe_power_w("npu") == (2.0, 0.0)
    assert s9.limits.cpu_util_max == 0.7 and hikey.cost.npu.speedup == 6.5
    assert s9.comm.model == "poly" and s9.comm.size_unit == "MB"


def test_pipeline_boards_are_unchanged_and_get_the_defaults():
    x = load_platform("xavier-agx-sim")
    assert x.purpose == "pipeline" and x.limits.cpu_util_max == 1.0
    # its Carmel cores (seed 003's CPU variants) are one cluster at the pipeline DSE's CPU clock
    assert x.big_cluster.core_type == "Carmel" and len(x.big_cluster.cores) == 8 and set(x.cost.cpu) == {"Carmel"}
    assert x.cpu_freq_mhz_at(4) == max(x.cpu_freq_mhz)
    orin = load_platform("orin-agx-sim")
    assert orin.cpu_clusters == () and orin.cost.cpu == {}
    assert (x.comm.model, x.comm.fixed_us, x.comm.bandwidth_gbs) == ("linear", 45.0, 14.0)   # its reformat terms
    assert "comm" not in x.raw and "purpose" not in x.raw


def test_the_pipeline_dse_refuses_a_layer_mapping_board(s9):
    from dse.backends import MeasureSettings, validate_backend

    with pytest.raises(DseError, match="per-layer-mapping board.*pipeline board such as xavier-agx-sim"):
        validate_backend(s9, MeasureSettings())


@pytest.mark.parametrize("mutate,match", [
    (lambda d: d["cpu"]["freq_by_active_cores"].__setitem__(5, 1790), r"5 busy cores; valid: 1\.\.4"),
    (lambda d: d["cpu"]["freq_by_active_cores"].__setitem__(1, 3000), r"3000 MHz is outside .* 1790\.\.2700"),
    (lambda d: d["cpu"]["freq_by_active_cores"].pop(3), r"lacks \[3\] busy cores"),
    (lambda d: d["cpu"]["clusters"][0].__setitem__("cores", [3, 4]), r"cores \[4\] already belong"),
    (lambda d: d["cpu"]["clusters"][0].__setitem__("freq", [1]), r"key of .*clusters\[0\] 'freq'.*freq_mhz"),
    (lambda d: d["cpu"].__setitem__("hotplug", {}), r"key of platform galaxy-s9-sim cpu 'hotplug'.*clusters"),
    (lambda d: d["cost"]["cpu"].__setitem__("M4", d["cost"]["cpu"]["M3"]), r"core type .*'M4'.*A55, M3"),
    (lambda d: d["cost"]["cpu"]["M3"]["efficiency"].__setitem__("winograd", 0.5), r"'winograd'.*conv_depthwise"),
    (lambda d: d["cost"]["cpu"]["M3"]["efficiency"].__setitem__("conv", 1.5), r"efficiency.conv must be in \(0, 1\]"),
    (lambda d: d["cost"]["cpu"]["M3"]["parallel_efficiency"].pop(3), r"lacks core counts \[3\]"),
    (lambda d: d["cost"]["cpu"]["M3"]["parallel_efficiency"].__setitem__(6, 0.5), r"core count 6 must be in 1\.\.4"),
    (lambda d: d["cost"]["cpu"]["M3"].__setitem__("sync_us", "fast"), r"sync_us must be a number, got 'fast'"),
    (lambda d: d["comm"].__setitem__("model", "cubic"), r"comm.model 'cubic'; valid choices: linear, poly"),
    (lambda d: d["comm"]["units"].__setitem__("size", "GB"), r"units.size 'GB'; valid choices: .*MB"),
    (lambda d: d["comm"].pop("map"), r"missing 'map'"),
    (lambda d: d["limits"].__setitem__("cpu_util_max", 1.5), r"cpu_util_max must be in \(0, 1\], got 1.5"),
    (lambda d: d.__setitem__("purpose", "mapping"), r"purpose of .*'mapping'; valid choices: layer-mapping, pipel"),
    (lambda d: d["power"]["cpu"].__setitem__("A72", {"busy_w": 1}), r"core type in power.cpu .*'A72'"),
    (lambda d: d["options"].__setitem__("N", [{"pe_type": "NPU"}]), r"NPU takes part in per-layer mapping only"),
])
def test_bad_layer_mapping_keys_are_refused_by_name(mutate, match):
    d = raw("galaxy-s9-sim")
    mutate(d)
    with pytest.raises(DseError, match=match):
        platform_from_dict(d)


def test_an_npu_needs_its_cost():
    d = raw("hikey970-sim")
    d["cost"].pop("npu")
    with pytest.raises(DseError, match="declares an NPU PE but no cost.npu"):
        platform_from_dict(d)


def test_a_linear_comm_section_and_an_unknown_kind(s9):
    d = raw("galaxy-s9-sim")
    d["comm"] = {"model": "linear", "bandwidth_gbs": 2.0, "fixed_us": 100}
    p = platform_from_dict(d)
    assert transfer_us(p, 2e6, "cpu1", "gpu") == pytest.approx(100 + 1000)
    with pytest.raises(DseError, match=r"unknown PE kind of platform galaxy-s9-sim 'npu'.*cpu1, cpu2, cpu3, cpu4, gpu"):
        transfer_us(s9, 10, "npu", "cpu1")
    with pytest.raises(DseError, match="unknown PE kind.*'cpu5'"):
        s9.pe_power_w("cpu5")


# -- costs -----------------------------------------------------------------------------------------------------

def test_cpu_layer_us_follows_the_scaling_formula(s9):
    c = s9.cost.cpu["M3"]
    layer = conv_layer()
    assert cpu_kind(layer) == "conv" and KERNELS["conv"] == 3
    t1 = (c.launch_us["conv"] + layer.macs / (c.peak_gmacs["fp32"] * 1e3 * c.efficiency["conv"])
          + (layer.input_bytes + layer.param_bytes + c.out_passes["conv"] * layer.activation_bytes)
          / (c.bandwidth_gbs * 1e3))
    for k in (1, 2, 3, 4):
        f = s9.cpu_freq_by_active_cores[k]
        expect = t1 * 2700 / f / (k * c.parallel_efficiency[k]) + c.sync_us * (k - 1) * 3
        assert cpu_layer_us(s9, layer, k) == pytest.approx(expect)
        # 002 L140: "all cores busy" = the 4-core frequency for every group
        busy = cpu_layer_us(s9, layer, k, active_cores=4)
        assert busy == pytest.approx((expect - c.sync_us * (k - 1) * 3) * f / 1790 + c.sync_us * (k - 1) * 3)
    assert cpu_layer_us(s9, layer, 1) < cpu_layer_us(s9, layer, 1, active_cores=2)   # 2.7 vs 2.31 GHz
    # a large layer speeds up with cores, a tiny one pays the synchronization (002 Table 1, c14)
    big, tiny = conv_layer(), conv_layer(cin=8, cout=8, hw=4, k=1)
    assert cpu_layer_us(s9, big, 4, active_cores=4) < 0.4 * cpu_layer_us(s9, big, 1, active_cores=4)
    assert cpu_layer_us(s9, tiny, 4, active_cores=4) > 0.5 * cpu_layer_us(s9, tiny, 1, active_cores=4)
    with pytest.raises(DseError, match=r"core count on platform galaxy-s9-sim 5"):
        cpu_layer_us(s9, big, 5)
    with pytest.raises(DseError, match=r"CPU precision .*'int8'; valid choices: fp32"):
        cpu_layer_us(s9, big, 2, "int8")
    with pytest.raises(DseError, match="no cost.cpu parameters for core type 'A55'; it has: M3"):
        cpu_layer_us(s9, big, 1, core_type="A55")


def test_kinds_of_the_cost_model():
    assert cpu_kind(conv_layer(k=1)) == "conv_1x1"
    assert cpu_kind(conv_layer(cin=32, cout=32, group=32)) == "conv_depthwise"
    assert cpu_kind(conv_layer(cin=32, cout=32, group=4)) == "conv_grouped"
    flat = Layer(1, "flatten_1", "Flatten", ("y",), ("z",), ((1, 10),), 0, 0, 40, 40, {})
    assert cpu_kind(flat) == "free" and cpu_layer_us(load_platform("galaxy-s9-sim"), flat, 4) == 0.0


def test_npu_is_the_quad_core_time_over_6_5(hikey):
    a = analyze(build_network("squeezenet", input_size=64))
    cpu4 = layer_times_us(hikey, a, "cpu4")
    np.testing.assert_allclose(layer_times_us(hikey, a, "npu"), cpu4 / 6.5)          # 002 L180
    assert npu_us(hikey, 650.0) == pytest.approx(100.0)
    with pytest.raises(DseError, match="no NPU cost"):
        npu_us(load_platform("galaxy-s9-sim"), 1.0)


def test_transfer_us_per_kind_pair(s9, hikey):
    mb = 1e6                                   # the poly model's size unit (002 L176, read as us and MB)
    memcpy = 1.06e-2 + 2.75e-1 + 1.70
    map_, unmap = 21.75 + 569.25, 9.97 + 526.39
    assert transfer_us(s9, mb, "cpu1", "cpu3") == pytest.approx(memcpy)                   # memcpy
    assert transfer_us(s9, mb, "gpu", "cpu2") == pytest.approx(map_ + memcpy)             # map + memcpy
    assert transfer_us(s9, mb, "cpu4", "gpu") == pytest.approx(map_ + memcpy + unmap)     # map + memcpy + unmap
    assert transfer_us(hikey, mb, "cpu1", "npu") == transfer_us(hikey, mb, "cpu1", "gpu")  # CPU<->NPU = CPU<->GPU
    assert transfer_us(hikey, mb, "npu", "cpu1") == transfer_us(hikey, mb, "gpu", "cpu1")
    assert transfer_us(hikey, mb, "gpu", "npu") == pytest.approx(2 * (map_ + memcpy) + unmap)   # through the host
    assert transfer_us(s9, 0, "cpu1", "cpu2") == pytest.approx(1.70)
    assert transfer_us(s9, 4 * mb, "cpu1", "cpu2") > transfer_us(s9, mb, "cpu1", "cpu2")
    x = load_platform("xavier-agx-sim")       # default linear model: the sim's GPU<->DLA reformat terms
    assert transfer_us(x, 1.4e6, "gpu", "dla") == pytest.approx(45 + 100)
    assert transfer_us(x, 1.4e6, "cpu2", "dla") == pytest.approx(45 + 100)


# -- zoo classifiers -------------------------------------------------------------------------------------------

# published multiply-accumulates (conv + FC) at the seeds' input sizes: MobileNet v1 569M (Howard et al. 2017,
# Table 1), v2 300M (Sandler et al. 2018, Table 3), SqueezeNet v1.1 ~350M (its release notes: 2.4x fewer than
# v1.0's ~830M), DenseNet-40 k=12 ~0.27G (265M computed: 3 blocks of 12 3x3 convs on 16+12i channels); k=32: 1.72G
MACS = {"mobilenet-v1": (569e6, 0.01), "mobilenet-v2": (300e6, 0.02), "squeezenet": (350e6, 0.03),
        "densenet-40-k12": (265e6, 0.02), "densenet-40": (1.72e9, 0.01)}
NODES = {"mobilenet-v1": 58, "mobilenet-v2": 101, "squeezenet": 66, "densenet-40": 120, "densenet-40-k12": 120}


@pytest.mark.parametrize("name", list(MACS))
def test_classifiers_build_analyse_and_run(name):
    entry = ZOO[name]
    assert entry.family == "layermap" and entry.input_size == (32 if name.startswith("densenet") else 224)
    model = build_network(name)
    a = analyze(model)
    convs = [layer for layer in a.layers if layer.op_type in ("Conv", "Gemm")]
    published, tol = MACS[name]
    assert sum(layer.macs for layer in convs) == pytest.approx(published, rel=tol)
    assert len(a.layers) == NODES[name] and a.feasible_cuts
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random((1, 3, entry.input_size, entry.input_size), dtype=np.float32)
    (probs,) = session.run(None, {"input": x})
    assert probs.shape == (1, 10 if name.startswith("densenet") else 1000)
    assert np.isfinite(probs).all() and probs.sum() == pytest.approx(1.0, rel=1e-4)


def test_classifier_structure():
    ops = {n: [layer.op_type for layer in analyze(build_network(n, input_size=64)).layers] for n in NETWORKS}
    depthwise = lambda n: sum(1 for layer in analyze(build_network(n, input_size=64)).layers  # noqa: E731
                              if cpu_kind(layer) == "conv_depthwise")
    assert depthwise("mobilenet-v1") == 13 and depthwise("mobilenet-v2") == 17
    assert ops["mobilenet-v2"].count("Add") == 10 and ops["mobilenet-v2"].count("Clip") == 35   # ReLU6
    assert ops["squeezenet"].count("Concat") == 8 and ops["squeezenet"].count("MaxPool") == 3  # 8 fire modules
    assert ops["densenet-40"].count("Concat") == 36 and ops["densenet-40"].count("AveragePool") == 2
    assert set(list_networks(family="layermap")) == {*NETWORKS, "densenet-40-k12"}


def test_depthwise_conv_and_local_avgpool_semantics():
    cfg = ("[net]\nwidth=4\nheight=4\nchannels=3\n[convolutional]\nfilters=3\nsize=3\npad=1\ngroups=3\n"
           "activation=linear\n[avgpool]\nsize=2\nstride=2\npadding=0\n")
    model = convert(cfg)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    w, b = inits["conv_0.weight"], inits["conv_0.bias"]
    x = np.random.default_rng(1).random((1, 3, 4, 4), dtype=np.float32)
    pad = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.stack([[[(pad[0, c, i:i + 3, j:j + 3] * w[c, 0]).sum() + b[c] for j in range(4)] for i in range(4)]
                     for c in range(3)])          # each channel sees only itself
    pooled = conv.reshape(3, 2, 2, 2, 2).mean(axis=(2, 4))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"input": x})[0][0], pooled, rtol=1e-5, atol=1e-6)


# -- calibration (004 Fig. 13) ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NETWORKS)
def test_galaxy_s9_whole_network_times_match_fig13(s9, name):
    gpu, cpu = cal.FIG13[name]
    a = cal.analysis(name)
    assert layer_times_us(s9, a, "gpu").sum() == pytest.approx(gpu, rel=cal.TOLERANCE)
    assert layer_times_us(s9, a, "cpu4").sum() == pytest.approx(cpu, rel=cal.TOLERANCE)


def test_calibration_bench_writes_its_table(tmp_path):
    out = tmp_path / "cal.json"
    assert cal.main(["--output", str(out)]) == 0
    data = json.loads(out.read_text())
    fig13 = [r for r in data["rows"] if r["group"] == "fig13"]
    assert len(fig13) == 8 and all(r["ok"] for r in fig13) and data["misses"] == []
    assert any(r["group"] == "002 Table 1" for r in data["rows"]) and data["tolerance"] == 0.1


def test_hikey_costs_follow_its_clocks(s9, hikey):
    a = cal.analysis("mobilenet-v1")
    # the A73 at a fixed 2.36 GHz beats the M3 held at 1.79 GHz when all 4 cores are busy, loses at 1 core (2.7)
    assert layer_times_us(hikey, a, "cpu4").sum() < layer_times_us(s9, a, "cpu4").sum()
    assert layer_times_us(hikey, a, "cpu1").sum() > layer_times_us(s9, a, "cpu1").sum()
    # Mali-G72 MP12 at 767 MHz vs MP18 at 572 MHz: a little slower
    ratio = layer_times_us(hikey, a, "gpu").sum() / layer_times_us(s9, a, "gpu").sum()
    assert 1.0 < ratio < 1.12
