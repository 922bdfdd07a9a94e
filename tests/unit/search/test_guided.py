"""The guided search: its board model recovers known DLA layer costs from stage times alone, its candidate
enumeration is every feasible tuple, and on small networks it finds the brute-force best with fewer tuples."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dse.backends.base import MeasureSettings
from dse.backends.sim import SimBackend
from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.evaluate import Evaluator
from dse.graph.analysis import analyze
from dse.core.measurement import Measurement
from dse.platform import load_platform
from dse.search import SearchSettings, Study, maximize_phase, run_search
from dse.search.board_model import (NetworkFacts, Observation, StageRole, StageRow, fit_board_model,
                                    roles_of_platform)
from dse.search.exhaustive import feasible_tuples
from dse.search.guided import CHECK_TUPLES, LOCAL_TUPLES, candidate_tuples, expected_gain, guided_search
from dse.search.params import search_config
from dse.search.streams import stream_tuple
from dse.zoo import build_network
from dse.workflow.space import space_of, search_space


def _synthetic_facts(n=48, groups=6, seed=0):
    rng = np.random.default_rng(seed)
    weight = rng.uniform(0.05, 0.5, n)
    ok = np.ones(n, dtype=bool)
    ok[[13, 31]] = False                     # two unsupported layers that split a DLA engine
    return NetworkFacts(weight=weight, dla_ok=ok, splits=~ok, crossing_bytes=rng.uniform(1e5, 1e6, n),
                        input_bytes=5e5, profiled=True, groups=groups)


def test_model_recovers_known_dla_layer_costs_from_stage_times():
    """Synthetic DLA stage times from known per-group DLA/GPU ratios (and loadable, reformat and fallback
    costs): NNLS over layer groups gets each group's ratio back from whole-stage times only."""
    facts = _synthetic_facts()
    g = facts.groups
    true = np.concatenate([[1.5, 2.0, 3.5, 2.5, 4.0, 1.8],     # DLA ms per GPU ms, per layer group
                           [0.08, 0.02, 1.0, 0.05, 0.03]])    # loadable, per MB, fallback slope, fixed, after cut
    rng = np.random.default_rng(1)
    rows = []
    for _ in range(60):
        a, b = sorted(rng.choice(facts.n, 2, replace=False))
        x = facts.dla_features(np.array([a]), np.array([b]))[0]
        rows.append(StageRow("dla", int(a), int(b), float(x @ true)))
    roles = {"E": [StageRole("gpu", ("GPU",))], "A": [StageRole("dla", ("DLA0",), fallback="GPU"),
                                                     StageRole("gpu", ("GPU",))]}
    gpu_rows = [StageRow("gpu", 0, facts.n - 1, float(facts.cum_w[-1]) + 0.1)]
    model = fit_board_model(facts, roles, gpu_rows + rows, [])
    central = model.fits["dla"][0]
    np.testing.assert_allclose(central[:g], true[:g], rtol=0.05)
    # and the stage times it predicts for unseen ranges
    first, last = np.array([0, 10, 20]), np.array([30, 40, 47])
    pred = model.fits["dla"][0] @ facts.dla_features(first, last).T
    np.testing.assert_allclose(pred, facts.dla_features(first, last) @ true, rtol=0.03)


def test_without_measurements_the_uncertainty_is_wide_and_measurements_narrow_it():
    facts = _synthetic_facts()
    roles = {"A": [StageRole("dla", ("DLA0",), fallback="GPU"), StageRole("gpu", ("GPU",))],
             "E": [StageRole("gpu", ("GPU",))]}
    cuts = np.array([[c] for c in range(5, 40)])
    gpu = [StageRow("gpu", 0, facts.n - 1, float(facts.cum_w[-1]))]
    blind = fit_board_model(facts, roles, gpu, [Observation("E", (), (1,), 4, 1000 / float(facts.cum_w[-1]))])
    _, sd_blind = blind.predict("A", cuts, (2, 1), 6)
    obs = [Observation("A", (c,), (2, 1), 6, 100.0) for c in (10, 20, 30)]
    seen = fit_board_model(facts, roles, gpu, obs)
    _, sd_seen = seen.predict("A", np.array([[10], [20], [30]]), (2, 1), 6)
    assert sd_seen.max() < sd_blind.min()
    assert np.all(expected_gain(np.log([90.0, 100.0, 110.0]), np.array([0.05] * 3), np.log(100.0)) > 0)


@pytest.fixture(scope="module", params=["tiny-detector", pytest.param("yolov2-tiny", marks=pytest.mark.slow)])
def board(request):
    net = request.param
    # noise-free: the brute-force best is one tuple
    backend, base = _sim_board(net, input_size=64 if net.startswith("tiny") else 416)
    return backend, space_of(backend.analysis, backend), base


def test_candidates_are_every_feasible_tuple(board):
    _, space, _ = board
    for n in (1, 2, 3):
        brute = {t for t in itertools.combinations(space.feasible_cuts, n) if space.feasibility(t) is None}
        assert {tuple(int(c) for c in row) for row in candidate_tuples(space, n)} == brute
    thinned = candidate_tuples(space, 3, limit=50)
    assert 0 < len(thinned) <= 50


def test_guided_finds_the_brute_force_best_with_fewer_tuples(board):
    """Every feasible tuple of every option with at most two cuts, measured at the same parameters: the
    guided search's answer is the best of them (noise-free sim) and it measured far fewer."""
    backend, space, base = board
    settings = SearchSettings(seed=0, options=("E", "A", "B", "C", "PND-A", "PND-B"), guided_noise=0.005)
    study = Study(Evaluator(backend), "guided")
    bounds = maximize_phase(space, study, base, settings.with_(strategy="guided")).extra["bounds"]
    found = guided_search(space, study, base, bounds, settings, space.network_facts(), options=settings.options,
                          known=list(study.memo.values()))
    brute, total = 0.0, 0
    for option in settings.options:
        streams = stream_tuple(space.stages(option), bounds["streams"], dla_streams=settings.dla_streams,
                               share_main=False)
        for cuts in feasible_tuples(space, space.n_cuts(option)) if space.n_cuts(option) else [()]:
            m = backend.measure(search_config(base, option, cuts, streams, bounds, settings.pipeline_buffers))
            brute, total = max(brute, m.fps if m.ok else 0.0), total + 1
    assert found.fps >= 0.995 * brute, (found.config, found.fps, brute)
    assert found.extra["unique_tuples"] < total / 2, (found.extra["unique_tuples"], total)
    assert found.extra["rounds"] and found.extra["stopped"]
    # one board measures one tuple at a time: after the first round (the model's best of every option) a gain round
    # measures ``guided_batch`` tuples (one by default); the check and local rounds have sizes of their own
    size = {"gain": settings.guided_batch, "check": CHECK_TUPLES, "local": LOCAL_TUPLES}
    assert len(found.extra["rounds"][0]["picks"]) == len(settings.options)
    assert all(len(r["picks"]) <= size[r["kind"]] for r in found.extra["rounds"][1:]), found.extra["rounds"]
    assert "check" in {r["kind"] for r in found.extra["rounds"]}, found.extra["rounds"]


