"""Search strategies on an analytical pipeline model (fast, exact, deterministic).

The model is a throughput formula, not the sim: FPS = 1 / max(bottleneck periods) with stage times
from per-layer costs (DLA ``ratio`` times slower), streams speeding up a PE up to a saturation,
pre/post threads, and buffers limiting frames in flight (latency / buffers). Its GPU utilization is the
GPU busy fraction of the period. Feasibility: some positions split fused chains, and skip arcs allow
at most one cut across them.
"""
from __future__ import annotations

import itertools
import json
import math
import random

import pytest

from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.core.measurement import Measurement
from dse.search import (Study, SearchSettings, SearchSpace, explore_option, finetune, maximize, run_search,
                        select_option, select_phase)
from dse.search.candidates import candidate_cuts
from dse.search.global_search import balanced_policies, main_pe_policies
from dse.search.initial import balanced_tuple, initial_tuple, random_tuple
from dse.search.local_search import local_search
from dse.search.moves import move, single
from dse.search.study import StudyView
from dse.search.streams import resplit_first_main, stream_tuple

XAVIER = {"A": ["DLA", "GPU"], "B": ["GPU", "DLA", "GPU"], "C": ["DLA", "DLA", "GPU"],
          "D": ["GPU", "DLA", "DLA", "GPU"], "E": ["GPU"], "PND-A": ["PND", "GPU"], "PND-B": ["GPU", "PND", "GPU"]}
BASE = Configuration(benchmark="analytic", platform="analytic-xavier", precision="int8")


# --------------------------------------------------------------------------------------------- model
class Model:
    """Analytical board: deterministic FPS and GPU utilization of a configuration."""

    def __init__(self, costs, *, ratio=2.8, pre_ms=6.0, post_ms=2.0, arcs=(), blocked=(), fail=None,
                 gpu_speed=(1.0, 1.45, 1.9), dla_speed=(1.0, 1.15), boundary_ms=0.05):
        self.costs = list(costs)
        self.n = len(self.costs)
        self.ratio, self.pre_ms, self.post_ms = ratio, pre_ms, post_ms
        self.arcs, self.blocked = list(arcs), set(blocked)
        self.fail = fail
        self.gpu_speed, self.dla_speed, self.boundary_ms = gpu_speed, dla_speed, boundary_ms

    # feasibility -------------------------------------------------------------------------------
    def feasible_positions(self):
        return [c for c in range(self.n - 1) if c not in self.blocked]

    def check(self, cuts):
        if any(c in self.blocked for c in cuts):
            return "splits a fused chain"
        for a, b in self.arcs:
            if sum(1 for c in cuts if a <= c < b) > 1:
                return f"arc {a}->{b} crosses two cuts"
        return None

    def space(self, **kw):
        return SearchSpace(n_layers=self.n, feasible_cuts=self.feasible_positions(), check_cuts=self.check,
                           stage_pe_types=dict(XAVIER), **kw)

    # performance ---------------------------------------------------------------------------------
    @staticmethod
    def _speed(table, s):
        return table[min(s, len(table)) - 1]

    def periods(self, option, cuts, streams, pre, post, buffers):
        types = XAVIER[option]
        bounds = [-1, *cuts, self.n - 1]
        gpu_busy, dla_busy, latency = 0.0, [0.0, 0.0], self.pre_ms + self.post_ms
        dla_core = 0
        for k, t in enumerate(types):
            work = sum(self.costs[bounds[k] + 1: bounds[k + 1] + 1])
            if t == "GPU":
                gpu_busy += work / self._speed(self.gpu_speed, streams[k])
                latency += work
            elif t == "DLA":
                dla_busy[dla_core] += work * self.ratio / self._speed(self.dla_speed, streams[k])
                dla_core += 1
                latency += work * self.ratio
            else:  # PND: two copies, one per DLA
                per = work * self.ratio / (2 * self._speed(self.dla_speed, math.ceil(streams[k] / 2)))
                dla_busy = [d + per for d in dla_busy]
                latency += work * self.ratio
        gpu_busy += self.boundary_ms * len(cuts)
        return [self.pre_ms / pre, self.post_ms / post, gpu_busy, *dla_busy, latency / buffers], gpu_busy

    def fps_of(self, option, cuts, streams, pre, post, buffers):
        periods, _ = self.periods(option, cuts, streams, pre, post, buffers)
        return 1000.0 / max(periods)

    def __call__(self, config: Configuration) -> Measurement:
        if self.fail and self.fail(config):
            return Measurement.refused(config, "analytic failure", backend="analytic")
        periods, gpu_busy = self.periods(config.option, config.cuts, config.streams, config.pre_threads,
                                         config.post_threads, config.buffers)
        period = max(periods)
        return Measurement(config=config, fps=1000.0 / period, util={"GPU": min(1.0, gpu_busy / period)},
                           backend="analytic")


