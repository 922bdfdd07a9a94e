"""The proposed search on the sim backend (virtual Xavier) with a real network: YOLOv3-tiny, INT8.

Checks the strategies against ground truth the sim can afford here: an exhaustive sweep of every
feasible single cut. Measurements go through the project's Evaluator (cache by config hash).
"""
from __future__ import annotations

import pytest

from dse.core.configuration import Configuration
from dse.backends.base import MeasureSettings
from dse.search import SearchSettings, SearchSpace, explore_option, maximize, run_search
from dse.search.params import search_config
from dse.search.streams import stream_tuple

sim = pytest.importorskip("dse.backends.sim")
evaluate_mod = pytest.importorskip("dse.evaluate.evaluator")
from dse.graph.analysis import analyze  # noqa: E402
from dse.platform import load_platform  # noqa: E402
from dse.zoo import build_network  # noqa: E402
from dse.workflow.space import space_of

NET, SIZE = "yolov3-tiny", 416


@pytest.fixture(scope="module")
def board():
    analysis = analyze(build_network(NET, input_size=SIZE))
    platform = load_platform("xavier-agx-sim")
    backend = sim.SimBackend(platform, analysis, MeasureSettings(input_size=SIZE, seed=0))
    space = space_of(analysis, backend)
    base = Configuration(benchmark=NET, platform=platform.name, precision="int8", input_size=SIZE,
                         model_digest=analysis.digest)
    return backend, space, base


def test_explorer_matches_exhaustive_single_cut_sweep(board):
    backend, space, base = board
    settings = SearchSettings(seed=0)
    ev = evaluate_mod.Evaluator(backend)
    bounds = maximize(ev, base, settings).extra["bounds"]
    for option in ("PND-A", "A"):
        streams = stream_tuple(space.stages(option), bounds["streams"])
        sweep = [ev.evaluate(search_config(base, option, (c,), streams, bounds), phase="sweep", strategy="exhaustive")
                 for c in space.feasible_cuts]
        best = max(m.fps for m in sweep if m.ok)
        fresh = evaluate_mod.Evaluator(backend)
        g = explore_option(space, fresh, option, bounds, settings, "global", base=base)
        f = explore_option(space, fresh, option, bounds, settings, "full", base=base)
        assert g.extra["tuples_measured"] < len(sweep) / 2
        assert f.fps >= 0.99 * best, (option, f.fps, best)
        assert f.fps >= g.fps
        assert set(g.extra["tuples"]) <= set(f.extra["tuples"])  # the full search replays the global one (from the cache)


def test_run_search_on_sim_never_remeasures(board):
    backend, space, base = board
    ev = evaluate_mod.Evaluator(backend)
    settings = SearchSettings(seed=1, strategy="proposed")
    r = run_search(space, ev, base, settings)
    assert ev.reused == 0 and ev.measured == r.extra["measured"]
    short = r.extra["selection"].shortlist
    assert short[0] == max(r.extra["options"], key=lambda o: r.extra["options"][o].fps) and r.extra["selected"] in short
    best = r.extra["search"].extra["refined"]
    assert best[r.extra["selected"]] == max(best.values())
    assert r.fps >= (1 - settings.degradation) * r.extra["finetune"].extra["reference_fps"]
    c = r.config
    assert c.buffers >= max(c.pre_threads, c.post_threads, *c.streams)
    assert r.fps >= 0.97 * r.extra["maximize"].measurement.fps  # never (noticeably) worse than GPU-only
    assert 0 < r.extra["unique_tuples"] < 350  # Table 3.4: 172-424 tuples on the board
