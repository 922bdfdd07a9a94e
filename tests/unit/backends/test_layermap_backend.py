"""Per-layer mapping configurations (option LM:..., mapping in extra) through the backends, the Evaluator's cache
and the Parquet store: real ORT runs of tiny networks on this host's core groups, and
virtual-board measurements from the sim profile, analytic model and task-graph DES."""
from __future__ import annotations

import numpy as np
import pytest

from dse.backends.base import MeasureSettings, warmup_frames, window_frames
from dse.backends.layermap import stage_mapping
from dse.backends.ort import OrtBackend
from dse.backends.sim import SimBackend
from dse.core.configuration import Configuration
from dse.evaluate import Evaluator
from dse.graph.analysis import analyze
from dse.taskgraph import LayerMapping
from dse.platform import load_platform
from dse.store import read, row_to_measurement
from dse.zoo import build_network

SIZE = 64
CORES = load_platform("host-cpu").mapping_core_ids()
SINGLES = "-".join("1" * len(CORES))   # one single-core PE per usable core


@pytest.fixture(scope="module")
def detector():
    return analyze(build_network("tiny-detector", input_size=SIZE))


def _ort(analysis, frames=30, keep=False):
    return OrtBackend("host-cpu", analysis, MeasureSettings(precision="fp32", sample_size=frames, input_size=SIZE,
                                                            warmup=3), keep_outputs=keep)


def _base(platform="host-cpu", precision="fp32", buffers=6):
    return Configuration(benchmark="tiny-detector", platform=platform, precision=precision, input_size=SIZE,
                         buffers=buffers)


def test_lm_configuration_is_cached_and_stored_with_its_mapping(detector, tmp_path):
    backend = _ort(detector)
    graph = backend.layermap.graph("fp32")
    lm = LayerMapping(SINGLES, [i % len(CORES) for i in range(graph.n)], graph_digest=graph.digest)
    config = lm.to_configuration(_base())
    store = tmp_path / "m.parquet"
    ev = Evaluator(backend, store)
    m1 = ev.evaluate(config, phase="p", strategy="s")
    assert m1.ok, m1.reason
    assert m1.fps > 0 and m1.latency_ms_p99 >= m1.latency_ms_p50 > 0 and 0 < m1.cpu_util <= 1
    segments = len(np.flatnonzero(np.diff(graph.expand(lm.array)))) + 1
    assert len(m1.stage_ms) == segments and set(m1.util) == {"CPU%d" % c for c in CORES}
    assert ev.evaluate(config, phase="p", strategy="s") is m1
    assert (ev.measured, ev.reused) == (1, 1)
    rows = read(store).to_dict("records")
    assert len(rows) == 1 and rows[0]["config_hash"] == config.hash
    stored = row_to_measurement(rows[0])
    assert stored.config == config and LayerMapping.from_configuration(stored.config) == lm
    again = Evaluator(_ort(detector), store)   # a new run answers from the file
    assert again.evaluate(config, phase="p", strategy="s").fps == pytest.approx(m1.fps)
    assert again.measured == 0


def test_ort_refuses_mappings_that_do_not_fit_this_host(detector):
    backend = _ort(detector)
    graph = backend.layermap.graph("fp32")
    n = graph.n
    base = _base()
    reason = backend.check(LayerMapping("9", [0] * n).to_configuration(base))
    assert "unknown CPU configuration '9'" in reason and "valid choices for" in reason and "cores" in reason
    m = backend.measure(LayerMapping("9", [0] * n).to_configuration(base))
    assert m.status == "refused" and "valid choices" in m.reason
    cpu = SINGLES
    assert "asks for 1 GPU PE(s); platform host-cpu has 0" in \
        backend.check(LayerMapping(cpu, [0] * n, accelerators=("gpu",)).to_configuration(base))
    assert f"layer_map has {n - 1} PE ids, the task graph has {n} tasks" in \
        backend.check(LayerMapping(cpu, [0] * (n - 1)).to_configuration(base))
    assert f"task 3 ({graph.names[3]}) on PE id 7; valid choices: 0..{len(CORES) - 1}" in \
        backend.check(LayerMapping(cpu, [0, 0, 0, 7] + [0] * (n - 4)).to_configuration(base))
    assert "was made for task graph abc" in \
        backend.check(LayerMapping(cpu, [0] * n, graph_digest="abc").to_configuration(base))
    assert "buffers 99 exceeds the limit" in backend.check(LayerMapping(cpu, [0] * n).to_configuration(_base(buffers=99)))


