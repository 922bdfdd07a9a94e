"""Fine-tuning GA (thesis Sec. 3.6.4.4): the proposed mapping, then a GA over threads, buffers, streams.

Genes: [pre, post, buffers, streams of each stage] within the fine-tuner's caps; fitness = measured
FPS through the shared evaluator. The answer applies the proposed fine-tuner's criterion to what the
GA measured: the fewest resources (threads + buffers + streams) within ``degradation`` of the best FPS.
``extra`` as the comprehensive GA's: fitness calls and the best FPS per generation.
"""
from __future__ import annotations

from typing import Sequence

from dse.core.configuration import Configuration
from dse.search.ga_common import GASettings, int_vector_toolbox, run_ga
from dse.search.study import Measurer, Study, as_study, score
from dse.search.result import StrategyResult
from dse.search.settings import SearchSettings
from dse.search.space import SearchSpace, stage_width

PHASE = "finetune-ga"


def resources(cfg: Configuration) -> int:
    return cfg.pre_threads + cfg.post_threads + cfg.buffers + sum(cfg.streams)


def finetune_ga(space: SearchSpace, evaluator: Measurer | Study, start: Configuration, settings: SearchSettings,
                ga: GASettings) -> StrategyResult:
    study = as_study(evaluator)
    mark = study.measured
    types: Sequence[str] = space.stages(start.option)
    stream_caps = [settings.max_streams * stage_width(t) for t in types]
    lows = [1, 1, 1] + [stage_width(t) for t in types]
    highs = [settings.max_pre, settings.max_post, settings.max_buffers] + stream_caps
    seen: dict[str, tuple[Configuration, float]] = {}
    evaluations = [0]

    def decode(ind) -> Configuration:
        pre, post, buffers, *streams = ind
        return start.with_(pre_threads=pre, post_threads=post, streams=tuple(streams),
                           buffers=max(buffers, pre, post, *streams))

    def evaluate(ind):
        evaluations[0] += 1
        cfg = decode(ind)
        fps = score(study.measure(cfg, PHASE))
        seen[cfg.hash] = (cfg, fps)
        return (fps,)

    tb = int_vector_toolbox(lows, highs, evaluate, ga, mutate_indpb=0.3)
    _, history = run_ga(tb, ga, "finetune")
    best_fps = max(f for _, f in seen.values())
    floor = best_fps * (1 - settings.degradation)
    cfg = min((c for c, f in seen.values() if f >= floor), key=lambda c: (resources(c), -seen[c.hash][1]))
    return StrategyResult(cfg, study.measure(cfg, PHASE), study.asked_since(mark),
                          {"evaluations": evaluations[0], "history": history})
