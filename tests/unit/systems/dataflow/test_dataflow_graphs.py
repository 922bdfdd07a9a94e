"""Dataflow graphs of Ch. 5: the shipped motivational example, every refused input, the random generator."""
import copy
import pickle

import networkx as nx
import pytest
import yaml

from dse.systems.dataflow.graphs import (GRAFT_TASK, DataflowGraph, DataflowTask, load_graph, motivational_graph,
                                 random_graph)
from dse.core.errors import DseError

EDGES = {("ReadImage", "cvt_BGR_NV12"), ("cvt_BGR_NV12", "Rescale-1"), ("Rescale-1", "Bilateral"),
         ("Bilateral", "cvt_NV12_BGR-1"), ("cvt_BGR_NV12", "Rescale-2"), ("Rescale-2", "cvt_NV12_BGR-2"),
         ("cvt_NV12_BGR-2", "SaveImage")}
KINDS = {"ReadImage": ("cpu",), "cvt_BGR_NV12": ("cpu", "gpu"), "Rescale-1": ("gpu",), "Bilateral": ("cpu", "gpu"),
         "cvt_NV12_BGR-1": ("cpu", "gpu"), "Rescale-2": ("gpu",), "cvt_NV12_BGR-2": ("cpu", "gpu"),
         "SaveImage": ("cpu",)}


def base():
    return {"name": "G", "tasks": {"A": {"wcet_us": {"cpu": 100}}, "B": {"wcet_us": {"cpu": 50, "gpu": 10}},
                                   "C": {"wcet_us": {"gpu": 20}}},
            "edges": [["A", "B"], ["B", "C"]]}


def refused(spec, *fragments):
    with pytest.raises(DseError) as e:
        load_graph(spec)
    for f in fragments:
        assert f in str(e.value), (f, str(e.value))
    return str(e.value)


# ---------------------------------------------------------------- the shipped example

def test_motivational_graph():
    g = motivational_graph()
    assert g.name == "ImageProcessing" and len(g.tasks) == 8
    assert set(g.edges) == EDGES and len(g.edges) == 7
    assert {t.name: t.processors for t in g.tasks} == KINDS
    assert GRAFT_TASK == "cvt_NV12_BGR-1" and GRAFT_TASK in g.index
    pos = g.index
    assert all(pos[u] < pos[v] for u, v in g.edges)
    assert all(i < j for i, j in g.edge_indices())
    assert [t.name for t in g.tasks] == list(nx.lexicographical_topological_sort(g.to_networkx(),
                                                                                    key=lambda n: pos[n]))
    assert g.sources == ("ReadImage",) and set(g.sinks) == {GRAFT_TASK, "SaveImage"}
    for t in g.tasks:                           # whole microseconds; default shares
        for k, w in t.wcet_us.items():
            assert w == int(w) and w > 0
            assert t.acet_us[k] == pytest.approx(0.8 * w) and t.bcet_us[k] == pytest.approx(0.6 * w)
    # a few ms of CPU work, well under a 40 ms period even with four copies on four cores
    assert 2000 < g.total_wcet_us("cpu") < 10000 and g.total_wcet_us("gpu") < g.total_wcet_us("cpu")
    assert motivational_graph("IP2").name == "IP2" and motivational_graph("IP2").tasks == g.tasks
    assert load_graph("image-processing") == g
    assert pickle.loads(pickle.dumps(g)) == g and hash(g) == hash(copy.deepcopy(g))


def test_load_from_yaml_file(tmp_path):
    p = tmp_path / "g.yaml"
    spec = base()
    spec["acet_share"], spec["bcet_share"] = 0.5, 0.25
    spec["tasks"]["B"]["acet_us"] = {"gpu": 9}
    p.write_text(yaml.safe_dump(spec))
    g = load_graph(p)
    assert load_graph(str(p)) == g
    b = g.task("B")
    assert b.acet_us == {"cpu": 25, "gpu": 9} and b.bcet_us == {"cpu": 12.5, "gpu": 2.5}
    assert g.task("A").processors == ("cpu",) and g.task("C").processors == ("gpu",)