# host-cpu's pipeline option and the layer-mapping CPU configuration of the same core groups
SAME_GROUPS = [("E", "2"), ("1-1", "1-1")]


def _pair(analysis, option, cuts):
    """(pipeline configuration, the LM configuration of the same core groups and cuts)."""
    backend = _ort(analysis, frames=12, keep=True)
    graph = backend.layermap.graph("fp32")
    pipe = _base().with_(option=option, cuts=cuts, streams=(1,) * (len(cuts) + 1))
    cpu_config = dict(SAME_GROUPS)[option]
    lm = LayerMapping(cpu_config, stage_mapping(graph, analysis.stage_of(cuts)), graph_digest=graph.digest)
    return backend, pipe, lm.to_configuration(_base())


@pytest.mark.parametrize("option,cpu_config", SAME_GROUPS)
def test_contiguous_mapping_equals_the_pipeline_configuration(detector, option, cpu_config):
    if len(CORES) != 2:
        pytest.skip("the options of a two-core host")
    cuts = () if option == "E" else (detector.feasible_cuts[len(detector.feasible_cuts) // 2],)
    backend, pipe, lm = _pair(detector, option, cuts)
    assert lm.option == f"LM:{cpu_config}" and lm.hash != pipe.hash
    m_pipe = backend.measure(pipe)
    out_pipe = backend.last_run.outputs
    m_lm = backend.measure(lm)
    out_lm = backend.last_run.outputs
    assert m_pipe.ok and m_lm.ok, (m_pipe.reason, m_lm.reason)
    for config, out in ((pipe, out_pipe), (lm, out_lm)):      # a window of the steady state, after a warm-up
        assert sorted(out) == list(range(window_frames(12, config) + warmup_frames(backend.warmup, config)))
    for f in set(out_pipe) & set(out_lm):
        assert set(out_pipe[f]) == set(out_lm[f])
        for name in out_pipe[f]:
            np.testing.assert_array_equal(out_pipe[f][name], out_lm[f][name])
    assert set(m_pipe.util) == set(m_lm.util) and len(m_pipe.stage_ms) == len(m_lm.stage_ms) == len(cuts) + 1


@pytest.mark.slow
@pytest.mark.parametrize("option,cpu_config", SAME_GROUPS)
def test_contiguous_mapping_runs_as_fast_as_the_pipeline_configuration(option, cpu_config):
    """Five interleaved rounds of 200 frames each through the backend, yolov3-tiny at 128: the median FPS ratio in
    a band that allows for the shared host's load (single runs vary by 2x)."""
    if len(CORES) != 2:
        pytest.skip("the options of a two-core host")
    analysis = analyze(build_network("yolov3-tiny", input_size=128))
    cuts = () if option == "E" else (analysis.feasible_cuts[len(analysis.feasible_cuts) // 2],)
    backend = OrtBackend("host-cpu", analysis, MeasureSettings(precision="fp32", sample_size=200, input_size=128,
                                                               warmup=20))
    graph = backend.layermap.graph("fp32")
    base = _base().with_(input_size=128)
    pipe = base.with_(option=option, cuts=cuts, streams=(1,) * (len(cuts) + 1))
    lm = LayerMapping(cpu_config, stage_mapping(graph, analysis.stage_of(cuts))).to_configuration(base)
    ratios = []
    for _ in range(5):
        a, b = backend.measure(pipe), backend.measure(lm)
        assert a.ok and b.ok, (a.reason, b.reason)
        ratios.append(b.fps / a.fps)
    assert 0.75 < float(np.median(ratios)) < 1.33, ratios


# --- sim --------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def xavier(detector):
    backend = SimBackend("xavier-agx-sim", detector, MeasureSettings(input_size=SIZE, seed=0))
    return backend, backend.layermap.graph("int8"), _base("xavier-agx-sim", "int8", buffers=1)


def test_sim_measures_gpu_dla_mappings_with_noise(xavier, tmp_path):
    backend, graph, base = xavier
    gpu_only = LayerMapping("8", [1] * graph.n, accelerators=("gpu",)).to_configuration(base)
    m = backend.measure(gpu_only)
    assert m.ok, m.reason
    assert m.util["GPU"] > 0.9 and m.cpu_util == 0 and m.power_w > 0 and len(m.stage_ms) == 1
    t_gpu = sum(m.stage_ms)
    assert 1000 / m.fps == pytest.approx(t_gpu, rel=0.1)   # period = the GPU's load, noise ~1 %
    again = backend.measure(gpu_only, repeat=1)
    assert again.ok and again.fps != m.fps and again.fps == pytest.approx(m.fps, rel=0.1)
    assert backend.measure(gpu_only).fps == m.fps   # seeded
    # DLA-capable tasks alternate GPU and DLA0: a two-PE pipeline beats the GPU alone
    from dse.backends.sim.tasks import profile_from_sim

    dla = profile_from_sim(backend.platform, backend.analysis, graph, ["dla"], "int8").column("dla")
    ids = [2 if np.isfinite(dla[i]) and i >= graph.n // 2 else 1 for i in range(graph.n)]
    split = LayerMapping("8", ids, accelerators=("gpu", "dla")).to_configuration(base)
    ms = Evaluator(backend, tmp_path / "s.parquet").evaluate(split, phase="p", strategy="s")
    assert ms.ok, ms.reason
    assert set(ms.util) >= {"GPU", "DLA0"} and ms.util["DLA0"] > 0
    bad = LayerMapping("8", [2] * graph.n, accelerators=("gpu", "dla")).to_configuration(base)
    if not np.isfinite(dla).all():
        r = backend.measure(bad)
        assert r.status == "refused" and "cannot run on PE 2 (DLA0" in r.reason
    assert "asks for 3 DLA PE(s); platform xavier-agx-sim has 2" in \
        backend.check(LayerMapping("8", [1] * graph.n, accelerators=("gpu", "dla", "dla", "dla")).to_configuration(base))
    assert "analysed input size 64" in backend.check(gpu_only.with_(input_size=128))
    fp32 = LayerMapping("8", [1] * graph.n, accelerators=("gpu", "dla")).to_configuration(base.with_(precision="fp32"))
    assert "the DLA of xavier-agx-sim runs precision(s)" in backend.check(fp32)


def test_sim_cpu_kinds_need_a_cpu_cost_model(xavier, detector):
    """CPU kinds are costed by dse.backends.sim.cpu_cost from the board's cpu.clusters and cost.cpu: a board
    without them is refused, naming the missing key; the Xavier's Carmel cores run fp32/fp16 (int8 is refused,
    naming the precisions); galaxy-s9-sim's big cluster is measured, the CPU groups busy."""
    import yaml

    from dse.config import config_dir

    backend, graph, base = xavier
    mapping = LayerMapping("4-4", [i % 3 for i in range(graph.n)], accelerators=("gpu",))
    m = backend.measure(mapping.to_configuration(base))
    assert m.status == "refused" and "CPU precision" in m.reason and "fp16, fp32" in m.reason, m.reason
    m = backend.measure(mapping.to_configuration(base.with_(precision="fp16")))
    assert m.ok and m.util["CPU0-3"] > 0 and m.util["CPU4-7"] > 0, m.reason
    bare = yaml.safe_load((config_dir() / "platform" / "xavier-agx-sim.yaml").read_text())
    del bare["cpu"]["clusters"], bare["cost"]["cpu"]
    plain = SimBackend(bare, detector, MeasureSettings(input_size=SIZE, seed=0))
    m = plain.measure(mapping.to_configuration(base))
    assert m.status == "refused" and "cpu.clusters" in m.reason, m.reason
    s9 = SimBackend("galaxy-s9-sim", detector, MeasureSettings(input_size=SIZE, seed=0))
    g = s9.layermap.graph("fp32")
    m = s9.measure(LayerMapping("2-2", [i % 3 for i in range(g.n)], accelerators=("gpu",))
                   .to_configuration(_base("galaxy-s9-sim", "fp32", buffers=1)))
    assert m.ok, m.reason
    assert set(m.util) == {"CPU4-5", "CPU6-7", "GPU"}, m.util   # the big M3 cluster is cores 4-7
    assert m.util["CPU4-5"] > 0 and m.util["CPU6-7"] > 0 and m.util["GPU"] > 0 and m.fps > 0, m.util
