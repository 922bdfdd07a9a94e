"""Parameter maximizer (thesis Sec. 3.5, Fig. 3.6): upper bounds of threads, buffers and streams.

On mapping option E (GPU only), pre threads, post threads and GPU streams are raised one at a time,
each until FPS stops improving by more than ``epsilon`` (relative). FPS is a max() of bottlenecks, so
a parameter that pays only after another was raised gets more rounds until a whole round changes
nothing; a round that changes nothing also tries raising two (then all three) together, for equal
bottlenecks. While those are raised, buffers sit at their cap so they never hide a gain; last, buffers are
raised from the smallest allowed value (the largest other parameter) until FPS stops improving.
"""
from __future__ import annotations

import itertools

from dse.core.configuration import Configuration
from dse.search.params import make_config
from dse.search.result import StrategyResult
from dse.search.study import Measurer, Study, StudyView, as_study, score
from dse.search.settings import SearchSettings

PHASE = "maximize"
RAISED = ("pre", "post", "streams")


def _config(base: Configuration, p: dict[str, int], option: str) -> Configuration:
    return make_config(base, option, (), (p["streams"],), pre=p["pre"], post=p["post"], buffers=p["buffers"])


def _groups(params: dict[str, int], caps: dict[str, int]) -> list[tuple[str, ...]]:
    """Pairs, then all, of the raisable parameters still below their caps."""
    open_ = [n for n in RAISED if params[n] < caps[n]]
    return [*itertools.combinations(open_, 2), *([tuple(open_)] if len(open_) > 2 else [])]


def maximize(evaluator: Measurer | Study, base: Configuration, settings: SearchSettings,
             option: str = "E") -> StrategyResult:
    """``option``: the single-stage main-PE option (``SearchSpace.main_only_option()``; E on Xavier). The answer's
    ``extra``: ``bounds`` (the parameters' upper bounds), ``points`` (configurations looked at), ``trajectory``."""
    tracker = StudyView(as_study(evaluator), PHASE, settings.max_tuples)
    caps = {"pre": settings.max_pre, "post": settings.max_post, "streams": settings.max_streams,
            "buffers": settings.max_buffers}
    eps = settings.epsilon

    def run(p: dict[str, int]) -> float:
        return score(tracker.measure(_config(base, p, option), "maximize"))

    params = {"pre": 1, "post": 1, "streams": 1, "buffers": caps["buffers"]}
    best = run(params)
    changed = True
    while changed and not tracker.exhausted:
        changed = False
        for name in RAISED:
            while params[name] < caps[name] and not tracker.exhausted:
                trial = {**params, name: params[name] + 1}
                fps = run(trial)
                if fps > best * (1 + eps):
                    params, best, changed = trial, fps, True
                else:
                    break
        if not changed:
            # two equal bottlenecks (e.g. pre and post) hide each other's gain: raise them together
            for group in _groups(params, caps):
                if tracker.exhausted:
                    break
                trial = {**params, **{n: params[n] + 1 for n in group}}
                fps = run(trial)
                if fps > best * (1 + eps):
                    params, best, changed = trial, fps, True
                    break

    # buffers: from the least allowed value upwards while FPS still improves
    params["buffers"] = max(params[n] for n in RAISED)
    best = run(params)
    while params["buffers"] < caps["buffers"] and not tracker.exhausted:
        trial = {**params, "buffers": params["buffers"] + 1}
        fps = run(trial)
        if fps > best * (1 + eps):
            params, best = trial, fps
        else:
            break
    final = tracker.measure(_config(base, params, option), "maximize")
    return StrategyResult(final.config, final, tracker.asked,
                          {"bounds": dict(params), "points": len(tracker.seen), "trajectory": tracker.trajectory})
