"""`AnalyticModel.task_costs_population` (the per-task occupancies of a whole population, the multi-app GA's input)
against a plain per-edge reference of the charge rules, and `loads` derived from it."""
from __future__ import annotations

import numpy as np
import pytest

from dse.taskgraph import AnalyticModel, LayerMapError, LinearComm, PeSet, ProfileTable, TaskGraph
from tests.unit.taskgraph.test_layermap_core import diamond, random_graph

COMM = LinearComm(bandwidth_gbs=2.0, fixed_us=15.0)
MODES = [("sender", False), ("receiver", False), ("sender", True), ("receiver", True)]


def reference_costs(model: AnalyticModel, m) -> tuple[np.ndarray, np.ndarray]:
    """The module docstring's rules edge by edge: a transfer between distinct PEs costs ``COMM``; without dedupe it
    is charged to its producer (sender) or consumer (receiver); with dedupe one per (producer, destination PE), the
    largest, charged to the producer or to the group's first consumer."""
    g = model.graph
    exec_us = np.array([model.E[i, m[i]] for i in range(g.n)])
    comm = np.zeros(g.n)
    groups: dict[tuple[int, int], list] = {}
    for s, d, nbytes in zip(g.src, g.dst, g.nbytes):
        if m[s] == m[d]:
            continue
        cost = float(COMM(nbytes, "", ""))
        if not model.dedupe:
            comm[s if model.charge == "sender" else d] += cost
            continue
        best = groups.setdefault((int(s), int(m[d])), [0.0, int(d)])
        best[0], best[1] = max(best[0], cost), min(best[1], int(d))
    for (s, _), (cost, first) in groups.items():
        comm[s if model.charge == "sender" else first] += cost
    return exec_us, comm


def fan_graph(n: int, seed: int):
    """Producers with up to 5 consumers each (the groups dedupe merges), a chain through all tasks."""
    g, prof = random_graph(n, seed, p_edge=0.0)
    rng = np.random.default_rng(seed)
    edges = {(i, i + 1) for i in range(n - 1)}
    for i in rng.choice(n - 2, size=n // 3, replace=False):
        edges |= {(int(i), int(j)) for j in rng.choice(np.arange(i + 1, n), size=min(5, n - 1 - i), replace=False)}
    src, dst = zip(*sorted(edges))
    fan = TaskGraph(names=g.names, layers=g.layers, op_types=g.op_types, macs=g.macs, src=src, dst=dst,
                    nbytes=rng.integers(1_000, 200_000, len(src)))
    return fan, ProfileTable(kinds=prof.kinds, time_us=prof.time_us, source="test", graph_digest=fan.digest,
                             tasks=fan.names)


GRAPHS = {"sparse": lambda: random_graph(30, seed=7, p_edge=0.05), "dense": lambda: random_graph(25, seed=8),
          "fans": lambda: fan_graph(24, seed=9), "chain": lambda: random_graph(12, seed=10, p_edge=0.0)}


@pytest.mark.parametrize("charge,dedupe", MODES)
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_population_rows_are_the_reference_and_task_costs(graph, charge, dedupe):
    g, prof = GRAPHS[graph]()
    pes = PeSet.build("2-1-1", ["gpu"])
    model = AnalyticModel(g, prof, pes, COMM, charge=charge, dedupe=dedupe)
    rng = np.random.default_rng([list(GRAPHS).index(graph), MODES.index((charge, dedupe))])
    pop = rng.integers(0, len(pes), size=(40, g.n))
    pop[0] = 0                                                           # all on one PE: no transfer at all
    pop[1] = np.arange(g.n) % len(pes)                                   # every edge crosses PEs
    exec_us, comm = model.task_costs_population(pop)
    assert exec_us.shape == comm.shape == (40, g.n)
    for k, m in enumerate(pop):
        ref_exec, ref_comm = reference_costs(model, m)
        assert np.allclose(exec_us[k], ref_exec) and np.allclose(comm[k], ref_comm, rtol=1e-12, atol=1e-9), k
        one_exec, one_comm = model.task_costs(m)
        assert np.allclose(one_exec, exec_us[k]) and np.allclose(one_comm, comm[k])
        assert np.allclose(model.loads(m), np.bincount(m, ref_exec + ref_comm, minlength=len(pes)))
    assert not comm[0].any() and comm[1].sum() > 0
    assert np.allclose(model.loads(pop), [np.bincount(m, e + c, minlength=len(pes))
                                          for m, e, c in zip(pop, exec_us, comm)])
    if dedupe and graph == "fans":                                       # the groups do merge transfers here
        plain = AnalyticModel(g, prof, pes, COMM, charge=charge).task_costs_population(pop)[1]
        assert (comm.sum(axis=1) < plain.sum(axis=1) - 1e-9).any()


def test_loads_keep_the_hand_computed_fan_out():
    """The fan-out of the diamond (a on CPU0 feeds b and c on CPU1) in all four modes, as before the rewrite."""
    g, prof, pes = diamond()
    fan = np.array([0, 1, 1, 1])
    comm = LinearComm(bandwidth_gbs=0.1, fixed_us=1.0)
    for (charge, dedupe), loads, per_task in zip(MODES, ([42, 58, 0], [10, 90, 0], [31, 58, 0], [10, 79, 0]),
                                                 ([32, 0, 0, 0], [0, 11, 21, 0], [21, 0, 0, 0], [0, 21, 0, 0])):
        model = AnalyticModel(g, prof, pes, comm, charge=charge, dedupe=dedupe)
        assert model.loads(fan).tolist() == pytest.approx(loads), (charge, dedupe)
        assert model.loads(np.stack([fan, fan]))[1].tolist() == pytest.approx(loads)
        assert model.task_costs_population(fan[None])[1][0].tolist() == pytest.approx(per_task), (charge, dedupe)


def test_unsupported_pe_empty_population_and_shape_errors():
    g, prof, pes = diamond()
    model = AnalyticModel(g, prof, pes, LinearComm(0.1, 1.0), dedupe=True)
    exec_us, comm = model.task_costs_population(np.array([[0, 0, 2, 0], [0, 0, 0, 0]]))
    assert np.isinf(exec_us[0, 2]) and np.isfinite(exec_us[1]).all() and np.isinf(model.loads([0, 0, 2, 0])[2])
    e0, c0 = model.task_costs_population(np.zeros((0, 4), dtype=np.int64))
    assert e0.shape == c0.shape == (0, 4) and model.loads(np.zeros((0, 4), dtype=np.int64)).shape == (0, 3)
    with pytest.raises(LayerMapError, match=r"takes a population \[pop, 4\]"):
        model.task_costs_population([0, 0, 0, 0])
    with pytest.raises(LayerMapError, match="task_costs takes one mapping"):
        model.task_costs([[0, 0, 0, 0]])
    with pytest.raises(LayerMapError, match="PE id 3 out of range"):
        model.task_costs_population([[0, 3, 0, 0]])