class CachingEvaluator:
    """Caches by config hash (like dse.evaluate) and checks the model is never asked twice."""

    def __init__(self, model):
        self.model = model
        self.cache: dict[str, Measurement] = {}
        self.asked: list[tuple[Configuration, str]] = []

    def evaluate(self, config, *, phase, strategy):
        assert strategy == ("Base(G)" if phase == "baseline" else "proposed")
        if config.hash not in self.cache:
            assert all(c.hash != config.hash for c, _ in self.asked)
            self.asked.append((config, phase))
            self.cache[config.hash] = self.model(config)
        return self.cache[config.hash]

    @property
    def measured(self):
        return len(self.asked)


class StrictEvaluator:
    """No cache at all: fails the test if a strategy asks for any configuration twice."""

    def __init__(self, model):
        self.model, self.seen = model, set()

    def evaluate(self, config, *, phase, strategy):
        assert config.hash not in self.seen, f"asked twice for {config}"
        self.seen.add(config.hash)
        return self.model(config)


def costs_bumpy(n, seed=0):
    """Per-layer GPU ms with variation (deterministic)."""
    return [0.05 + 0.04 * ((i * 7919 + seed * 31) % 11) / 10 for i in range(n)]


BOUNDS = {"pre": 3, "post": 1, "buffers": 8, "streams": 3}


def fast(**kw):
    """The thesis' search (these tests check its phases; the guided one has tests of its own)."""
    return SearchSettings(**{"seed": 0, "strategy": "proposed", **kw})


# --------------------------------------------------------------------------------------------- settings
def test_settings_from_dict_and_unknown_key():
    s = SearchSettings.from_dict({"top_k": 5, "sample_step": 4, "options": ["A", "E"]})
    assert (s.top_k, s.sample_step, s.options) == (5, 4, ("A", "E"))
    assert SearchSettings.from_dict(s.to_dict()) == s
    with pytest.raises(DseError, match="top_kk.*valid choices.*top_k"):
        SearchSettings.from_dict({"top_kk": 3})
    with pytest.raises(DseError, match="initial"):
        SearchSettings(initial="greedy")
    assert SearchSettings().step_for(15) == 1 and SearchSettings().step_for(269) == 14
    assert SearchSettings(sample_step=3).step_for(269) == 3


def test_the_guided_search_is_the_default_and_refuses_reuse_from(tmp_path):
    """reuse_from seeds the thesis' per-option searches; the (default) guided search has none to seed, so it
    says which strategy to pick instead of ignoring the setting."""
    (tmp_path / "options").mkdir()
    assert SearchSettings().strategy == "guided"
    with pytest.raises(DseError, match="search.strategy=proposed"):
        SearchSettings(reuse_from=str(tmp_path))
    assert SearchSettings(reuse_from=str(tmp_path), strategy="proposed").reuse_from == str(tmp_path)


# --------------------------------------------------------------------------------------------- streams
@pytest.mark.parametrize("option,s,expected", [
    ("A", 4, (2, 4)), ("B", 4, (2, 2, 2)), ("C", 4, (2, 2, 4)), ("D", 4, (2, 2, 2, 2)), ("E", 4, (4,)),
    ("PND-A", 4, (4, 4)), ("PND-B", 4, (2, 4, 2)), ("B", 3, (2, 2, 2)), ("B", 1, (1, 2, 1)), ("PND-B", 5, (3, 4, 3)),
])
def test_stream_tuple_per_option(option, s, expected):
    assert stream_tuple(XAVIER[option], s) == expected


@pytest.mark.parametrize("option,s,expected", [("PND-B", 2, (2, 4, 2)), ("B", 3, (3, 2, 3)), ("E", 3, (3,)),
                                               ("PND-A", 1, (4, 1))])
def test_stream_tuple_unshared_gives_every_gpu_stage_the_whole_count(option, s, expected):
    assert stream_tuple(XAVIER[option], s, share_main=False) == expected


