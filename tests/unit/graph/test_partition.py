"""Stage partitioning: chained stages equal the whole network (Polygraphy's Comparator on ONNX Runtime), boundary
tensors are exact, errors are clear."""
from __future__ import annotations

import functools
import itertools
import json

import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import numpy_helper

from dse.cli import main
from dse.core.errors import DseError
from dse.graph.analysis import analyze
from dse.graph.partition import check_partition, partition, write_partition
from dse.zoo import build_network, save_network
from tests.models import paddle_style_detector, pytorch_style_convnet, random_dag_model

ZOO_NETS = ("tiny-chain", "tiny-residual", "tiny-detector", "yolov4-tiny")
TEST_MODELS = {
    "torch-opset17": lambda: (pytorch_style_convnet(17), {"input": [1, 3, 32, 32]}),
    "torch-opset11": lambda: (pytorch_style_convnet(11), {"input": [2, 3, 16, 16]}),
    "paddle-opset13": lambda: (paddle_style_detector(13), {"image": [1, 3, 32, 32]}),
    "random-dag-3": lambda: (random_dag_model(3), None),
    "random-dag-11": lambda: (random_dag_model(11), None),
}


@functools.lru_cache(maxsize=None)
def analysis_of(name: str):
    if name in TEST_MODELS:
        model, shapes = TEST_MODELS[name]()
        return analyze(model, shapes)
    return analyze(build_network(name, input_size=64))


@functools.lru_cache(maxsize=None)
def feasible_tuples(name: str) -> tuple[tuple[int, ...], ...]:
    """Every feasible tuple of 1 to 3 cuts (the models are small enough to list them)."""
    a = analysis_of(name)
    return tuple(c for k in (1, 2, 3) for c in itertools.combinations(a.feasible_cuts, k) if a.check_cuts(c) is None)


def assert_stages_consistent(a, stages, cuts):
    assert [s.last_layer for s in stages[:-1]] == list(cuts)
    assert stages[0].first_layer == 0 and stages[-1].last_layer == len(a.layers) - 1
    net_inputs, net_outputs = set(a.inputs), set(a.outputs)
    crossing = a.crossing_tensors(cuts)
    for k, s in enumerate(stages):
        g = s.model.graph
        assert [n.name for n in g.node] == [a.layers[i].name for i in range(s.first_layer, s.last_layer + 1)]
        assert [i.name for i in g.input if i.name not in {t.name for t in g.initializer}] == s.inputs
        assert [o.name for o in g.output] == s.outputs
        for vi in list(g.input) + list(g.output):  # shapes inferred and static
            dims = vi.type.tensor_type.shape.dim
            assert all(d.HasField("dim_value") and d.dim_value > 0 for d in dims), vi
        if k > 0:  # exactly what the previous stage hands over (plus network inputs read here)
            assert set(s.inputs) - net_inputs == set(crossing[k - 1])
            handed = set(crossing[k - 1])
            assert handed <= set(stages[k - 1].outputs) and set(stages[k - 1].outputs) - handed <= net_outputs
        produced = {o for n in g.node for o in n.output}
        assert produced & net_outputs <= set(s.outputs)
    assert {o for s in stages for o in s.outputs} >= net_outputs


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_feasible_tuples_on_zoo_networks(data):
    name = data.draw(st.sampled_from(ZOO_NETS), label="network")
    cuts = data.draw(st.sampled_from(feasible_tuples(name)), label="cuts")
    a = analysis_of(name)
    stages = partition(a, cuts)
    assert_stages_consistent(a, stages, cuts)
    diffs = check_partition(a, stages, seed=1)
    assert set(diffs) == set(a.outputs) and max(diffs.values()) <= 1e-5


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_feasible_tuples_on_exporter_style_models(data):
    """Dynamic axes, shape subgraphs, an If reading outer tensors, long skip edges, outputs mid-graph."""
    name = data.draw(st.sampled_from(sorted(TEST_MODELS)), label="model")
    cuts = data.draw(st.sampled_from(feasible_tuples(name)), label="cuts")
    a = analysis_of(name)
    stages = partition(a, cuts)
    assert_stages_consistent(a, stages, cuts)
    assert max(check_partition(a, stages, seed=2).values()) <= 1e-5


def test_detector_boundaries_and_written_files(tmp_path):
    a = analysis_of("tiny-detector")
    cuts = next(c for c in feasible_tuples("tiny-detector") if len(c) == 2 and len(a.crossing_tensors(c)[0]) == 2)
    stages = partition(a, cuts)
    assert len(stages[0].outputs) == 2 and stages[1].inputs == stages[0].outputs
    # a second partition with more stages leaves files the manifest must not keep
    more = next(c for c in feasible_tuples("tiny-detector") if len(c) == 3)
    write_partition(partition(a, more), tmp_path, digest=a.digest)
    path = write_partition(stages, tmp_path, digest=a.digest)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["partition.json", "stage_0.onnx", "stage_1.onnx", "stage_2.onnx"]
    man = json.loads(path.read_text())
    assert man["cuts"] == list(cuts) and man["model_digest"] == a.digest
    assert [(s["first_layer"], s["last_layer"]) for s in man["stages"]] == [(s.first_layer, s.last_layer) for s in stages]
    assert list(man["stages"][1]["inputs"]) == stages[1].inputs
    assert sum(s["macs"] for s in man["stages"]) == sum(layer.macs for layer in a.layers)
    reloaded = [onnx.load(tmp_path / f"stage_{k}.onnx") for k in range(3)]
    for s, m in zip(stages, reloaded):
        s.model = m
    assert set(check_partition(a, stages)) == set(a.outputs)  # the written files chain to the network


