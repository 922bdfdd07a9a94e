"""Comprehensive GA (thesis Sec. 3.6.4.4): every parameter in one chromosome, fitness = measured FPS.

Genes: [option, cut_1 .. cut_M (indices into the feasible cut positions), streams_1 .. streams_S, buffers,
pre, post], M = S - 1 = the most cuts any option has. An option uses its first n cuts and n + 1 stream
genes; cuts are repaired to the nearest feasible tuple; buffers are raised to the largest stream
count (the runtime rule the proposed search also keeps). Ranges come from the maximizer's bounds.
Every evaluation is a measurement through the shared evaluator (cached: a repeated configuration costs
nothing), so points measured = distinct configurations the GA asked for; ``extra``: the fitness calls
(``evaluations``, repeats included) and the best FPS per generation (``history``).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from dse.core.configuration import Configuration
from dse.search.ga_common import GASettings, int_vector_toolbox, repair_cuts, run_ga, stream_cap
from dse.search.params import make_config
from dse.search.study import Measurer, Study, as_study, score
from dse.search.result import StrategyResult
from dse.search.settings import SearchSettings
from dse.search.space import SearchSpace, stage_width

PHASE = "comprehensive-ga"


def comprehensive_ga(space: SearchSpace, evaluator: Measurer | Study, base_cfg: Configuration,
                     options: Sequence[str], bounds: Mapping[str, int], settings: SearchSettings,
                     ga: GASettings) -> StrategyResult:
    study = as_study(evaluator)
    mark = study.measured
    options = [o for o in options if len(space.feasible_cuts) >= space.n_cuts(o)]
    m_cuts = max(space.n_cuts(o) for o in options)
    n_stages = m_cuts + 1
    n_pos = len(space.feasible_cuts)
    # (low, high) of every gene
    lows = [0] + [0] * m_cuts + [1] * n_stages + [1, 1, 1]
    highs = ([len(options) - 1] + [max(n_pos - 1, 0)] * m_cuts
             + [max(stream_cap(t, bounds, settings, space.main_pe) for o in options for t in space.stages(o))] * n_stages
             + [int(bounds["buffers"]), int(bounds["pre"]), int(bounds["post"])])
    evaluations = [0]

    def decode(ind) -> Configuration | None:
        option = options[ind[0]]
        types = space.stages(option)
        n = len(types) - 1
        wish = [space.feasible_cuts[g] for g in ind[1:1 + n]]
        cuts = repair_cuts(space, wish, n)
        if cuts is None:
            return None
        raw = ind[1 + m_cuts: 1 + m_cuts + len(types)]
        streams = [min(int(s), stream_cap(t, bounds, settings, space.main_pe)) for s, t in zip(raw, types)]
        streams = [max(s, stage_width(t)) for s, t in zip(streams, types)]
        buffers, pre, post = ind[-3:]
        return make_config(base_cfg, option, cuts, streams, pre=pre, post=post, buffers=buffers)

    def evaluate(ind):
        evaluations[0] += 1
        cfg = decode(ind)
        return (score(study.measure(cfg, PHASE)) if cfg is not None else 0.0,)

    tb = int_vector_toolbox(lows, highs, evaluate, ga, mutate_indpb=0.2)
    hof, history = run_ga(tb, ga, "comprehensive")
    best = decode(hof[0])
    return StrategyResult(best, study.measure(best, PHASE), study.asked_since(mark),
                          {"evaluations": evaluations[0], "history": history})