def test_topological_order_is_deterministic():
    spec = base()
    spec["tasks"] = {"C": spec["tasks"]["C"], "X": {"wcet_us": {"cpu": 1}}, "B": spec["tasks"]["B"],
                     "A": spec["tasks"]["A"]}
    g = load_graph(spec)
    assert [t.name for t in g.tasks] == ["X", "A", "B", "C"]   # X: no constraints, listed before A
    assert g.edge_indices() == ((1, 2), (2, 3))
    assert g.sources == ("X", "A") and g.sinks == ("X", "C")    # a disconnected task is fine


def test_scaled_and_renamed():
    g = load_graph(base())
    s = g.scaled(2.5)
    assert s is not g and s.name == "G" and s.edges == g.edges
    for a, b in zip(g.tasks, s.tasks):
        for attr in ("wcet_us", "acet_us", "bcet_us"):
            assert getattr(b, attr) == pytest.approx({k: 2.5 * v for k, v in getattr(a, attr).items()})
    assert g.task("A").wcet_us == {"cpu": 100}                    # the original is untouched
    r = g.renamed("H")
    assert r.name == "H" and r.tasks == g.tasks and r.edges == g.edges and g.name == "G"
    with pytest.raises(DseError, match="scale factor"):
        g.scaled(0)


# ---------------------------------------------------------------- refused inputs

def test_cycle_names_its_tasks():
    spec = base()
    spec["edges"].append(["C", "A"])
    msg = refused(spec, "graph 'G'", "cycle")
    assert all(t in msg for t in "ABC")


def test_task_without_processor():
    spec = base()
    spec["tasks"]["B"] = {"wcet_us": {}}
    refused(spec, "graph 'G'", "task 'B'", "no allowed processor", "cpu, gpu")
    spec["tasks"]["B"] = None
    refused(spec, "task 'B'", "no allowed processor")
    spec["tasks"]["B"] = {"acet_us": {"cpu": 1}}
    refused(spec, "task 'B'", "no allowed processor")


def test_unknown_processor_kind():
    spec = base()
    spec["tasks"]["B"]["wcet_us"]["dla"] = 5
    refused(spec, "graph 'G'", "task 'B'", "'dla'", "cpu, gpu")


@pytest.mark.parametrize("bad", [0, -3, "fast", None, True, float("nan"), float("inf")])
def test_bad_wcet(bad):
    spec = base()
    spec["tasks"]["B"]["wcet_us"]["cpu"] = bad
    refused(spec, "graph 'G'", "task 'B'", "wcet_us.cpu")


def test_acet_bcet_order():
    spec = base()
    spec["tasks"]["B"]["acet_us"] = {"cpu": 60}
    refused(spec, "task 'B'", "acet_us.cpu = 60 exceeds wcet_us.cpu = 50")
    spec["tasks"]["B"]["acet_us"] = {"cpu": 40}
    spec["tasks"]["B"]["bcet_us"] = {"cpu": 45}
    refused(spec, "task 'B'", "bcet_us.cpu = 45 exceeds acet_us.cpu = 40")
    spec["tasks"]["B"]["bcet_us"] = {"gpu": 5}
    spec["tasks"]["A"]["acet_us"] = {"gpu": 5}                   # A may not run on the GPU
    refused(spec, "task 'A'", "acet_us gives 'gpu'", "only on cpu")


def test_bad_edges():
    spec = base()
    spec["edges"].append(["B", "Z"])
    refused(spec, "graph 'G'", "'B' -> 'Z'", "unknown task 'Z'", "A, B, C")
    spec = base()
    spec["edges"].append(["Y", "A"])
    refused(spec, "'Y' -> 'A'", "unknown task 'Y'")
    spec = base()
    spec["edges"].append(["B", "B"])
    refused(spec, "'B' -> 'B'", "self-loop")
    spec = base()
    spec["edges"].append(["A", "B"])
    refused(spec, "'A' -> 'B'", "twice")
    spec = base()
    spec["edges"].append(["A", "B", "C"])
    refused(spec, "graph 'G'", "pair")


def test_unknown_keys_at_every_level():
    spec = base()
    spec["period"] = 40
    refused(spec, "graph 'G'", "'period'", "acet_share, bcet_share, edges, name, tasks")
    spec = base()
    spec["tasks"]["A"]["wcet"] = {"cpu": 1}
    refused(spec, "graph 'G'", "task 'A'", "'wcet'", "acet_us, bcet_us, wcet_us")