def test_run_search_runs_the_guided_strategy_and_labels_its_rows(board):
    backend, space, base = board
    ev = Evaluator(backend)
    r = run_search(space, Study(ev), base, SearchSettings(seed=0, strategy="guided", options=("E", "A", "PND-A")))
    assert r.to_dict()["strategy"] == "guided" and r.fps >= r.extra["guided"].fps * 0.98
    assert r.extra["selected"] in ("E", "A", "PND-A")
    assert r.extra["unique_tuples"] == len({(o, c) for o, c in r.extra["guided"].extra["tuples"]})


def test_roles_follow_the_platform():
    roles = roles_of_platform(load_platform("xavier-agx-sim"))
    assert [r.cost_class for r in roles["PND-B"]] == ["gpu", "dla", "gpu"]
    assert roles["PND-B"][1].split and roles["PND-B"][1].resources == ("DLA0", "DLA1")
    cpu = roles_of_platform(load_platform("host-cpu"))
    assert all(r.cost_class.startswith("cpu") for rs in cpu.values() for r in rs)


def test_bad_guided_settings_name_the_value():
    with pytest.raises(DseError, match="search.strategy"):
        SearchSettings(strategy="bayes")
    with pytest.raises(DseError, match="guided_noise"):
        SearchSettings(guided_noise=0)
    with pytest.raises(DseError, match="guided_noise must be 'auto' or a number in \\(0, 1\\), got 'loud'"):
        SearchSettings(guided_noise="loud")
    with pytest.raises(DseError, match="guided_budget"):
        SearchSettings(guided_budget=0)
    for bad in (-0.5, float("inf"), "half", True):
        with pytest.raises(DseError, match=f"guided_rerun_share must be a number >= 0, got {bad!r}"):
            SearchSettings(guided_rerun_share=bad)
    assert SearchSettings(guided_rerun_share=0).guided_rerun_share == 0


def test_model_learns_the_host_thread_bounds_and_asks_for_enough_threads():
    """Measurements held back by one pre-processing thread sit on a common ceiling while post-processing (two
    threads) never binds: the model puts every configuration with that one pre thread under the ceiling, whatever
    its post threads, and asks for pre threads by the pre cost and post threads by the post cost (one post
    thread passed 0.8 of the GPU's rate) to clear a higher FPS."""
    facts = _synthetic_facts()
    roles = {"E": [StageRole("gpu", ("GPU",))]}
    ms = float(facts.cum_w[-1])
    gpu = [StageRow("gpu", 0, facts.n - 1, ms)]
    ceiling = 0.5 * 1000 / ms                 # one pre thread passes half the GPU's rate
    obs = [Observation("E", (), (s,), 8, ceiling * (1 - 0.001 * s), pre=1, post=2) for s in (1, 2, 3)]
    obs.append(Observation("E", (), (2,), 8, 0.8 * 1000 / ms, pre=4, post=1))    # GPU-bound, one post thread
    model = fit_board_model(facts, roles, gpu, obs)
    assert model.pre_ms == pytest.approx(1000 / obs[0].fps)
    assert model.post_ms == pytest.approx(1000 / obs[-1].fps)
    capped, _ = model.predict("E", np.zeros((1, 0), dtype=int), (2,), 8, threads=(1, 8))
    free, _ = model.predict("E", np.zeros((1, 0), dtype=int), (2,), 8, threads=(4, 2))
    assert capped[0] <= obs[0].fps * 1.02 < free[0]
    assert model.threads_for(obs[0].fps * 2.5) == (3, 2) and model.threads_for(obs[0].fps * 0.9) == (1, 1)
    assert fit_board_model(facts, roles, gpu, [Observation("E", (), (1,), 8, 50.0)]).threads_for(1e6) == (1, 1)
    # an option's correction (here +20 %) fixes the accelerators' side; the thread pools' ceiling still holds
    model.log_kappa["E"] = math.log(1.2)
    lifted, _ = model.predict("E", np.zeros((1, 0), dtype=int), (2,), 8, threads=(1, 8))
    assert lifted[0] == pytest.approx(model.host_ceiling((1, 8))) and model.host_ceiling(None) == math.inf


def test_a_busy_cpu_bounds_its_option_at_its_threads():
    """Pre, post and stage threads share the CPU cores: a measurement with every core busy bounds what its option
    reaches at its threads (the best FPS per CPU utilization there), whatever the cuts; a less busy one, another
    option or other threads are not bounded by it (yolov3-tiny INT8 on the Xavier: every tuple at 7/4 threads
    measured within 2 % of 800 FPS at 0.99 CPU while the model, blind to the cores, kept predicting more)."""
    facts = _synthetic_facts()
    roles = {"E": [StageRole("gpu", ("GPU",))], "A": [StageRole("gpu", ("GPU",)), StageRole("dla", ("DLA0",))]}
    ms = float(facts.cum_w[-1])
    gpu = [StageRow("gpu", 0, facts.n - 1, ms)]
    busy = 0.6 * 1000 / ms
    obs = [Observation("E", (), (2,), 8, busy, pre=7, post=4, cpu=0.99),
           Observation("E", (), (2,), 8, 0.3 * 1000 / ms, pre=2, post=1, cpu=0.5)]
    model = fit_board_model(facts, roles, gpu, obs)
    assert model.host_ceiling((7, 4), "E") == pytest.approx(busy / 0.99)
    assert model.host_ceiling((2, 1), "E") == model.host_ceiling((2, 1)) and model.host_ceiling((7, 4), "A") > busy
    model.log_kappa["E"] = math.log(1.3)                  # a correction that would lift E above what the cores allow
    fps, _ = model.predict("E", np.zeros((1, 0), dtype=int), (2,), 8, threads=(7, 4))
    assert fps[0] == pytest.approx(busy / 0.99)