def test_full_stream_config_scales_a_stage_by_its_share_of_the_maximizers_cores():
    """A core-group stage gets the maximizer's streams times its share of the cores the maximizer ran on (four
    cores: 3-1 at 4 streams is (3, 1), 2-1-1 at 2 is (1, 1, 1)); a Jetson's GPU stages each get them whole."""
    from dse.platform import load_platform
    from dse.search.board_model import StageRole, roles_of_platform
    from dse.search.params import full_stream_config

    groups = {"E": [(0, 1, 2, 3)], "3-1": [(0, 1, 2), (3,)], "2-1-1": [(0, 1), (2,), (3,)]}
    roles = {o: [StageRole(f"cpu{len(g)}", tuple(f"core{c}" for c in g)) for g in gs] for o, gs in groups.items()}
    cores = SearchSpace(n_layers=10, feasible_cuts=list(range(9)), check_cuts=lambda c: None, main_pe="CPU",
                        stage_pe_types={o: ["CPU"] * len(gs) for o, gs in groups.items()}, stage_roles=roles)
    base = Configuration(benchmark="x", platform="p")
    settings = SearchSettings()

    def streams(space, option, s):
        bounds = {"pre": 1, "post": 1, "buffers": 4, "streams": s}
        return full_stream_config(space, base, option, (), bounds, settings).streams

    assert [streams(cores, o, 4) for o in groups] == [(4,), (3, 1), (2, 1, 1)]
    assert [streams(cores, o, 2) for o in groups] == [(2,), (2, 1), (1, 1, 1)]
    xavier = roles_of_platform(load_platform("xavier-agx-sim"))
    gpu = SearchSpace(n_layers=10, feasible_cuts=list(range(9)), check_cuts=lambda c: None,
                      stage_pe_types={o: XAVIER[o] for o in ("E", "PND-B")}, stage_roles=xavier)
    assert streams(gpu, "PND-B", 3) == (3, 4, 3) and streams(gpu, "E", 3) == (3,)


def test_stream_resplit_only_for_first_gpu_stage():
    assert resplit_first_main((2, 2, 2), XAVIER["B"]) == (1, 2, 3)
    assert resplit_first_main((3, 4, 3), XAVIER["PND-B"]) == (1, 4, 5)
    assert resplit_first_main((2, 2, 2, 2), XAVIER["D"]) == (1, 2, 2, 3)
    assert resplit_first_main((2, 4), XAVIER["A"]) is None
    assert resplit_first_main((1, 2, 1), XAVIER["B"]) is None


# --------------------------------------------------------------------------------------------- candidates & moves
def test_candidate_set_samples_every_step_and_keeps_initial_cuts():
    assert candidate_cuts(range(15), 3) == [0, 3, 6, 9, 12]
    assert candidate_cuts(range(15), 3, include=(4, 13)) == [0, 3, 4, 6, 9, 12, 13]
    # sparse feasibility: positions at least `step` apart, not multiples of it
    assert candidate_cuts([0, 1, 2, 5, 6, 7, 8, 12], 3) == [0, 5, 8, 12]
    assert candidate_cuts([4, 2, 2], 1) == [2, 4]


def test_move_skips_infeasible_and_stops_at_neighbours():
    pos = list(range(0, 20, 2))
    forbid = lambda t: "no" if 6 in t else None  # noqa: E731
    assert move((4, 10), single(2, 0, +1), pos, forbid) == (8, 10)  # skips 6, not measured
    assert move((8, 10), single(2, 0, +1), pos, forbid) is None      # would collide with cut 2
    assert move((2, 10), (-1, -1), pos, forbid) == (0, 8)
    assert move((0, 10), (-1, -1), pos, forbid) is None              # leaves the candidate set
    assert move((5, 10), single(2, 0, +1), pos, forbid) == (8, 10)   # off-grid cut steps to the grid
    assert move((5, 10), single(2, 0, -1), pos, forbid) == (4, 10)


def test_policy_sets():
    assert balanced_policies(1) == [(-1,), (1,)]
    assert balanced_policies(2) == [(-1, 0), (1, 0), (0, -1), (0, 1), (-1, -1), (1, 1)]
    assert main_pe_policies(XAVIER["A"], "GPU") == [(-1,)]                  # GPU stage grows leftwards
    assert main_pe_policies(XAVIER["B"], "GPU") == [(1, 0), (0, -1), (1, -1)]
    assert main_pe_policies(XAVIER["C"], "GPU") == [(0, -1)]
    assert main_pe_policies(XAVIER["PND-B"], "GPU") == [(1, 0), (0, -1), (1, -1)]


# --------------------------------------------------------------------------------------------- initial
def test_random_initial_tuples_feasible_ordered_and_seeded():
    model = Model(costs_bumpy(60), arcs=[(10, 30), (35, 50)], blocked=range(2, 60, 7))
    space = model.space()
    for option in XAVIER:
        t, how = initial_tuple(space, option, fast(seed=3))
        assert how == "random" and len(t) == space.n_cuts(option)
        assert space.feasibility(t) is None and list(t) == sorted(set(t))
        assert initial_tuple(space, option, fast(seed=3)) == (t, how)
    draws = {initial_tuple(space, "B", fast(seed=s))[0] for s in range(8)}
    assert len(draws) > 1


