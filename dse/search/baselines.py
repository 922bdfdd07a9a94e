"""The baselines of thesis Sec. 3.6.4: Base(G), Base(D), Interleaved and Interleaved + tuned.

- Base(G): the whole network on the main PE, one execution context, no pre/post overlap (1 buffer,
  1 pre and 1 post thread): the default TensorRT application (JEDI's baseline).
- Base(D): the same on one DLA core; layers the DLA cannot run fall back to the GPU inside the stage.
- Interleaved: every PE runs the whole network and frames alternate between them (3 buffers,
  3 streams: one per PE), no pipelining of the network itself.
- Interleaved + tuned: threads, buffers and streams reduced from their maximum values until FPS
  degrades (the proposed fine-tuner started at the maxima).
"""
from __future__ import annotations

from typing import Mapping

from dse.core.configuration import Configuration
from dse.search.finetune import finetune
from dse.search.study import Measurer, Study, as_study
from dse.search.result import StrategyResult
from dse.search.settings import SearchSettings
from dse.search.space import SearchSpace, stage_width

DLA_ONLY = "DLA"            # single-DLA-stage option name (GPU fallback inside the stage)
INTERLEAVED = "IL"          # interleaved option name: one stage whose streams alternate over the PEs
INTERLEAVED_PES = 3         # GPU, DLA0, DLA1


def base_g_config(base: Configuration, space: SearchSpace) -> Configuration:
    return base.with_(option=space.main_only_option(), cuts=(), streams=(1,), buffers=1, pre_threads=1,
                      post_threads=1)


def base_d_config(base: Configuration) -> Configuration:
    return base.with_(option=DLA_ONLY, cuts=(), streams=(1,), buffers=1, pre_threads=1, post_threads=1)


def interleaved_config(base: Configuration, n_pes: int = INTERLEAVED_PES) -> Configuration:
    return base.with_(option=INTERLEAVED, cuts=(), streams=(n_pes,), buffers=n_pes, pre_threads=1,
                      post_threads=1)


def interleaved_tuned(space: SearchSpace, evaluator: Measurer | Study, base: Configuration,
                      bounds: Mapping[str, int], settings: SearchSettings,
                      n_pes: int = INTERLEAVED_PES) -> StrategyResult:
    """Interleaved execution with the proposed techniques: start at the maxima, remove what does not pay.

    Maxima: the maximizer's pre/post threads and buffers, and ``bounds['streams']`` contexts per PE (``extra``:
    ``start``, that configuration). A start the board refuses is the answer: nothing to tune."""
    streams = max(n_pes, int(bounds["streams"]) * n_pes)
    streams = min(streams, settings.max_streams * stage_width(space.stages(INTERLEAVED)[0]))
    streams = max(streams, n_pes)
    start = base.with_(option=INTERLEAVED, cuts=(), streams=(streams,), pre_threads=int(bounds["pre"]),
                       post_threads=int(bounds["post"]),
                       buffers=max(int(bounds["buffers"]), streams, int(bounds["pre"]), int(bounds["post"])))
    tuned_settings = settings.with_(max_streams=max(settings.max_streams, streams),
                                    max_buffers=max(settings.max_buffers, start.buffers))
    study = as_study(evaluator)
    mark = study.measured
    first = study.measure(start, "start")
    extra = {"start": start.to_dict()}
    if not first.ok:  # nothing to tune (e.g. too many DLA loadables): report the refusal, do not shrink it away
        return StrategyResult(start, first, study.asked_since(mark), extra)
    result = finetune(space, study, start, tuned_settings)
    return StrategyResult(result.config, result.measurement, study.asked_since(mark), extra)