def test_idle_accelerators_bound_their_option_at_its_threads():
    """A measurement whose every accelerator had idle time was held back by the host: its option reaches no more
    than that FPS (plus twice the noise) at its threads, though the CPU was not fully busy (Orin, yolov3-tiny
    INT8: every option measured 1,500-1,600 FPS at 8/4 threads with the CPU at 0.83, its host threads slowing
    each other down, while the model's single per-thread cost allowed 1,829). A busy accelerator, or an unknown
    utilization, bounds nothing; an option with a stage on CPU cores reports none (``_observations``)."""
    from dse.search.guided import _observations

    facts = _synthetic_facts()
    roles = {"E": [StageRole("gpu", ("GPU",))], "A": [StageRole("gpu", ("GPU",)), StageRole("dla", ("DLA0",))]}
    ms = float(facts.cum_w[-1])
    gpu = [StageRow("gpu", 0, facts.n - 1, ms)]
    held = 0.6 * 1000 / ms
    obs = [Observation("A", (5,), (2, 1), 8, held, pre=8, post=4, cpu=0.8, accel=0.7),
           Observation("E", (), (2,), 8, 0.9 * 1000 / ms, pre=8, post=4, cpu=0.8, accel=0.99),
           Observation("E", (), (2,), 8, 0.5 * 1000 / ms, pre=2, post=1, cpu=0.5)]
    model = fit_board_model(facts, roles, gpu, obs)
    assert model.host_ceiling((8, 4), "A") == pytest.approx(held * (1 + 2 * model.noise))
    assert model.host_ceiling((8, 4), "E") == model.host_ceiling((8, 4)) > held * 1.5
    assert model.host_ceiling((2, 1), "E") == model.host_ceiling((2, 1))

    analysis = analyze(build_network("tiny-detector", input_size=64))
    space = space_of(analysis, SimBackend(load_platform("xavier-agx-sim"), analysis,
                                                         MeasureSettings(input_size=64, seed=0)))
    a = Configuration(benchmark="tiny-detector", platform="xavier-agx-sim", option="A", cuts=(3,), streams=(2, 1))
    measured = [Measurement(a, fps=500.0, util={"GPU": 0.6, "DLA0": 0.7, "DLA1": 0.0, "CPU": 0.8}, cpu_util=0.8),
                Measurement(a.with_(option="E", cuts=(), streams=(2,)), fps=400.0, util={"CPU": 0.8})]
    _, seen = _observations(space, space.stage_roles, measured)
    assert [o.accel for o in seen] == [0.7, 0.0]


def test_expected_gain_stops_at_the_host_ceiling():
    """No tuple beats the FPS the host's thread pools let through: a ceiling at the incumbent leaves no gain (a
    host-bound plateau, where every option measures the same, converges), and one above it leaves the gain of
    the truncated variable E[(min(X, c) - I)+] (checked by sampling)."""
    rng = np.random.default_rng(0)
    m, s, incumbent, ceiling = np.log(100.0), 0.05, np.log(98.0), np.log(103.0)
    free = expected_gain(np.array([m]), np.array([s]), incumbent)[0]
    capped = expected_gain(np.array([m]), np.array([s]), incumbent, ceiling)[0]
    x = rng.normal(m, s, 400_000)
    assert capped == pytest.approx(np.maximum(np.minimum(x, ceiling) - incumbent, 0).mean(), rel=0.01)
    assert 0 < capped < free == pytest.approx(np.maximum(x - incumbent, 0).mean(), rel=0.01)
    assert expected_gain(np.array([m]), np.array([s]), incumbent, incumbent)[0] == 0.0


def test_remeasure_asks_fresh_repeats_once_each(tiny_board):
    backend, space, base, settings, ev, bounds = tiny_board
    study = Study(ev, "guided")
    config = search_config(base, "E", (), (2,), bounds)
    first = study.remeasure(config, "guided", range(1, 4))
    assert len(first) == 3 and len(set(first)) > 1            # independent noise per repeat
    assert study.remeasure(config, "guided", range(1, 4)) == first and len(study.reruns) == 3
    assert study.measured == 0                               # re-runs are not new configurations
    with pytest.raises(ValueError, match="repeat 1"):
        study.remeasure(config, "guided", range(0, 2))


def test_a_race_re_runs_only_the_configurations_still_in_doubt():
    """Ranking re-runs (``dse.search.race``): a configuration far under the leader gets one batch, near-equal
    ones get more batches until the doubt is resolved or the cap is reached, the re-runs round-robin on consecutive
    fresh repeat indices; no noise (assumed, or left within the rounds): one batch; no repeats: none."""
    from dse.search.race import RACE_ROUNDS, race

    backend, base = _sim_board("yolov4", sigma=0.03)
    study = Study(Evaluator(backend), "guided")
    e = search_config(base, "E", (), (2,), {"streams": 2, "pre": 4, "post": 2, "buffers": 6})
    slow = e.with_(streams=(1,), pre_threads=1)
    near = e.with_(buffers=7)                        # the same true FPS as ``e``: GPU-bound either way
    runs = race(study, [slow, e, near], "finetune", 3, 0.03, first=5)[0]
    assert len(runs[0]) == 3 and min(len(runs[1]), len(runs[2])) > 3
    assert max(len(r) for r in runs) <= RACE_ROUNDS * 3
    for config, r in zip((slow, e, near), runs):      # consecutive repeat indices from ``first``, nothing else
        assert study.remeasure(config, "finetune", range(5, 5 + len(r))) == r
    assert len(study.reruns) == sum(map(len, runs))
    # round-robin: one run of each configuration in the batch before the next of any (a drift hits all alike)
    order = [m.config.hash for m in study.reruns]
    assert order[:9] == [slow.hash, e.hash, near.hash] * 3 and order[9:15] == [e.hash, near.hash] * 3
    # noise-free, ``e`` and ``near`` stay tied, but nothing is left within the rounds to doubt them by
    quiet = Study(Evaluator(_sim_board("yolov4")[0]), "guided")
    for noise in (0.0, 0.01, 0.03):
        assert [len(r) for r in race(quiet, [slow, e, near], "finetune", 3, noise)[0]] == [3, 3, 3]
    assert race(quiet, [e, near], "finetune", 0, 0.03)[0] == [[], []]


def test_a_race_adds_batches_only_while_the_re_runs_cost_less_board_time_than_the_measurements():
    """The re-run budget (``dse.search.board_time``): its account of the measurements' and re-runs' board seconds is
    the report's model (``board_seconds``: a start-up and the frames per run, one build per distinct engine, an
    engine being a PE type and a layer range), counted from where it starts plus what it is handed; a race whose
    next batch would take the re-runs past ``share`` of the measurements' seconds stops after the batches that fit
    (the first always runs), and counts the refusal."""
    from dse.report.tables import board_seconds
    from dse.search.board_time import RerunBudget
    from dse.search.race import race

    backend, base = _sim_board("yolov4", sigma=0.03)
    space = space_of(backend.analysis, backend)
    e = search_config(base, "E", (), (2,), {"streams": 2, "pre": 4, "post": 2, "buffers": 6})
    near = e.with_(buffers=7)                        # the same true FPS as ``e``: a race at 3 % wants more batches
    earlier = e.with_(option="A", cuts=(60,), streams=(2, 1))
    later = [e, near, earlier.with_(streams=(2, 2)), earlier.with_(cuts=(90,))]

    def measured(budget_share: float, carried=None) -> tuple[Study, RerunBudget]:
        study = Study(Evaluator(backend), "guided")
        known = study.measure(earlier, "guided")
        budget = RerunBudget(space, study, budget_share, carried=carried, known=[known])
        for config in later:
            study.measure(config, "guided")
        return study, budget

    study, budget = measured(1e9)
    platform, frames = backend.platform, space.run_frames
    assert space.stages("A") == ["DLA", "GPU"]
    # E's engine, A's two at cut 60 (which its second stream count shares) and two at cut 90
    engines = {"GPU": {"E", "A60", "A90"}, "DLA": {"A60", "A90"}}
    total = board_seconds([m.fps for m in study.memo.values()], engines, frames, platform.board_costs)
    assert budget.spent() == pytest.approx((total, 0.0))
    free_runs, free_means = race(study, [e, near], "finetune", 3, 0.03, first=5, budget=budget)
    batches = len(free_runs[0]) // 3
    assert batches >= 2 and budget.refused == 0 and budget.spent()[1] == pytest.approx(
        board_seconds([m.fps for m in study.reruns], {}, frames, platform.board_costs))
    # share 0: the first batch only, one refusal; re-runs already carried: the batches that still fit
    run_s = platform.board_costs.run_s(frames, free_means[0])
    for share, carried, fit in ((0.0, 0.0, 1), (1.0, total - 9 * run_s, 1), (1.0, total - 15 * run_s, 2)):
        study, budget = measured(share, {"rerun_s": carried})
        runs, _ = race(study, [e, near], "finetune", 3, 0.03, first=5, budget=budget)
        assert [len(r) for r in runs] == [3 * fit] * 2 and budget.refused == int(fit < batches)


