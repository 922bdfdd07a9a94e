"""Parameter fine-tuner (thesis Sec. 3.5.2): the fewest threads, buffers and streams that keep FPS.

Three greedy steps on the chosen option and cuts, under the constraint buffers >= every other
parameter (pre threads, post threads, each stage's streams):
1. raise each parameter by one while FPS improves (another option may want more than option E did),
   in rounds until none improves;
2. lower each parameter by one while FPS stays within ``degradation`` of the step-1 best;
3. when two stages share the GPU, move streams between them (same total) while FPS improves.
"""
from __future__ import annotations

import math

from dse.core.configuration import Configuration
from dse.core.measurement import Measurement
from dse.search.result import StrategyResult
from dse.search.study import Measurer, Study, StudyView, as_study, score
from dse.search.settings import SearchSettings
from dse.search.space import SearchSpace, stage_width

PHASE = "finetune"


def tuned(config: Configuration, measurement: Measurement, asked, start_fps: float, reference_fps: float,
          points: int, trajectory=(), confirmed=(), batches_refused: int = 0,
          board_s: tuple[float, float] = (0.0, 0.0)) -> StrategyResult:
    """The fine-tuner's answer. ``extra``: ``start_fps``; ``reference_fps``, the best FPS after step 1 (what step 2
    may lose at most ``degradation`` of); ``points``, parameter points looked at besides the start;
    ``trajectory``; and for the guided search ``confirmed`` (the answer, then every other start, tuned
    configuration and variant tried, best mean first, each with its fresh re-runs), ``batches_refused`` (race
    batches the re-run budget refused) and ``board_s`` (board seconds of the search's measurements, re-runs)."""
    return StrategyResult(config, measurement, list(asked), {
        "start_fps": start_fps, "reference_fps": reference_fps, "points": points, "trajectory": list(trajectory),
        "confirmed": list(confirmed), "batches_refused": batches_refused,
        "board_s": [round(x, 3) for x in board_s]})


def get_param(cfg: Configuration, name: str) -> int:
    if name.startswith("s"):
        return cfg.streams[int(name[1:])]
    return {"pre": cfg.pre_threads, "post": cfg.post_threads, "buffers": cfg.buffers}[name]


def set_param(cfg: Configuration, name: str, value: int) -> Configuration:
    if name.startswith("s"):
        i = int(name[1:])
        return cfg.with_(streams=cfg.streams[:i] + (value,) + cfg.streams[i + 1:])
    key = {"pre": "pre_threads", "post": "post_threads", "buffers": "buffers"}[name]
    return cfg.with_(**{key: value})


def others_max(cfg: Configuration) -> int:
    return max(cfg.pre_threads, cfg.post_threads, *cfg.streams)


def buffers_along(cfg: Configuration, cap: float = math.inf) -> Configuration | None:
    """``cfg`` with its buffers raised to its largest other parameter where they fall under it (buffers >= every
    other parameter); None where that would pass ``cap``."""
    need = others_max(cfg)
    if cfg.buffers >= need:
        return cfg
    return cfg.with_(buffers=need) if need <= cap else None


def parameter_caps(space: SearchSpace, option: str, settings: SearchSettings) -> dict[str, int]:
    """The highest value of every tunable parameter of ``option``: pre, post, buffers, then each stage's streams
    (``s0``, ``s1``, ...; a stage on several PEs gets the cap per PE)."""
    caps = {"pre": settings.max_pre, "post": settings.max_post, "buffers": settings.max_buffers}
    for i, t in enumerate(space.stages(option)):
        caps[f"s{i}"] = settings.max_streams * stage_width(t)
    return caps