def test_random_initial_finds_rare_feasible_tuples():
    # one long skip arc over almost everything: 3 cuts fit only in a narrow window
    model = Model(costs_bumpy(40), arcs=[(1, 37)])
    t = random_tuple(model.space(), "D", random.Random(0))
    assert model.check(t) is None and len(t) == 3


def test_balanced_initial_from_gpu_profile():
    costs = [1.0] * 100
    model = Model(costs)
    space = model.space(gpu_layer_profile=lambda: costs)
    t, how = initial_tuple(space, "A", fast(initial="auto", dla_ratio=3.0))
    assert how == "balanced" and t == (24,)  # DLA share 1/(1+3) of the GPU time, cut at the 25th layer
    t = balanced_tuple(space, "PND-A", costs, dla_ratio=3.0)
    assert t == (39,)  # two DLAs: share 0.667/(1+0.667) = 0.4
    t = balanced_tuple(space, "B", costs, dla_ratio=2.0)
    assert t == (33, 66)  # GPU stages 1/3 each (sharing the GPU) = the DLA's 1/3 x 2
    assert initial_tuple(model.space(), "A", fast(initial="auto"))[1] == "random"
    with pytest.raises(DseError, match="balanced"):
        initial_tuple(model.space(), "A", fast(initial="balanced"))


def test_reused_initial_is_validated():
    model = Model(costs_bumpy(40), arcs=[(10, 20)])
    space = model.space()
    assert initial_tuple(space, "B", fast(), reuse=[5, 25]) == ((5, 25), "reused")
    with pytest.raises(DseError, match="needs 2"):
        initial_tuple(space, "B", fast(), reuse=[5])
    with pytest.raises(DseError, match="infeasible"):
        initial_tuple(space, "B", fast(), reuse=[12, 15])


# --------------------------------------------------------------------------------------------- maximizer
def test_maximizer_finds_the_bounds():
    # E: pre 6 ms, post 2 ms, GPU 8 ms (streams speed 1, 1.45, 1.9), latency 16 ms / buffers
    model = Model([8.0 / 40] * 40)
    ev = CachingEvaluator(model)
    result = maximize(ev, BASE, fast())
    assert result.extra["bounds"] == {"pre": 2, "post": 1, "streams": 3, "buffers": 4}
    assert result.config.option == "E" and result.config.streams == (3,)
    grid = max(model.fps_of("E", (), (s,), p, q, b) for p in range(1, 9) for q in range(1, 9)
               for s in range(1, 9) for b in range(1, 33))
    assert result.measurement.fps == pytest.approx(grid)
    assert result.extra["points"] == ev.measured < 40   # a greedy walk, not a grid
    assert all(c.buffers >= c.streams[0] for c, _ in ev.asked)


def test_maximizer_respects_caps():
    model = Model([0.02] * 40, pre_ms=20, post_ms=10)  # threads always help
    result = maximize(CachingEvaluator(model), BASE, fast(max_pre=3, max_post=2, max_buffers=6))
    assert result.extra["bounds"]["pre"] == 3 and result.extra["bounds"]["post"] == 2 and result.extra["bounds"]["buffers"] <= 6


# --------------------------------------------------------------------------------------------- global / local
def exhaustive(model, space, option, bounds, settings):
    streams = stream_tuple(XAVIER[option], bounds["streams"], dla_streams=settings.dla_streams)
    best, count = 0.0, 0
    for cuts in itertools.combinations(space.feasible_cuts, space.n_cuts(option)):
        if space.feasibility(cuts) is None:
            count += 1
            best = max(best, model.fps_of(option, cuts, streams, bounds["pre"], bounds["post"],
                                          max(bounds["buffers"], *streams)))
    return best, count


def test_global_search_finds_optimum_of_unimodal_landscape_cheaply():
    model = Model([0.1] * 150, ratio=2.8, pre_ms=1.0, post_ms=1.0, blocked=range(3, 150, 5))
    space = model.space()
    for seed in range(3):
        settings = fast(seed=seed, sample_step=5)
        opt, count = exhaustive(model, space, "A", BOUNDS, settings)
        ev = CachingEvaluator(model)
        r = explore_option(space, ev, "A", BOUNDS, settings, "global", base=BASE)
        assert r.fps >= 0.97 * opt
        assert r.extra["tuples_measured"] == ev.measured < count / 3
        full = explore_option(space, ev, "A", BOUNDS, settings, "full", base=BASE)
        assert full.fps == pytest.approx(opt)
        assert full.extra["tuples_measured"] < count