class _Host:
    """A stand-in for a real host's re-runs (the race's statistics alone): FPS = the configuration's speed x
    the host's speed at that repeat (``drift``, keyed by configuration for a drift of its own) x its own noise
    (``wobble``, by repeat)."""

    def __init__(self, speed: dict, drift, wobble):
        self.speed, self.drift, self.wobble = speed, drift, wobble

    def remeasure(self, config, phase, repeats):
        return [self.speed[config.buffers] * self.drift(config.buffers, r) * self.wobble(config.buffers, r)
                for r in repeats]


def test_a_race_compares_configurations_within_rounds():
    """A host whose speed jumps +-25 % between rounds (as one shared with other tenants did: all configurations
    about 25 % faster in one round) and whose runs differ by 0.5 % within a round: a configuration 5 % ahead is
    settled after one batch although one run's noise (10 %) would keep an unpaired race going to its cap; the same
    jumps, but each configuration's own, do keep it going. Where little noise is left within the rounds, how many
    batches two tied configurations get follows from the noise assumed for one run alone, and ranks follow the
    within-round comparison, not the raw means (a configuration that sat out a slow batch is not ahead for it)."""
    from dse.search.race import RACE_ROUNDS, race

    a, b, c = (Configuration("n", "host-cpu", buffers=k) for k in (1, 2, 3))
    levels = [1.0, 1.25, 0.8, 1.2, 0.75, 1.1, 0.9, 1.3, 0.85, 1.0, 1.15, 0.8, 1.05]
    wobble = lambda k, r: 1 + 0.005 * (-1) ** (r + k)                    # noqa: E731
    shared = _Host({1: 100.0, 2: 105.0}, lambda k, r: levels[r], wobble)
    runs, means = race(shared, [a, b], "finetune", 3, 0.10)
    assert [len(r) for r in runs] == [3, 3] and means[1] > means[0]
    own = _Host({1: 100.0, 2: 105.0}, lambda k, r: levels[(r + 5 * k) % len(levels)], wobble)
    assert [len(r) for r in race(own, [a, b], "finetune", 3, 0.10)[0]] == [3 * RACE_ROUNDS] * 2
    # tied, within-round spread 10 %: the noise assumed decides (2 standard errors of 3 runs under 2 % at 1 %)
    spread = lambda k, r: (1.1, 0.9, 1.0)[(r + k) % 3]                   # noqa: E731
    tied = _Host({1: 100.0, 2: 100.0}, lambda k, r: 1.0, spread)
    lengths = {noise: [len(r) for r in race(tied, [a, b], "finetune", 3, noise)[0]]
               for noise in (0.01, 0.015, 0.03)}
    assert lengths == {0.01: [3, 3], 0.015: [6, 6], 0.03: [12, 12]}
    # ``c`` 5 % behind is settled after the first batch; the tied two race on through a batch 30 % slower
    slower = _Host({1: 100.0, 2: 100.0, 3: 95.0}, lambda k, r: 1.0 if r <= 3 else 0.7, wobble)
    runs, means = race(slower, [a, b, c], "finetune", 3, 0.10, resolution=0.005)
    assert len(runs[2]) == 3 < min(len(runs[0]), len(runs[1])) and sum(runs[0]) / len(runs[0]) < sum(runs[2]) / 3
    assert [m / means[2] for m in means[:2]] == pytest.approx([100 / 95] * 2, rel=0.01)


def test_guided_answer_is_the_best_mean_over_fresh_reruns(board):
    """The fine-tuning of several finalists ends on the start or tuned configuration with the best mean of
    fresh re-runs; a second finalist of the same option gets the first one's tuned parameters (one
    measurement), and the answer is one of the candidates it re-ran."""
    from dse.search.pipeline import finetune_phase

    backend, space, base = board
    settings = SearchSettings(seed=0, strategy="guided", options=("E", "A", "PND-A"), guided_repeats=2)
    study = Study(Evaluator(backend), "guided")
    bounds = maximize_phase(space, study, base, settings).extra["bounds"]
    found = guided_search(space, study, base, bounds, settings, space.network_facts(), options=settings.options,
                          known=list(study.memo.values()))
    # raced: batches of two fresh re-runs, more where the ranking is in doubt
    assert found.extra["contenders"] and all(len(c["reruns"]) in (2, 4, 6, 8) for c in found.extra["contenders"])
    means = [c["mean"] for c in found.extra["contenders"]]
    assert means == sorted(means, reverse=True)
    starts = found.extra["finalists"] + [found.extra["finalists"][0].with_(cuts=found.extra["finalists"][0].cuts)]
    tuned = finetune_phase(space, study, starts, settings, reruns_used=found.extra["reruns_used"], account=found.extra["rerun_account"])
    # the re-run budget's account goes on from the search's: the fine-tuner's measurements and re-runs on top, the
    # same in a fresh process (the workflow's fine-tune job asks for its starts again: nothing runs for them)
    carried = found.extra["rerun_account"]
    assert tuned.extra["board_s"][0] > carried["measured_s"] and tuned.extra["board_s"][1] > carried["rerun_s"]
    alone = finetune_phase(space, Study(Evaluator(backend), "guided"), starts, settings, reruns_used=found.extra["reruns_used"],
                           account=carried)
    assert alone.extra["board_s"] == pytest.approx(tuned.extra["board_s"])
    confirmed = tuned.extra["confirmed"]
    assert confirmed and confirmed[0]["config_hash"] == tuned.config.hash
    assert [c["mean"] for c in confirmed[1:]] == sorted((c["mean"] for c in confirmed[1:]), reverse=True)
    proposed = finetune_phase(space, study, found.extra["finalists"][0], settings.with_(strategy="proposed"))
    assert not proposed.extra["confirmed"]