def test_check_fails_when_a_stage_is_wrong():
    """A stage whose weights were altered fails the check, naming the output; a small atol does not hide it."""
    a = analysis_of("tiny-residual")
    cuts = feasible_tuples("tiny-residual")[3]
    stages = partition(a, cuts)
    init = next(t for t in stages[-1].model.graph.initializer if numpy_helper.to_array(t).ndim == 4)
    arr = numpy_helper.to_array(init).copy()
    arr.flat[0] += 0.5
    init.CopyFrom(numpy_helper.from_array(arr, init.name))
    (output,) = a.outputs
    with pytest.raises(DseError, match=rf"partition check failed: {output} max abs diff [0-9.e-]+ > 1e-05"):
        check_partition(a, stages)
    diffs_loose = check_partition(a, stages, atol=1e3)  # the same diff, now within tolerance, is reported
    assert 1e-5 < diffs_loose[output] <= 1e3


def test_check_fails_when_no_stage_produces_an_output():
    a = analysis_of("tiny-detector")
    cuts = next(c for c in feasible_tuples("tiny-detector") if len(c) == 1)
    stages = partition(a, cuts)
    last = stages[-1]
    dropped = next(o for o in last.outputs if o in a.outputs)
    last.outputs.remove(dropped)
    kept = [vi for vi in last.model.graph.output if vi.name != dropped]
    del last.model.graph.output[:]
    last.model.graph.output.extend(kept)
    with pytest.raises(DseError, match=f"network output '{dropped}' is produced by no stage"):
        check_partition(a, stages)


def test_partition_errors_name_the_problem():
    a = analysis_of("paddle-opset13")
    n = len(a.layers)
    with pytest.raises(DseError, match=rf"out of range.*0\.\.{n - 2}"):
        partition(a, (3, n))
    with pytest.raises(DseError, match="strictly increasing"):
        partition(a, (5, 5))
    fused = next(c for c in range(n - 1) if c not in a.feasible_cuts
                 and "fused chain" in (a.check_cuts((c,)) or ""))
    below, above = (str(x).lower() for x in a.nearest_feasible(fused))
    with pytest.raises(DseError, match=rf"fused chain.*nearest feasible positions: {below}, {above}"):
        partition(a, (fused,))
    feasible = set(feasible_tuples("paddle-opset13"))
    skip = next(c for c in itertools.combinations(a.feasible_cuts, 2) if c not in feasible)
    with pytest.raises(DseError, match=r"tensor '.+' produced in stage 0 .* would skip stage 1"):
        partition(a, skip)


@pytest.fixture(scope="module")
def detector_file(tmp_path_factory):
    return str(save_network(build_network("tiny-detector", input_size=64), tmp_path_factory.mktemp("m") / "det.onnx"))


def test_cli_partition_with_check(detector_file, tmp_path, capsys):
    cuts = feasible_tuples("tiny-detector")[-1]
    out = tmp_path / "stages"
    rc = main(["partition", detector_file, "--cuts", ",".join(map(str, cuts)), "-o", str(out), "--check"])
    text = capsys.readouterr().out
    assert rc == 0
    assert "match, max abs diff" in text and "MMACs" in text and "partition.json" in text
    assert len(list(out.glob("stage_*.onnx"))) == len(cuts) + 1


def test_cli_partition_of_a_dynamic_model_needs_and_takes_shapes(tmp_path, capsys):
    path = tmp_path / "torch.onnx"
    onnx.save(pytorch_style_convnet(17), path)
    a = analysis_of("torch-opset17")
    cuts = feasible_tuples("torch-opset17")[-1]
    rc = main(["partition", str(path), "--cuts", ",".join(map(str, cuts)), "--input-shape", "input:1x3x32x32",
               "-o", str(tmp_path / "out"), "--check"])
    assert rc == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "out" / "partition.json").read_text())["model_digest"] == a.digest


@pytest.mark.parametrize("cuts, message", [
    ("500", "out of range"),
    ("7,3", "strictly increasing"),
])
def test_cli_partition_errors(detector_file, tmp_path, capsys, cuts, message):
    rc = main(["partition", detector_file, "--cuts", cuts, "-o", str(tmp_path / "o")])
    assert rc == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()  # nothing half-written


def test_cli_partition_infeasible_and_fused(detector_file, tmp_path, capsys):
    a = analysis_of("tiny-detector")
    fused = next(c for c in range(len(a.layers) - 1) if "fused chain" in (a.check_cuts((c,)) or ""))
    assert main(["partition", detector_file, "--cuts", str(fused), "-o", str(tmp_path / "o")]) == 2
    assert "nearest feasible positions" in capsys.readouterr().err
    skip = next(c for c in itertools.combinations(a.feasible_cuts, 2) if a.check_cuts(c))
    assert main(["partition", detector_file, "--cuts", ",".join(map(str, skip)), "-o", str(tmp_path / "o")]) == 2
    assert "would skip" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