def test_two_cut_option_near_exhaustive_optimum():
    model = Model(costs_bumpy(90), ratio=2.8, pre_ms=1.0, post_ms=1.0, arcs=[(20, 40)])
    space = model.space()
    settings = fast(seed=1, sample_step=6, min_local_searches=4)
    for option in ("B", "PND-B", "C"):
        opt, count = exhaustive(model, space, option, BOUNDS, settings)
        ev = CachingEvaluator(model)
        r = explore_option(space, ev, option, BOUNDS, settings, "full", base=BASE)
        assert r.fps >= 0.95 * opt, option
        assert ev.measured < count / 4, option
        for c, _ in ev.asked:  # infeasible tuples are never measured
            assert space.feasibility(c.cuts) is None


def test_local_search_improves_on_global():
    # coarse candidate grid: the optimum lies between candidates, only local search reaches it
    model = Model([0.1] * 150, ratio=2.8, pre_ms=1.0, post_ms=1.0)
    space = model.space()
    settings = fast(seed=0, sample_step=25)
    ev = CachingEvaluator(model)
    g = explore_option(space, ev, "A", BOUNDS, settings, "global", base=BASE)
    f = explore_option(space, ev, "A", BOUNDS, settings, "full", base=BASE)
    opt, _ = exhaustive(model, space, "A", BOUNDS, settings)
    assert g.fps < opt and f.fps > g.fps and f.fps == pytest.approx(opt)
    assert all(c in g.extra["candidates"] for c in g.config.cuts)
    assert f.config.cuts[0] not in g.extra["candidates"]
    assert set(f.extra["tuples"]) > set(g.extra["tuples"])


def test_local_search_stream_resplit_and_rollback():
    model = Model(costs_bumpy(60), ratio=2.8, pre_ms=0.5, post_ms=0.5)
    space = model.space()
    ev = CachingEvaluator(model)
    tracker = StudyView(Study(ev), "test", 1000)
    # small first GPU stage: one stream there, the rest on the last stage is better
    cfg = BASE.with_(option="B", cuts=(3, 10), streams=(2, 2, 2), buffers=8, pre_threads=3, post_threads=1)
    m0 = tracker.measure(cfg, "start")
    best_cfg, best_m = local_search(space, tracker, cfg, m0)
    assert best_m.fps > m0.fps
    assert best_cfg.streams == (1, 2, 3)
    kinds = [tp.kind for tp in tracker.trajectory]
    assert kinds[1] == "local-streams" and "local" in kinds
    # option A: no stream resplit
    cfg_a = BASE.with_(option="A", cuts=(20,), streams=(2, 3), buffers=8, pre_threads=3)
    tracker = StudyView(Study(ev), "test", 1000)
    local_search(space, tracker, cfg_a, tracker.measure(cfg_a, "start"))
    assert "local-streams" not in [tp.kind for tp in tracker.trajectory]


def test_threshold_lowering_reaches_required_local_searches():
    # GPU mostly idle (slow pre-processing): utilization is low, so T must drop before local search runs
    model = Model(costs_bumpy(80), ratio=2.8, pre_ms=20.0, post_ms=1.0)
    space = model.space()
    settings = fast(seed=2, sample_step=4, min_local_searches=3)
    r = explore_option(space, CachingEvaluator(model), "B", BOUNDS, settings, "full", base=BASE)
    assert r.extra["thresholds"][0] == 0.95 and len(r.extra["thresholds"]) > 1
    assert all(a > b for a, b in zip(r.extra["thresholds"], r.extra["thresholds"][1:]))
    assert r.extra["threshold"] == r.extra["thresholds"][-1] and r.extra["local_searches"] >= 3
    # unreachable L: stops at T_min instead of looping
    r2 = explore_option(space, CachingEvaluator(model), "B", BOUNDS, settings.with_(min_local_searches=1000,
                        t_min=0.5), "full", base=BASE)
    assert r2.extra["thresholds"][-1] == 0.5 and r2.extra["local_searches"] < 10_000
    g = explore_option(space, CachingEvaluator(model), "B", BOUNDS, settings, "global", base=BASE)
    assert g.extra["local_searches"] == 0 and g.extra["thresholds"] == [0.95]


def test_reused_initial_tuple_uses_k1_and_searches_less():
    model = Model(costs_bumpy(120), ratio=2.8, pre_ms=1.0, post_ms=1.0)
    space = model.space()
    settings = fast(seed=4, sample_step=4)
    first = explore_option(space, CachingEvaluator(model), "PND-B", BOUNDS, settings, "global", base=BASE)
    again = explore_option(space, CachingEvaluator(model), "PND-B", BOUNDS, settings, "global",
                           initial=first.config.cuts, base=BASE)
    assert again.extra["initial_how"] == "reused" and len(again.extra["top_k"]) == 1
    assert again.fps >= first.fps and again.extra["tuples_measured"] < first.extra["tuples_measured"]


