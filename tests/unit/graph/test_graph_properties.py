"""Property tests: the analysis' feasibility agrees with a brute-force reading of the ONNX graph itself."""
from __future__ import annotations

from functools import lru_cache
from itertools import combinations

import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dse.graph.analysis import FUSION_HEADS, FUSION_TAILS, analyze
from tests.models import paddle_style_detector, pytorch_style_convnet, random_dag_model

FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}
MODELS = {
    "torch11": lambda: analyze(pytorch_style_convnet(11), {"input": [1, 3, 16, 16]}),
    "torch21": lambda: analyze(pytorch_style_convnet(21), {"input": [1, 3, 16, 16]}),
    "paddle13": lambda: analyze(paddle_style_detector(13), {"image": [1, 3, 16, 16]}),
    "paddle17": lambda: analyze(paddle_style_detector(17), {"image": [1, 3, 16, 16]}),
}


@lru_cache(maxsize=None)
def _analysis(key: str):
    return MODELS[key]()


@lru_cache(maxsize=64)
def _dag(seed: int):
    return analyze(random_dag_model(seed, 12 + seed % 7))


# -- brute force, straight from the graph ---------------------------------------------------------------------

def _reads(node: onnx.NodeProto) -> list[str]:
    names = [i for i in node.input if i]
    for attr in node.attribute:
        graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for g in graphs:
            local = {i.name for i in g.input} | {t.name for t in g.initializer}
            for n in g.node:
                names += [r for r in _reads(n) if r not in local]
                local.update(n.output)
    return names


class Brute:
    """Feasibility by definition: stage of every producer/consumer pair, rules checked per position."""

    def __init__(self, model: onnx.ModelProto):
        self.nodes = list(model.graph.node)
        self.weights = {t.name for t in model.graph.initializer}
        self.outputs = {o.name for o in model.graph.output}
        self.types = {vi.name: vi.type.tensor_type for vi in list(model.graph.value_info) + list(model.graph.output)}
        self.producer = {o: i for i, n in enumerate(self.nodes) for o in n.output if o}
        self.consumers: dict[str, list[int]] = {}
        self._memo: dict[int, bool] = {}
        for q, n in enumerate(self.nodes):
            for r in _reads(n):
                if r in self.producer:
                    self.consumers.setdefault(r, []).append(q)

    def _is_shape_value(self, name: str) -> bool:
        node = self.nodes[self.producer[name]]
        if node.op_type in ("Shape", "Size"):
            return True
        acts = [r for r in _reads(node) if r not in self.weights]
        return bool(acts) and all(r in self.producer and self._is_shape_value(r) for r in acts)

    def position_feasible(self, c: int) -> bool:
        if c not in self._memo:
            self._memo[c] = self._position_feasible(c)
        return self._memo[c]

    def _position_feasible(self, c: int) -> bool:
        for p in range(c + 1):
            node = self.nodes[p]
            outs = [o for o in node.output if o]
            if node.op_type in FUSION_HEADS and len(outs) == 1 and outs[0] not in self.outputs:
                users = self.consumers.get(outs[0], [])
                if len(users) == 1 and users[0] > c:
                    tail = self.nodes[users[0]]
                    if tail.op_type in FUSION_TAILS and tail.input[0] == outs[0] and list(tail.input).count(outs[0]) == 1:
                        return False
        for name, p in self.producer.items():
            if p <= c and any(q > c for q in self.consumers.get(name, [])):
                tensor_type = self.types[name]
                if tensor_type.elem_type not in FLOATS or len(tensor_type.shape.dim) == 0:
                    return False
                if self._is_shape_value(name):
                    return False
        return True

    def tuple_feasible(self, cuts) -> bool:
        if not all(self.position_feasible(c) for c in cuts):
            return False
        stage = [sum(1 for c in cuts if c < i) for i in range(len(self.nodes))]
        for name, users in self.consumers.items():
            for q in users:
                if stage[q] - stage[self.producer[name]] not in (0, 1):
                    return False
        return True


@lru_cache(maxsize=None)
def _brute(key: str) -> Brute:
    return Brute(_analysis(key).model)


def _positions(brute: Brute) -> list[int]:
    return [c for c in range(len(brute.nodes) - 1) if brute.position_feasible(c)]


# -- properties -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", sorted(MODELS))
def test_feasible_positions_match_brute_force(key):
    assert _analysis(key).feasible_cuts == _positions(_brute(key))


@pytest.mark.parametrize("key", sorted(MODELS))
def test_count_tuples_matches_enumeration(key):
    analysis, brute = _analysis(key), _brute(key)
    feasible = _positions(brute)
    for k in (1, 2, 3):
        expected = sum(1 for cuts in combinations(feasible, k) if brute.tuple_feasible(cuts))
        assert analysis.count_tuples(k) == expected, k


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(sorted(MODELS)), data=st.data())
def test_check_cuts_matches_brute_force(key, data):
    analysis, brute = _analysis(key), _brute(key)
    positions = len(analysis.layers) - 1
    pool = analysis.feasible_cuts if data.draw(st.booleans(), label="feasible pool") else list(range(positions))
    cuts = sorted(data.draw(st.sets(st.sampled_from(pool), min_size=1, max_size=4), label="cuts"))
    reason = analysis.check_cuts(cuts)
    assert (reason is None) == brute.tuple_feasible(cuts), reason
    if reason is None:
        stages = analysis.stage_of(cuts)
        for boundary, names in enumerate(analysis.crossing_tensors(cuts)):
            for name in names:
                assert stages[brute.producer[name]] == boundary
                assert {stages[q] for q in brute.consumers[name]} <= {boundary, boundary + 1}
                assert any(stages[q] == boundary + 1 for q in brute.consumers[name])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 5000), data=st.data())
def test_random_dags_agree_with_brute_force(seed, data):
    analysis = _dag(seed)
    brute = Brute(analysis.model)
    feasible = _positions(brute)
    assert analysis.feasible_cuts == feasible
    for k in (1, 2, 3):
        assert analysis.count_tuples(k) == sum(1 for c in combinations(feasible, k) if brute.tuple_feasible(c))
    positions = len(analysis.layers) - 1
    if positions > 0:
        cuts = sorted(data.draw(st.sets(st.integers(0, positions - 1), min_size=1, max_size=3)))
        assert (analysis.check_cuts(cuts) is None) == brute.tuple_feasible(cuts)