def test_guided_fine_tuning_lowers_only_the_answer():
    """Each finalist is raised (step 1), the starts and raised configurations are raced, and only the winner's
    resources are lowered (steps 2-3), where it is a raised one: the loser's fine-tuning never goes below its
    start. The lowered configuration is raced against the winner before it replaces it."""

    from dse.search.pipeline import _lowered, finetune_phase

    backend, base = _sim_board("tiny-detector", 0.01, input_size=64)
    space = space_of(backend.analysis, backend)
    cut = next(c for c in space.feasible_cuts if c > 3 and space.feasibility((c,)) is None)
    starts = [base.with_(option="E", streams=(4,), buffers=10, pre_threads=4, post_threads=3),
              base.with_(option="A", cuts=(cut,), streams=(4, 4), buffers=10, pre_threads=4, post_threads=3)]
    study = Study(Evaluator(backend), "guided")
    settings = SearchSettings(seed=0, strategy="guided", guided_repeats=3)
    tuned = finetune_phase(space, study, starts, settings, noise=0.01)
    answer = (tuned.config.option, tuned.config.cuts)
    resources = {c.hash: (c.pre_threads, c.post_threads, c.buffers, *c.streams) for c in (m.config for m in
                                                                                          study.memo.values())}
    loser = next(s for s in starts if (s.option, s.cuts) != answer)
    winner = next(s for s in starts if (s.option, s.cuts) == answer)
    loser_runs = [m.config for m in study.memo.values() if (m.config.option, m.config.cuts) == (loser.option,
                                                                                                 loser.cuts)]
    assert loser_runs and all(min(a - b for a, b in zip(resources[c.hash], resources[loser.hash])) >= 0
                              for c in loser_runs)
    lowered = [tp for tp in tuned.extra["trajectory"] if tp.kind.startswith("lower")]
    assert lowered and sum(resources[tuned.config.hash]) < sum(resources[winner.hash])
    assert [tp.step for tp in tuned.extra["trajectory"]] == list(range(len(tuned.extra["trajectory"])))
    raced = {e["config_hash"]: e for e in tuned.extra["confirmed"]}
    assert tuned.config.hash in raced and len(raced[tuned.config.hash]["reruns"]) >= 3
    # a start that won over its raises keeps its parameters: nothing is lowered or measured
    start_won = tuned.with_extra(confirmed=[{**tuned.extra["confirmed"][0], "tuned": False}])
    measured = study.measured
    assert _lowered(space, study, start_won, settings, 3, 0.01, None) == (start_won, 0)
    assert study.measured == measured


def _sim_board(network: str, sigma: float = 0.0, precision: str = "int8", input_size: int = 416):
    """The virtual Xavier at run noise ``sigma`` (no task noise) for ``network``, and its base configuration."""
    analysis = analyze(build_network(network, input_size=input_size))
    raw = dict(load_platform("xavier-agx-sim").raw)
    raw["noise"] = {"sigma": sigma, "task_sigma": 0.0}
    platform = load_platform(raw)
    backend = SimBackend(platform, analysis, MeasureSettings(precision=precision, input_size=input_size, seed=0))
    base = Configuration(benchmark=network, platform=platform.name, precision=precision, input_size=input_size,
                         model_digest=analysis.digest)
    return backend, base


def _quiet_probe(network: str, precision: str) -> tuple[Study, Configuration]:
    """A study on the noise-free virtual Xavier, and the network's base configuration."""
    backend, base = _sim_board(network, precision=precision)
    return Study(Evaluator(backend), "guided"), base


def _confirmed(study: Study, config: Configuration):
    """``config`` as ``_confirm`` answers it: measured, with two fresh re-runs."""
    from dse.search.finetune import tuned
    from dse.search.pipeline import _confirmed_entry

    m = study.measure(config, "finetune")
    reruns = study.remeasure(config, "finetune", range(3, 5))
    return tuned(config, m, [], m.fps, m.fps, 0, confirmed=[_confirmed_entry(config, True, reruns, 3)])


def test_a_cpu_bound_answer_takes_one_pre_thread_fewer_where_it_does_as_well():
    """With every CPU core busy the host threads only contend: the guided answer is re-run with one
    pre-processing thread fewer and replaced where that does at least as well on the same fresh re-runs
    (yolov3-tiny FP16, noise-free, two post threads: PND-A (17) at 10 pre threads 816.3 FPS, at 9 832.1); an answer
    with CPU time to spare is left as it is, unmeasured."""
    from dse.search.pipeline import _one_thread_fewer

    study, base = _quiet_probe("yolov3-tiny", "fp16")
    busy = base.with_(option="PND-A", cuts=(17,), streams=(4, 2), buffers=17, pre_threads=10, post_threads=2)
    answer = _confirmed(study, busy)
    assert answer.measurement.cpu_util >= 0.9
    relieved = _one_thread_fewer(study, answer, 2, 0.01)
    assert relieved.config == busy.with_(pre_threads=9) and relieved.fps > answer.fps
    assert [c["config_hash"] for c in relieved.extra["confirmed"]] == [relieved.config.hash, busy.hash]
    spare = busy.with_(pre_threads=4)
    answer = _confirmed(study, spare)
    assert answer.measurement.cpu_util < 0.9
    asked = study.measured
    assert _one_thread_fewer(study, answer, 2, 0.01) is answer and study.measured == asked


def test_a_cpu_bound_answer_takes_one_stream_per_stage_where_that_does_as_well():
    """A CPU-bound answer on a plateau of streams the fine-tuner stopped on is re-run with one stream per stage and
    replaced where that does at least as well on the same fresh re-runs (yolov2-tiny INT8 E, noise-free, 7 pre / 2
    post threads: 4 streams 846.9 FPS, 1 stream 867.3); an answer with CPU time to spare, or one at one stream
    already, or one whose PEs are the host's cores (host-cpu), is left as it is, unmeasured."""
    from dse.search.pipeline import _one_stream_each

    study, base = _quiet_probe("yolov2-tiny", "int8")
    busy = base.with_(option="E", cuts=(), streams=(4,), buffers=12, pre_threads=7, post_threads=2)
    answer = _confirmed(study, busy)
    assert answer.measurement.cpu_util >= 0.9
    asked = study.measured
    assert _one_stream_each(study, answer, 2, 0.01, shared_cores=2) is answer and study.measured == asked
    relieved = _one_stream_each(study, answer, 2, 0.01)
    assert relieved.config == busy.with_(streams=(1,)) and relieved.fps > answer.fps
    assert [c["config_hash"] for c in relieved.extra["confirmed"]] == [relieved.config.hash, busy.hash]
    for left in (busy.with_(pre_threads=2), busy.with_(streams=(1,))):
        answer = _confirmed(study, left)
        asked = study.measured
        assert _one_stream_each(study, answer, 2, 0.01) is answer and study.measured == asked