def test_failed_measurements_do_not_stop_the_search():
    # a DLA stage longer than 40 layers "fails to build"; the random start may be such a tuple
    model = Model([0.1] * 100, ratio=2.8, pre_ms=1.0, post_ms=1.0,
                  fail=lambda c: c.option == "A" and c.cuts and c.cuts[0] > 40)
    space = model.space()
    ev = CachingEvaluator(model)
    r = explore_option(space, ev, "A", BOUNDS, fast(seed=0, sample_step=5, initial="random"), "full",
                       initial=None, base=BASE)
    assert r.measurement.ok and r.config.cuts[0] <= 40
    assert all(e.fps > 0 for e in r.extra["top_k"])


# --------------------------------------------------------------------------------------------- fine-tuner
def test_finetune_minimizes_resources_within_degradation():
    model = Model(costs_bumpy(60), ratio=2.8, pre_ms=2.0, post_ms=1.0)
    space = model.space()
    ev = CachingEvaluator(model)
    start = BASE.with_(option="B", cuts=(10, 30), streams=(4, 2, 4), buffers=16, pre_threads=6, post_threads=5)
    settings = fast(degradation=0.02)
    r = finetune(space, ev, start, settings)
    assert r.fps >= r.extra["reference_fps"] * (1 - 0.02) and r.extra["reference_fps"] >= r.extra["start_fps"]
    c = r.config
    assert c.pre_threads + c.post_threads + c.buffers + sum(c.streams) < 6 + 5 + 16 + 10
    assert r.extra["points"] == ev.measured - 1
    for cfg, phase in ev.asked:
        assert phase == "finetune"
        assert cfg.buffers >= max(cfg.pre_threads, cfg.post_threads, *cfg.streams)
        assert (cfg.option, cfg.cuts) == ("B", (10, 30))


def test_finetune_keeps_buffers_at_least_streams():
    # latency ~ GPU work: 2 buffers would keep the FPS of 3 streams, but buffers >= streams forbids it
    model = Model([0.2] * 40, pre_ms=0.1, post_ms=0.1)
    ev = CachingEvaluator(model)
    start = BASE.with_(option="E", streams=(3,), buffers=8, pre_threads=1, post_threads=1)
    r = finetune(model.space(), ev, start, fast(degradation=0.0, max_streams=3))
    assert r.config.streams == (3,) and r.config.buffers == 3
    assert all(c.buffers >= max(c.streams) for c, _ in ev.asked)
    assert model.fps_of("E", (), (3,), 1, 1, 2) == pytest.approx(r.fps)  # the constraint, not FPS, stopped it


def resources(c: Configuration) -> tuple[int, ...]:
    return (c.pre_threads, c.post_threads, c.buffers, *c.streams)


def test_finetune_in_two_parts_lowers_as_the_whole():
    """``lower=False`` stops after step 1 (the guided search lowers only the answer of its ranking);
    ``fewest_resources`` from there, given step 1's FPS, ends where the whole fine-tuner does, and the two parts
    measure what the whole does."""
    from dse.search.finetune import fewest_resources

    model = Model(costs_bumpy(60), ratio=2.8, pre_ms=2.0, post_ms=1.0)
    start = BASE.with_(option="B", cuts=(10, 30), streams=(4, 2, 4), buffers=16, pre_threads=6, post_threads=5)
    settings = fast(degradation=0.02)
    whole = finetune(model.space(), CachingEvaluator(model), start, settings)
    assert any(tp.kind.startswith("lower") for tp in whole.extra["trajectory"])
    ev = CachingEvaluator(model)
    raised = finetune(model.space(), ev, start, settings, lower=False)
    assert not any(tp.kind.startswith(("lower", "rebalance")) for tp in raised.extra["trajectory"])
    assert raised.extra["reference_fps"] == raised.fps == whole.extra["reference_fps"] and raised.extra["points"] < whole.extra["points"]
    lowered = fewest_resources(model.space(), ev, raised.config, raised.fps, settings)
    assert lowered.config == whole.config and lowered.fps == whole.fps
    assert raised.extra["points"] + lowered.extra["points"] == whole.extra["points"] == ev.measured - 1
    assert lowered.extra["trajectory"][0].kind == "start" and lowered.extra["trajectory"][0].fps == raised.fps
    # the floor is the reference's, not the start's sample: 5 % above it, fewer lowerings get through
    strict = fewest_resources(model.space(), CachingEvaluator(model), raised.config, raised.fps * 1.05, settings)
    assert sum(resources(strict.config)) > sum(resources(lowered.config))