def finetune(space: SearchSpace, evaluator: Measurer | Study, config: Configuration,
             settings: SearchSettings, margin: float = 0.0, lower: bool = True) -> StrategyResult:
    """The three steps from ``config``. ``margin``: the relative gain a raise or a rebalance must show to be kept
    (the noise of one measurement, where the caller knows it): with none, a raise that changes nothing is kept on a
    lucky sample half the time, the next raise is tried from there, and step 2 measures its way back down (Yolov4
    INT8 on the Xavier at 1 % noise: 26 raises and 28 lowers, buffers 6 -> 13 -> ...). ``lower=False``: step 1
    only; the guided search ranks its finalists' raised configurations first and lowers only the answer
    (``fewest_resources``): the fewest resources of a finalist that loses are never used."""
    tracker = StudyView(as_study(evaluator), PHASE, settings.max_tuples)
    caps = parameter_caps(space, config.option, settings)
    cur = buffers_along(config)
    m_cur = tracker.measure(cur, "start")
    start_fps = fps_cur = score(m_cur)

    # step 1: more of each parameter while FPS improves (rounds: a gain may need another raise first)
    changed = True
    while changed and not tracker.exhausted:
        changed = False
        for name in ["pre", "post", "buffers", *_stream_names(space, cur)]:
            while get_param(cur, name) < caps[name] and not tracker.exhausted:
                trial = buffers_along(set_param(cur, name, get_param(cur, name) + 1), caps["buffers"])
                if trial is None:
                    break
                m = tracker.measure(trial, f"raise-{name}")
                if score(m) > fps_cur * (1 + margin):
                    cur, m_cur, fps_cur, changed = trial, m, score(m), True
                else:
                    break
    if lower:
        cur, m_cur = _lower_and_rebalance(tracker, space, cur, m_cur, fps_cur, settings, margin)
    return tuned(cur, m_cur, tracker.asked, start_fps, fps_cur, points=len(tracker.seen) - 1,
                 trajectory=tracker.trajectory)


def fewest_resources(space: SearchSpace, evaluator: Measurer | Study, config: Configuration, reference: float,
                     settings: SearchSettings, margin: float = 0.0) -> StrategyResult:
    """Steps 2 and 3 from ``config``, step 1's best at ``reference`` FPS: the guided search lowers the answer of its
    ranking of raised configurations (``finetune(lower=False)``) only."""
    tracker = StudyView(as_study(evaluator), PHASE, settings.max_tuples)
    m = tracker.measure(config, "start")
    cur, m_cur = _lower_and_rebalance(tracker, space, config, m, reference, settings, margin)
    return tuned(cur, m_cur, tracker.asked, score(m), reference, points=len(tracker.seen) - 1,
                 trajectory=tracker.trajectory)


def _stream_names(space: SearchSpace, cfg: Configuration) -> list[str]:
    return [f"s{i}" for i in range(len(space.stages(cfg.option)))]


def _lower_and_rebalance(tracker: StudyView, space: SearchSpace, cur: Configuration, m_cur: Measurement,
                         reference: float, settings: SearchSettings,
                         margin: float) -> tuple[Configuration, Measurement]:
    """Steps 2 and 3 from ``cur`` (measured ``m_cur``); ``reference``: the FPS step 2 may lose ``degradation`` of.
    Nothing where that is 0 (a refused configuration: "within degradation of 0" would lower everything)."""
    if reference <= 0:
        return cur, m_cur
    fps_cur = score(m_cur)
    # step 2: less of each parameter while FPS stays within the allowed degradation (buffers last:
    # they may only drop once the others did)
    floor = reference * (1 - settings.degradation)
    changed = True
    while changed and not tracker.exhausted:
        changed = False
        for name in [*_stream_names(space, cur), "post", "pre", "buffers"]:
            while get_param(cur, name) > 1 and not tracker.exhausted:
                trial = set_param(cur, name, get_param(cur, name) - 1)
                if trial.buffers < others_max(trial):
                    break
                m = tracker.measure(trial, f"lower-{name}")
                if score(m) >= floor:
                    cur, m_cur, fps_cur, changed = trial, m, score(m), True
                else:
                    break

    # step 3: rebalance streams between the first and the last GPU stage, total kept
    mains = [i for i, t in enumerate(space.stages(cur.option)) if t == space.main_pe]
    if len(mains) >= 2:
        a, b = mains[0], mains[-1]
        for give, take in ((a, b), (b, a)):
            moved = False
            while cur.streams[give] > 1 and not tracker.exhausted:
                s = list(cur.streams)
                s[give] -= 1
                s[take] += 1
                trial = cur.with_(streams=tuple(s))
                if trial.buffers < others_max(trial):
                    break
                m = tracker.measure(trial, "rebalance")
                if score(m) > fps_cur * (1 + margin):
                    cur, m_cur, fps_cur, moved = trial, m, score(m), True
                else:
                    break
            if moved:
                break
    return cur, m_cur