def test_the_answer_takes_every_buffer_only_where_that_gains():
    """Buffers can gain a little each, under the noise one raise is judged on, and more together: the guided
    answer is re-run with all of them (Yolov4-csp INT8 PND-B (45,162), streams 3,4,3, noise-free: 4 buffers 243.1
    FPS, 32 buffers 249.2). Where they gain nothing (Yolov3-tiny FP16 PND-A (17) with CPU time to spare: 568.1 FPS
    with either), the answer keeps its buffers; one already at the cap, or one that runs the CPU busy (the host, not the
    accelerators, bounds it), is not re-measured, unless the PEs are the host's cores (host-cpu: every run keeps the
    CPU busy, and buffers gained there)."""
    from dse.search.pipeline import _more_buffers

    study, base = _quiet_probe("yolov4-csp", "int8")
    config = base.with_(option="PND-B", cuts=(45, 162), streams=(3, 4, 3), buffers=4, pre_threads=3, post_threads=2)
    answer = _confirmed(study, config)
    more = _more_buffers(study, answer, 2, 0.01, 32)
    assert more.config == config.with_(buffers=32) and more.fps > answer.fps * 1.015
    assert [c["config_hash"] for c in more.extra["confirmed"]] == [more.config.hash, config.hash]
    asked = study.measured
    assert _more_buffers(study, more, 2, 0.01, 32) is more and study.measured == asked

    study, base = _quiet_probe("yolov3-tiny", "fp16")
    config = base.with_(option="PND-A", cuts=(17,), streams=(4, 2), buffers=17, pre_threads=4, post_threads=2)
    answer = _confirmed(study, config)
    kept = _more_buffers(study, answer, 2, 0.01, 32)
    assert kept.config == config and len(kept.extra["confirmed"]) == 2
    busy = _confirmed(study, config.with_(pre_threads=10))
    assert busy.measurement.cpu_util >= 0.9
    asked = study.measured
    assert _more_buffers(study, busy, 2, 0.01, 32) is busy and study.measured == asked
    raced = _more_buffers(study, busy, 2, 0.01, 32, shared_cores=2)
    assert [c["config_hash"] for c in raced.extra["confirmed"] if c["config_hash"] != raced.config.hash] and \
        config.with_(pre_threads=10, buffers=32).hash in {c["config_hash"] for c in raced.extra["confirmed"]}


def test_a_variant_in_doubt_is_raced_against_the_answer_on_fresh_re_runs_of_both():
    """At 3 % noise two re-runs cannot tell a variant 2.5 % faster (Yolov4-csp INT8 PND-B (45,162) with every
    buffer, noise-free 2.5 % over 4 buffers) from the answer: both get more batches of re-runs while the race is in
    doubt (``dse.search.race``), the answer's after the indices it won the pick on (those favour it), and its record
    keeps both. The variant wins here, and its first race run is its measurement (it is measured only there)."""
    from dse.search.pipeline import _more_buffers
    from dse.search.race import RACE_ROUNDS

    backend, base = _sim_board("yolov4-csp", sigma=0.03)
    study = Study(Evaluator(backend), "guided")
    config = base.with_(option="PND-B", cuts=(45, 162), streams=(3, 4, 3), buffers=4, pre_threads=3, post_threads=2)
    answer = _confirmed(study, config)
    before = answer.extra["confirmed"][0]["reruns"]
    asked = study.measured
    more = _more_buffers(study, answer, 2, 0.03, 32)
    records = {e["config_hash"]: e for e in more.extra["confirmed"]}
    variant, kept = records[config.with_(buffers=32).hash], records[config.hash]
    assert 2 < len(variant["reruns"]) <= 2 * RACE_ROUNDS and variant["first_rerun"] == 5
    assert kept["first_rerun"] == 3 and kept["reruns"][:2] == before and len(kept["reruns"]) > 2
    fresh = study.remeasure(config, "finetune", range(5, 3 + len(kept["reruns"])))
    assert kept["reruns"][2:] == [round(x, 3) for x in fresh] and set(fresh).isdisjoint(before)
    assert study.measured == asked              # the variant has no search sample: it was only re-run
    assert more.config.buffers == 32 and more.measurement is study.rerun(more.config, "finetune", range(5, 6))[0]