def test_finetune_of_a_refused_configuration_does_not_shrink_it():
    """Every configuration refused (0 FPS): step 2 must not read 'within degradation of 0' as licence to
    lower everything; the start is returned as it was."""
    model = Model([0.2] * 40, pre_ms=0.1, post_ms=0.1)
    ev = CachingEvaluator(lambda cfg: Measurement.refused(cfg, "refused by the board"))
    start = BASE.with_(option="E", streams=(3,), buffers=8, pre_threads=2, post_threads=2)
    r = finetune(model.space(), ev, start, fast(max_pre=3, max_post=3, max_buffers=9, max_streams=4))
    assert r.config == start and r.fps == 0
    assert not any(phase == "finetune" and (c.buffers < 8 or c.pre_threads < 2) for c, phase in ev.asked)


def test_finetune_raises_parameters_that_help():
    model = Model(costs_bumpy(60), ratio=2.8, pre_ms=6.0, post_ms=1.0)  # pre-processing bound
    ev = CachingEvaluator(model)
    start = BASE.with_(option="A", cuts=(12,), streams=(2, 2), buffers=2, pre_threads=1, post_threads=1)
    r = finetune(model.space(), ev, start, fast(degradation=0.0))
    assert r.fps > 2 * r.extra["start_fps"] and r.config.pre_threads > 1
    assert r.config.buffers >= r.config.pre_threads


def test_finetune_keeps_only_raises_that_gain_more_than_the_margin():
    """With ``margin`` (the noise of one measurement) a raise is kept only where it gains more than that: a
    parameter worth 0.4 % a step is left where it was, one worth 50 % is raised as before, and the steps the
    small gains would have cost are not measured."""
    def board(cfg):
        return Measurement(config=cfg, fps=100.0 * min(cfg.pre_threads, 3) * (1 + 0.004 * cfg.buffers),
                           backend="analytic")

    model = Model([0.2] * 40, pre_ms=0.1, post_ms=0.1)
    start = BASE.with_(option="E", streams=(1,), buffers=1, pre_threads=1, post_threads=1)
    settings = fast(degradation=0.0, max_pre=4, max_post=2, max_buffers=8, max_streams=1)
    plain = finetune(model.space(), CachingEvaluator(board), start, settings)
    noisy = finetune(model.space(), CachingEvaluator(board), start, settings, margin=0.01)
    assert (plain.config.pre_threads, plain.config.buffers) == (3, 8)
    assert (noisy.config.pre_threads, noisy.config.buffers) == (3, 3)
    assert noisy.extra["points"] < plain.extra["points"]


def test_finetune_rebalances_gpu_streams():
    # big last GPU stage, tiny first one: moving streams to the last stage pays
    model = Model(costs_bumpy(60), ratio=2.8, pre_ms=0.5, post_ms=0.5, gpu_speed=(1.0, 1.6, 2.1, 2.5, 2.8))
    ev = CachingEvaluator(model)
    start = BASE.with_(option="B", cuts=(1, 15), streams=(3, 2, 2), buffers=8, pre_threads=1, post_threads=1)
    settings = fast(degradation=0.0, max_streams=3)   # step 1 cannot add more streams than 3 per stage
    r = finetune(model.space(), ev, start, settings)
    assert "rebalance" in [tp.kind for tp in r.extra["trajectory"]]
    assert r.config.streams[2] > r.config.streams[0]


# --------------------------------------------------------------------------------------------- pipeline
def test_run_search_end_to_end_asks_nothing_twice_and_reproduces():
    model = Model(costs_bumpy(70), ratio=2.8, pre_ms=5.0, post_ms=1.5, arcs=[(15, 30)], blocked=range(4, 70, 9))
    space = model.space()
    settings = fast(seed=7, sample_step=5, min_local_searches=3)
    r = run_search(space, StrictEvaluator(model), BASE, settings)
    short = r.extra["selection"].shortlist
    fps = {o: res.fps for o, res in r.extra["options"].items()}
    assert short[0] == select_option(fps, space) == max(r.extra["options"], key=lambda o: r.extra["options"][o].fps)
    searched = r.extra["search"].extra
    assert list(searched["refined"]) == short and r.extra["selected"] in short
    assert r.extra["finetune"].extra["start_fps"] == max(searched["refined"].values())
    assert r.extra["options"]["E"].extra["tuples_measured"] == 0
    assert r.extra["options"]["E"].config == r.extra["maximize"].config
    pairs = {(o, tuple(t)) for o, res in r.extra["options"].items() for t in res.extra["tuples"]}
    pairs |= {(o, tuple(t)) for o, ts in searched["tuples_by_option"].items() for t in ts}
    assert r.extra["unique_tuples"] == len(pairs) > len(searched["tuples"])
    assert r.extra["param_points"] == r.extra["finetune"].extra["points"] > 0
    assert r.fps >= (1 - settings.degradation) * r.extra["finetune"].extra["reference_fps"]
    doc = r.to_dict()
    json.dumps(doc)
    written = {(o, tuple(t)) for o, res in doc["options"].items() for t in res["tuples"]}
    written |= {(o, tuple(t)) for o, ts in doc["search"]["tuples_by_option"].items() for t in ts}
    assert doc["unique_tuples"] == len(written) == r.extra["unique_tuples"]   # the files count the same tuples
    again = run_search(space, CachingEvaluator(model), BASE, settings).to_dict()
    assert again == doc
    other = run_search(space, CachingEvaluator(model), BASE, settings.with_(seed=8)).to_dict()
    assert [o["initial"] for o in other["options"].values()] != [o["initial"] for o in doc["options"].values()]


