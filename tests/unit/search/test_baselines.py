"""Each comparison method on a tiny network (tiny-detector, 64x64) on the virtual Xavier, seeded and small."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from dse.backends.sim import SimBackend
from dse.core.configuration import Configuration
from dse.evaluate import Evaluator
from dse.platform import load_platform
from dse.search.baselines import DLA_ONLY, base_d_config, base_g_config
from dse.search.exhaustive import exhaustive_search, plan_tuples
from dse.search.ga_common import GASettings, repair_cuts
from dse.search.ga_comprehensive import comprehensive_ga
from dse.search.ga_finetune import finetune_ga, resources
from dse.search.ga_profiled import _Decoder, profiled_mapping, profiled_search, stage_estimates_ms
from dse.search.random_search import random_search
from dse.search.study import Study, anytime
from dse.backends.base import MeasureSettings
from dse.workflow.compare import with_baseline_options

NET, SIZE = "tiny-detector", 64
OPTIONS = ["A", "B", "C", "E", "PND-A", "PND-B"]


@pytest.fixture(scope="module")
def board(tiny_board):
    return tiny_board


def test_base_g_and_base_d(board):
    backend, space, base, settings, ev, _ = board
    g = ev.evaluate(base_g_config(base, space), phase="baseline", strategy="Base(G)")
    d = ev.evaluate(base_d_config(base), phase="baseline", strategy="Base(D)")
    assert DLA_ONLY in space.options and g.ok and d.ok, d.reason
    assert (g.config.streams, g.config.buffers, g.config.pre_threads, g.config.post_threads) == ((1,), 1, 1, 1)
    assert d.fallback_layers > 0 and d.util.get("DLA0", 0) > 0   # the detection head falls back to the GPU
    assert d.stage_ms[0] > g.stage_ms[0]                          # the DLA is the slower PE


def test_repair_cuts_gives_feasible_tuples(board):
    _, space, *_ = board
    rng = random.Random(0)
    for n in (1, 2, 3):
        for _ in range(20):
            wish = [rng.randrange(space.n_layers) for _ in range(n)]
            cuts = repair_cuts(space, wish, n)
            assert cuts is not None and len(cuts) == n and space.feasibility(cuts) is None


def test_profiled_decoder_always_yields_a_platform_mapping(board):
    backend, space, *_ = board
    profile = backend.gpu_layer_profile("int8", 1)
    dec = _Decoder(space, OPTIONS, profile, 3.0, 4)
    rng = random.Random(1)
    for _ in range(30):
        genes = [rng.randrange(len(dec.kinds)) for _ in range(space.n_layers)]
        mapping, fixed = dec.decode(genes)
        assert mapping.option in OPTIONS and space.feasibility(mapping.cuts) is None
        assert dec.decode(fixed)[0] == mapping          # the written-back chromosome encodes the same mapping
        assert mapping.estimate_ms == stage_estimates_ms(profile, mapping.cuts, space.stages(mapping.option), 3.0)


def test_profiled_is_seeded_and_estimates_low(board):
    backend, space, base, settings, ev, bounds = board
    profile = backend.gpu_layer_profile("int8", 1)
    ga = GASettings(population=10, generations=4, seed=3)
    a, n, hist = profiled_mapping(space, OPTIONS, profile, 3.0, ga)
    b, _, _ = profiled_mapping(space, OPTIONS, profile, 3.0, ga)
    assert [(m.option, m.cuts) for m in a] == [(m.option, m.cuts) for m in b]
    assert n >= ga.population and len(hist) == ga.generations + 1
    assert a[0].fps == pytest.approx(max(hist))          # the hall of fame keeps the best estimate ever seen
    study = Study(ev, "Profiled", "profiled")
    r = profiled_search(space, study, base, OPTIONS, profile, 3.0, bounds, settings, ga)
    assert r.measurement.ok and r.fps > 0
    measured = ev.evaluate(Configuration.from_dict(r.extra["start"]), phase="x", strategy="x")
    assert sum(r.extra["estimate_ms"]) < sum(measured.stage_ms)   # Table 3.11: the estimate is too low
    assert all(ph.startswith("profiled/") for ph, _ in study.asked)


def test_comprehensive_ga_is_seeded_and_counts_distinct_points(board):
    backend, space, base, settings, _, bounds = board
    ga = GASettings(population=6, generations=2, seed=5)
    runs = []
    for _ in range(2):
        study = Study(Evaluator(backend), "Comprehensive GA")
        r = comprehensive_ga(space, study, base, OPTIONS, bounds, settings, ga)
        runs.append((r.config.hash, len(study.asked)))
        assert r.extra["evaluations"] >= ga.population and len(study.asked) == len(r.asked) <= r.extra["evaluations"]
        assert len({m.config.hash for _, m in study.asked}) == len(study.asked)
        for _, m in study.asked:
            c = m.config
            assert c.option in OPTIONS and c.buffers >= max(c.streams) and c.pre_threads <= bounds["pre"]
    assert runs[0] == runs[1]


def test_finetune_ga_keeps_mapping_and_minimizes_resources(board):
    backend, space, base, settings, ev, bounds = board
    start = base.with_(option="A", cuts=repair_cuts(space, [space.n_layers // 2], 1), streams=(2, 2), buffers=4,
                       pre_threads=2, post_threads=1)
    study = Study(ev, "Fine-tuning GA")
    r = finetune_ga(space, study, start, settings, GASettings(population=6, generations=2, seed=0))
    assert (r.config.option, r.config.cuts) == (start.option, start.cuts)
    best = max(m.fps for _, m in study.asked if m.ok)
    assert r.fps >= best * (1 - settings.degradation)
    close = [m.config for _, m in study.asked if m.ok and m.fps >= best * (1 - settings.degradation)]
    assert resources(r.config) == min(resources(c) for c in close)


def test_exhaustive_is_ground_truth_for_its_tuples(board):
    backend, space, base, settings, ev, bounds = board
    plan = plan_tuples(space, OPTIONS, max_cuts=2, cap=100_000)
    assert set(plan) == {"A", "B", "C", "E", "PND-A", "PND-B"}
    small = plan_tuples(space, OPTIONS, max_cuts=2, cap=len(plan["A"]) * 2 + 1)
    assert set(small) == {"A", "E", "PND-A"}                   # over the cap: 1-cut options only
    study = Study(ev, "Exhaustive")
    r = exhaustive_search(space, study, base, ["A", "E"], bounds, settings, cap=10_000)
    sweep = [m for ph, m in study.asked if ph == "exhaustive"]
    assert len(sweep) == len(plan["A"]) + 1
    assert r.extra["best_start"] == max(sweep, key=lambda m: m.fps if m.ok else 0).config.to_dict()
    assert r.fps >= 0.97 * max(m.fps for m in sweep)


def test_random_search_spends_exactly_its_budget(board):
    backend, space, base, settings, ev, bounds = board
    study = Study(ev, "Random", "random")
    r = random_search(space, study, base, OPTIONS, bounds, settings, budget=15, seed=2)
    assert len(study.asked) == 15 and r.asked == study.asked
    assert r.fps == max(m.fps for _, m in study.asked if m.ok)
    curve = anytime(study.asked)
    assert curve[-1] == pytest.approx(r.fps) and curve == sorted(curve)


def test_interleaved_runs_every_pe_and_tuning_pays(board):
    """Interleaving deserializes two whole-network engines on the DLAs (within Xavier's 4), their GPU
    fallback included; on Orin too, and tuning pays."""
    from dse.search.baselines import INTERLEAVED, interleaved_config, interleaved_tuned

    backend, space, base, settings, ev, bounds = board
    assert INTERLEAVED in space.options
    xavier = ev.evaluate(interleaved_config(base), phase="baseline", strategy="Interleaved")
    assert xavier.ok, xavier.reason
    assert xavier.dla_loadables >= 2 and xavier.fallback_layers > 0
    orin = SimBackend(with_baseline_options(load_platform("orin-agx-sim")), backend.analysis,
                      MeasureSettings(input_size=SIZE, seed=0, sample_size=300))
    ev = Evaluator(orin)
    base = base.with_(platform="orin-agx-sim")
    il = ev.evaluate(interleaved_config(base), phase="baseline", strategy="Interleaved")
    g = ev.evaluate(base_g_config(base, space), phase="baseline", strategy="Base(G)")
    assert il.ok, il.reason
    assert il.fps >= 0.95 * g.fps                        # one pre thread: the GPU context alone keeps up
    tuned = interleaved_tuned(space, Study(ev, "Interleaved+tuned"), base, bounds, settings)
    assert tuned.measurement.ok and tuned.measurement.fps > il.fps


def test_interleaved_stage_in_the_des_pulls_frames_on_every_pe():
    """Per-stream phases: context 0 runs the network on the GPU (1 ms), contexts 1-2 on DLA0/DLA1 (3 ms each);
    a free context takes the next frame, so throughput is the sum of the PEs' rates."""
    from dse.backends.sim.des import SimInput, StageRuntime, simulate

    gpu, dla = [("gpu", 1000.0, 1.0)], [("dla", 3000.0, 0.0)]
    stage = StageRuntime(phases=gpu, stream_cores=[None, 0, 1], stream_phases=[gpu, dla, dla])
    res = simulate(SimInput(pre_us=10, post_us=10, pre_threads=4, post_threads=4, buffers=6, cpu_cores=8,
                            cpu_contention=0.0, stages=[stage], n_dla=2, frames=600, warmup=30))
    assert res.buffers_per_s == pytest.approx(1e6 * (1 / 1000 + 2 / 3000), rel=0.03)
    assert res.gpu_busy > 0.95 and min(res.dla_busy) > 0.95


def test_ga_stops_after_stalling_and_is_seeded():
    """A GA whose best fitness stops improving ends ``stall`` generations later instead of spending its
    whole budget; the same seed replays the same run."""
    from dse.search.ga_common import int_vector_toolbox, run_ga

    calls = []

    def plateau(ind):          # improves while the first gene grows, then a plateau at 3
        calls.append(list(ind))
        return (float(min(ind[0], 3)),)

    ga = GASettings(population=8, generations=50, stall=3, seed=1)
    hof, history = run_ga(int_vector_toolbox([0, 0], [9, 9], plateau, ga, 0.3), ga, "t")
    assert hof[0].fitness.values[0] == 3.0 and history[-1] == 3.0
    assert history == sorted(history) and len(history) < ga.generations + 1
    assert len(history) == history.index(3.0) + 1 + ga.stall     # stopped exactly `stall` generations later
    first = list(calls)
    calls.clear()
    _, again = run_ga(int_vector_toolbox([0, 0], [9, 9], plateau, ga, 0.3), ga, "t")
    assert again == history and calls == first
    _, full = run_ga(int_vector_toolbox([0, 0], [9, 9], plateau, ga, 0.3), replace(ga, stall=0), "t")
    assert len(full) == ga.generations + 1


def test_a_pnd_stage_is_estimated_per_frame_for_the_search_and_per_execution_against_a_stage_timer():
    """Two DLAs alternate on a PND stage: a frame leaves every half execution (the GA's throughput estimate), but a
    board's stage timer reads one execution on one DLA (Table 3.11's measured side), twice as long."""
    profile = [1.0, 2.0, 3.0, 4.0]
    share = stage_estimates_ms(profile, [1], ["PND", "GPU"], 3.0)
    one = stage_estimates_ms(profile, [1], ["PND", "GPU"], 3.0, per_execution=True)
    assert share == [4.5, 7.0] and one == [9.0, 7.0]
    assert stage_estimates_ms(profile, [1], ["DLA", "GPU"], 3.0, per_execution=True) == [9.0, 7.0]