def test_local_round_steps_along_each_cut_from_the_best_measured(board):
    from dse.search.guided import _local_round, _Pool

    _, space, base = board
    cuts = candidate_tuples(space, 1)
    pool = _Pool(base.with_(option="A"), cuts)
    mid = tuple(int(c) for c in cuts[len(cuts) // 2])
    pool.measured = {mid: 100.0, tuple(int(c) for c in cuts[0]): 50.0}

    class Flat:
        lengths, length = {}, 4.0

    preds = {"A": (np.full(len(cuts), 95.0), np.full(len(cuts), 0.01))}
    polished = set()
    picks = _local_round({"A": pool}, Flat(), preds, np.log(100.0), 0.01, 8, polished)
    assert picks and all(o == "A" and abs(c[0] - mid[0]) <= 3 and pool.has(c) for o, c in picks)
    assert {c[0] < mid[0] for _, c in picks} == {True, False}      # both directions
    assert _local_round({"A": pool}, Flat(), preds, np.log(100.0), 0.01, 8, polished) == []   # once per centre


def test_local_round_leaves_out_neighbours_predicted_far_below(board):
    """A step the model puts more than LOCAL_REACH and two noises under the incumbent is not measured (outward
    steps are: the test below gives them such predictions)."""
    from dse.search.guided import LOCAL_REACH, _local_round, _Pool

    _, space, base = board
    cuts = candidate_tuples(space, 1)
    pool = _Pool(base.with_(option="A"), cuts)
    mid = tuple(int(c) for c in cuts[len(cuts) // 2])
    pool.measured = {mid: 100.0}

    class Flat:
        lengths, length = {}, 4.0

    far = 100.0 * (1 - LOCAL_REACH - 2 * 0.01) - 0.5
    preds = {"A": (np.full(len(cuts), far), np.full(len(cuts), 0.01))}
    assert _local_round({"A": pool}, Flat(), preds, np.log(100.0), 0.01, 8, set()) == []
    steps = _local_round({"A": pool}, Flat(), {"A": (np.full(len(cuts), 99.0), preds["A"][1])}, np.log(100.0),
                         0.01, 8, set())
    assert len(steps) >= 2
    preds["A"][0][pool.row(steps[0][1])] = far + 1.0        # just inside the reach: measured alone
    assert _local_round({"A": pool}, Flat(), preds, np.log(100.0), 0.01, 8, set()) == [steps[0]]


def test_local_round_once_per_region(board):
    """A new best less than a step from a polished centre has the neighbours just measured: no second round
    there; one a whole step away (the walk goes on in its direction) or far away gets its own."""
    from dse.search.guided import _local_round, _Pool

    _, space, base = board
    cuts = candidate_tuples(space, 1)
    pool = _Pool(base.with_(option="A"), cuts)
    rows = [tuple(int(c) for c in row) for row in cuts]
    mid = rows[len(rows) // 2]
    pool.measured = {mid: 100.0}

    class Wide:
        lengths, length = {}, 6.0           # a step of 3 layers

    preds = {"A": (np.full(len(cuts), 100.0), np.full(len(cuts), 0.01))}
    polished = set()
    picks = _local_round({"A": pool}, Wide(), preds, np.log(100.0), 0.01, 8, polished)
    near = next(c for c in rows if 0 < abs(c[0] - mid[0]) < 3 and ("A", c) not in picks)
    pool.measured[near] = 101.0
    assert picks and _local_round({"A": pool}, Wide(), preds, np.log(101.0), 0.01, 8, polished) == []
    pool.measured[picks[0][1]] = 101.5      # a whole step away
    assert _local_round({"A": pool}, Wide(), preds, np.log(101.5), 0.01, 8, polished)
    pool.measured[rows[0]] = 102.0          # far from every polished centre
    assert abs(rows[0][0] - mid[0]) > 6 and _local_round({"A": pool}, Wide(), preds, np.log(102.0), 0.01, 8, polished)


def test_a_plateau_flatter_than_the_noise_counts_as_measured(board):
    """The search does not chase the model's argmax over tuples it predicts within a quarter of the noise of a
    measured one (one measurement each on a flat plateau), but measures it when it stands out."""
    from dse.search.guided import _pick, _Pool

    _, space, base = board
    cuts = candidate_tuples(space, 1)
    pool = _Pool(base.with_(option="A"), cuts)
    pool.measured = {tuple(int(c) for c in cuts[0]): 100.0}
    mean, sd = np.full(len(cuts), 50.0), np.full(len(cuts), 1e-4)
    mean[0], mean[1] = 100.0, 100.1         # the model's best, unmeasured, 0.1 % above the measured tuple
    picks, top = _pick({"A": pool}, {"A": (mean, sd)}, math.log(100.0), 4, first=False, threshold=0.0025)
    assert picks == [] and top[1] == tuple(int(c) for c in cuts[1])
    mean[1] = 103.0
    picks, _ = _pick({"A": pool}, {"A": (mean, sd)}, math.log(100.0), 4, first=False, threshold=0.0025)
    assert picks and picks[0] == ("A", tuple(int(c) for c in cuts[1]))


@pytest.mark.parametrize("sigma, lo, hi", [(0.0, 0.01, 0.01), (0.04, 0.02, 0.07)])
def test_auto_noise_is_the_spread_of_fresh_reruns_of_the_best_earlier_configuration(sigma, lo, hi):
    from dse.search.guided import NOISE_RUNS, estimate_noise

    backend, base = _sim_board("tiny-detector", sigma, input_size=64)
    study = Study(Evaluator(backend), "guided")
    known = [study.measure(base.with_(option="E", streams=(s,), buffers=4), "maximize") for s in (1, 2, 3)]
    noise, runs = estimate_noise(study, known)
    assert lo <= noise <= hi and len(runs) == NOISE_RUNS
    best = max(known, key=lambda m: m.fps).config.hash
    assert {m.config.hash for m in study.reruns} == {best}          # re-runs of one built configuration only
    assert estimate_noise(Study(Evaluator(backend), "guided"), []) == (0.01, [])   # nothing to re-run: the prior
    assert SearchSettings().guided_noise == "auto" and SearchSettings(guided_noise=0.02).guided_noise == 0.02


def test_the_best_earlier_measurement_competes_with_the_searched_tuples():
    """The maximizer's best configuration (its own parameters) is a contender beside the searched tuples when its
    sample reaches the window, and is ranked on the same fresh re-runs."""
    from dse.search.guided import _finalists, _Pool

    backend, base = _sim_board("tiny-detector", 0.01, input_size=64)
    study = Study(Evaluator(backend), "guided")
    template = base.with_(option="E", streams=(1,), buffers=2, pre_threads=1, post_threads=1)
    pool = _Pool(template, np.zeros((1, 0), dtype=int))
    pool.measured[()] = float(study.measure(template, "guided").fps)
    earlier = study.measure(base.with_(option="E", streams=(3,), buffers=8, pre_threads=2, post_threads=2),
                            "maximize")
    assert earlier.fps > pool.measured[()]
    finalists, contenders = _finalists(study, {"E": pool}, 0.01, 3, [earlier])
    assert {c["config_hash"] for c in contenders} == {template.hash, earlier.config.hash}
    assert finalists[0].config.hash == earlier.config.hash and all(len(c["reruns"]) == 3 for c in contenders)


def test_near_equal_contenders_are_raced_to_one_percent_where_it_changes_the_finalists():
    """Contenders whose order decides which go to the fine-tuner and whose means stay within the doubt of three
    re-runs at 1 % noise get more batches (a tuple 1 % behind is what the fine-tuner cannot make up); two that both
    go on need none. The fine-tuner's confirmation re-runs the starts on repeat indices after those the ranking
    took: fresh samples, not the ones that chose them."""
    from dse.search.finetune import tuned
    from dse.search.guided import CONTENDER_RESOLUTION, FINALISTS, _finalists, _Pool, reruns_used
    from dse.search.pipeline import _confirm
    from dse.search.race import RACE_ROUNDS

    assert CONTENDER_RESOLUTION == 0.01 and FINALISTS == 2
    backend, base = _sim_board("yolov4", sigma=0.01)
    study = Study(Evaluator(backend), "guided")
    template = search_config(base, "E", (), (2,), {"streams": 2, "pre": 4, "post": 2, "buffers": 6})
    pool = _Pool(template, np.zeros((1, 0), dtype=int))
    pool.measured[()] = float(study.measure(template, "guided").fps)
    # the same true FPS: GPU-bound either way
    twins = [study.measure(template.with_(buffers=b), "maximize") for b in (7, 8)]
    _, both_go_on = _finalists(study, {"E": pool}, 0.01, 3, twins[:1])
    assert [len(c["reruns"]) for c in both_go_on] == [3, 3]
    finalists, contenders = _finalists(study, {"E": pool}, 0.01, 3, twins)
    assert len(contenders) == 3 and len(finalists) == FINALISTS
    assert max(len(c["reruns"]) for c in contenders) > 3 and all(len(c["reruns"]) <= 3 * RACE_ROUNDS
                                                                  for c in contenders)
    by_hash = {c.hash: c for c in (template, *(m.config for m in twins))}
    for c in contenders:        # consecutive fresh repeat indices from 1
        assert study.remeasure(by_hash[c["config_hash"]], "guided", range(1, 1 + len(c["reruns"]))) == c["reruns"]
    used = reruns_used(contenders)
    assert used == max(len(c["reruns"]) for c in contenders) > 3
    starts = [m.config for m in finalists]
    results = [tuned(c, study.measure(c, "finetune"), [], 0.0, 0.0, 0) for c in starts]   # nothing tuned
    confirmed = _confirm(study, starts, results, 3, 0.01, used).extra["confirmed"]
    assert {e["first_rerun"] for e in confirmed} == {used + 1}
    assert _confirm(study, starts, results, 3, 0.01).extra["confirmed"][0]["first_rerun"] == 4     # no ranking: after 3


def test_finalists_take_the_best_of_each_option_before_a_second_tuple_of_one(board):
    """Near-equal tuples of one option tune alike: another option's best within the window is re-run and goes to
    the fine-tuner before a second tuple of the first option, even when its sample ranks below them (PND-B gains
    more from streams than PND-A, which its sample at the cut search's parameters does not show)."""
    from dse.search.guided import CONTENDERS, FINALISTS, _finalists, _Pool

    backend, space, base = board
    study = Study(Evaluator(backend), "guided")
    bounds = {"pre": 2, "post": 2, "buffers": 4, "streams": 2}
    pools = {}
    for option, samples in (("A", [100.0, 99.9, 99.8, 99.7, 99.6]), ("PND-A", [99.0])):
        template = search_config(base, option, (), stream_tuple(space.stages(option), 2, main_pe=space.main_pe),
                                 bounds, None)
        pool = pools[option] = _Pool(template, candidate_tuples(space, 1))
        rows = pool.cuts[:: max(1, len(pool.cuts) // len(samples))][:len(samples)]
        pool.measured = {tuple(int(c) for c in row): fps for row, fps in zip(rows, samples)}   # what the search saw
    finalists, contenders = _finalists(study, pools, 0.5, 1)     # a noise whose window holds every tuple
    assert len(contenders) == CONTENDERS and "PND-A" in {c["option"] for c in contenders}   # not A's 4 best only
    assert sorted(m.config.option for m in finalists) == ["A", "PND-A"] and len(finalists) == FINALISTS
    assert all(c["reruns"] and c["mean"] == c["reruns"][0] for c in contenders)   # ranked on their re-runs


def test_local_round_steps_outwards_where_a_far_option_rises_towards_an_edge(board):
    """An option far below the incumbent gets one outward step when its best measured tuple is the last of three
    or more along an axis (its samples rise towards an edge the model may not extrapolate past), none when its
    best lies between its other samples."""
    from dse.search.guided import _local_round, _Pool

    _, space, base = board
    cuts = candidate_tuples(space, 1)
    pool = _Pool(base.with_(option="A"), cuts)
    rows = [tuple(int(c) for c in cuts[i]) for i in (len(cuts) // 2, len(cuts) - 2, len(cuts) - 1)]

    class Flat:
        lengths, length = {}, 4.0

    incumbent = np.log(200.0)                       # another option's: A is far outside the window
    preds = {"A": (np.full(len(cuts), 90.0), np.full(len(cuts), 0.01))}     # the model sees no rise past the edge
    pool.measured = dict(zip(rows, (100.0, 90.0, 80.0)))      # rising towards the lowest cut measured
    picks = _local_round({"A": pool}, Flat(), preds, incumbent, 0.01, 8, set())
    assert picks and all(c[0] < rows[0][0] and pool.has(c) for _, c in picks)     # outwards only
    pool.measured = dict(zip(rows, (90.0, 100.0, 80.0)))      # best in the middle: nothing to extrapolate
    assert _local_round({"A": pool}, Flat(), preds, incumbent, 0.01, 8, set()) == []


def test_every_gpu_stage_is_searched_at_the_maximizers_streams(board):
    """The cut search does not halve the GPU streams over two GPU stages (thesis Sec. 3.5.1 does): at (1, 4, 1)
    PND-B would rank below PND-A by what the fine-tuner gives back."""
    backend, space, base = board
    settings = SearchSettings(seed=0, options=("B", "PND-B"), guided_noise=0.01, guided_budget=6)
    study = Study(Evaluator(backend), "guided")
    bounds = {"pre": 2, "post": 2, "buffers": 4, "streams": 2}
    found = guided_search(space, study, base, bounds, settings, space.network_facts(), options=settings.options)
    gpu = [i for i, t in enumerate(space.stages("PND-B")) if t == space.main_pe]
    searched = [m.config for m in study.memo.values() if m.config.option in settings.options]
    assert found.extra["tuples"] and len(gpu) == 2 and searched
    assert all(c.streams[i] == 2 for c in searched for i in gpu), {c.streams for c in searched}


def test_threads_rise_to_the_settings_bound_and_no_further(board):
    """The exploration raises the pools' threads to what the model asks for, up to ``max_pre``/``max_post`` (which
    the resolved settings stop at the cores where the threads share them: ``test_config``); a host-cpu search space
    knows those cores."""
    backend, space, base = board
    bounds = {"pre": 1, "post": 1, "buffers": 4, "streams": 2}

    def most_threads(settings):
        study = Study(Evaluator(backend), "guided")
        guided_search(space, study, base, bounds, settings, space.network_facts(), options=settings.options)
        return max(max(m.config.pre_threads, m.config.post_threads) for m in study.memo.values())

    settings = SearchSettings(seed=0, options=("E", "A"), guided_noise=0.01, guided_budget=4)
    assert most_threads(settings) > 2
    assert most_threads(settings.with_(max_pre=2, max_post=2)) == 2
    host = load_platform("host-cpu")
    analysis = analyze(build_network("tiny-chain", input_size=32))
    shared = search_space(analysis, host, MeasureSettings(precision="fp32", input_size=32), lambda: None)
    assert shared.shared_cores == host.shared_cores() == host.mapping_cores() >= 1


def test_on_the_hosts_cores_the_cuts_are_measured_with_every_buffer():
    """Where the PEs are the host's cores (``shared_cores``: host-cpu) a frame in flight costs host memory only and
    more buffers gained on every answer raced there, so the guided search measures with ``max_buffers``; elsewhere
    at the maximizer's bound (more buffers can lose on a board)."""
    from dataclasses import replace

    backend, base = _sim_board("tiny-detector", input_size=64)
    space = space_of(backend.analysis, backend)
    settings = SearchSettings(seed=0, options=("E", "A"), guided_noise=0.01, guided_budget=4, max_buffers=24)

    def buffers(space):
        study = Study(Evaluator(backend), "guided")
        guided_search(space, study, base, {"pre": 2, "post": 2, "buffers": 4, "streams": 2}, settings,
                      space.network_facts(), options=settings.options)
        return {m.config.buffers for m in study.memo.values()}

    assert buffers(replace(space, shared_cores=2)) == {24}
    assert 24 not in buffers(space)


def test_check_round_takes_the_models_best_then_the_cheapest_within_the_noise_of_it(board):
    """The check measures the model's best unmeasured tuple (the one the check is there to test), then, of the
    tuples it ranks within the noise of that one, those whose engines are built first; outside the noise the
    predicted mean decides."""
    from dse.search.guided import _check_round, _Pool

    _, space, base = board
    cuts = np.array([[10, 50], [20, 60], [30, 70], [40, 80], [50, 90]])
    pool = _Pool(base.with_(option="PND-B"), cuts)
    preds = {"PND-B": (np.array([100.0, 99.5, 90.0, 80.0, 99.8]), np.ones(5))}
    cheap = {(20, 60): 10.0, (40, 80): 1.0}

    def cost(option, c, fps):
        return cheap.get(c, 100.0)

    assert _check_round({"PND-B": pool}, preds, 1, 0.01, cost) == [("PND-B", (10, 50))]
    assert _check_round({"PND-B": pool}, preds, 2, 0.01, cost) == [("PND-B", (10, 50)), ("PND-B", (20, 60))]
    assert _check_round({"PND-B": pool}, preds, 2, 0.001, cost) == [("PND-B", (10, 50)), ("PND-B", (50, 90))]
    assert _check_round({"PND-B": pool}, preds, 5, 0.01, cost) == [("PND-B", c) for c in
                                                                   [(10, 50), (20, 60), (50, 90), (30, 70), (40, 80)]]
    pool.measured[(10, 50)] = 99.0
    assert _check_round({"PND-B": pool}, preds, 2, 0.01, cost) == [("PND-B", (50, 90)), ("PND-B", (20, 60))]