def test_run_search_picks_gpu_only_when_pre_processing_dominates():
    # tiny network, slow pre-processing: pipelining across DLAs cannot pay (the tiny-INT8 rows of Table 3.5)
    model = Model([0.01] * 30, ratio=2.8, pre_ms=6.0, post_ms=1.0, boundary_ms=0.3)
    r = run_search(model.space(), CachingEvaluator(model), BASE, fast(sample_step=3, min_local_searches=2))
    assert r.extra["selected"] == "E" and not r.extra["search"].extra["tuples"]
    assert r.config.option == "E" and r.config.pre_threads >= 3


def test_explore_option_rejects_bad_mode_and_bounds():
    space = Model([0.1] * 20).space()
    with pytest.raises(DseError, match="mode"):
        explore_option(space, CachingEvaluator(Model([0.1] * 20)), "A", BOUNDS, fast(), "both", base=BASE)
    with pytest.raises(DseError, match="bounds"):
        explore_option(space, CachingEvaluator(Model([0.1] * 20)), "A", {"pre": 1}, fast(), base=BASE)
    with pytest.raises(DseError, match="mapping option"):
        explore_option(space, CachingEvaluator(Model([0.1] * 20)), "Z", BOUNDS, fast(), base=BASE)


def test_shortlist_keeps_options_close_to_the_best():
    space = Model([0.1] * 20).space()
    fps = {"A": 100.0, "B": 98.0, "C": 90.0, "E": 99.5, "D": 97.0}
    assert select_phase(space, fps, fast(refine_within=0.03)).shortlist == ["A", "E", "B", "D"]
    assert select_phase(space, fps, fast(refine_within=0.0)).shortlist == ["A"] == [select_option(fps, space)]


def test_select_tie_goes_to_the_option_with_fewer_stages():
    """The documented tie-break, whatever the order the options are listed in (the workflow's select phase
    once returned PND-A here: it compared bare FPS values and fell back to the listing order)."""
    space = Model([0.1] * 20).space()
    assert select_option({"PND-A": 50.0, "E": 50.0}, space) == "E"
    assert select_option({"D": 50.0, "PND-B": 50.0, "A": 50.0}, space) == "A"
    assert select_option({"B": 50.0, "PND-B": 50.0}, space) == "B"        # equal stages: the first listed
    assert select_phase(space, {"PND-A": 50.0, "E": 50.0}, fast()).selected == "E"


def test_select_refuses_when_nothing_ran():
    with pytest.raises(DseError, match="no mapping option ran"):
        select_phase(Model([0.1] * 20).space(), {"A": 0.0, "E": 0.0}, fast())


def test_search_config_sizes_buffers_for_the_pipeline():
    """One-stage: the maximizer's buffer bound (found on that very pipeline); deeper: one frame per busy
    thread and execution context at least, so the cut search never starves a stage of frames."""
    from dse.search.params import search_config

    bounds = {"pre": 2, "post": 1, "buffers": 5, "streams": 3}
    assert search_config(BASE, "E", (), (3,), bounds).buffers == 5
    assert search_config(BASE, "PND-A", (20,), (4, 2), bounds).buffers == 2 + 1 + 4 + 2
    assert search_config(BASE, "A", (20,), (1, 1), bounds).buffers == 5


def test_thesis_buffer_rule_keeps_the_maximizer_bound():
    from dse.search.params import search_config

    bounds = {"pre": 2, "post": 1, "buffers": 5, "streams": 3}
    assert search_config(BASE, "PND-A", (20,), (4, 2), bounds, pipeline_buffers=False).buffers == 5
    assert SearchSettings().pipeline_buffers and not SearchSettings(pipeline_buffers=False).pipeline_buffers
