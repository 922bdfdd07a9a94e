"""Profile-based GA ("Profiled", thesis Sec. 3.6.4, after Kang et al.): map layers to PEs from estimates.

A chromosome holds one gene per layer: the PE kind that runs it (main PE, a first or a second DLA,
both DLAs = PND). Runs of equal genes are pipeline stages. Decoding repairs a chromosome into a valid
mapping of the platform: at most ``max_stages`` stages whose kind sequence is one of the mapping options
(the shortest stage is merged into a neighbour until it is), and a feasible cut tuple near the runs'
ends. Fitness is the estimated pipeline throughput, 1000 / (slowest stage's estimated ms): per-layer
GPU times from the profile; a DLA layer costs its GPU time x ``dla_ratio`` (no per-layer DLA profile
exists), a PND stage half of that. Nothing is measured while evolving; the result is measured and
fine-tuned like the proposed method's mapping.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Mapping, Sequence

from deap import base, tools

from dse.core.configuration import Configuration
from dse.core.errors import DseError
from dse.search.finetune import finetune
from dse.search.ga_common import GASettings, deap_types, repair_cuts, run_ga
from dse.search.params import search_config
from dse.search.study import Measurer, Study, as_study
from dse.search.result import StrategyResult
from dse.search.settings import SearchSettings
from dse.search.space import SearchSpace, stage_width
from dse.search.streams import stream_tuple

PHASE = "profiled-ga"


def gene_kinds(space: SearchSpace, options: Sequence[str]) -> list[str]:
    """Gene alphabet: the main PE, two DLA labels (so two DLA stages in a row can be told apart), PND."""
    types = {t for o in options for t in space.stages(o)}
    kinds = [space.main_pe]
    if "DLA" in types:
        kinds += ["DLA", "DLA'"]
    if "PND" in types:
        kinds.append("PND")
    return kinds


def _stage_type(kind: str) -> str:
    return "DLA" if kind.startswith("DLA") else kind


def stage_estimates_ms(profile: Sequence[float], cuts: Sequence[int], types: Sequence[str],
                       dla_ratio: float, *, per_execution: bool = False) -> list[float]:
    """Estimated time of each stage alone: GPU profile sums, x ratio on a DLA, x ratio / 2 for PND (a frame every
    half execution: the stage's share of the throughput); ``per_execution``: one execution's time on one DLA, what
    a board's stage timer reads and Table 3.11 compares."""
    bounds = [-1, *cuts, len(profile) - 1]
    out = []
    for k, t in enumerate(types):
        gpu = float(sum(profile[bounds[k] + 1: bounds[k + 1] + 1]))
        width = 1 if per_execution else stage_width(t)
        out.append(gpu * (dla_ratio / width if t in ("DLA", "PND") else 1.0))
    return out


@dataclass
class Mapping_:
    option: str
    cuts: tuple[int, ...]
    estimate_ms: list[float]

    @property
    def fps(self) -> float:
        return 1000.0 / max(self.estimate_ms) if self.estimate_ms and max(self.estimate_ms) > 0 else 0.0


class _Decoder:
    def __init__(self, space: SearchSpace, options: Sequence[str], profile: Sequence[float], dla_ratio: float,
                 max_stages: int):
        self.space, self.profile, self.ratio, self.max_stages = space, list(profile), float(dla_ratio), max_stages
        self.kinds = gene_kinds(space, options)
        self.by_types = {}
        for o in options:
            if len(space.stages(o)) <= max_stages:
                self.by_types.setdefault(tuple(space.stages(o)), o)
        self.main = space.main_only_option()

    def _option(self, kinds: Sequence[str]) -> str | None:
        types = tuple(_stage_type(k) for k in kinds)
        # two DLA stages in a row must be two different DLA genes (DLA then DLA'), else they are one stage
        return self.by_types.get(types)

    def decode(self, genes: Sequence[int]) -> tuple[Mapping_, list[int]]:
        """Repaired mapping and the chromosome that encodes it exactly (written back: Lamarckian repair)."""
        n = len(genes)
        segs: list[list] = []                      # [kind index, first, last]
        for i, g in enumerate(genes):
            if segs and segs[-1][0] == g:
                segs[-1][2] = i
            else:
                segs.append([int(g), i, i])
        while True:
            kinds = [self.kinds[s[0]] for s in segs]
            option = self._option(kinds) if len(segs) <= self.max_stages else None
            if option is not None:
                cuts = repair_cuts(self.space, [s[2] for s in segs[:-1]], len(segs) - 1)
                if cuts is not None:
                    break
            if len(segs) == 1:                     # a lone non-main stage with no option: the main PE
                segs[0][0] = 0
                option, cuts = self.main, ()
                break
            j = min(range(len(segs)), key=lambda i: segs[i][2] - segs[i][1])
            into = j - 1 if j > 0 and (j == len(segs) - 1 or
                                        segs[j - 1][2] - segs[j - 1][1] <= segs[j + 1][2] - segs[j + 1][1]) else j + 1
            lo, hi = min(segs[j][1], segs[into][1]), max(segs[j][2], segs[into][2])
            segs[into][1], segs[into][2] = lo, hi
            del segs[j]
            merged = []                            # neighbours of the same kind become one stage
            for s in segs:
                if merged and merged[-1][0] == s[0]:
                    merged[-1][2] = s[2]
                else:
                    merged.append(s)
            segs = merged
        types = self.space.stages(option)
        est = stage_estimates_ms(self.profile, cuts, types, self.ratio)
        bounds = [-1, *cuts, n - 1]
        out = []
        for k in range(len(types)):
            out += [segs[k][0] if len(segs) == len(types) else 0] * (bounds[k + 1] - bounds[k])
        return Mapping_(option, tuple(cuts), est), out

    def encode(self, option: str, cuts: Sequence[int]) -> list[int]:
        types, n = self.space.stages(option), len(self.profile)
        bounds, out, prev_dla = [-1, *cuts, n - 1], [], False
        for k, t in enumerate(types):
            if t == "DLA":
                g = self.kinds.index("DLA'" if prev_dla else "DLA")
            else:
                g = self.kinds.index(t)
            prev_dla = t == "DLA"
            out += [g] * (bounds[k + 1] - bounds[k])
        return out


def profiled_mapping(space: SearchSpace, options: Sequence[str], profile: Sequence[float], dla_ratio: float,
                     ga: GASettings, max_stages: int = 4, keep: int = 10) -> tuple[list[Mapping_], int, list[float]]:
    """Evolve per-layer mappings on estimates only; returns up to ``keep`` distinct mappings, best
    estimate first (the next one is used when a board refuses the first), #estimates, history."""
    if len(profile) != space.n_layers:
        raise DseError(f"GPU profile has {len(profile)} layers, the network {space.n_layers}")
    _, Individual = deap_types()
    dec = _Decoder(space, options, profile, dla_ratio, max_stages)
    rng = random.Random(f"{ga.seed}:profiled")
    count = [0]

    def random_individual():
        option = rng.choice(list(dec.by_types.values()))
        wish = sorted(rng.sample(range(space.n_layers - 1), space.n_cuts(option)))
        cuts = repair_cuts(space, wish, space.n_cuts(option))
        if cuts is None:
            option, cuts = dec.main, ()
        return Individual(dec.encode(option, cuts))

    def evaluate(ind):
        count[0] += 1
        mapping, genes = dec.decode(ind)
        ind[:] = genes
        return (mapping.fps,)

    def paint(ind):
        """Mutation: a random layer range moves to a random PE kind (Kang et al.'s remapping move)."""
        a, b = sorted(random.sample(range(len(ind) + 1), 2))
        k = random.randrange(len(dec.kinds))
        for i in range(a, b):
            ind[i] = k
        return (ind,)

    tb = base.Toolbox()
    tb.register("individual", random_individual)
    tb.register("population", tools.initRepeat, list, tb.individual)
    tb.register("evaluate", evaluate)
    tb.register("mate", tools.cxTwoPoint)
    tb.register("mutate", paint)
    tb.register("select", tools.selTournament, tournsize=ga.tournament)
    hof, history = run_ga(tb, ga, "profiled-deap", keep=4 * keep)
    ranked, seen = [], set()
    for ind in hof:
        mapping, _ = dec.decode(ind)
        if (mapping.option, mapping.cuts) not in seen:
            seen.add((mapping.option, mapping.cuts))
            ranked.append(mapping)
    return ranked[:keep], count[0], history


def profiled_search(space: SearchSpace, evaluator: Measurer | Study, base: Configuration, options: Sequence[str],
                    profile: Sequence[float], dla_ratio: float, bounds: Mapping[str, int], settings: SearchSettings,
                    ga: GASettings) -> StrategyResult:
    """The Profiled method end to end: GA on estimates, then measure the mapping and fine-tune it. ``extra``: the
    mapping (``option``, ``cuts``, its stage estimates ``estimate_ms`` and ``estimated_fps``), ``dla_ratio``, the
    estimates computed (``evaluations``: nothing is measured while evolving), the measured configuration of the
    mapping (``start``) and the best estimated FPS per generation (``history``)."""
    study = as_study(evaluator)
    mark = study.measured
    ranked, n, history = profiled_mapping(space, options, profile, dla_ratio, ga,
                                          max_stages=min(4, max(len(space.stages(o)) for o in options)))
    for mapping in ranked:  # a mapping the board refuses (e.g. too many DLA loadables): the next best estimate
        streams = stream_tuple(space.stages(mapping.option), bounds["streams"], dla_streams=settings.dla_streams,
                               main_pe=space.main_pe)
        start = search_config(base, mapping.option, mapping.cuts, streams, bounds, settings.pipeline_buffers)
        if study.measure(start, PHASE).ok:
            break
    else:
        raise DseError(f"every mapping the profile-based GA found failed on the board ({len(ranked)} tried)")
    tuned = finetune(space, study, start, settings)
    return StrategyResult(tuned.config, tuned.measurement, study.asked_since(mark),
                          {"option": mapping.option, "cuts": list(mapping.cuts), "estimate_ms": mapping.estimate_ms,
                           "estimated_fps": mapping.fps, "dla_ratio": float(dla_ratio), "evaluations": n,
                           "start": start.to_dict(), "history": history})