def test_no_tasks_and_bad_graph_values():
    spec = base()
    spec["tasks"] = {}
    refused(spec, "graph 'G'", "no tasks")
    spec = base()
    del spec["name"]
    refused(spec, "name")
    spec = base()
    spec["acet_share"] = 1.5
    refused(spec, "graph 'G'", "acet_share", "(0, 1]")
    spec = base()
    spec["acet_share"], spec["bcet_share"] = 0.5, 0.7
    refused(spec, "bcet_share 0.7 exceeds acet_share 0.5")
    refused("no-such-graph", "unknown dataflow graph 'no-such-graph'", "image-processing")
    refused("/nonexistent/g.yaml", "no such file")


def test_constructor_checks_too():
    a = DataflowTask("A", {"cpu": 10})
    assert a.acet_us == {"cpu": 8} and a.bcet_us == {"cpu": 6}
    with pytest.raises(DseError, match="listed twice"):
        DataflowGraph("G", (a, a))
    with pytest.raises(DseError, match="no tasks"):
        DataflowGraph("G", ())
    with pytest.raises(DseError, match="no allowed processor"):
        DataflowTask("A", {})


# ---------------------------------------------------------------- random graphs

SEEDS = range(40)


def test_random_graph_deterministic_per_seed():
    assert random_graph("R", 7) == random_graph("R", 7)
    assert len({random_graph("R", s) for s in range(10)}) == 10
    assert random_graph("R", 1).edges != random_graph("R", 2).edges or \
        random_graph("R", 1).tasks != random_graph("R", 2).tasks


@pytest.mark.parametrize("n", [1, 2, 3, 10, 25])
def test_random_graph_shape(n):
    for s in SEEDS:
        g = random_graph(f"R{s}", s, n)
        dg = g.to_networkx()
        assert len(g.tasks) == n and nx.is_directed_acyclic_graph(dg) and nx.is_weakly_connected(dg)
        assert all(i < j for i, j in g.edge_indices())
        sources = set(g.sources)
        for v in dg:
            assert v in sources or 1 <= dg.in_degree(v) <= 2
        gpu_only = sum(t.processors == ("gpu",) for t in g.tasks)
        assert gpu_only == int(n * 0.5 + 0.5)
        assert all(t.processors in (("gpu",), ("cpu", "gpu")) for t in g.tasks)
        for t in g.tasks:
            assert 10 <= t.wcet_us["gpu"] <= 100 and t.wcet_us["gpu"] == int(t.wcet_us["gpu"])
            if "cpu" in t.wcet_us:
                assert 100 <= t.wcet_us["cpu"] <= 500


def test_random_graph_scale_and_options():
    g = random_graph("R", 3)
    s4 = random_graph("R", 3, scale=4)
    assert s4 == g.scaled(4)
    assert all(t4.wcet_us == {k: 4 * v for k, v in t.wcet_us.items()} for t, t4 in zip(g.tasks, s4.tasks))
    assert all(t.processors == ("gpu",) for t in random_graph("R", 3, gpu_only_share=1).tasks)
    assert all(t.processors == ("cpu", "gpu") for t in random_graph("R", 3, gpu_only_share=0).tasks)
    h = random_graph("R", 3, cpu_us=(1000, 1000), gpu_us=(5, 6))
    assert all(t.wcet_us.get("cpu", 1000) == 1000 and 5 <= t.wcet_us["gpu"] <= 6 for t in h.tasks)
    # depth: layered, not a star or a chain of width 1 only
    depths = {len(nx.dag_longest_path(random_graph("R", s).to_networkx())) for s in SEEDS}
    assert min(depths) >= 3 and max(depths) <= 10


@pytest.mark.parametrize("kwargs, fragment", [
    ({"n_tasks": 0}, "n_tasks"), ({"n_tasks": 2.5}, "n_tasks"), ({"cpu_us": (500, 100)}, "cpu_us"),
    ({"gpu_us": (0, 10)}, "gpu_us"), ({"cpu_us": 5}, "cpu_us"), ({"gpu_only_share": 1.2}, "gpu_only_share"),
    ({"scale": 0}, "scale"), ({"seed": -1}, "seed")])
def test_random_graph_bad_arguments(kwargs, fragment):
    kwargs = {"seed": 0, **kwargs}
    with pytest.raises(DseError, match=fragment):
        random_graph("R", **kwargs)
